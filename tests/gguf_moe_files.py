"""Mixture-of-experts GGUF files for the tests, as llama.cpp's ``convert_hf_to_gguf.py`` writes them.

A helper module, not a test module: ``tests/model/test_gguf_moe.py`` imports it. From a transformers
``MixtralForCausalLM``, ``Qwen3MoeForCausalLM`` or ``Qwen2MoeForCausalLM`` (whose experts transformers
holds fused, ``gate_up_proj`` [E, 2f, d] gate first and ``down_proj`` [E, d, f]), after llama.cpp:

* architecture ``llama`` for Mixtral (``LlamaModel`` converts it: W_Q / W_K rows permuted), ``qwen3moe``
  and ``qwen2moe`` (rows as they are);
* ``a.expert_count``, ``a.expert_used_count`` and, for the Qwens, ``a.expert_feed_forward_length``
  (Qwen2-MoE: ``a.expert_shared_feed_forward_length`` too);
* Qwen2-MoE's shared expert as ``ffn_{gate,up,down}_shexp`` and its gate ``ffn_gate_inp_shexp``
  squeezed to [d] (the converter squeezes every tensor: [1, d] becomes [d], kept F32);
* per layer ``ffn_gate_inp`` [E, d] (the router, kept F32 as the converter keeps it), and the experts
  stacked: ``ffn_gate_exps`` / ``ffn_up_exps`` [E, f, d], ``ffn_down_exps`` [E, d, f];
* the rest as :func:`tests.gguf_files.gguf_tensors` names it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.gguf_files import _GLOBAL, _LAYER, _permute, write_gguf_tensors

__all__ = ["ARCH", "moe_tensors", "write_moe_gguf"]

#: transformers ``model_type`` -> llama.cpp's ``general.architecture``.
ARCH = {"mixtral": "llama", "qwen3_moe": "qwen3moe", "qwen2_moe": "qwen2moe"}
#: Qwen2-MoE's shared expert (after ``model.layers.N.mlp.``) -> llama.cpp's name (after ``blk.N.``).
_SHARED = {
    "shared_expert.gate_proj": "ffn_gate_shexp",
    "shared_expert.up_proj": "ffn_up_shexp",
    "shared_expert.down_proj": "ffn_down_shexp",
    "shared_expert_gate": "ffn_gate_inp_shexp",
}


def moe_tensors(model) -> list[tuple[str, Any]]:
    """``(llama.cpp name, float32 numpy array)`` of every tensor the converter writes, in its order."""
    cfg = model.config
    tied = bool(getattr(cfg, "tie_word_embeddings", False))
    out = []
    for name, tensor in model.state_dict().items():
        stem, _, kind = name.rpartition(".")
        if stem == "lm_head" and tied:
            continue
        w = tensor.detach().float().numpy().copy()
        m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", name)
        if m and m[2] == "mlp.experts.gate_up_proj":  # [E, 2f, d]: gate rows first, then up
            f = w.shape[1] // 2
            out += [(f"blk.{m[1]}.ffn_gate_exps.weight", w[:, :f].copy())]
            out += [(f"blk.{m[1]}.ffn_up_exps.weight", w[:, f:].copy())]
            continue
        if m and m[2] == "mlp.experts.down_proj":
            out.append((f"blk.{m[1]}.ffn_down_exps.weight", w))
            continue
        if m and m[2] == "mlp.gate.weight":
            out.append((f"blk.{m[1]}.ffn_gate_inp.weight", w))
            continue
        lm = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", stem)
        if lm and lm[2].removeprefix("mlp.") in _SHARED:
            out.append((f"blk.{lm[1]}.{_SHARED[lm[2].removeprefix('mlp.')]}.{kind}", w.squeeze()))
            continue
        new = f"blk.{lm[1]}.{_LAYER[lm[2]]}.{kind}" if lm else f"{_GLOBAL[stem]}.{kind}"
        if cfg.model_type == "mixtral" and lm and lm[2] in ("self_attn.q_proj", "self_attn.k_proj"):
            heads = cfg.num_attention_heads if lm[2] == "self_attn.q_proj" else cfg.num_key_value_heads
            w = _permute(w, heads)
        out.append((new, w))
    return out


def write_moe_gguf(
    path: str | Path, model, tokenizer_folder: str | Path, qtype: str = "F32", **options: Any
) -> Path:
    """Write ``model`` (Mixtral, Qwen3-MoE or Qwen2-MoE) and the tokenizer of ``tokenizer_folder`` as
    llama.cpp converts them; ``options`` as :func:`tests.gguf_files.write_gguf_tensors`' (``types``,
    ``raw``), ``tensors`` replacing :func:`moe_tensors`' list, ``metadata`` setting keys as
    :func:`tests.gguf_files.write_gguf`'s does (``{key: (value, "UINT32")}``; None removes one)."""
    from gguf import GGUFValueType
    from gguf.gguf_writer import GGUFValue

    cfg = model.config
    arch = ARCH[cfg.model_type]
    overrides = options.pop("metadata", {})

    def metadata(writer) -> None:
        experts = getattr(cfg, "num_local_experts", None) or cfg.num_experts
        writer.add_expert_count(experts)
        writer.add_expert_used_count(cfg.num_experts_per_tok)
        if cfg.model_type in ("qwen3_moe", "qwen2_moe"):
            writer.add_expert_feed_forward_length(cfg.moe_intermediate_size)
        if cfg.model_type == "qwen2_moe":
            writer.add_expert_shared_feed_forward_length(cfg.shared_expert_intermediate_size)
        for key, value in overrides.items():
            if value is None:
                writer.kv_data[0].pop(key, None)
            else:
                writer.kv_data[0][key] = GGUFValue(value=value[0], type=GGUFValueType[value[1]])

    tensors = options.pop("tensors", None) or moe_tensors(model)
    return write_gguf_tensors(
        path,
        arch,
        cfg,
        tokenizer_folder,
        tensors,
        qtype,
        tokenizer_family="llama" if cfg.model_type == "mixtral" else "qwen2",
        metadata=metadata,
        float32=lambda name: "ffn_gate_inp" in name,  # the routers and the shared expert's gate
        **options,
    )
