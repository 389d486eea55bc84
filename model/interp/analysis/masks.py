"""Attention masks for the mask lab, as bool ``[T, T]`` tensors for :func:`model.nn.hooks.use_mask`.

Convention (the model's and ``Trace.mask``'s): ``mask[i, j]`` is True when query ``i`` may attend to
key ``j``. Masked scores become −∞ before the softmax, so their weights are exactly 0.

==================  ===============================================  ============================
kind                rule: query ``i`` sees key ``j`` when            keys per row
==================  ===============================================  ============================
``causal``          ``j <= i``                                       ``i + 1``
``none``            always (bidirectional, BERT-style)               ``T``
``sliding``         ``i - w < j <= i`` (the last ``w`` tokens)       ``min(i + 1, w)``
``prefix``          ``j < p`` or ``j <= i`` (prefix-LM)              ``max(p, i + 1)``
==================  ===============================================  ============================
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.heads import as_numpy
from model.interp.trace import run_with_trace

MASK_KINDS = ("causal", "none", "sliding", "prefix")


def causal_mask(T: int) -> torch.Tensor:
    """Lower triangle: ``mask[i, j] = j <= i``. bool [T, T]."""
    return torch.ones(T, T, dtype=torch.bool).tril()


def full_mask(T: int) -> torch.Tensor:
    """No mask at all: every query sees every key (what a model without the causal mask does). bool [T, T]."""
    return torch.ones(T, T, dtype=torch.bool)


def sliding_window_mask(T: int, window: int) -> torch.Tensor:
    """Causal with a window of ``window`` keys (itself and the ``window - 1`` before): ``i - w < j <= i``."""
    if window < 1:
        raise ValueError(f"window must be at least 1 token, got {window}")
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j <= i) & (j > i - window)


def prefix_lm_mask(T: int, prefix: int) -> torch.Tensor:
    """Prefix-LM: the first ``prefix`` tokens see each other both ways; later tokens are causal.

    ``mask[i, j] = (j < prefix) or (j <= i)``. ``prefix = 0`` or 1 is the causal mask.
    """
    if prefix < 0:
        raise ValueError(f"prefix length must be 0 or more, got {prefix}")
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    return (j < prefix) | (j <= i)


def make_mask(kind: str, T: int, *, window: int = 8, prefix: int = 4) -> torch.Tensor:
    """The mask named ``kind`` (one of :data:`MASK_KINDS`) for ``T`` tokens."""
    if kind == "causal":
        return causal_mask(T)
    if kind == "none":
        return full_mask(T)
    if kind == "sliding":
        return sliding_window_mask(T, window)
    if kind == "prefix":
        return prefix_lm_mask(T, prefix)
    raise ValueError(f"mask kind {kind!r} is not one of {', '.join(MASK_KINDS)}")


def apply_mask(scores, mask) -> np.ndarray:
    """The scores the softmax sees: ``scores`` [..., T, T] with −∞ where ``mask`` is False.

    A numpy copy (float64 stays float64, anything else becomes float32).
    """
    s = as_numpy(scores).copy()
    m = np.asarray(mask.cpu().numpy() if hasattr(mask, "cpu") else mask, dtype=bool)
    s[..., ~m] = -np.inf
    return s


def future_weight(weights) -> np.ndarray:
    """Attention mass on future keys (``j > i``), mean over queries: [..., T, T] → [...].

    0 for any causal head; for a model trained without the mask it shows how much each head copies
    from the answer it is asked to predict (the "no-mask bug" of the mask lab).
    """
    w = as_numpy(weights)
    T = w.shape[-1]
    upper = np.triu(np.ones((T, T), dtype=bool), 1)
    return (w * upper).sum(-1, dtype=np.float64).mean(-1)


@dataclass
class MaskStages:
    """One head's attention, stage by stage (all float64 [T, T] except ``mask``).

    ``scores``: ``s(QKᵀ)``, what enters the softmax before masking; ``mask`` bool (True = may attend);
    ``additive``: the additive mask ``M`` (0 where allowed, −∞ where hidden); ``masked``: ``scores + M``;
    ``weights``: ``softmax_row(masked)``; ``future``: mean weight on keys after the query (j > i).
    """

    scores: np.ndarray
    mask: np.ndarray
    additive: np.ndarray
    masked: np.ndarray
    weights: np.ndarray
    future: float


def mask_stages(trace, layer: int, head: int, batch: int = 0) -> MaskStages:
    """:class:`MaskStages` of head ``(layer, head)`` (the trace holds ``scores`` and ``pattern``)."""
    scores = trace["scores", layer][batch, head].double().numpy()
    weights = trace["pattern", layer][batch, head].double().numpy()
    mask = trace.mask.numpy().astype(bool)
    additive = np.where(mask, 0.0, -np.inf)
    return MaskStages(
        scores=scores,
        mask=mask,
        additive=additive,
        masked=apply_mask(scores, mask),
        weights=weights,
        future=float(future_weight(weights)),
    )


def future_attention(model, ids) -> float:
    """Mean attention weight on keys *after* the query (``j > i``) over every head, on ``ids``, under
    the model's own mask: 0 for a causal model; near 1 for one that learned to read the answer."""
    trace = run_with_trace(model, ids, kinds=("pattern",))
    return float(np.mean(future_weight(trace.stack("pattern"))))


__all__ = [
    "MASK_KINDS",
    "MaskStages",
    "apply_mask",
    "causal_mask",
    "full_mask",
    "future_attention",
    "future_weight",
    "make_mask",
    "mask_stages",
    "prefix_lm_mask",
    "sliding_window_mask",
]
