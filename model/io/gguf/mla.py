"""GGUF files of the latent-attention and sink families: ``deepseek2`` (DeepSeek-V2/V3 and their small
relatives) opened as the Hugging Face ``deepseek_v3`` family and ``gpt-oss`` as ``gpt_oss``
(:mod:`model.io.hf.families`), exactly.

llama.cpp's ``convert_hf_to_gguf.py`` (``DeepseekV2Model``) writes a DeepSeek checkpoint as follows, and
:func:`mla_hf` and :func:`mla_source` undo it:

======================================  ==============================================================
``deepseek2.`` metadata                 Hugging Face ``config.json``
======================================  ==============================================================
``attention.q_lora_rank`` (absent:      ``q_lora_rank`` (``None``: one ``W_Q`` [H·d_qk, d], V2-Lite)
V2-Lite), ``attention.kv_lora_rank``    ``kv_lora_rank`` r (the latent ``c_KV`` [r] a token caches)
``rope.dimension_count``                ``qk_rope_head_dim`` d_R (the rotary part of q and k)
``attention.key_length_mla``            ``qk_nope_head_dim + qk_rope_head_dim`` (older files:
(older: ``attention.key_length``)       ``key_length``; newer ones write r + d_R there, the MQA view)
``attention.value_length_mla``          ``v_head_dim`` (older files: ``value_length``)
``leading_dense_block_count``           ``first_k_dense_replace`` (dense MLPs ``feed_forward_length`` wide)
``expert_count``, ``expert_used_count`` ``n_routed_experts`` E, ``num_experts_per_tok`` k
``expert_feed_forward_length``,         ``moe_intermediate_size`` f; ``n_shared_experts`` (one
``expert_shared_count``                 always-on MLP n_shared·f wide)
``expert_gating_func`` (1 softmax,      the router: V2 ``p = softmax(z)``, V3 ``s = σ(z)`` chosen with
2 sigmoid; absent: softmax, V2's)       ``exp_probs_b`` (e_score_correction_bias) added
``expert_weights_norm``,                ``norm_topk_prob`` (weights renormalised over the chosen k),
``expert_weights_scale``                ``routed_scaling_factor`` (× the weights)
``expert_group_count``,                 ``n_group``, ``topk_group`` (V3's grouped routing: a group's
``expert_group_used_count``             score is the sum of its two best)
``rope.scaling.type`` = yarn, ``.factor``, ``.original_context_length``: YaRN; ``.yarn_log_multiplier``
= 0.1·mscale_all_dim: the scores scaled by ``d_qk^-½ · (1 + 0.1·mscale_all_dim·ln s)²``
======================================  ==============================================================

The weights are not permuted (llama.cpp rotates DeepSeek's q and k in adjacent pairs, as the checkpoint
stores them: ``rope_interleave``, undone by :func:`~model.io.hf.families.family_layout`). Layer ``i``:
``attn_q_a``, ``attn_q_a_norm``, ``attn_q_b`` (or ``attn_q``), ``attn_kv_a_mqa``, ``attn_kv_a_norm``,
``attn_output`` → ``self_attn.{q_a_proj, q_a_layernorm, q_b_proj, q_proj, kv_a_proj_with_mqa,
kv_a_layernorm, o_proj}``; ``W_UKV`` = ``kv_b_proj`` [H·(d_nope + d_v), r] is stored whole as
``attn_kv_b`` by older converters and split by newer ones (for the absorbed form of MLA) into
``attn_k_b`` [H, r, d_nope] (each head's ``W_UK`` transposed) and ``attn_v_b`` [H, d_v, r]; rebuilt per
head as ``[W_UK_h; W_UV_h]``. The experts are stacked: ``ffn_{gate,up,down}_exps`` [E, f, d] / [E, d, f]
→ ``mlp.experts.e.{gate,up,down}_proj`` (:func:`mla_expert_header`); ``ffn_gate_inp`` → ``mlp.gate``,
``exp_probs_b.bias`` → ``mlp.gate.e_score_correction_bias``, ``ffn_*_shexp`` → ``mlp.shared_experts.*``.

``gpt-oss`` (``GptOssModel``): the metadata holds the Llama-shaped keys, ``expert_count``,
``expert_used_count``, ``expert_feed_forward_length`` (f), ``attention.sliding_window`` W, YaRN; the
architecture implies the rest, as llama.cpp's loader does: every other layer local from layer 0
(``"LG"``), every linear layer biased, the SwiGLU clamped at 7 with α = 1.702, the router's softmax over
the chosen k logits. Tensors: ``attn_sinks.weight`` → ``self_attn.sinks`` (one logit per head in each
softmax's denominator), ``post_attention_norm`` → ``post_attention_layernorm`` (the MLP's pre-norm),
``ffn_gate_inp`` (+ bias) → ``mlp.router``, and the experts one by one as DeepSeek's:
``ffn_gate_exps`` and ``ffn_up_exps`` [E, f, d] (or the fused ``ffn_gate_up_exps`` [E, 2f, d], gate
rows then up rows) → ``mlp.experts.e.{gate,up}_proj`` [f, d], ``ffn_down_exps`` [E, d, f] →
``mlp.experts.e.down_proj`` [d, f], each bias [E, ·] alike. The converter took transformers'
``gate_up_proj`` [E, d, 2f] (gate and up in alternate columns) apart into these, so expert e's
``W_gate`` is its rows of ``ffn_gate_exps`` as stored, and our clamped SwiGLU
(:class:`~model.nn.layers.ClampedSwiGLU`) computes from them what transformers computes from the
interleaved columns. The released files store the expert matrices as MXFP4
(:mod:`model.io.gguf.decode`). Q and K are not permuted (llama.cpp rotates gpt-oss's halves, NEOX).

Refused in one line: V2's group-limited routing (each group scored by its best expert), sigmoid gating
without its choice bias or without renormalised weights, a ``kv_b`` that is neither whole nor split.
Kept as stored (:mod:`model.io.gguf.stored`), each expert's matrix (DeepSeek's, gpt-oss's MXFP4 ones)
is a matrix over its own rows of the stack, decoded as it is used and sized at its stored bytes;
DeepSeek's ``q_b`` / ``kv_a`` are their stored rows read in our rotary order
(:meth:`~model.nn.quantized.StoredMatrix.reordered`); only a split ``kv_b`` (rebuilt from
``attn_k_b`` and ``attn_v_b``) is dequantized at the open.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import torch

from model.config import GPTConfig
from model.io.gguf.file import GGUFHeader, GGUFTensor, read_tensor
from model.io.gguf.moe import stacked_items
from model.io.gguf.stored import stored_matrices
from model.io.loaded import CheckpointError
from model.io.weights import TensorSource

__all__ = ["MLA_ARCHITECTURES", "mla_adjust", "mla_expert_header", "mla_hf", "mla_source"]

#: ``general.architecture`` -> the Hugging Face ``model_type`` it opens as.
MLA_ARCHITECTURES = {"deepseek2": "deepseek_v3", "gpt-oss": "gpt_oss"}

#: llama.cpp's ``llama_expert_gating_func_type``.
_SOFTMAX, _SIGMOID = 1, 2

#: ``blk.i.<theirs>`` -> ``model.layers.i.<Hugging Face>`` for the tensors renamed one to one.
_DEEPSEEK2_LAYER = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_q_a": "self_attn.q_a_proj",
    "attn_q_a_norm": "self_attn.q_a_layernorm",
    "attn_q_b": "self_attn.q_b_proj",
    "attn_kv_a_mqa": "self_attn.kv_a_proj_with_mqa",
    "attn_kv_a_norm": "self_attn.kv_a_layernorm",
    "attn_kv_b": "self_attn.kv_b_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "ffn_gate_inp": "mlp.gate",
    "ffn_gate_shexp": "mlp.shared_experts.gate_proj",
    "ffn_up_shexp": "mlp.shared_experts.up_proj",
    "ffn_down_shexp": "mlp.shared_experts.down_proj",
    "exp_probs_b": "mlp.gate.e_score_correction_bias",  # a buffer of the router's in transformers
}
#: the stacked experts [E, ...]: ``blk.i.<theirs>`` -> ``mlp.experts.e.<Hugging Face>`` (each item's
#: rows split evenly among the names: gpt-oss's fused gate and up).
_EXPERTS = {
    "ffn_gate_exps": ("gate_proj",),
    "ffn_up_exps": ("up_proj",),
    "ffn_down_exps": ("down_proj",),
    "ffn_gate_up_exps": ("gate_proj", "up_proj"),
}
_GLOBAL = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


# ---------------------------------------------------------------------------------------------
# the config
# ---------------------------------------------------------------------------------------------
def mla_hf(header: GGUFHeader, arch: str, key: Callable[..., Any], **shape: Any) -> dict[str, Any]:
    """The ``config.json`` of the Hugging Face folder a file of :data:`MLA_ARCHITECTURES` would be;
    ``shape``: ``n_layers``, ``n_heads``, ``context``, ``vocab``, ``d``, ``tied`` (from
    :func:`model.io.gguf.load.gguf_config`)."""
    if arch == "gpt-oss":
        return _gpt_oss_hf(header, arch, key, **shape)
    return _deepseek2_hf(header, arch, key, **shape)


def _deepseek2_hf(
    header: GGUFHeader,
    arch: str,
    key: Callable[..., Any],
    *,
    n_layers: int,
    n_heads: int,
    context: int,
    vocab: int,
    d: int,
    tied: bool,
) -> dict[str, Any]:
    """The ``config.json`` of the Hugging Face ``deepseek_v3`` folder a ``deepseek2`` file would be."""
    where = header.path.name
    ff = key("feed_forward_length", required=True)
    rope = key("rope.dimension_count", required=True)
    kv_rank = key("attention.kv_lora_rank", required=True)
    qk = key("attention.key_length_mla") or key("attention.key_length", required=True)
    v = key("attention.value_length_mla") or key("attention.value_length", required=True)
    if not (isinstance(qk, int) and isinstance(rope, int) and 0 < rope < qk):
        raise CheckpointError(
            f"{where}: {arch}.rope.dimension_count={rope} must be a whole number below the key's size "
            f"({arch}.attention.key_length_mla={qk}): latent attention's keys are a rotary and a plain part"
        )
    pre = header.get("tokenizer.ggml.pre")
    if pre in ("deepseek-llm", "deepseek-coder"):  # several splits by long character classes
        raise CheckpointError(f"{where}: tokenizer.ggml.pre={pre!r} (DeepSeek-V2's split) is not implemented")
    gating = key("expert_gating_func", _SOFTMAX)  # absent in V2's files: llama.cpp reads it as softmax
    groups, used_groups = key("expert_group_count", 1), key("expert_group_used_count", 1)
    norm = bool(header.get(f"{arch}.expert_weights_norm", False))
    if gating not in (_SOFTMAX, _SIGMOID):
        raise CheckpointError(
            f"{where}: {arch}.expert_gating_func={gating} is not implemented (1: softmax, 2: sigmoid)"
        )
    if gating == _SOFTMAX and groups > 1:
        raise CheckpointError(
            f"{where}: {arch}.expert_group_count={groups} with softmax gating (DeepSeek-V2's routing limited "
            f"to the groups of the best experts) is not implemented"
        )
    bias = any(n.endswith(".exp_probs_b.bias") for n in header.tensors)
    if gating == _SIGMOID and not (bias and norm):
        raise CheckpointError(
            f"{where}: {arch}.expert_gating_func=2 (sigmoid) without "
            f"{'renormalised weights (expert_weights_norm)' if bias else 'its choice bias (exp_probs_b)'} "
            f"is not implemented (DeepSeek-V3's router has both)"
        )
    hf = {
        "model_type": "deepseek_v3",
        "num_hidden_layers": n_layers,
        "hidden_size": key("embedding_length", d),
        "intermediate_size": ff,
        "num_attention_heads": n_heads,
        "num_key_value_heads": n_heads,  # MLA: every head its own k and v (the file says 1: the latent)
        "max_position_embeddings": context,
        "rms_norm_eps": key("attention.layer_norm_rms_epsilon", 1e-6),
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        "kv_lora_rank": kv_rank,
        "q_lora_rank": key("attention.q_lora_rank") or None,
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": qk - rope,
        "v_head_dim": v,
        "n_routed_experts": key("expert_count", 0),
        "num_experts_per_tok": key("expert_used_count", 1),
        "n_shared_experts": key("expert_shared_count", 0),
        "moe_intermediate_size": key("expert_feed_forward_length", ff),
        "first_k_dense_replace": key("leading_dense_block_count", 0),
        "n_group": groups,
        "topk_group": used_groups,
        "routed_scaling_factor": key("expert_weights_scale", 1.0),
        "norm_topk_prob": norm or gating == _SOFTMAX,  # softmax: checked again by mla_adjust
    }
    if key("expert_count", 0) < 1:
        raise CheckpointError(f"{where}: {arch}.expert_count is missing: a DeepSeek file without experts")
    hf.update(_yarn(header, arch, key))
    return hf


def _yarn(header: GGUFHeader, arch: str, key: Callable[..., Any]) -> dict[str, Any]:
    """``rope_parameters`` of the file's RoPE: plain, or YaRN as llama.cpp's ``deepseek2`` applies it
    (its attention factor cancels: ``cos``/``sin`` unscaled; mscale² on the scores from the log
    multiplier)."""
    theta = key("rope.freq_base", 10000.0)
    scaling = header.get(f"{arch}.rope.scaling.type")
    if scaling in (None, "none"):
        return {"rope_parameters": {"rope_type": "default", "rope_theta": theta}}
    if scaling != "yarn":
        raise CheckpointError(
            f"{header.path.name}: RoPE scaling {scaling!r} is not implemented for {arch} (yarn is)"
        )
    mscale_all = key("rope.scaling.yarn_log_multiplier", 0.0) / 0.1
    return {
        "rope_parameters": {
            "rope_type": "yarn",
            "rope_theta": theta,
            "factor": key("rope.scaling.factor", required=True),
            "original_max_position_embeddings": key("rope.scaling.original_context_length", required=True),
            "beta_fast": key("rope.scaling.yarn_beta_fast", 32.0),
            "beta_slow": key("rope.scaling.yarn_beta_slow", 1.0),
            "attention_factor": 1.0,
            "mscale": mscale_all,
            "mscale_all_dim": mscale_all,
        }
    }


def _gpt_oss_hf(
    header: GGUFHeader,
    arch: str,
    key: Callable[..., Any],
    *,
    n_layers: int,
    n_heads: int,
    context: int,
    vocab: int,
    d: int,
    tied: bool,
) -> dict[str, Any]:
    """The ``config.json`` of the Hugging Face ``gpt_oss`` folder a ``gpt-oss`` file would be: what the
    metadata holds; the window on every other layer from layer 0 (llama.cpp's ``set_swa_pattern(2)``,
    transformers' default ``layer_types``), the SwiGLU limit 7 and α 1.702 from the architecture."""
    where = header.path.name
    hidden = key("embedding_length", d)
    head_dim = key("attention.key_length", hidden // n_heads if n_heads else 0)
    rope = key("rope.dimension_count", head_dim)
    if key("attention.value_length", head_dim) != head_dim or rope != head_dim:
        raise CheckpointError(
            f"{where}: {arch}.attention.value_length or rope.dimension_count other than "
            f"{arch}.attention.key_length={head_dim} is not implemented (gpt-oss rotates whole heads)"
        )
    theta = key("rope.freq_base", 150000.0)
    scaling = header.get(f"{arch}.rope.scaling.type")
    params: dict[str, Any] = {"rope_type": "default", "rope_theta": theta}
    if scaling == "yarn":  # llama.cpp's YaRN: corrections rounded to whole dims (transformers' truncate)
        params.update(
            rope_type="yarn",
            factor=key("rope.scaling.factor", required=True),
            original_max_position_embeddings=key("rope.scaling.original_context_length", required=True),
            beta_fast=key("rope.scaling.yarn_beta_fast", 32.0),
            beta_slow=key("rope.scaling.yarn_beta_slow", 1.0),
        )
    elif scaling not in (None, "none"):
        raise CheckpointError(f"{where}: RoPE scaling {scaling!r} is not implemented for {arch} (yarn is)")
    return {
        "model_type": "gpt_oss",
        "num_hidden_layers": n_layers,
        "hidden_size": hidden,
        "intermediate_size": key("expert_feed_forward_length") or key("feed_forward_length", required=True),
        "num_attention_heads": n_heads,
        "num_key_value_heads": key("attention.head_count_kv", n_heads),
        "head_dim": head_dim,
        "max_position_embeddings": context,
        "rms_norm_eps": key("attention.layer_norm_rms_epsilon", 1e-5),
        "vocab_size": vocab,
        "tie_word_embeddings": tied,
        "attention_bias": True,
        "num_local_experts": key("expert_count", required=True),
        "num_experts_per_tok": key("expert_used_count", required=True),
        "sliding_window": key("attention.sliding_window", required=True),
        "rope_parameters": params,
    }


def mla_adjust(header: GGUFHeader, arch: str, cfg: GPTConfig) -> GPTConfig:
    """``cfg`` with the router the file's gating sets (the ``deepseek_v3`` family's is V3's sigmoid)."""
    if arch != "deepseek2":
        return cfg
    gating = header.get(f"{arch}.expert_gating_func", _SOFTMAX)
    if gating == _SIGMOID:
        return cfg
    norm = bool(header.get(f"{arch}.expert_weights_norm", False))
    return cfg.replace(router="softmax_topk_norm" if norm else "softmax_topk", router_choice_bias=False)


# ---------------------------------------------------------------------------------------------
# the weights
# ---------------------------------------------------------------------------------------------
def _layer_of(name: str) -> tuple[str, str, str] | None:
    """``(layer, part, kind)`` of ``blk.<layer>.<part>.<kind>``, else None."""
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit():
        return parts[1], parts[2], parts[3]
    return None


class _Entry(NamedTuple):
    """One Hugging Face tensor of the file: its ``shape``, how it is ``read`` (dequantized float32) and
    the GGUF tensor it is whole, as stored (``whole``; None for one built from parts)."""

    hf: str
    shape: tuple[int, ...]
    read: Callable[[], np.ndarray]
    whole: str | None = None


def _one_to_one(header: GGUFHeader, name: str, layer_names: dict[str, str]) -> _Entry:
    """The entry of a tensor renamed as is: ``output_norm`` -> ``model.norm``, ``blk.i.<part>`` ->
    ``model.layers.i.<layer_names[part]>``; a name with no place here (or an expert's, already under its
    Hugging Face name: :func:`mla_expert_header`) kept as is."""
    t, path = header.tensors[name], header.path
    stem, _, kind = name.rpartition(".")
    found = _layer_of(name)
    if found is None:
        hf = f"{_GLOBAL[stem]}.{kind}" if stem in _GLOBAL else name
    else:
        layer, part, kind = found
        hf = f"model.layers.{layer}.{layer_names[part]}" if part in layer_names else name
        hf += f".{kind}" if part in layer_names and part not in _NO_KIND else ""
    return _Entry(hf, t.shape, lambda: read_tensor(path, t), name)


#: parts whose Hugging Face name has no ``.weight`` / ``.bias`` (a buffer, a parameter of its own).
_NO_KIND = ("exp_probs_b", "attn_sinks")


def _deepseek2_entries(header: GGUFHeader) -> list[_Entry]:
    path, out = header.path, []
    for name, t in header.tensors.items():
        layer, part, _ = _layer_of(name) or ("", "", "")
        prefix = f"model.layers.{layer}."
        if part == "attn_k_b" and f"blk.{layer}.attn_kv_b.weight" not in header.tensors:
            v_b = header.tensors.get(f"blk.{layer}.attn_v_b.weight")
            if v_b is None or len(t.shape) != 3 or len(v_b.shape) != 3:
                raise CheckpointError(
                    f"{path.name}: {name} without blk.{layer}.attn_v_b.weight, each [heads, ·, ·]: the "
                    f"latent's key and value up-projections are stored split but not both"
                )
            heads, rank, nope = t.shape
            shape = (heads * (nope + v_b.shape[1]), rank)
            out.append(_Entry(f"{prefix}self_attn.kv_b_proj.weight", shape, _kv_b(path, t, v_b)))
        elif part not in ("attn_k_b", "attn_v_b"):  # those beside a whole attn_kv_b are not read
            out.append(_one_to_one(header, name, _DEEPSEEK2_LAYER))
    return out


#: gpt-oss's tensors renamed one to one (after ``blk.i.``).
_GPT_OSS_LAYER = {
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_sinks": "self_attn.sinks",
    "ffn_gate_inp": "mlp.router",
}


def _gpt_oss_entries(header: GGUFHeader) -> list[_Entry]:
    """Every tensor renamed one to one (the experts already split and named by :func:`mla_expert_header`)."""
    return [_one_to_one(header, name, _GPT_OSS_LAYER) for name in header.tensors]


def mla_expert_header(header: GGUFHeader) -> GGUFHeader:
    """``header`` with each stacked expert tensor (:data:`_EXPERTS`, weights [E, r, c] and biases
    [E, r]) split into one tensor per expert over its bytes, nothing read
    (:func:`~model.io.gguf.moe.stacked_items`), named ``model.layers.i.mlp.experts.e.<proj>.<kind>``:
    a 2-D matrix each, dequantized alone or kept as stored, and sized so; gpt-oss's fused
    ``ffn_gate_up_exps`` [E, 2f, d] gives each expert its ``[W_gate; W_up]`` halves."""
    tensors: dict[str, GGUFTensor] = {}
    for name, t in header.tensors.items():
        layer, part, kind = _layer_of(name) or ("", "", "")
        if part in _EXPERTS and len(t.shape) == (3 if kind == "weight" else 2):
            x = f"model.layers.{layer}.mlp.experts."
            names = [tuple(f"{x}{e}.{proj}.{kind}" for proj in _EXPERTS[part]) for e in range(t.shape[0])]
            tensors.update(stacked_items(t, names))
        else:
            tensors[name] = t
    return dataclasses.replace(header, tensors=tensors)


def mla_source(header: GGUFHeader, arch: str, *, stored: bool = False) -> TensorSource:
    """The tensors of a file of :data:`MLA_ARCHITECTURES` (its header from :func:`mla_expert_header`)
    under the Hugging Face names (module docstring), dequantized to float32 when read; ``stored``: the
    matrices stored whole kept as stored instead, each expert's among them (the split ``kv_b`` is
    dequantized at the open)."""
    entries = {e.hf: e for e in (_deepseek2_entries if arch == "deepseek2" else _gpt_oss_entries)(header)}
    renamed = {e.whole: e.hf for e in entries.values() if e.whole is not None}
    matrices = stored_matrices(header, lambda n, r: None) if stored else {}
    kept = {renamed[n]: m for n, m in matrices.items() if n in renamed}

    def get(hf: str) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(entries[hf].read()))

    return TensorSource(
        entries.keys(), lambda hf: entries[hf].shape, get, fresh=True, stored=kept.get if stored else None
    )


def _kv_b(path: Any, k_b: GGUFTensor, v_b: GGUFTensor) -> Callable[[], np.ndarray]:
    """``kv_b_proj`` [H·(d_nope + d_v), r] from ``attn_k_b`` [H, r, d_nope] and ``attn_v_b`` [H, d_v, r]:
    per head ``[W_UK_hᵀ; W_UV_h]``, as ``convert_hf_to_gguf`` split it."""

    def read() -> np.ndarray:
        k = read_tensor(path, k_b).swapaxes(1, 2)  # [H, d_nope, r]
        v = read_tensor(path, v_b)
        return np.concatenate([k, v], axis=1).reshape(-1, k.shape[-1])

    return read
