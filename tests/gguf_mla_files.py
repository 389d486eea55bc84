"""GGUF files of the latent-attention family for the tests: a tiny transformers DeepSeek-V2 or -V3 model
converted as llama.cpp's ``convert_hf_to_gguf.py`` (``DeepseekV2Model``) converts it
(:func:`write_deepseek2_gguf`). A helper module, not a test module: ``tests/model/test_gguf_mla.py``
imports it; the tokenizer and the types each tensor is stored in are :mod:`tests.gguf_files`'.

What the converter does, and this writer after it:

* metadata under ``deepseek2.``: the Llama-shaped keys with ``head_count_kv`` = 1, ``key_length`` =
  r + d_R and ``value_length`` = r (MLA run as MQA over the latent), ``key_length_mla`` = d_nope + d_R,
  ``value_length_mla`` = d_v, ``rope.dimension_count`` = d_R, ``attention.q_lora_rank`` (only when set),
  ``attention.kv_lora_rank``, ``leading_dense_block_count``, ``expert_count``, ``expert_used_count``,
  ``expert_group_count`` / ``_used_count``, ``expert_feed_forward_length``, ``expert_shared_count``,
  ``expert_weights_scale``, ``expert_weights_norm`` (only when true), ``expert_gating_func`` (only when
  the config names its scoring function: V2's files lack it), YaRN as ``rope.scaling.*`` with
  ``yarn_log_multiplier`` = 0.1·mscale_all_dim;
* tensors not permuted; the experts stacked ``[E, ...]`` (``ffn_{gate,up,down}_exps``); ``kv_b_proj``
  split per head into ``attn_k_b`` [H, r, d_nope] (transposed) and ``attn_v_b`` [H, d_v, r]
  (``split_kv_b=False``: kept whole as ``attn_kv_b``, as older converters wrote it);
  ``e_score_correction_bias`` as ``exp_probs_b.bias``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.gguf_files import _add_tokenizer, _llama_cpp_type

__all__ = ["deepseek2_tensors", "dequantized_into", "write_deepseek2_gguf", "write_gpt_oss_gguf"]

_LAYER = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.q_a_proj": "attn_q_a",
    "self_attn.q_a_layernorm": "attn_q_a_norm",
    "self_attn.q_b_proj": "attn_q_b",
    "self_attn.kv_a_proj_with_mqa": "attn_kv_a_mqa",
    "self_attn.kv_a_layernorm": "attn_kv_a_norm",
    "self_attn.kv_b_proj": "attn_kv_b",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "mlp.gate": "ffn_gate_inp",
    "mlp.shared_experts.gate_proj": "ffn_gate_shexp",
    "mlp.shared_experts.up_proj": "ffn_up_shexp",
    "mlp.shared_experts.down_proj": "ffn_down_shexp",
}
_GLOBAL = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}


def _deepseek2_converted(model, split_kv_b: bool) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Each state-dict entry of ``model`` with the ``(llama.cpp name, float32 array)`` it is written
    as (none for a tied head, two for the fused experts and a split ``kv_b_proj``)."""
    import numpy as np

    cfg = model.config
    out = []
    for name, tensor in model.state_dict().items():
        w = tensor.detach().float().numpy().copy()
        m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)\.([a-z_]+)", name)
        if m is None:
            stem, _, kind = name.rpartition(".")
            tied = stem == "lm_head" and cfg.tie_word_embeddings
            out.append((name, [] if tied else [(f"{_GLOBAL[stem]}.{kind}", w)]))
            continue
        bid, part, kind = m.groups()
        blk = f"blk.{bid}."
        if kind == "gate_up_proj":  # transformers fuses [E, 2f, d] (gate rows, then up); llama.cpp stacks
            f = w.shape[1] // 2
            parts = [
                (f"{blk}ffn_gate_exps.weight", w[:, :f].copy()),
                (f"{blk}ffn_up_exps.weight", w[:, f:].copy()),
            ]
        elif part == "mlp.experts":
            parts = [(f"{blk}ffn_down_exps.weight", w)]
        elif kind == "e_score_correction_bias":
            parts = [(f"{blk}exp_probs_b.bias", w)]
        elif part == "self_attn.kv_b_proj" and split_kv_b:
            heads, nope, v = cfg.num_attention_heads, cfg.qk_nope_head_dim, cfg.v_head_dim
            kv_b = w.reshape(heads, nope + v, w.shape[-1])
            parts = [
                (f"{blk}attn_k_b.weight", np.ascontiguousarray(kv_b[:, :nope].swapaxes(1, 2))),
                (f"{blk}attn_v_b.weight", np.ascontiguousarray(kv_b[:, nope:])),
            ]
        else:
            parts = [(f"{blk}{_LAYER[part]}.{kind}", w)]
        out.append((name, parts))
    return out


_GPT_OSS_LAYER = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "post_attention_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.router": "ffn_gate_inp",
}


def _gpt_oss_converted(model) -> list[tuple[str, list[tuple[str, Any]]]]:
    """As :func:`_deepseek2_converted`, for gpt-oss (``GptOssModel.modify_tensors`` from bf16 weights):
    ``gate_up_proj`` [E, d, 2f] transposed and split into its even (gate) and odd (up) rows,
    ``down_proj`` [E, f, d] transposed, the biases split alike, ``sinks`` as ``attn_sinks.weight``."""
    out = []
    for name, tensor in model.state_dict().items():
        w = tensor.detach().float().numpy().copy()
        m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", name)
        if m is None:
            stem, _, kind = name.rpartition(".")
            tied = stem == "lm_head" and model.config.tie_word_embeddings
            out.append((name, [] if tied else [(f"{_GLOBAL[stem]}.{kind}", w)]))
            continue
        blk, rest = f"blk.{m[1]}.", m[2]
        if rest.startswith("mlp.experts.gate_up_proj"):
            kind = "bias" if rest.endswith("_bias") else "weight"
            w = w if kind == "bias" else w.swapaxes(1, 2)  # [E, 2f, d]
            parts = [
                (f"{blk}ffn_gate_exps.{kind}", w[:, ::2].copy()),
                (f"{blk}ffn_up_exps.{kind}", w[:, 1::2].copy()),
            ]
        elif rest.startswith("mlp.experts.down_proj"):
            kind = "bias" if rest.endswith("_bias") else "weight"
            parts = [(f"{blk}ffn_down_exps.{kind}", w if kind == "bias" else w.swapaxes(1, 2).copy())]
        elif rest == "self_attn.sinks":
            parts = [(f"{blk}attn_sinks.weight", w)]
        else:
            part, _, kind = rest.rpartition(".")
            parts = [(f"{blk}{_GPT_OSS_LAYER[part]}.{kind}", w)]
        out.append((name, parts))
    return out


def _converted(model, split_kv_b: bool = True) -> list[tuple[str, list[tuple[str, Any]]]]:
    if model.config.model_type == "gpt_oss":
        return _gpt_oss_converted(model)
    return _deepseek2_converted(model, split_kv_b)


def deepseek2_tensors(model, *, split_kv_b: bool = True) -> list[tuple[str, Any]]:
    """``(llama.cpp name, float32 numpy array)`` of every tensor the converter writes."""
    return [part for _, parts in _converted(model, split_kv_b) for part in parts]


def _add_deepseek2_hparams(writer, cfg, scoring: str | None) -> None:
    from gguf import ExpertGatingFuncType

    rope, r = cfg.qk_rope_head_dim, cfg.kv_lora_rank
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(1)
    params = dict(cfg.rope_parameters or {})
    writer.add_rope_freq_base(float(params.get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_expert_count(cfg.n_routed_experts)
    writer.add_expert_used_count(cfg.num_experts_per_tok)
    writer.add_expert_group_count(cfg.n_group)
    writer.add_expert_group_used_count(cfg.topk_group)
    if scoring is not None:
        kind = ExpertGatingFuncType.SIGMOID if scoring == "sigmoid" else ExpertGatingFuncType.SOFTMAX
        writer.add_expert_gating_func(kind)
    if params.get("rope_type") == "yarn":
        from gguf import RopeScalingType

        writer.add_rope_scaling_type(RopeScalingType.YARN)
        writer.add_rope_scaling_factor(params["factor"])
        writer.add_rope_scaling_orig_ctx_len(params["original_max_position_embeddings"])
    writer.add_leading_dense_block_count(cfg.first_k_dense_replace)
    writer.add_vocab_size(cfg.vocab_size)
    if cfg.q_lora_rank is not None:
        writer.add_q_lora_rank(cfg.q_lora_rank)
    writer.add_kv_lora_rank(r)
    writer.add_key_length(r + rope)
    writer.add_value_length(r)
    writer.add_key_length_mla(cfg.qk_nope_head_dim + rope)
    writer.add_value_length_mla(cfg.v_head_dim)
    writer.add_expert_feed_forward_length(cfg.moe_intermediate_size)
    writer.add_expert_shared_count(cfg.n_shared_experts)
    writer.add_expert_weights_scale(cfg.routed_scaling_factor)
    if cfg.norm_topk_prob:
        writer.add_expert_weights_norm(True)
    writer.add_rope_dimension_count(rope)
    if params.get("mscale_all_dim"):
        writer.add_rope_scaling_yarn_log_mul(0.1 * params["mscale_all_dim"])


def write_deepseek2_gguf(
    path: str | Path,
    model,
    tokenizer_folder: str | Path,
    qtype: str = "F32",
    *,
    split_kv_b: bool = True,
    types: dict[str, str] | None = None,
    pre: str = "deepseek-v3",
) -> Path:
    """Write ``model`` (transformers' ``DeepseekV3ForCausalLM``, scoring ``sigmoid``, or
    ``DeepseekV2ForCausalLM``, whose config names no scoring function) as llama.cpp's converter would,
    its matrices in ``qtype`` (``types``: another type for named tensors, for a file of mixed types),
    its vocabulary's split named ``pre`` (DeepSeek-V3's by default)."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter
    from gguf.gguf_writer import GGUFValue
    from gguf.quants import quantize

    path = Path(path)
    cfg = model.config
    writer = GGUFWriter(str(path), arch="deepseek2")
    writer.add_name("tiny-deepseek")
    _add_deepseek2_hparams(writer, cfg, "sigmoid" if cfg.model_type == "deepseek_v3" else None)
    _add_tokenizer(writer, Path(tokenizer_folder), "deepseek2")
    writer.kv_data[0]["tokenizer.ggml.pre"] = GGUFValue(value=pre, type=GGUFValueType.STRING)
    for name, w in deepseek2_tensors(model, split_kv_b=split_kv_b):
        kind = GGMLQuantizationType[types[name]] if types and name in types else None
        if kind is None:
            kind = _llama_cpp_type(name, w, GGMLQuantizationType[qtype])
        if name.endswith("exp_probs_b.bias"):
            kind = GGMLQuantizationType.F32
        writer.add_tensor(name, quantize(np.ascontiguousarray(w, dtype=np.float32), kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def dequantized_into(model, path: str | Path) -> None:
    """Put the weights of the GGUF file at ``path`` (written from ``model`` by
    :func:`write_deepseek2_gguf`), as ``gguf``'s own reader and ``gguf.quants.dequantize`` decode them,
    back into ``model``: transformers' model of the quantized file, the reference for a quantized one."""
    import numpy as np
    import torch
    from gguf import GGUFReader
    from gguf.quants import dequantize

    reader = GGUFReader(str(path))
    decoded = {t.name: dequantize(t.data, t.tensor_type) for t in reader.tensors}
    split = any(n.endswith("attn_k_b.weight") for n in decoded)
    state = model.state_dict()
    with torch.no_grad():
        for name, parts in _converted(model, split):
            if not parts:
                continue  # the tied head
            arrays = [decoded[n].reshape(w.shape) for n, w in parts]
            if (
                len(arrays) == 1
                and name.endswith("experts.down_proj")
                and model.config.model_type == "gpt_oss"
            ):
                w = arrays[0].swapaxes(1, 2)
            elif len(arrays) == 1:
                w = arrays[0]
            elif name.endswith("gate_up_proj") and model.config.model_type != "gpt_oss":
                w = np.concatenate(arrays, axis=1)
            elif "gate_up_proj" in name:  # gpt-oss: gate and up rows interleaved, the weight transposed
                both = np.stack(arrays, axis=2).reshape(arrays[0].shape[0], -1, *arrays[0].shape[2:])
                w = both if both.ndim == 2 else both.swapaxes(1, 2)
            else:  # kv_b_proj from attn_k_b [H, r, d_nope] and attn_v_b [H, d_v, r]
                w = np.concatenate([arrays[0].swapaxes(1, 2), arrays[1]], axis=1).reshape(state[name].shape)
            state[name].copy_(torch.tensor(np.asarray(w, dtype=np.float32)))


def write_gpt_oss_gguf(
    path: str | Path, model, tokenizer_folder: str | Path, qtype: str = "F32", *, experts: str = "MXFP4"
) -> Path:
    """Write transformers' ``GptOssForCausalLM`` as llama.cpp's converter would: metadata under
    ``gpt-oss.`` (the Llama-shaped keys, ``expert_count``, ``expert_used_count``,
    ``expert_feed_forward_length``, ``attention.sliding_window``, ``key_length`` / ``value_length``, YaRN
    as ``rope.scaling.*``), the o200k-style vocabulary as ``gpt2`` with ``pre`` = ``gpt-4o``, the expert
    matrices in ``experts`` (MXFP4, as the released files), the other matrices in ``qtype``."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFValueType, GGUFWriter, RopeScalingType
    from gguf.gguf_writer import GGUFValue
    from gguf.quants import quantize

    path, cfg = Path(path), model.config
    writer = GGUFWriter(str(path), arch="gpt-oss")
    writer.add_name("tiny-gpt-oss")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    params = dict(cfg.rope_parameters)
    writer.add_rope_freq_base(float(params["rope_theta"]))
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_expert_count(cfg.num_local_experts)
    writer.add_expert_used_count(cfg.num_experts_per_tok)
    writer.add_key_length(cfg.head_dim)
    writer.add_value_length(cfg.head_dim)
    if params.get("rope_type") == "yarn":
        writer.add_rope_scaling_type(RopeScalingType.YARN)
        writer.add_rope_scaling_factor(params["factor"])
        writer.add_rope_scaling_orig_ctx_len(params["original_max_position_embeddings"])
    writer.add_sliding_window(cfg.sliding_window)
    writer.add_expert_feed_forward_length(cfg.intermediate_size)
    _add_tokenizer(writer, Path(tokenizer_folder), "gpt-oss")
    writer.kv_data[0]["tokenizer.ggml.pre"] = GGUFValue(value="gpt-4o", type=GGUFValueType.STRING)
    for name, w in deepseek2_tensors(model):
        kind = _llama_cpp_type(name, w, GGMLQuantizationType[qtype])
        if "_exps.weight" in name:
            kind = GGMLQuantizationType[experts]
        writer.add_tensor(name, quantize(np.ascontiguousarray(w, dtype=np.float32), kind), raw_dtype=kind)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
