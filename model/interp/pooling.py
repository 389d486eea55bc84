"""Pooled overviews of attention patterns: many heads of a long prompt drawn at a bounded size.

A grid of ``n`` heads of ``T`` tokens is drawn with each head at ``S = ceil(T / b)`` pixels per side,
where the block ``b`` is the smallest integer keeping the whole grid under :data:`MAX_CANVAS_PIXELS`
and a head under :data:`MAX_CELL` pixels (:func:`block_size`). Each pixel then shows one summary of
its ``b × b`` block of (query, key) pairs:

- :func:`pool_max`: the *largest* weight, so thin patterns (a previous-token diagonal) stay visible;
- :func:`pool_absmax`: the value of largest magnitude with its sign (a difference ``A − B``);
- :func:`pool_visible`: whether any pair of the block may attend (a mask).

Pure numpy; the GUI's head mosaic and the attention inspection both use it.
"""

from __future__ import annotations

import math

import numpy as np

#: Largest canvas drawn (pixels); beyond it heads are max-pooled.
MAX_CANVAS_PIXELS = 4_500_000
#: Largest drawn size of one head (pixels per side).
MAX_CELL = 256


def block_size(T: int, n_cells: int, *, max_pixels: int = MAX_CANVAS_PIXELS, max_cell: int = MAX_CELL) -> int:
    """The pooling block ``b`` (1 = every token drawn) for ``n_cells`` heads of ``T`` tokens.

    ``b`` is the smallest integer with ``ceil(T / b) ≤ side``, ``side = min(max_cell,
    max(16, √(max_pixels / n_cells)))``.
    """
    if T <= 0:
        return 1
    side = min(max_cell, max(16, int(math.sqrt(max_pixels / max(1, n_cells)))))
    return max(1, math.ceil(T / side))


def pool_max(weights: np.ndarray, b: int) -> np.ndarray:
    """Max over ``b × b`` blocks of the last two axes: [..., T, T] → [..., ceil(T/b), ceil(T/b)] float32.

    The last block is padded with zeros (weights are ≥ 0). ``b = 1`` returns ``weights`` as float32.
    Strided maxima (``b`` passes over each axis) instead of a 6-D reshape: ~10× faster on big grids;
    float16 input is converted one leading slice at a time (12×12 heads at 1024 tokens: 0.6 s, not 1.7).
    """
    w = np.asarray(weights)
    if b <= 1:
        return np.ascontiguousarray(w, dtype=np.float32)
    if w.dtype != np.float32 and w.ndim > 2:
        # numpy emulates float16 arithmetic (~3× slower than converting first): one slice at a time
        return np.stack([pool_max(np.asarray(part, dtype=np.float32), b) for part in w])
    T = w.shape[-1]
    S = math.ceil(T / b)
    if S * b == T:
        rows = w[..., 0::b, :].astype(np.float32)
    else:  # the zero padding of the last block, without a padded copy of the whole array
        rows = np.zeros((*w.shape[:-2], S, T), dtype=np.float32)
        rows[...] = w[..., 0::b, :]
    for i in range(1, b):
        part = w[..., i::b, :]  # S or S - 1 rows (the last block is short)
        np.maximum(rows[..., : part.shape[-2], :], part, out=rows[..., : part.shape[-2], :])
    out = np.zeros((*w.shape[:-2], S, S), dtype=np.float32) if S * b != T else None
    if out is None:
        out = np.ascontiguousarray(rows[..., 0::b])
    else:
        out[...] = rows[..., 0::b]
    for i in range(1, b):
        part = rows[..., i::b]
        np.maximum(out[..., : part.shape[-1]], part, out=out[..., : part.shape[-1]])
    return out


def pool_absmax(values: np.ndarray, b: int) -> np.ndarray:
    """Per ``b × b`` block, the value of largest ``|v|`` with its sign (ties: the positive one).

    [..., T, T] → [..., ceil(T/b), ceil(T/b)] float32: ``hi = pool_max(v)``, ``lo = −pool_max(−v)``,
    the result is ``hi`` where ``hi ≥ −lo`` else ``lo``. The zero padding never wins (|0| is least).
    """
    hi = pool_max(values, b)
    if b <= 1:
        return hi
    lo = -pool_max(-np.asarray(values, dtype=np.float32), b)
    return np.where(hi >= -lo, hi, lo).astype(np.float32, copy=False)


def pool_visible(mask: np.ndarray, b: int) -> np.ndarray:
    """bool [S, S]: a pooled pixel is visible when any query/key pair of its block may attend."""
    m = np.asarray(mask, dtype=bool)
    if b <= 1:
        return m
    return pool_max(m.view(np.uint8), b) > 0  # converted an [S, T] slice at a time, not all of [T, T]


__all__ = ["MAX_CANVAS_PIXELS", "MAX_CELL", "block_size", "pool_absmax", "pool_max", "pool_visible"]
