"""Mixture-of-experts GGUF files: Mixtral (``llama`` with experts) and Qwen3-MoE (``qwen3moe``).

llama.cpp's ``convert_hf_to_gguf.py`` writes a mixture-of-experts block of layer ``i`` as

=====================================  ==================  ==========================================
GGUF tensor (PyTorch order)            shape               Hugging Face (Mixtral / Qwen3-MoE)
=====================================  ==================  ==========================================
``blk.i.ffn_gate_inp.weight``          [E, d]              ``block_sparse_moe.gate`` / ``mlp.gate``
``blk.i.ffn_gate_exps.weight``         [E, f, d]           expert e's ``w1`` / ``gate_proj``
``blk.i.ffn_up_exps.weight``           [E, f, d]           expert e's ``w3`` / ``up_proj``
``blk.i.ffn_down_exps.weight``         [E, d, f]           expert e's ``w2`` / ``down_proj``
=====================================  ==================  ==========================================

the E experts' matrices stacked along a first axis. In the file a stacked tensor is ``E·f`` rows of
``d`` values (``E·d`` rows of ``f``), each row whole blocks of its type, so expert ``e`` is the
contiguous bytes ``[e·n/E, (e+1)·n/E)`` of its ``n``: :func:`expert_header` splits each stacked tensor
into E tensors of their own over those bytes (nothing read), under the Hugging Face names, and the file
then opens through the families' layouts (:mod:`model.io.families`) like any other. Each expert is thus
a 2-D matrix: it is dequantized alone, or kept as stored (:mod:`model.io.gguf_stored`) and decoded one
expert at a time as it is used, and the size check counts its stored bytes.

Metadata (``a.`` the architecture): ``a.expert_count`` E, ``a.expert_used_count`` k,
``a.expert_feed_forward_length`` f (Qwen3-MoE; Mixtral's experts are ``a.feed_forward_length`` wide).
What the architecture implies, as llama.cpp's graph computes it (``build_moe_ffn``):

* ``llama`` with experts is Mixtral: ``softmax`` gating, top-k renormalised (Mixtral's router; the
  top-k of a softmax, renormalised, is the softmax of the top-k logits), W_Q / W_K rows permuted as
  every ``llama`` file's (undone by :mod:`model.io.gguf`);
* ``qwen3moe``: softmax, top-k renormalised (``norm_topk_prob``: llama.cpp always renormalises; a file's
  ``a.expert_weights_norm`` says otherwise where present), per-head Q/K RMSNorm, every layer a mixture,
  no Q/K permutation (Qwen rotates halves, as ggml's NeoX RoPE).

A stacked tensor that is not ``[E, …]`` 3-D, or a layer without its router and three stacked tensors, is
refused in one line naming the file's tensors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from model.config import GPTConfig
from model.io.gguf_file import GGUFHeader, GGUFTensor
from model.io.loaded import CheckpointError

__all__ = ["MOE_ARCHITECTURES", "expert_header", "moe_hf", "moe_model_type"]

#: ``general.architecture`` -> the Hugging Face ``model_type`` of its mixture-of-experts files (a
#: ``llama`` file with ``llama.expert_count`` is Mixtral: :func:`moe_model_type`).
MOE_ARCHITECTURES = {"qwen3moe": "qwen3_moe"}

#: Per family: the Hugging Face prefix of the block (after ``model.layers.i.``) and its experts' names
#: of the gate, up and down projections.
_HF_EXPERTS = {
    "mixtral": ("block_sparse_moe.", ("w1", "w3", "w2")),
    "qwen3_moe": ("mlp.", ("gate_proj", "up_proj", "down_proj")),
}
_STACKED = ("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps")


def moe_model_type(header: GGUFHeader) -> str | None:
    """The Hugging Face ``model_type`` a mixture-of-experts file opens as (``mixtral`` for ``llama``
    with experts), else None."""
    arch = header.architecture
    if arch == "llama" and header.get("llama.expert_count"):
        return "mixtral"
    return MOE_ARCHITECTURES.get(arch)


def moe_hf(header: GGUFHeader, arch: str, model_type: str, key: Callable[..., Any]) -> dict[str, Any]:
    """The ``config.json`` fields of a mixture-of-experts file beyond a Llama-shaped one's
    (``key``: the file's numbers, :func:`model.io.gguf._numbers`)."""
    E, k = key("expert_count", required=True), key("expert_used_count", required=True)
    if model_type == "mixtral":
        return {"num_local_experts": E, "num_experts_per_tok": k}
    norm = header.get(f"{arch}.expert_weights_norm", True)
    if not isinstance(norm, bool):
        raise CheckpointError(
            f"{header.path.name}: {arch}.expert_weights_norm is {norm!r}, not true or false"
        )
    return {
        "num_experts": E,
        "num_experts_per_tok": k,
        "moe_intermediate_size": key("expert_feed_forward_length", required=True),
        "norm_topk_prob": norm,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    }


def expert_header(header: GGUFHeader, model_type: str, cfg: GPTConfig) -> GGUFHeader:
    """``header`` with each layer's router and stacked experts under their Hugging Face names, every
    stacked ``[E, r, c]`` tensor split into E ``[r, c]`` tensors over its bytes (module docstring);
    ``header`` itself when ``model_type`` is no mixture of experts."""
    if model_type not in _HF_EXPERTS:
        return header
    block, names = _HF_EXPERTS[model_type]
    E = int(cfg.n_experts or 0)
    tensors = dict(header.tensors)
    for i in range(cfg.n_layers):
        if not cfg.is_moe_layer(i):
            continue
        hf = f"model.layers.{i}.{block}"
        router = tensors.pop(f"blk.{i}.ffn_gate_inp.weight", None)
        stacked = [tensors.pop(f"blk.{i}.{s}.weight", None) for s in _STACKED]
        missing = [
            f"blk.{i}.{s}.weight"
            for s, t in zip(("ffn_gate_inp", *_STACKED), [router, *stacked])
            if t is None
        ]
        if missing:
            raise CheckpointError(
                f"{header.path.name}: {', '.join(missing)} missing ({E} experts, "
                f"{header.architecture}.expert_count)"
            )
        assert router is not None
        tensors[f"{hf}gate.weight"] = dataclasses.replace(router, name=f"{hf}gate.weight")
        for t, theirs in zip(stacked, names, strict=True):
            assert t is not None
            for e, part in enumerate(_split(header, t, E)):
                tensors[f"{hf}experts.{e}.{theirs}.weight"] = dataclasses.replace(
                    part, name=f"{hf}experts.{e}.{theirs}.weight"
                )
    return dataclasses.replace(header, tensors=tensors)


def _split(header: GGUFHeader, t: GGUFTensor, E: int) -> list[GGUFTensor]:
    """The E ``[r, c]`` tensors over the bytes of stacked ``t`` [E, r, c] (each whole rows of blocks)."""
    if len(t.shape) != 3 or t.shape[0] != E:
        raise CheckpointError(
            f"{header.path.name}: {t.name} has shape {list(t.shape)}, not [{E}, rows, columns] "
            f"({E} experts stacked, {header.architecture}.expert_count)"
        )
    each = t.nbytes // E
    return [GGUFTensor(t.name, tuple(t.shape[1:]), t.ggml_type, t.offset + e * each, each) for e in range(E)]
