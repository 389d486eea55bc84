"""Values as colours: the levels and colour-table entries every matrix and head grid of the app
draws with (:func:`~app.widgets.palette.matrix_lut`: 254 colours, then the hidden grey and the gap
white), the colour scales of weights (:data:`SCALES`), and the default levels of a matrix."""

from __future__ import annotations

import numpy as np

from app.widgets.palette import N_MAP_COLOURS

#: The smallest weight the log colour scale tells apart (everything below looks like it).
LOG_FLOOR = 1e-4


def lut_levels(lo: float, hi: float) -> tuple[float, float, float, float]:
    """Image levels for :func:`~app.widgets.palette.matrix_lut` so that ``[lo, hi]`` spans its map
    entries: ``(lo, top, hidden, gap)`` with ``top`` the image's upper level and ``hidden``/``gap``
    the values that land on the grey and white entries."""
    top = lo + (hi - lo) * 256.0 / (N_MAP_COLOURS - 0.01)
    unit = (top - lo) / 256.0
    return lo, top, lo + 254.5 * unit, lo + 255.5 * unit


def lut_indices(
    values: np.ndarray,
    lo: float,
    top: float,
    *,
    scratch: np.ndarray | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """uint8 entries of a 256-colour table for ``values`` drawn at levels ``(lo, top)``:
    ``clip(floor((v − lo) · 256 / (top − lo)), 0, 255)``, what pyqtgraph computes at paint time for a
    float image (NaN lands on entry 254, the hidden grey). ``scratch`` (float32) and ``out`` (uint8),
    of ``values``' shape, are reused when given."""
    scratch = np.empty(values.shape, np.float32) if scratch is None else scratch
    out = np.empty(values.shape, np.uint8) if out is None else out
    np.subtract(values, np.float32(lo), out=scratch)
    np.multiply(scratch, np.float32(256.0 / (top - lo)), out=scratch)
    # NaN → the hidden grey; ±∞ are clipped below (nan_to_num's search for infinities took ~4× the
    # rest of this function on a 270-head grid)
    np.copyto(scratch, np.float32(254.0), where=np.isnan(scratch))
    np.clip(scratch, 0.0, 255.0, out=scratch)
    np.copyto(out, scratch, casting="unsafe")
    return out


def log_weights(m: np.ndarray, floor: float = LOG_FLOOR) -> np.ndarray:
    """``log10(max(m, floor))`` as float32 (NaN stays NaN): what the log colour scale draws."""
    with np.errstate(invalid="ignore"):
        return np.log10(np.maximum(m, np.float32(floor))).astype(np.float32, copy=False)


#: How a matrix of weights may be coloured: ``"linear"`` the values; ``"row"`` each row over its
#: largest value (``A[i, j] / max_j A[i, j]``, in [0, 1]); ``"log"`` ``log10(max(A, LOG_FLOOR))``. A
#: causal row at query ``i`` spreads its weight over ``i + 1`` keys, so on a long prompt the weights
#: of late rows fall like ``1/i`` and a linear map is dark but for its first rows; over the row's
#: largest weight every row shows where it looks, at any length.
SCALES = ("row", "linear", "log")


def scale_label(scale: str, label: str) -> str:
    """What the colour bar of ``label`` values says under ``scale`` (e.g. "weight ÷ row max")."""
    return {"row": f"{label} ÷ row max", "log": f"log₁₀ {label}"}.get(scale, label)


def row_normalised(m: np.ndarray, hidden: np.ndarray) -> np.ndarray:
    """``m[i, j] / max_j m[i, j]`` over the cells not ``hidden`` (float32 [R, C]); a row whose largest
    value is not above 0 is left as it is. Hidden cells keep their value (drawn grey anyway)."""
    if m.size == 0:
        return m.astype(np.float32)
    top = np.max(m, axis=1, keepdims=True, where=~hidden, initial=-np.inf)  # no [R, C] copy
    top = np.where(np.isfinite(top) & (top > 0), top, 1.0).astype(np.float32)
    with np.errstate(invalid="ignore"):  # NaN and ±∞ in hidden cells stay what they are
        return (m / top).astype(np.float32, copy=False)


def symmetric_levels(m: np.ndarray) -> tuple[float, float]:
    """(−a, a) with ``a`` the largest finite |value| (1 when there is none): centres a diverging map on 0."""
    finite = m[np.isfinite(m)]
    a = float(np.abs(finite).max()) if finite.size else 1.0
    a = a if a > 0 else 1.0
    return (-a, a)


def finite_range(m: np.ndarray) -> tuple[float, float]:
    """(min, max) of the finite values ((0, 1) when none; ``hi > lo`` always)."""
    vals = m[np.isfinite(m)]
    lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (0.0, 1.0)
    return (lo, hi if hi > lo else lo + 1.0)


__all__ = [
    "LOG_FLOOR",
    "SCALES",
    "finite_range",
    "log_weights",
    "lut_indices",
    "lut_levels",
    "row_normalised",
    "scale_label",
    "symmetric_levels",
]
