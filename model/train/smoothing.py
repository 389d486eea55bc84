"""Smoothing of training curves (the same smoothing everywhere a loss curve is drawn)."""

from __future__ import annotations

import numpy as np


def ema(values: np.ndarray, a: float) -> np.ndarray:
    """Debiased exponential moving average of ``values`` with factor ``a`` in [0, 1)."""
    if a <= 0 or len(values) == 0:
        return values.astype(np.float64)
    out = np.empty(len(values), dtype=np.float64)
    m = 0.0
    for i, x in enumerate(values):
        m = a * m + (1 - a) * float(x)
        out[i] = m / (1 - a ** (i + 1))
    return out
