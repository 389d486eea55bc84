"""Colour maps for attention heatmaps: ≤ 256-entry lookup tables, built once and shared."""

from __future__ import annotations

import functools

import numpy as np

#: The default map for attention weights in [0, 1]: dark = no attention, bright = all of it.
DEFAULT_CMAP = "viridis"


@functools.lru_cache(maxsize=16)
def lookup_table(name: str = DEFAULT_CMAP, n: int = 256) -> np.ndarray:
    """uint8 [n, 3] RGB lookup table of a pyqtgraph colour map (n ≤ 256 keeps ``setImage`` cheap)."""
    import pyqtgraph as pg

    n = min(int(n), 256)
    cmap = pg.colormap.get(name)
    lut = cmap.getLookupTable(0.0, 1.0, n, alpha=False)
    return np.ascontiguousarray(lut, dtype=np.uint8)


def colormap(name: str = DEFAULT_CMAP):
    import pyqtgraph as pg

    return pg.colormap.get(name)
