"""Softmax saturation on the real model: each head with its scale and with the scale removed.

From one trace: the model's weights ``A = softmax(mask(s(QKᵀ)))`` against ``A⁰ = softmax(mask(QKᵀ))``,
the same raw scores without the model's scaling rule ``s`` (1/√d_k, a learned τ_h, or qk_norm's
``g_h cos``). Per head, averaged over informative rows (queries seeing at least two keys):

* ``entropy`` (nats) and ``entropy_norm`` (÷ ln of the visible keys) — lower = more saturated
* ``max_weight``: ``mean_i max_j A_ij`` — near 1 = one-hot
* ``score_std``: the spread of the scores the softmax compares, before (``QKᵀ``) and after the scaling

Why ``÷√d_k``: if the ``d_k`` components of ``q`` and ``k`` were independent with mean 0 and variance 1,
``q·k`` would have variance ``d_k``, and ``q·k/√d_k`` variance 1. Trained heads are not built that
way: their q and k grow and align, and the scaled spread is often well above 1 (SmolLM2-135M: about 2
in almost every head). ``score_std_scaled`` measures it on the model's own prompt.

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


def score_std(scores, mask) -> np.ndarray:
    """Standard deviation of a head's scores over every (query, key) pair it may attend to.

    ``scores`` [..., T, S]; ``mask`` bool [T, S] (True = visible) or one per layer [L, T, S] for a stack
    [L, H, T, S]. → [...] (float64; NaN where nothing is visible). Masked pairs are left out: they are
    never compared.
    """
    z = as_numpy(scores).astype(np.float64, copy=False)
    m = np.asarray(mask.cpu().numpy() if hasattr(mask, "cpu") else mask, dtype=bool)
    if m.ndim == 3:  # one mask per layer: [L, T, S] for [L, H, T, S]
        m = m[:, None]
    m = np.broadcast_to(m, z.shape)
    n = m.sum((-2, -1))
    mean = np.where(m, z, 0.0).sum((-2, -1)) / np.maximum(n, 1)
    var = np.where(m, (z - mean[..., None, None]) ** 2, 0.0).sum((-2, -1)) / np.maximum(n, 1)
    return np.where(n > 0, np.sqrt(var), np.nan)


@dataclass
class ScoreSpread:
    """The spread of every head's scores on one prompt, [L, H] each: ``raw`` of ``QKᵀ``, ``scaled`` of
    the scores the softmax compares (``s(QKᵀ)``, soft-capped where the model caps)."""

    raw: np.ndarray
    scaled: np.ndarray

    @property
    def median_scaled(self) -> float:
        return float(np.nanmedian(self.scaled))

    def share_above(self, level: float = 1.25) -> float:
        """Fraction of the heads whose scaled spread is above ``level`` (1 is what ``÷√d_k`` aims for)."""
        finite = self.scaled[np.isfinite(self.scaled)]
        return float((finite > level).mean()) if finite.size else float("nan")


def score_spread(trace, batch: int = 0) -> ScoreSpread:
    """:class:`ScoreSpread` from a trace holding ``scores_raw`` and ``scores`` for every layer."""
    scaled = trace.stack("scores", batch)
    masks = np.stack([trace.layer_mask(layer).cpu().numpy() for layer in range(scaled.shape[0])])
    return ScoreSpread(
        raw=score_std(trace.stack("scores_raw", batch), masks), scaled=score_std(scaled, masks)
    )


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
    spread: ScoreSpread | None = None


def model_saturation(trace, batch: int = 0) -> SaturationStats:
    """:class:`SaturationStats` from a trace holding ``weights`` and ``scores_raw`` for every layer (and
    the spread of the scores when it also holds ``scores``)."""
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
        attn_scale=trace.config.attention.attn_scale,
        spread=score_spread(trace, batch) if trace.has("scores", 0) else None,
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
    "ScoreSpread",
    "mean_max_weight",
    "model_saturation",
    "saturation_summary",
    "score_spread",
    "score_std",
    "softmax_without_scale",
]
