"""Comparing two runs: per-head differences of attention, aligned metric tables, config differences.

Typical uses: the same prompt before and after training, with and without an ablation, two models
(masked vs unmasked, scaled vs unscaled) on one prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from model.interp.analysis.heads import HeadMetrics, as_numpy


def _stacked(x, kind: str) -> np.ndarray:
    """A trace's stacked ``kind`` [L, H, T, T] (batch row 0), or an array as given."""
    if hasattr(x, "stack"):
        return x.stack(kind).astype(np.float64)
    return as_numpy(x)


def weights_difference(a, b, kind: str = "pattern") -> np.ndarray:
    """``A − B`` per head: two traces (or arrays) of the same shape → [L, H, T, T] (float64).

    Raises ``ValueError`` naming both shapes when they differ (different prompts or models).
    """
    wa, wb = _stacked(a, kind), _stacked(b, kind)
    if wa.shape != wb.shape:
        raise ValueError(
            f"cannot compare {kind}: shapes differ, {list(wa.shape)} vs {list(wb.shape)} "
            f"(layers, heads, queries, keys); compare the same prompt on models of the same shape"
        )
    return wa - wb


@dataclass
class HeadDiff:
    """Per-head summaries of a difference ``D`` [L, H, T, T]: each [L, H].

    ``max_abs = max |D|``; ``mean_abs = mean |D|`` over all cells; ``row_tv`` = mean over queries of
    the total-variation distance ``½ Σ_j |D_ij|`` (0 = same pattern, 1 = disjoint).
    """

    max_abs: np.ndarray
    mean_abs: np.ndarray
    row_tv: np.ndarray


def head_diff_summary(diff) -> HeadDiff:
    """:class:`HeadDiff` of a weights difference [L, H, T, T] (e.g. from :func:`weights_difference`)."""
    d = np.abs(as_numpy(diff))
    return HeadDiff(d.max((-1, -2)), d.mean((-1, -2)), 0.5 * d.sum(-1).mean(-1))


@dataclass
class MetricRow:
    """One head's metric in both runs: ``a``, ``b`` and ``delta = b − a`` (None where not measured)."""

    layer: int
    head: int
    metric: str
    a: float | None
    b: float | None

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a


def _pick(v, layer: int, head: int) -> float | None:
    if v is None or layer >= v.shape[0] or head >= v.shape[1]:
        return None
    return float(v[layer, head])


def align_metrics(a: HeadMetrics, b: HeadMetrics) -> list[MetricRow]:
    """Every (layer, head, metric) of two [L, H] metric sets side by side.

    Heads present in only one run (different shapes) get ``None`` on the other side.
    """
    if len(a.shape) != 2 or len(b.shape) != 2:
        raise ValueError("align_metrics needs [L, H] metrics")
    L, H = max(a.shape[0], b.shape[0]), max(a.shape[1], b.shape[1])
    rows = []
    for f in fields(HeadMetrics):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if va is None and vb is None:
            continue
        rows += [
            MetricRow(layer, head, f.name, _pick(va, layer, head), _pick(vb, layer, head))
            for layer in range(L)
            for head in range(H)
        ]
    return rows


def config_diff(a, b) -> dict[str, tuple]:
    """Only the fields that differ between two configs (GPTConfig or dicts): ``{field: (a, b)}``.

    Derived sizes are compared as given (``head_dim=None`` and ``head_dim=32`` differ even when
    ``d_model / n_heads = 32``).
    """
    da = a.to_dict() if hasattr(a, "to_dict") else dict(a)
    db = b.to_dict() if hasattr(b, "to_dict") else dict(b)
    return {k: (da.get(k), db.get(k)) for k in sorted(set(da) | set(db)) if da.get(k) != db.get(k)}


__all__ = ["HeadDiff", "MetricRow", "align_metrics", "config_diff", "head_diff_summary", "weights_difference"]
