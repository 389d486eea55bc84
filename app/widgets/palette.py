"""The one palette: run colours for curves and legends, and the colour maps of every matrix.

Run colours (tab10) are used by every view that tells runs or variants apart, so a run keeps its
colour from the loss curves to the tables. Colour maps are ≤ 256-entry lookup tables, built once
and shared.

``gamma`` < 1 brightens small values: value ``v`` gets the colour the plain map gives ``v**gamma``
(0.5: a square-root scale, which makes the many small weights of a long prompt visible while 0 and
1 keep their colours). The image levels stay fixed at [0, 1]; only the table changes, so it costs
nothing per frame.
"""

from __future__ import annotations

import functools

import numpy as np
import pyqtgraph as pg

#: Run colours (tab10): the i-th run or variant of any view is drawn in ``PALETTE[i % 10]``.
PALETTE: list[tuple[int, int, int]] = [
    (31, 119, 180),
    (214, 39, 40),
    (44, 160, 44),
    (255, 127, 14),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
]


def run_color(i: int) -> tuple[int, int, int]:
    """The colour of the ``i``-th run (cycles through :data:`PALETTE`)."""
    return PALETTE[i % len(PALETTE)]


#: The default map for attention weights in [0, 1]: dark = no attention, bright = all of it.
DEFAULT_CMAP = "viridis"
#: The map for signed values (scores, queries, keys, differences A − B): blue < 0 (white) < red.
DIVERGING_CMAP = "diverging"
#: Maps of our own, by name (pyqtgraph's by theirs): ColorBrewer RdBu's end points, white at the middle.
CUSTOM_MAPS: dict[str, list[tuple[int, int, int]]] = {
    "diverging": [(33, 102, 172), (146, 197, 222), (247, 247, 247), (244, 165, 130), (178, 24, 43)],
}
#: The same map the other way round: positive values blue (a logit pushed up), negative red
CUSTOM_MAPS["diverging_up_blue"] = CUSTOM_MAPS["diverging"][::-1]
UP_BLUE_CMAP = "diverging_up_blue"
#: The colour of hidden cells: masked (−∞) or not a number.
HIDDEN_COLOR = (212, 212, 212)
#: The colour of the gaps between the cells of a mosaic.
GAP_COLOR = (255, 255, 255)
#: Lookup-table entries of :func:`matrix_lut` that carry the colour map (the rest: hidden, gap).
N_MAP_COLOURS = 254


@functools.lru_cache(maxsize=32)
def lookup_table(name: str = DEFAULT_CMAP, n: int = 256, gamma: float = 1.0) -> np.ndarray:
    """uint8 [n, 3] RGB lookup table (n ≤ 256 keeps ``setImage`` cheap); see the module doc for gamma."""

    n = min(int(n), 256)
    cmap = _get(name)
    x = np.linspace(0.0, 1.0, n) ** float(gamma)
    rgba = cmap.map(x, mode="byte")
    return np.ascontiguousarray(rgba[:, :3], dtype=np.uint8)


@functools.lru_cache(maxsize=32)
def matrix_lut(name: str = DEFAULT_CMAP, gamma: float = 1.0) -> np.ndarray:
    """uint8 [256, 3] for matrix images: entries 0..253 the map (with ``gamma``), 254 the hidden
    grey, 255 the gap white. A value is drawn hidden by giving it the level of entry 254, which is
    cheaper to paint than NaN (NaN makes pyqtgraph blend RGBA)."""
    lut = lookup_table(name, N_MAP_COLOURS, gamma)
    return np.ascontiguousarray(np.vstack([lut, [HIDDEN_COLOR, GAP_COLOR]]), dtype=np.uint8)


def colormap(name: str = DEFAULT_CMAP, gamma: float = 1.0):
    """A pyqtgraph ColorMap matching :func:`lookup_table` (for colour bars with value ticks)."""
    if gamma == 1.0:
        return _get(name)
    lut = lookup_table(name, 256, gamma)
    return pg.ColorMap(np.linspace(0.0, 1.0, len(lut)), lut)


def relative_luminance(rgb) -> float:
    """WCAG 2 relative luminance of an sRGB colour (0 = black, 1 = white)."""

    def channel(c: float) -> float:
        c = c / 255.0
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(float(c)) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(a, b) -> float:
    """WCAG 2 contrast ratio of two colours, 1 to 21 (text needs ≥ 4.5 to be read easily)."""
    la, lb = relative_luminance(a), relative_luminance(b)
    return (max(la, lb) + 0.05) / (min(la, lb) + 0.05)


def text_color_on(background) -> tuple[int, int, int]:
    """Black or white, whichever reads better on ``background``: its contrast is always ≥ 4.58."""
    black, white = (0, 0, 0), (255, 255, 255)
    return black if contrast_ratio(black, background) >= contrast_ratio(white, background) else white


@functools.lru_cache(maxsize=32)
def text_colors(name: str = DEFAULT_CMAP, gamma: float = 1.0) -> tuple[tuple[int, int, int], ...]:
    """:func:`text_color_on` each entry of :func:`matrix_lut` (the map's, then hidden and gap)."""
    return tuple(text_color_on(tuple(int(c) for c in rgb)) for rgb in matrix_lut(name, gamma))


#: Fixed colours for the variants the labs compare, so "unmasked" or "Post-LN" has the same colour in
#: every plot of a lab (anything else cycles through :data:`PALETTE`).
NAMED_COLORS: dict[str, tuple[int, int, int]] = {
    "masked": PALETTE[0],
    "with mask": PALETTE[0],
    "unmasked": PALETTE[1],
    "without mask": PALETTE[1],
    "scaled": PALETTE[0],
    "unscaled": PALETTE[1],
    "temperature": PALETTE[2],
    "cosine": PALETTE[4],
    "init": PALETTE[3],
    "Pre-LN": PALETTE[0],
    "Post-LN": PALETTE[1],
    "model's scale": PALETTE[0],
    "scale removed": PALETTE[1],
    "attention": PALETTE[0],
    "MLP": PALETTE[3],
    "theory": (120, 120, 120),
}


def color_for(name: str, index: int = 0) -> tuple[int, int, int]:
    """The colour of a named variant (fixed for known names, else the ``index``-th run colour)."""
    return NAMED_COLORS.get(name, run_color(index))


def _get(name: str):
    """The pyqtgraph ColorMap called ``name``: one of :data:`CUSTOM_MAPS` or of pyqtgraph's."""
    if name in CUSTOM_MAPS:
        colors = CUSTOM_MAPS[name]
        return pg.ColorMap(np.linspace(0.0, 1.0, len(colors)), colors)
    return pg.colormap.get(name)
