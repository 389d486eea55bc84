"""Attention rollout (Abnar & Zuidema 2020): how much each input token flows into each position.

Per layer ``l`` the heads are averaged and the residual connection is modelled as an identity taking
half of the flow::

    Â_l = normalise_rows(0.5 · mean_h A_{l,h} + 0.5 · I)              [T, T]
    R_0 = Â_0,   R_l = Â_l · R_{l−1}                                     [T, T]

``R_{L−1}[i, j]`` is the share of position ``i``'s final stream attributed to input token ``j``.
Every row sums to 1 and, under a causal mask, ``R`` stays lower-triangular.

Caveat (say it next to any plot): rollout looks only at the attention weights. It ignores what the
heads write (the values and ``W_O``: a head may attend strongly and write almost nothing), ignores the
MLPs entirely, and assumes the residual stream and attention split the flow evenly (the 0.5/0.5). It
is a picture of where information *could* flow, not a measured attribution; activation patching and
direct logit attribution (:mod:`model.interp.analysis.patching`, :mod:`model.interp.analysis.attribution`)
measure.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from model.interp.analysis.heads import as_numpy

#: The caveat in one sentence, for the page that shows rollout.
ROLLOUT_CAVEAT = (
    "Attention rollout multiplies head-averaged attention (plus the identity for the residual, 50/50) "
    "layer by layer: it ignores what heads write (values, W_O), ignores the MLPs, and assumes the "
    "residual splits evenly, so it shows where information could flow, not what the model uses."
)


@dataclass
class Rollout:
    """``rollout`` [T, T]: the product over every layer; ``per_layer`` [L, T, T]: ``R_l`` after layer
    ``l`` (so ``per_layer[-1] == rollout``); ``layer_mix`` [L, T, T]: each layer's ``Â_l``."""

    rollout: np.ndarray
    per_layer: np.ndarray
    layer_mix: np.ndarray


def attention_rollout(weights, residual: float = 0.5) -> Rollout:
    """:class:`Rollout` of attention weights [L, H, T, T] (``trace.stack("pattern")``).

    ``residual`` is the identity's share (0.5 in the paper): ``Â = (1 − r) · mean_h A + r · I``, rows
    renormalised. float64 numpy outputs.
    """
    w = as_numpy(weights)
    if w.ndim != 4 or w.shape[-1] != w.shape[-2]:
        raise ValueError(f"expected attention weights [L, H, T, T], got shape {w.shape}")
    # one layer at a time: a float64 copy of every head at once would be 4× a float16 trace
    return rollout_of_means(np.stack([w[l].astype(np.float64).mean(0) for l in range(w.shape[0])]), residual)


def rollout_of_means(means, residual: float = 0.5) -> Rollout:
    """:class:`Rollout` from the head-averaged weights of each layer ``means`` [L, T, T] (what
    :func:`attention_rollout` computes first; the Aggregates page already has them)."""
    m = np.asarray(means, dtype=np.float64)
    if m.ndim != 3 or m.shape[-1] != m.shape[-2]:
        raise ValueError(f"expected head-averaged weights [L, T, T], got shape {m.shape}")
    if not 0.0 <= residual <= 1.0:
        raise ValueError(f"residual share must be in [0, 1], got {residual}")
    T = m.shape[-1]
    mix = (1.0 - residual) * m + residual * np.eye(T)  # [L, T, T]
    mix = mix / mix.sum(-1, keepdims=True)
    per_layer = np.empty_like(mix)
    acc = np.eye(T)
    for layer in range(mix.shape[0]):
        acc = mix[layer] @ acc
        per_layer[layer] = acc
    return Rollout(rollout=acc, per_layer=per_layer, layer_mix=mix)


__all__ = ["ROLLOUT_CAVEAT", "Rollout", "attention_rollout", "rollout_of_means"]
