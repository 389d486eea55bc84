"""Softmax saturation on the real model: each head with its scale and with the scale removed.

From one trace: the model's weights ``A = softmax(mask(s(QKᵀ)))`` against ``A⁰ = softmax(mask(QKᵀ))``,
the same raw scores without the model's scaling rule ``s`` (1/√d_k, a learned τ_h, or qk_norm's
``g_h cos``). Per head, averaged over informative rows (queries seeing at least two keys):

* ``entropy`` (nats) and ``entropy_norm`` (÷ ln of the visible keys) — lower = more saturated
* ``max_weight``: ``mean_i max_j A_ij`` — near 1 = one-hot

For ``attn_scale = "sqrt_dk"`` (a factor below 1) the unscaled rows are always at least as peaked:
the entropy of ``softmax(β s)`` falls as β grows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.heads import (
    _mask_for,
    _mean_rows,
    as_numpy,
    entropy,
    entropy_norm,
    informative_rows,
)
from model.interp.analysis.masks import apply_mask
from model.interp.trace import run_with_trace


def mean_max_weight(weights, mask=None) -> np.ndarray:
    """``mean_i max_j w_ij`` over informative rows: [..., T, T] → [...] (1/n = uniform, 1 = one-hot)."""
    w = as_numpy(weights)
    m = _mask_for(w, mask)
    return _mean_rows(w.max(-1), informative_rows(m))


def softmax_without_scale(scores_raw, mask) -> np.ndarray:
    """``softmax_row(mask(QKᵀ))``: what the weights would be with no scaling at all. [..., T, T]."""
    z = torch.from_numpy(np.ascontiguousarray(apply_mask(scores_raw, mask)))
    return torch.softmax(z, dim=-1).numpy()


@dataclass
class SaturationStats:
    """Per-head [L, H] numbers with the model's scale (``*_model``) and without (``*_unscaled``)."""

    entropy_model: np.ndarray
    entropy_unscaled: np.ndarray
    entropy_norm_model: np.ndarray
    entropy_norm_unscaled: np.ndarray
    max_weight_model: np.ndarray
    max_weight_unscaled: np.ndarray
    attn_scale: str


def model_saturation(trace, batch: int = 0) -> SaturationStats:
    """:class:`SaturationStats` from a trace holding ``weights`` and ``scores_raw`` for every layer."""
    w = trace.stack("pattern", batch)
    w0 = softmax_without_scale(trace.stack("scores_raw", batch), trace.mask)
    m = trace.mask
    return SaturationStats(
        entropy_model=entropy(w, m),
        entropy_unscaled=entropy(w0, m),
        entropy_norm_model=entropy_norm(w, m),
        entropy_norm_unscaled=entropy_norm(w0, m),
        max_weight_model=mean_max_weight(w, m),
        max_weight_unscaled=mean_max_weight(w0, m),
        attn_scale=trace.config.attn_scale,
    )


def saturation_summary(model, ids) -> dict[str, float]:
    """How peaked the model's attention is on ``ids``: means over every head of the mean max weight
    (``max_j w_ij``, 1 = one-hot) and of the row entropy normalised by ``ln`` (visible keys)."""
    from model.interp.analysis.heads import entropy_norm

    trace = run_with_trace(model, ids, kinds=("pattern",))
    w = trace.stack("pattern")  # [L, H, T, T]
    return {
        "max_weight": float(np.nanmean(mean_max_weight(w, trace.mask))),
        "entropy_norm": float(np.nanmean(entropy_norm(w, trace.mask))),
    }


__all__ = [
    "SaturationStats",
    "mean_max_weight",
    "model_saturation",
    "saturation_summary",
    "softmax_without_scale",
]
