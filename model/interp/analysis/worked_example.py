"""The three-token worked example of scaled dot-product attention, every intermediate exposed.

One query ``q`` attends over keys ``k_j`` with values ``v_j`` (rows of ``keys`` and ``values``)::

    raw_j     = q · k_j                      (n,)
    scaled_j  = raw_j / √d_k                 (n,)
    masked_j  = scaled_j, or −∞ where the key is hidden
    exp_j     = exp(masked_j)                (n,)   (−∞ → 0)
    w_j       = exp_j / Σ exp                (n,)   the attention weights
    out       = Σ_j w_j v_j                  (d_v,)

The textbook numbers: q = (1, 0), keys (1, 0), (0, 1), (1, 1), values (1, 0), (0, 2), (3, 1), d_k = 2
give scaled (0.707, 0, 0.707), weights (0.401, 0.198, 0.401), output (1.604, 0.797). The lab edits
any vector and recomputes with :func:`attention_example`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EXAMPLE_Q = (1.0, 0.0)
EXAMPLE_KEYS = ((1.0, 0.0), (0.0, 1.0), (1.0, 1.0))
EXAMPLE_VALUES = ((1.0, 0.0), (0.0, 2.0), (3.0, 1.0))


@dataclass
class WorkedExample:
    """Every stage of one query's attention (shapes for ``n`` keys and values of width ``d_v``)."""

    q: np.ndarray  # (d_k,)
    keys: np.ndarray  # (n, d_k)
    values: np.ndarray  # (n, d_v)
    d_k: int
    scale: float  # 1/√d_k
    raw: np.ndarray  # (n,) q · k_j
    scaled: np.ndarray  # (n,)
    masked: np.ndarray  # (n,) −∞ where hidden
    exp: np.ndarray  # (n,)
    exp_sum: float
    weights: np.ndarray  # (n,)
    contributions: np.ndarray  # (n, d_v) w_j v_j
    output: np.ndarray  # (d_v,)


def attention_example(
    q=EXAMPLE_Q, keys=EXAMPLE_KEYS, values=EXAMPLE_VALUES, *, scale: float | None = None, visible=None
) -> WorkedExample:
    """Compute every stage for query ``q`` (d_k,), ``keys`` (n, d_k), ``values`` (n, d_v).

    ``scale`` defaults to ``1/√d_k``; ``visible`` (n,) bool hides keys (the causal mask), default all.
    The softmax subtracts the maximum before exponentiating for stability but reports ``exp`` of the
    masked scores themselves, as the textbook writes them.
    """
    q = np.asarray(q, dtype=np.float64)
    K = np.atleast_2d(np.asarray(keys, dtype=np.float64))
    V = np.atleast_2d(np.asarray(values, dtype=np.float64))
    if q.ndim != 1 or K.shape[1] != q.shape[0]:
        raise ValueError(f"keys must have the query's width {q.shape[0]}, got shape {K.shape}")
    if V.shape[0] != K.shape[0]:
        raise ValueError(f"need one value per key: {K.shape[0]} keys, {V.shape[0]} values")
    d_k = q.shape[0]
    c = 1.0 / np.sqrt(d_k) if scale is None else float(scale)
    vis = np.ones(K.shape[0], dtype=bool) if visible is None else np.asarray(visible, dtype=bool)
    if not vis.any():
        raise ValueError("at least one key must be visible")
    raw = K @ q
    scaled = raw * c
    masked = np.where(vis, scaled, -np.inf)
    exp = np.exp(masked)
    stable = np.exp(masked - masked[vis].max())
    weights = stable / stable.sum()
    contributions = weights[:, None] * V
    return WorkedExample(
        q=q,
        keys=K,
        values=V,
        d_k=d_k,
        scale=c,
        raw=raw,
        scaled=scaled,
        masked=masked,
        exp=exp,
        exp_sum=float(exp.sum()),
        weights=weights,
        contributions=contributions,
        output=contributions.sum(0),
    )


__all__ = ["EXAMPLE_KEYS", "EXAMPLE_Q", "EXAMPLE_VALUES", "WorkedExample", "attention_example"]
