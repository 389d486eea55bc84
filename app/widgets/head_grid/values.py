"""What the head grid is given to draw, checked: :func:`check_values` and :func:`split_mask`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

#: What ``set_data`` takes as a mask: one [T, T] for every row, one (or None) per row, or None
MaskArg = np.ndarray | Sequence[np.ndarray | None] | None


def check_values(values: Any, what: str) -> np.ndarray:
    """``values`` as an [R, C, T, T] array (a ValueError for any other shape). An array-like that
    computes one head when indexed (a long prompt's patterns) is kept as it is."""
    v = (
        values
        if getattr(values, "ndim", None) == 4 and not isinstance(values, np.ndarray)
        else np.asarray(values)
    )
    if v.ndim != 4 or v.shape[-1] != v.shape[-2]:
        raise ValueError(f"{what} must be [R, C, T, T], got shape {v.shape}")
    return v


def split_mask(mask: MaskArg, R: int) -> tuple[np.ndarray | None, list[np.ndarray | None] | None]:
    """(one mask for every row, None) or (None, one per row) from what ``set_data`` was given."""
    if mask is None or (isinstance(mask, np.ndarray) and mask.ndim == 2):
        return mask, None
    rows = list(mask)
    if len(rows) != R:
        raise ValueError(f"{len(rows)} row masks for {R} rows")
    if all(m is rows[0] for m in rows):
        return rows[0], None
    return None, rows


__all__ = ["MaskArg", "check_values", "split_mask"]
