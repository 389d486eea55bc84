"""GGUF files of today's dense families: Gemma 2, Gemma 3 (text), Phi-3 and OLMo 2, as llama.cpp writes them.

:mod:`model.io.gguf.load` opens a GGUF file through the Hugging Face path of its family; for these four the
file's metadata says less than a ``config.json`` and its tensors are named and stored llama.cpp's way.
One :class:`DenseArch` per ``general.architecture`` says what differs, after llama.cpp's
``convert_hf_to_gguf.py`` (what it writes) and ``llama-model.cpp`` (what it reads and what it takes from
the architecture itself):

==========  ===============  =============================================================================
arch        ``model_type``   what the file does not say (llama.cpp's rule), how its tensors differ
==========  ===============  =============================================================================
``gemma2``  ``gemma2``       local/global layers ``"LG"`` (``sliding_window``, 4096 when absent); logit
                             soft-caps ``attn_logit_softcapping`` (50) and ``final_logit_softcapping``
                             (30) when absent; the query scalar: scores scaled by ``1/√d_k``, or
                             ``1/√(d/H)`` for the 46-layer (27B) model; four norms a block, every one
                             stored as ``1 + γ``; tied head
``gemma3``  ``gemma3_text``  local/global layers ``"LLLLLG"`` when ``sliding_window`` is set (else every
                             layer global); the local layers' RoPE θ 10 000 (``rope.freq_base`` is the
                             global layers'), their RoPE unscaled; ``final_logit_softcapping`` only when
                             written; the query scalar as Gemma 2's (62 layers: the 27B); every norm, q/k
                             norms too, as ``1 + γ``; ``output`` when untied
``phi3``    ``phi3``         Q, K, V fused in ``attn_qkv`` ``[W_Q; W_K; W_V]`` and gate/up in ``ffn_up``
                             ``[W_gate; W_up]`` (split at load, as a ``config.json`` folder's are);
                             llama.cpp runs every layer global whatever ``sliding_window`` says (so does
                             transformers from GGUF), and so does this; LongRoPE (``rope_factors_long`` /
                             ``_short``) is refused
``olmo2``   ``olmo2``        norms after each sublayer (``post_attention_norm``, ``post_ffw_norm``), q/k
                             norms over the whole projection; a ``sliding_window`` (OLMo 3's local
                             layers) is refused
==========  ===============  =============================================================================

None of them permutes the rows of W_Q and W_K: llama.cpp rotates these architectures' queries and keys as
NeoX does (rotate-half), the Hugging Face order. Per-layer tensor names (after ``blk.i.``) -> Hugging Face's
(after ``model.layers.i.``) are each architecture's :attr:`DenseArch.layers`, which
:func:`model.io.gguf.names.hf_name` takes instead of Llama's; ``token_embd``, ``output_norm`` and
``output`` are as for every family.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from model.io.gguf.file import GGUFHeader
from model.io.loaded import CheckpointError

__all__ = ["DENSE", "DenseArch", "dense_hf"]

#: ``key(name, default=None, *, required=False)``: a number of the file's metadata (model.io.gguf.load)
Key = Callable[..., Any]

_ATTENTION = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
}
_MLP = {"ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
_QK_NORMS = {"attn_q_norm": "self_attn.q_norm", "attn_k_norm": "self_attn.k_norm"}

#: Gemma 2/3's sandwich: a norm before and after each sublayer (``ffn_norm`` is the one *before* the MLP)
_SANDWICH = {
    "attn_norm": "input_layernorm",
    "post_attention_norm": "post_attention_layernorm",
    "ffn_norm": "pre_feedforward_layernorm",
    "post_ffw_norm": "post_feedforward_layernorm",
}


def _gemma_scalar(hf: dict[str, Any], big_depth: int) -> float:
    """``query_pre_attn_scalar`` as llama.cpp sets Gemma's score scale (``f_attention_scale``): the head
    size (``1/√d_k``), but ``d / H`` for the 27B model, which it knows by its depth (``big_depth``
    layers); transformers, reading no scalar from the file either, takes Gemma's default of 256."""
    if hf["num_hidden_layers"] == big_depth:
        return hf["hidden_size"] / hf["num_attention_heads"]
    return float(hf["head_dim"])


def _gemma2(header: GGUFHeader, key: Key, hf: dict[str, Any]) -> dict[str, Any]:
    return {
        "sliding_window": key("attention.sliding_window", 4096) or None,
        "attn_logit_softcapping": key("attn_logit_softcapping", 50.0),
        "final_logit_softcapping": key("final_logit_softcapping", 30.0),
        "query_pre_attn_scalar": _gemma_scalar(hf, 46),
    }


def _gemma3(header: GGUFHeader, key: Key, hf: dict[str, Any]) -> dict[str, Any]:
    window = key("attention.sliding_window") or None
    out: dict[str, Any] = {
        "sliding_window": window,
        "sliding_window_pattern": 6,
        "rope_local_base_freq": 10000.0,
        "final_logit_softcapping": key("final_logit_softcapping"),
        "query_pre_attn_scalar": _gemma_scalar(hf, 62),
    }
    if window is None:  # llama.cpp: no window written, no local layer
        out["layer_types"] = ["full_attention"] * hf["num_hidden_layers"]
    return out


def _phi3(header: GGUFHeader, key: Key, hf: dict[str, Any]) -> dict[str, Any]:
    longrope = [n for n in ("rope_factors_long.weight", "rope_factors_short.weight") if n in header.tensors]
    if longrope:
        raise CheckpointError(
            f"{header.path.name}: {', '.join(longrope)} (Phi-3's LongRoPE scaling) is not implemented"
        )
    return {"sliding_window": None, "use_sliding_window": False}  # llama.cpp: Phi-3's window is off


def _olmo2(header: GGUFHeader, key: Key, hf: dict[str, Any]) -> dict[str, Any]:
    window = key("attention.sliding_window")
    if window:
        raise CheckpointError(
            f"{header.path.name}: olmo2.attention.sliding_window={window} (OLMo 3's local layers) is not "
            f"implemented"
        )
    return {"sliding_window": None, "use_sliding_window": False}


class DenseArch(NamedTuple):
    """How a GGUF ``general.architecture`` opens: as Hugging Face ``model_type``, its per-layer tensor
    names (GGUF -> Hugging Face), whether its norms are stored as ``1 + γ`` (``norm_plus_one``), and the
    ``config.json`` fields it implies beyond :func:`model.io.gguf.load.gguf_config`'s (``hf``)."""

    model_type: str
    layers: dict[str, str]
    norm_plus_one: bool
    hf: Callable[[GGUFHeader, Key, dict[str, Any]], dict[str, Any]]


#: ``general.architecture`` -> :class:`DenseArch` (module docstring)
DENSE: dict[str, DenseArch] = {
    "gemma2": DenseArch("gemma2", {**_SANDWICH, **_ATTENTION, **_MLP}, True, _gemma2),
    "gemma3": DenseArch("gemma3_text", {**_SANDWICH, **_ATTENTION, **_QK_NORMS, **_MLP}, True, _gemma3),
    "phi3": DenseArch(
        "phi3",
        {
            "attn_norm": "input_layernorm",
            "attn_qkv": "self_attn.qkv_proj",
            "attn_output": "self_attn.o_proj",
            "ffn_norm": "post_attention_layernorm",
            "ffn_up": "mlp.gate_up_proj",
            "ffn_down": "mlp.down_proj",
        },
        False,
        _phi3,
    ),
    "olmo2": DenseArch(
        "olmo2",
        {
            "post_attention_norm": "post_attention_layernorm",
            "post_ffw_norm": "post_feedforward_layernorm",
            **_ATTENTION,
            **_QK_NORMS,
            **_MLP,
        },
        False,
        _olmo2,
    ),
}


def dense_hf(header: GGUFHeader, key: Key, hf: dict[str, Any]) -> dict[str, Any]:
    """The ``config.json`` fields a file of one of :data:`DENSE` implies beyond ``hf`` (what
    :func:`model.io.gguf.load.gguf_config` read from its metadata); raises :class:`CheckpointError` for
    what is not implemented."""
    return DENSE[header.architecture].hf(header, key, hf)
