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
into E tensors of their own over those bytes (:func:`stacked_items`, nothing read; DeepSeek's and
gpt-oss's files are split by it too, :mod:`model.io.gguf.mla`), under the Hugging Face names, and the file
then opens through the families' layouts (:mod:`model.io.hf.families`) like any other. Each expert is thus
a 2-D matrix: it is dequantized alone, or kept as stored (:mod:`model.io.gguf.stored`) and decoded one
expert at a time as it is used, and the size check counts its stored bytes.

Metadata (``a.`` the architecture): ``a.expert_count`` E, ``a.expert_used_count`` k,
``a.expert_feed_forward_length`` f (Qwen3-MoE, Qwen2-MoE; Mixtral's experts are ``a.feed_forward_length``
wide), ``a.expert_shared_feed_forward_length`` f_s (Qwen2-MoE's shared expert).
What the architecture implies, as llama.cpp's graph computes it (``build_moe_ffn``):

* ``llama`` with experts is Mixtral: ``softmax`` gating, top-k renormalised (Mixtral's router; the
  top-k of a softmax, renormalised, is the softmax of the top-k logits), W_Q / W_K rows permuted as
  every ``llama`` file's (undone by :mod:`model.io.gguf.load`);
* ``qwen3moe``: softmax, top-k renormalised (``norm_topk_prob``: llama.cpp's graph always
  renormalises, whatever the metadata), per-head Q/K RMSNorm, every layer a mixture, no Q/K permutation
  (Qwen rotates halves, as ggml's NeoX RoPE);
* ``qwen2moe``: softmax, top-k **not** renormalised (llama.cpp's graph, transformers' default), Q/K/V
  biases where the file has them, and the shared expert added behind its gate:
  ``y = Σ_j g_j·E_j(x) + σ(w_s·x)·Shared(x)``, every layer a mixture.

The Qwens' widths default as llama.cpp's loader does when a file (converted before the keys were
written) lacks them: f = ``a.feed_forward_length`` / k, f_s = ``a.feed_forward_length``. A file asking
for ``a.expert_weights_scale`` (its routed weights scaled) is refused in one line.

A stacked tensor that is not ``[E, …]`` 3-D, or a layer without its router and three stacked tensors, is
refused in one line naming the file's tensors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from model.config import GPTConfig
from model.io.gguf.file import DEQUANTIZED, GGUFHeader, GGUFTensor
from model.io.loaded import CheckpointError

__all__ = ["MOE_ARCHITECTURES", "expert_header", "moe_hf", "moe_model_type", "stacked_items"]

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
    (``key``: the file's numbers, :func:`model.io.gguf.load._numbers`)."""
    E, k = key("expert_count", required=True), key("expert_used_count")
    if not k:  # llama.cpp cannot route without it either
        raise CheckpointError(
            f"{header.path.name}: {arch}.expert_count={E} (mixture-of-experts) without "
            f"{arch}.expert_used_count: how many experts each token goes to is not said"
        )
    scale = key("expert_weights_scale")
    if scale not in (None, 0, 1):  # llama.cpp multiplies the routed weights by it
        raise CheckpointError(
            f"{header.path.name}: {arch}.expert_weights_scale={scale} (routed weights scaled) is not "
            f"implemented for {arch}"
        )
    if model_type == "mixtral":
        return {"num_local_experts": E, "num_experts_per_tok": k}
    n_ff = key("feed_forward_length", required=True)
    out = {
        "num_experts": E,
        "num_experts_per_tok": k,
        # llama.cpp's width when the key is absent (files converted before it was written)
        "moe_intermediate_size": key("expert_feed_forward_length") or n_ff // k,
        "norm_topk_prob": model_type == "qwen3_moe",  # llama.cpp's graphs: fixed per architecture
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
    }
    if model_type == "qwen2_moe":
        out.update(
            shared_expert_intermediate_size=key("expert_shared_feed_forward_length") or n_ff,
            qkv_bias="blk.0.attn_q.bias" in header.tensors,
            attention_bias=False,  # its O projection and MLPs never have biases
        )
    return out


def expert_header(header: GGUFHeader, model_type: str, cfg: GPTConfig) -> GGUFHeader:
    """``header`` with each layer's router and stacked experts under their Hugging Face names, every
    stacked ``[E, r, c]`` tensor split into E ``[r, c]`` tensors over its bytes (module docstring);
    ``header`` itself when ``model_type`` is no mixture of experts. A tensor missing, or of another
    shape than the config says, is refused naming it as the file does."""
    if model_type not in _HF_EXPERTS:
        return header
    tensors = dict(header.tensors)
    for i in range(cfg.core.n_layers):
        if cfg.is_moe_layer(i):
            tensors.update(_layer(header, tensors, i, model_type, cfg))
    return dataclasses.replace(header, tensors=tensors)


def stacked_items(t: GGUFTensor, names: list[tuple[str, ...]]) -> dict[str, GGUFTensor]:
    """The items of the stacked tensor ``t`` [E, r, ...] as tensors of their own over its bytes, nothing
    read: item ``e`` is the bytes ``[e·n/E, (e+1)·n/E)`` of its ``n`` (rows ``[e·r, (e+1)·r)``, whole
    blocks each), split into equal blocks of rows named ``names[e]`` (one name: the item whole; two:
    the halves of a fused ``[W_gate; W_up]``). An item whose rows do not split into whole blocks is
    refused naming ``t``."""
    E, parts = t.shape[0], len(names[0])
    shape = (t.shape[1] // parts, *t.shape[2:])
    block = DEQUANTIZED[t.ggml_type][1] if len(shape) == 1 else 1  # an item [r] is one row of blocks
    if t.nbytes % (E * parts) or t.shape[1] % parts or shape[0] % block:
        raise CheckpointError(f"{t.name} {list(t.shape)} ({t.type_name}) does not split in {E}×{parts} parts")
    each = t.nbytes // (E * parts)
    out: dict[str, GGUFTensor] = {}
    for e in range(E):
        for j, name in enumerate(names[e]):
            out[name] = GGUFTensor(name, shape, t.ggml_type, t.offset + (e * parts + j) * each, each)
    return out


def _layer(
    header: GGUFHeader, tensors: dict[str, GGUFTensor], i: int, model_type: str, cfg: GPTConfig
) -> dict[str, GGUFTensor]:
    """Layer ``i``'s expert tensors taken out of ``tensors``, checked and renamed (:func:`expert_header`)."""
    E, f, d, f_s = (
        int(cfg.feed_forward.n_experts or 0),
        cfg.expert_hidden,
        cfg.core.d_model,
        cfg.shared_hidden,
    )
    expected = {
        "ffn_gate_inp": (E, d),
        "ffn_gate_exps": (E, f, d),
        "ffn_up_exps": (E, f, d),
        "ffn_down_exps": (E, d, f),
    }
    if model_type == "qwen2_moe":  # the shared expert; its gate is stored [d] (the converter squeezes)
        expected.update(
            ffn_gate_inp_shexp=(d,), ffn_gate_shexp=(f_s, d), ffn_up_shexp=(f_s, d), ffn_down_shexp=(d, f_s)
        )
    found = {s: tensors.pop(f"blk.{i}.{s}.weight", None) for s in expected}
    where, arch = header.path.name, header.architecture
    missing = [f"blk.{i}.{s}.weight" for s, t in found.items() if t is None]
    if missing:
        raise CheckpointError(f"{where}: {', '.join(missing)} missing ({E} experts, {arch}.expert_count)")
    for s, t in found.items():
        assert t is not None
        if tuple(t.shape) != expected[s] and not (s == "ffn_gate_inp_shexp" and tuple(t.shape) == (1, d)):
            raise CheckpointError(
                f"{where}: {t.name} has shape {list(t.shape)}, not {list(expected[s])} (as "
                f"{arch}.expert_count, the experts' widths and {arch}.embedding_length say)"
            )
    block, names = _HF_EXPERTS[model_type]
    hf = f"model.layers.{i}.{block}"
    out: dict[str, GGUFTensor] = {}
    for s, t in found.items():
        assert t is not None
        if s in _STACKED:
            theirs = names[_STACKED.index(s)]
            out.update(stacked_items(t, [(f"{hf}experts.{e}.{theirs}.weight",) for e in range(E)]))
        else:
            name = f"{hf}{'gate' if s == 'ffn_gate_inp' else _SHARED[s]}.weight"
            shape = (1, d) if s == "ffn_gate_inp_shexp" else t.shape  # the gate: [1, d] theirs
            out[name] = dataclasses.replace(t, name=name, shape=shape)
    return out
