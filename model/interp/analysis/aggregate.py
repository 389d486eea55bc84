"""Aggregates of attention weights [L, H, T, T] for the inspector: averages and token focus.

All functions take numpy (or torch) weights ``w`` of shape [L, H, T, T] (``trace.stack("pattern")``)
and return float numpy arrays. Averages of rows that sum to 1 still sum to 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from model.interp.analysis.heads import as_numpy


def _check(w: np.ndarray) -> np.ndarray:
    if w.ndim != 4 or w.shape[-1] != w.shape[-2]:
        raise ValueError(f"expected attention weights [L, H, T, T], got shape {w.shape}")
    return w


def mean_over_heads(weights) -> np.ndarray:
    """Per-layer average pattern ``(1/H) Σ_h w[l, h]``: [L, H, T, T] → [L, T, T]."""
    return _check(as_numpy(weights)).mean(1)


def mean_over_layers(weights) -> np.ndarray:
    """Per-head-index average over layers ``(1/L) Σ_l w[l, h]``: [L, H, T, T] → [H, T, T]."""
    return _check(as_numpy(weights)).mean(0)


def mean_over_all(weights) -> np.ndarray:
    """The model's average pattern over every layer and head: [L, H, T, T] → [T, T]."""
    return _check(as_numpy(weights)).mean((0, 1))


def mean_over_heads_set(weights, heads: Iterable[tuple[int, int]]) -> np.ndarray:
    """Average of a chosen set of (layer, head) patterns: [L, H, T, T] → [T, T].

    Raises ``ValueError`` for an empty set or a head outside the model.
    """
    w = _check(as_numpy(weights))
    heads = list(heads)
    if not heads:
        raise ValueError("choose at least one head to average")
    L, H = w.shape[:2]
    for layer, head in heads:
        if not (0 <= layer < L and 0 <= head < H):
            raise ValueError(f"head ({layer}, {head}) is outside the model's {L} layers × {H} heads")
    return np.mean([w[layer, head] for layer, head in heads], axis=0)


@dataclass
class TokenFocus:
    """Where token ``t`` looks and who looks at it, across all heads.

    ``looks_at`` [L, H, T] = ``w[:, :, t, :]`` (its query row: which keys token ``t`` reads);
    ``looked_at_by`` [L, H, T] = ``w[:, :, :, t]`` (its key column: how much each query reads it).
    ``looks_at_mean`` / ``looked_at_by_mean`` [T]: the same averaged over every layer and head.
    """

    token: int
    looks_at: np.ndarray
    looked_at_by: np.ndarray

    @property
    def looks_at_mean(self) -> np.ndarray:
        return self.looks_at.mean((0, 1))

    @property
    def looked_at_by_mean(self) -> np.ndarray:
        return self.looked_at_by.mean((0, 1))


def token_focus(weights, t: int) -> TokenFocus:
    """:class:`TokenFocus` of position ``t`` (negative counts from the end) in weights [L, H, T, T]."""
    w = _check(as_numpy(weights))
    T = w.shape[-1]
    if not -T <= t < T:
        raise ValueError(f"token position {t} is outside a prompt of {T} tokens")
    t = t % T
    return TokenFocus(t, w[:, :, t, :].copy(), w[:, :, :, t].copy())


__all__ = [
    "TokenFocus",
    "mean_over_all",
    "mean_over_heads",
    "mean_over_heads_set",
    "mean_over_layers",
    "token_focus",
]
