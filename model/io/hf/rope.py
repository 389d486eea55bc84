"""The RoPE and sliding-window fields of a Hugging Face ``config.json`` (:mod:`model.io.hf.families`).

How a family's config sets its rotary positions (``rope_parameters`` or ``rope_theta`` +
``rope_scaling``: linear, llama3, YaRN; Gemma 3's local θ; DeepSeek's mscale² on the scores) and which of
its layers slide (``sliding_window``, ``layer_types``, Qwen's ``max_window_layers``), as the family's code
in transformers applies them; what it does not implement is appended to ``problems``.
"""

from __future__ import annotations

import math
from typing import Any

#: gpt-oss's RoPE when its config.json says nothing of RoPE (transformers' GptOssConfig default)
_GPT_OSS_ROPE = {
    "rope_type": "yarn",
    "factor": 32.0,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "truncate": False,
    "original_max_position_embeddings": 4096,
}


def _get_mscale(scale: float, mscale: float = 1.0) -> float:
    """YaRN's ``0.1·m·ln(s) + 1`` (1 for a factor up to 1), as transformers writes it."""
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _rope_fields(hf: dict[str, Any], model_type: str, problems: list[str]) -> dict[str, Any]:
    """``rope_base``, ``rope_scaling`` (+ factors), ``rotary_pct`` and ``rope_local_base`` from either
    form transformers writes: ``rope_parameters`` (v5; per layer type for Gemma 3) or ``rope_theta`` +
    ``rope_scaling`` (+ ``rotary_pct``, ``rotary_emb_base``, ``rope_local_base_freq``)."""
    params = hf.get("rope_parameters")
    params = dict(params) if isinstance(params, dict) else {}
    local: Any = None
    if "full_attention" in params or "sliding_attention" in params:  # per layer type (Gemma 3)
        local = params.get("sliding_attention")
        params = dict(params.get("full_attention") or {})
    scaling = hf.get("rope_scaling")
    if isinstance(scaling, dict):
        params = {**scaling, **params}
    if model_type == "gpt_oss" and not params and "rope_theta" not in hf:
        params = dict(_GPT_OSS_ROPE)
    theta = params.get("rope_theta", hf.get("rope_theta", hf.get("rotary_emb_base", 10000.0)))
    pct = params.get("partial_rotary_factor", hf.get("partial_rotary_factor", hf.get("rotary_pct", 1.0)))
    out: dict[str, Any] = {"rope_base": float(theta), "rotary_pct": float(pct)}
    if model_type == "gemma3_text":
        local = dict(local) if isinstance(local, dict) else {}
        kind = local.get("rope_type", local.get("type", "default"))
        if kind != "default":
            problems.append(f"RoPE scaling of the local layers ({kind!r}) is not implemented")
        out["rope_local_base"] = float(local.get("rope_theta", hf.get("rope_local_base_freq", 10000.0)))
    kind = params.get("rope_type", params.get("type", "default"))
    if kind == "default":
        return out
    kinds = ("linear", "llama3", "yarn") if model_type in ("gpt_oss", "deepseek_v3") else ("linear", "llama3")
    if kind not in kinds:
        only = " and ".join(kinds)
        problems.append(
            f"rope_scaling of type {kind!r} is not implemented for {model_type} (only {only} are)"
        )
        return out
    factor = params.get("factor", 1.0)
    original = hf.get("original_max_position_embeddings", params.get("original_max_position_embeddings"))
    if kind == "yarn":
        original = original if original is not None else hf.get("max_position_embeddings", 2048)
        if factor is None:  # DeepSeek's way: the ratio of the contexts
            factor = hf.get("max_position_embeddings", 2048) / original
        attention = params.get("attention_factor")
        mscale, mscale_all = params.get("mscale"), params.get("mscale_all_dim")
        if attention is None and mscale and mscale_all:
            attention = _get_mscale(factor, float(mscale)) / _get_mscale(factor, float(mscale_all))
        elif attention is None:
            attention = _get_mscale(factor)
        out.update(
            rope_scaling="yarn",
            rope_factor=float(factor),
            rope_original_context=int(original),
            rope_beta_fast=float(params.get("beta_fast") or 32),
            rope_beta_slow=float(params.get("beta_slow") or 1),
            rope_truncate=bool(params.get("truncate", True)),
            rope_attn_factor=float(attention),
        )
        return out
    out.update(rope_scaling=kind, rope_factor=float(factor))
    if kind == "llama3":
        try:
            out.update(
                rope_low_freq_factor=float(params["low_freq_factor"]),
                rope_high_freq_factor=float(params["high_freq_factor"]),
                rope_original_context=int(params["original_max_position_embeddings"]),
            )
        except (KeyError, TypeError, ValueError):
            problems.append(
                "llama3 rope_scaling needs low_freq_factor, high_freq_factor and "
                "original_max_position_embeddings"
            )
    return out


def _score_scale(hf: dict[str, Any]) -> float | None:
    """DeepSeek's ``attn_scale_dim``: transformers scales its scores by ``d_qk^-½·mscale²`` when the RoPE
    is scaled and ``mscale_all_dim`` is set (``1/√attn_scale_dim`` is that scale); else None (1/√d_qk)."""
    params = hf.get("rope_parameters")
    params = dict(params) if isinstance(params, dict) else {}
    if isinstance(hf.get("rope_scaling"), dict):
        params = {**hf["rope_scaling"], **params}
    kind = params.get("rope_type", params.get("type", "default"))
    mscale_all = params.get("mscale_all_dim", 0)
    if kind == "default" or not mscale_all:
        return None
    m = _get_mscale(float(params["factor"]), float(mscale_all))
    scale = (hf["qk_nope_head_dim"] + hf["qk_rope_head_dim"]) ** -0.5 * m * m
    return 1.0 / (scale * scale)


#: How each family's code (transformers') chooses the layers that slide, for those not in
#: :func:`_layer_pattern`: every layer when ``sliding_window`` is set (Qwen3-MoE: and
#: ``use_sliding_window``), Qwen's ``layer_types`` (default: the layers from ``max_window_layers`` on, when
#: ``use_sliding_window``), or none at all (its code has no window).
_EVERY_LAYER = ("mistral", "mixtral", "phi3", "qwen3_moe", "qwen2_moe")
_QWEN_LAYERS = ("qwen2", "qwen3")


def _layer_letters(types: Any, n: int, problems: list[str]) -> str | None:
    """``layer_types`` as one letter per layer (``L`` sliding, ``G`` full), or None (a problem) when it
    is not one ``sliding_attention`` or ``full_attention`` per layer."""
    other = (
        sorted({str(t) for t in types} - {"sliding_attention", "full_attention"})
        if isinstance(types, list)
        else []
    )
    if not isinstance(types, list) or other or len(types) != n:
        problems.append(
            f"layer_types {other or types} is not implemented (one sliding_attention or "
            f"full_attention per layer is)"
        )
        return None
    return "".join("L" if t == "sliding_attention" else "G" for t in types)


def _as_pattern(letters: str) -> str:
    """``window_pattern`` of per-layer letters: their shortest repeating run (empty: every layer slides)."""
    n = len(letters)
    period = next(k for k in range(1, n + 1) if all(letters[i] == letters[i % k] for i in range(n)))
    pattern = letters[:period]
    return "" if pattern == "L" else pattern


def _window(
    hf: dict[str, Any], model_type: str, n_layers: int, problems: list[str]
) -> tuple[int | None, str]:
    """``(sliding_window, window_pattern)`` as the family's code applies them (:data:`_EVERY_LAYER`,
    :data:`_QWEN_LAYERS`, else no window). A ``layer_types`` that says otherwise than the code does is
    refused: which of the two the weights were trained with cannot be told."""
    W = hf.get("sliding_window")
    types = hf.get("layer_types")
    letters = None if types is None else _layer_letters(types, n_layers, problems)
    if types is not None and letters is None:
        return None, ""
    if model_type in _QWEN_LAYERS:
        if not hf.get("use_sliding_window"):
            W = None  # transformers: no window unless use_sliding_window, whatever sliding_window says
        first = hf.get("max_window_layers") or 0
        if letters is None:
            letters = "".join("L" if W is not None and i >= first else "G" for i in range(n_layers))
        elif W is None and "L" in letters:
            problems.append(
                "layer_types has sliding_attention layers but use_sliding_window is false (or "
                "sliding_window empty): no window to apply"
            )
            return None, ""
    else:
        if model_type in ("qwen3_moe", "qwen2_moe") and not hf.get("use_sliding_window"):
            W = None
        if model_type not in _EVERY_LAYER:
            W = None  # Llama, Gemma, GPT-NeoX: their code has no window
        every = "L" * n_layers if W is not None else "G" * n_layers
        if letters is not None and letters != every:
            what = f"slides every layer (sliding_window={W})" if W is not None else "has no sliding window"
            k = letters.count("L")
            problems.append(
                f"sliding-window attention on only some layers (layer_types: {k} of {n_layers}) is not "
                f"implemented for {model_type}, whose code {what}"
                if 0 < k < n_layers
                else f"layer_types marks {k} of {n_layers} layers sliding_attention, but {model_type}'s "
                f"code {what}: not implemented"
            )
            return None, ""
        letters = every
    if W is None or "L" not in letters:
        return None, ""
    return W, _as_pattern(letters)


def _layer_pattern(hf: dict[str, Any], model_type: str, problems: list[str]) -> tuple[int | None, str]:
    """``(sliding_window, window_pattern)`` of a family with local and global layers (Gemma 2/3,
    gpt-oss): ``layer_types`` (or the family's default) as the shortest repeating run of ``L``/``G``."""
    n = hf["num_hidden_layers"]
    types = hf.get("layer_types")
    if not (isinstance(types, list) and types):
        every = int(hf.get("sliding_window_pattern", 6)) if model_type == "gemma3_text" else 2
        types = ["sliding_attention" if (i + 1) % every else "full_attention" for i in range(n)]
    letters = _layer_letters(types, n, problems)
    if letters is None or "L" not in letters:
        return None, ""
    W = hf.get("sliding_window")
    if W is None:
        problems.append("layer_types has sliding_attention layers but sliding_window is empty")
        return None, ""
    return W, _as_pattern(letters)
