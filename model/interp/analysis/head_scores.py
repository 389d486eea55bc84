"""The per-head scores of attention patterns, one function each (:mod:`model.interp.analysis.heads`'
docstring has the table): entropy, previous-token, sink, self, learned-sink and induction scores, each
averaged over the informative query rows of a mask; and the helpers that read weights and masks.
Re-exported by :mod:`model.interp.analysis.heads`, which gathers them per model and names the heads.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def as_numpy(x: Any) -> np.ndarray:
    """A float numpy view/copy of a numpy array or (CPU/GPU, any dtype) torch tensor.

    float64 stays float64; every other dtype becomes float32 (enough for weights in [0, 1], and half
    the memory and time of float64 on a 12×12×256×256 stack).
    """
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        x = x.numpy() if x.dtype in (torch.float32, torch.float64) else x.float().numpy()
    x = np.asarray(x)
    return x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)


def causal_mask_np(T: int) -> np.ndarray:
    """The causal mask as numpy bool [T, T]: ``mask[i, j] = j <= i``."""
    return np.tril(np.ones((T, T), dtype=bool))


def _mask_for(weights: np.ndarray, mask: Any) -> np.ndarray:
    T = weights.shape[-1]
    if weights.shape[-2] != T:
        raise ValueError(f"attention weights must be square [..., T, T], got shape {weights.shape}")
    if mask is None:
        return causal_mask_np(T)
    m = np.asarray(mask.cpu().numpy() if hasattr(mask, "cpu") else mask, dtype=bool)
    if m.shape != (T, T):
        raise ValueError(f"mask has shape {m.shape}, expected {(T, T)}")
    return m


def informative_rows(mask: np.ndarray) -> np.ndarray:
    """bool [T]: queries that see at least two keys (the rows whose weights the head chose)."""
    return np.asarray(mask, dtype=bool).sum(-1) >= 2


def _mean_rows(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Mean of ``values`` [..., T] over the selected rows (NaN when none is selected)."""
    if not rows.any():
        return np.full(values.shape[:-1], np.nan)
    return values[..., rows].mean(-1, dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# one function per metric
# ---------------------------------------------------------------------------------------------
def row_entropy(weights: Any) -> np.ndarray:
    """Entropy of every attention row, ``H_i = -Σ_j w_ij ln w_ij`` in nats (0·ln 0 = 0).

    [..., T, T] → [..., T] (float64).
    """
    w = as_numpy(weights)
    logw = np.log(w, out=np.zeros_like(w), where=w > 0)
    return -np.einsum("...ij,...ij->...i", w, logw).astype(np.float64)


def _entropy_from_rows(h: np.ndarray, m: np.ndarray) -> np.ndarray:
    return _mean_rows(h, informative_rows(m))


def _entropy_norm_from_rows(h: np.ndarray, m: np.ndarray) -> np.ndarray:
    n = np.maximum(m.sum(-1), 2)
    return _mean_rows(h / np.log(n), informative_rows(m))


def entropy(weights: Any, mask: Any = None) -> np.ndarray:
    """Mean row entropy in nats over informative rows: [..., T, T] → [...].

    Ranges from 0 (every query looks at one key) to the mean of ``ln n_i`` (uniform over visible keys).
    """
    w = as_numpy(weights)
    return _entropy_from_rows(row_entropy(w), _mask_for(w, mask))


def entropy_norm(weights: Any, mask: Any = None) -> np.ndarray:
    """Mean normalised row entropy ``H_i / ln n_i`` (``n_i`` = keys query ``i`` may see): [..., T, T] → [...].

    1 means uniform over the visible keys (a head that averages, or does nothing), 0 means one-hot.
    """
    w = as_numpy(weights)
    return _entropy_norm_from_rows(row_entropy(w), _mask_for(w, mask))


def prev_token_score(weights: Any, mask: Any = None) -> np.ndarray:
    """Mean weight on the previous token, ``w_{i, i-1}``, over informative queries ``i >= 1``: → [...]."""
    w = as_numpy(weights)
    m = _mask_for(w, mask)
    T = w.shape[-1]
    if T < 2:
        return np.full(w.shape[:-2], np.nan)
    i = np.arange(1, T)
    return _mean_rows(w[..., i, i - 1], informative_rows(m)[1:])


def sink_score(weights: Any, mask: Any = None) -> np.ndarray:
    """Mean weight on the first token (the "attention sink"), ``w_{i, 0}``, over informative queries."""
    w = as_numpy(weights)
    m = _mask_for(w, mask)
    return _mean_rows(w[..., :, 0], informative_rows(m))


def self_score(weights: Any, mask: Any = None) -> np.ndarray:
    """Mean weight on the diagonal (a query attending to itself), ``w_{i, i}``, over informative queries."""
    w = as_numpy(weights)
    m = _mask_for(w, mask)
    return _mean_rows(np.diagonal(w, axis1=-2, axis2=-1), informative_rows(m))


def learned_sink_share(weights: Any, mask: Any = None) -> np.ndarray:
    """Mean share of attention that went to a learned sink (``attn_sinks``), ``1 − Σ_j w_ij``, over every
    query that sees at least one key: [..., T, T] → [...].

    A head with a learned sink logit ``b_h`` in its softmax's denominator gives each query's keys
    ``Σ_j w_ij = 1 − exp(b_h) / (exp(b_h) + Σ_j exp(s_ij))``: what is missing went to no key. Without
    sinks every row sums to 1 and this is 0 (up to rounding: :func:`head_metrics` writes an exact 0
    for a model without sinks). Every query counts, the first one too: even a query that sees one key
    splits its attention between that key and the sink.
    """
    w = as_numpy(weights)
    m = _mask_for(w, mask)
    rows = np.asarray(m.any(-1), dtype=bool)
    return _mean_rows(1.0 - w.sum(-1, dtype=np.float64), rows)


def induction_positions(T: int, period: int, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(queries, keys) an induction head links on a prompt repeating with ``period`` from ``start``.

    Queries are every position of every copy after the first, ``i ∈ [start + P, T)``; the key is the
    token after the previous occurrence, ``i - P + 1``.
    """
    if period < 1:
        raise ValueError(f"period must be at least 1, got {period}")
    queries = np.arange(start + period, T)
    return queries, queries - period + 1


def induction_score(weights: Any, period: int, start: int = 0) -> np.ndarray:
    """Mean weight from each query ``i`` in the repeated copies to key ``i - period + 1``.

    [..., T, T] → [...].

    ``weights`` must come from a prompt whose tokens ``start .. start + period - 1`` repeat after
    themselves (see :func:`repeated_sequence`); ``period`` ``P`` is the length of one copy. A perfect
    induction head scores 1; a uniform causal head scores about ``mean(1/(i+1))``.
    """
    w = as_numpy(weights)
    T = w.shape[-1]
    q, k = induction_positions(T, period, start)
    if len(q) == 0:
        raise ValueError(f"a prompt of {T} tokens holds no repeat of period {period} after position {start}")
    return w[..., q, k].mean(-1, dtype=np.float64)


# ---------------------------------------------------------------------------------------------
# scores of where a head looks: distance, locality, and the prompt's own repeated tokens
# ---------------------------------------------------------------------------------------------
#: The local window of :func:`local_share`: keys at most this many positions back, the query's own
#: position included (``i − j < LOCAL_WINDOW``).
LOCAL_WINDOW = 8


def mean_distance(weights: Any, mask: Any = None) -> np.ndarray:
    """Mean attention distance ``Σ_j w_ij (i − j)`` (positions back), over informative queries: → [...]."""
    w = as_numpy(weights)
    m = _mask_for(w, mask)
    T = w.shape[-1]
    back = np.arange(T)[:, None] - np.arange(T)[None, :]
    per_row = np.einsum("...ij,ij->...i", w, np.where(m, back, 0).astype(w.dtype))
    return _mean_rows(per_row, informative_rows(m))


def local_share(weights: Any, mask: Any = None, window: int = LOCAL_WINDOW) -> np.ndarray:
    """Share of attention on the last ``window`` keys, ``Σ_{i−window < j ≤ i} w_ij``, over informative
    queries: → [...]. 1 for a head that only looks nearby (a previous-token head: ``window ≥ 2``)."""
    w = as_numpy(weights)
    m = _mask_for(w, mask)
    T = w.shape[-1]
    back = np.arange(T)[:, None] - np.arange(T)[None, :]
    near = (m & (back < int(window))).astype(w.dtype)
    return _mean_rows(np.einsum("...ij,ij->...i", w, near), informative_rows(m))


def _same_token(tokens: np.ndarray) -> np.ndarray:
    """bool [..., T, T]: ``x_i = x_j`` for an earlier key ``j < i``."""
    t = np.asarray(tokens)
    T = t.shape[-1]
    return (t[..., :, None] == t[..., None, :]) & (np.arange(T)[:, None] > np.arange(T)[None, :])


def _share_on(w: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Mean over the queries that have a key in ``keys`` [..., T, T] (bool, broadcast against ``w``'s
    leading axes) of the weight on those keys; NaN where no query has one."""
    per_row = np.einsum("...ij,...ij->...i", w, keys.astype(w.dtype))
    rows = np.broadcast_to(keys.any(-1), per_row.shape)
    n = rows.sum(-1)
    total = np.where(rows, per_row, 0.0).sum(-1, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, total / np.maximum(n, 1), np.nan)


def duplicate_token_score(weights: Any, tokens: Any) -> np.ndarray:
    """Weight on earlier copies of the query's own token, ``Σ_{j<i, x_j = x_i} w_ij``, averaged over the
    queries whose token occurred before (NaN when none did): [..., T, T] → [...].

    ``tokens`` [..., T] the prompt's ids, broadcast against the weights' leading axes (pass
    ``tokens[:, None]`` for weights [B, H, T, T])."""
    w = as_numpy(weights)
    return _share_on(w, _same_token(tokens))


def repeat_induction_score(weights: Any, tokens: Any) -> np.ndarray:
    """Induction on the prompt's own repeats: the weight from query ``i`` on the tokens that followed an
    earlier occurrence of its token, ``Σ_{j+1<i, x_j = x_i} w_{i, j+1}``, averaged over the queries that
    have such a key (NaN when none has): [..., T, T] → [...]; ``tokens`` as in
    :func:`duplicate_token_score`.

    On a random block repeated with period ``P`` (distinct ids) the one such key of a query ``i`` of a
    later copy is ``i − P + 1``, and this equals :func:`induction_score`."""
    w = as_numpy(weights)
    same = _same_token(tokens)
    after = np.zeros_like(same)
    after[..., 1:] = same[..., :-1]  # key j + 1 for every earlier occurrence j
    T = w.shape[-1]
    after &= np.arange(T)[:, None] > np.arange(T)[None, :]  # the key itself comes before the query
    return _share_on(w, after)
