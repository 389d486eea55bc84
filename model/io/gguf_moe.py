"""Mixture-of-experts GGUF files: Mixtral (``llama`` with experts), Qwen3-MoE (``qwen3moe``) and
Qwen2-MoE (``qwen2moe``).

llama.cpp's ``convert_hf_to_gguf.py`` writes a mixture-of-experts block of layer ``i`` as

=====================================  ==================  ==========================================
GGUF tensor (PyTorch order)            shape               Hugging Face (Mixtral / Qwen3-MoE)
=====================================  ==================  ==========================================
``blk.i.ffn_gate_inp.weight``          [E, d]              ``block_sparse_moe.gate`` / ``mlp.gate``
``blk.i.ffn_gate_exps.weight``         [E, f, d]           expert e's ``w1`` / ``gate_proj``
``blk.i.ffn_up_exps.weight``           [E, f, d]           expert e's ``w3`` / ``up_proj``
``blk.i.ffn_down_exps.weight``         [E, d, f]           expert e's ``w2`` / ``down_proj``
``blk.i.ffn_{gate,up,down}_shexp``     [f_s, d], [d, f_s]  Qwen2-MoE: ``mlp.shared_expert.*_proj``
``blk.i.ffn_gate_inp_shexp.weight``    [d]                 Qwen2-MoE: ``mlp.shared_expert_gate`` [1, d]
=====================================  ==================  ==========================================

the E experts' matrices stacked along a first axis. In the file a stacked tensor is ``E·f`` rows of
``d`` values (``E·d`` rows of ``f``), each row whole blocks of its type, so expert ``e`` is the
contiguous bytes ``[e·n/E, (e+1)·n/E)`` of its ``n``: :func:`expert_header` splits each stacked tensor
into E tensors of their own over those bytes (nothing read), under the Hugging Face names, and the file
then opens through the families' layouts (:mod:`model.io.families`) like any other. Each expert is thus
a 2-D matrix: it is dequantized alone, or kept as stored (:mod:`model.io.gguf_stored`) and decoded one
expert at a time as it is used, and the size check counts its stored bytes.

Metadata (``a.`` the architecture): ``a.expert_count`` E, ``a.expert_used_count`` k,
``a.expert_feed_forward_length`` f (Qwen3-MoE, Qwen2-MoE; Mixtral's experts are ``a.feed_forward_length``
wide), ``a.expert_shared_feed_forward_length`` f_s (Qwen2-MoE's shared expert).
What the architecture implies, as llama.cpp's graph computes it (``build_moe_ffn``):

* ``llama`` with experts is Mixtral: ``softmax`` gating, top-k renormalised (Mixtral's router; the
  top-k of a softmax, renormalised, is the softmax of the top-k logits), W_Q / W_K rows permuted as
  every ``llama`` file's (undone by :mod:`model.io.gguf`);
* ``qwen3moe``: softmax, top-k renormalised (``norm_topk_prob``: llama.cpp always renormalises; a file's
  ``a.expert_weights_norm`` says otherwise where present), per-head Q/K RMSNorm, every layer a mixture,
  no Q/K permutation (Qwen rotates halves, as ggml's NeoX RoPE);
* ``qwen2moe``: softmax, top-k **not** renormalised (llama.cpp's and transformers' default; a file's
  ``a.expert_weights_norm`` says otherwise where present), Q/K/V biases where the file has them, and
  the shared expert added behind its gate: ``y = Σ_j g_j·E_j(x) + σ(w_s·x)·Shared(x)``, every layer a
  mixture.

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
MOE_ARCHITECTURES = {"qwen3moe": "qwen3_moe", "qwen2moe": "qwen2_moe"}

#: Per family: the Hugging Face prefix of the block (after ``model.layers.i.``) and its experts' names
#: of the gate, up and down projections.
_HF_EXPERTS = {
    "mixtral": ("block_sparse_moe.", ("w1", "w3", "w2")),
    "qwen3_moe": ("mlp.", ("gate_proj", "up_proj", "down_proj")),
    "qwen2_moe": ("mlp.", ("gate_proj", "up_proj", "down_proj")),
}
#: Qwen2-MoE's shared expert: GGUF name (after ``blk.i.``) -> Hugging Face's (after ``mlp.``).
_SHARED = {
    "ffn_gate_inp_shexp": "shared_expert_gate",
    "ffn_gate_shexp": "shared_expert.gate_proj",
    "ffn_up_shexp": "shared_expert.up_proj",
    "ffn_down_shexp": "shared_expert.down_proj",
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
    E, k = key("expert_count", required=True), key("expert_used_count")
    if not k:  # llama.cpp cannot route without it either
        raise CheckpointError(
            f"{header.path.name}: {arch}.expert_count={E} (mixture-of-experts) without "
            f"{arch}.expert_used_count: how many experts each token goes to is not said"
        )
    if model_type == "mixtral":
        return {"num_local_experts": E, "num_experts_per_tok": k}
    norm = header.get(f"{arch}.expert_weights_norm", model_type == "qwen3_moe")
    if not isinstance(norm, bool):
        raise CheckpointError(
            f"{header.path.name}: {arch}.expert_weights_norm is {norm!r}, not true or false"
        )
    out = {
        "num_experts": E,
        "num_experts_per_tok": k,
        "moe_intermediate_size": key("expert_feed_forward_length", required=True),
        "norm_topk_prob": norm,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    }
    if model_type == "qwen2_moe":
        out.update(
            shared_expert_intermediate_size=key("expert_shared_feed_forward_length", required=True),
            qkv_bias="blk.0.attn_q.bias" in header.tensors,
            attention_bias=False,  # its O projection and MLPs never have biases
        )
    return out


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
        shared = (
            {s: tensors.pop(f"blk.{i}.{s}.weight", None) for s in _SHARED}
            if model_type == "qwen2_moe"
            else {}
        )
        missing = [
            f"blk.{i}.{s}.weight"
            for s, t in zip(("ffn_gate_inp", *_STACKED, *shared), [router, *stacked, *shared.values()])
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
        for s, t in shared.items():
            assert t is not None
            shape = (1, *t.shape) if len(t.shape) == 1 else t.shape  # the gate: [d] stored, [1, d] theirs
            tensors[f"{hf}{_SHARED[s]}.weight"] = dataclasses.replace(
                t, name=f"{hf}{_SHARED[s]}.weight", shape=shape
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
