"""What the Compare tab tabulates of several runs: summary rows, aligned per-head tables, loss curves.

Summary row of a run (the same keys as :meth:`TrainerGroup.summary`, :data:`SUMMARY_KEYS`): final
``train_loss``, last measured ``val_loss``, latest ``tokens_per_s``, ``params`` (all parameters, tied
head once), ``flops_per_token`` = forward ``2·N_mm + 4·L·T·h·d_k`` at the training context ``T``, and
``kv_cache_bytes_per_token`` = ``2·L·h_kv·d_k`` values × 4 bytes (fp32, as the app computes).

Differences. The A − B heatmap of two runs of the same shape is ``weights_A − weights_B`` per head
[L, H, T, T] (:func:`model.interp.analysis.compare.weights_difference`); :func:`diff_levels` gives the
symmetric colour levels ``(−m, m)``, ``m = max |A − B|`` (at least ``floor``, so a zero difference
is drawn as zero and not as noise blown up to full scale).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from model.budget import arithmetic as budget
from model.config import GPTConfig

#: The history fields a comparison keeps per step (what the loss curves and the table need).
HISTORY_KEYS = ("step", "train_loss", "val_loss", "tokens_per_s")
#: Columns of :func:`summary_row`, in table order.
SUMMARY_KEYS = (
    "steps",
    "train_loss",
    "val_loss",
    "tokens_per_s",
    "params",
    "flops_per_token",
    "kv_cache_bytes_per_token",
)

__all__ = [
    "HISTORY_KEYS",
    "SUMMARY_KEYS",
    "config_table",
    "diff_levels",
    "history_points",
    "loss_curves",
    "metric_table",
    "same_shape",
    "summary_row",
]


def history_points(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fields of :data:`HISTORY_KEYS` of each training event (what a comparison keeps)."""
    return [{k: ev.get(k) for k in HISTORY_KEYS} for ev in history]


def loss_curves(history: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """``{"step", "train_loss", "val_step", "val_loss"}`` float64 arrays for plotting (val: measured
    steps only)."""
    steps = np.array([float(h["step"]) for h in history], dtype=np.float64)
    train = np.array(
        [float(h["train_loss"]) if h.get("train_loss") is not None else np.nan for h in history],
        dtype=np.float64,
    )
    val = [(float(h["step"]), float(h["val_loss"])) for h in history if h.get("val_loss") is not None]
    return {
        "step": steps,
        "train_loss": train,
        "val_step": np.array([v[0] for v in val], dtype=np.float64),
        "val_loss": np.array([v[1] for v in val], dtype=np.float64),
    }


def summary_row(
    config: GPTConfig | dict[str, Any], history: list[dict[str, Any]], *, context: int | None = None
) -> dict[str, Any]:
    """One table row for a run (see the module docstring for each key); ``context`` is the T of the
    FLOPs figure (default: the config's context length), kept in the row as ``context``."""
    cfg = config if isinstance(config, GPTConfig) else GPTConfig.from_dict(dict(config), validate=False)
    last_val = next((h["val_loss"] for h in reversed(history) if h.get("val_loss") is not None), None)
    T = context or cfg.core.context_length
    row: dict[str, Any] = {
        "steps": int(history[-1]["step"]) if history else 0,
        "train_loss": history[-1].get("train_loss") if history else None,
        "val_loss": last_val,
        "tokens_per_s": history[-1].get("tokens_per_s") if history else None,
        "params": None,
        "flops_per_token": None,
        "kv_cache_bytes_per_token": None,
        "context": min(T, cfg.core.context_length) if isinstance(cfg.core.context_length, int) else T,
    }
    if not budget.problems(cfg, seq_len=min(T, cfg.core.context_length)):
        row["params"] = budget.parameters(cfg).total
        row["flops_per_token"] = budget.flops(cfg, min(T, cfg.core.context_length)).forward_total_per_token
        row["kv_cache_bytes_per_token"] = budget.kv_cache(cfg, 1, 1, 4).bytes
    return row


def config_table(configs: dict[str, GPTConfig | dict[str, Any]]) -> list[tuple[str, list[Any]]]:
    """Only the fields that differ across the runs: ``[(field, [value of each run]), ...]`` in
    GPTConfig field order. One run, or runs with equal configs, give ``[]``."""
    dicts = [c.to_dict() if hasattr(c, "to_dict") else dict(c) for c in configs.values()]
    out = []
    for name in GPTConfig.field_names():
        values = [d.get(name) for d in dicts]
        if any(v != values[0] for v in values[1:]):
            out.append((name, values))
    return out


def metric_table(metrics: dict[str, Any], metric: str) -> list[dict[str, Any]]:
    """Per-head ``metric`` of every run aligned by (layer, head): one dict per head with ``layer``,
    ``head``, one entry per run name (None where that run has no such head), and ``delta`` = last
    run − first run when there are exactly two runs and both have the head.

    ``metrics`` maps run names to :class:`~model.interp.analysis.heads.HeadMetrics` of shape [L, H] (or
    ``None`` for a run not measured).
    """
    arrays = {}
    for name, m in metrics.items():
        arr = None if m is None else getattr(m, metric, None)
        arrays[name] = None if arr is None else np.asarray(arr, dtype=np.float64)
    shapes = [a.shape for a in arrays.values() if a is not None]
    if not shapes:
        return []
    L = max(s[0] for s in shapes)
    H = max(s[1] for s in shapes)
    names = list(arrays)
    rows = []
    for layer in range(L):
        for head in range(H):
            row: dict[str, Any] = {"layer": layer, "head": head}
            for name in names:
                m = arrays[name]
                ok = m is not None and layer < m.shape[0] and head < m.shape[1]
                row[name] = float(m[layer, head]) if m is not None and ok else None
            if len(names) == 2:
                a, b = row[names[0]], row[names[1]]
                row["delta"] = None if a is None or b is None else b - a
            rows.append(row)
    return rows


def same_shape(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Whether two weight stacks [L, H, T, T] can be subtracted (same layers, heads and tokens)."""
    return a is not None and b is not None and np.shape(a) == np.shape(b)


def diff_levels(diff: np.ndarray, floor: float = 1e-3) -> tuple[float, float]:
    """Symmetric colour levels ``(−m, m)`` of a difference, ``m = max(max |diff|, floor)``, so zero
    is the middle colour and equal magnitudes of either sign look equally strong."""
    d = np.asarray(diff)
    m = float(np.nanmax(np.abs(d))) if d.size else 0.0
    if not math.isfinite(m):
        m = 0.0
    m = max(m, float(floor))
    return (-m, m)
