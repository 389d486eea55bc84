"""How the cells of the head grid fill its view: :class:`MosaicFit`.

By default every drawn row is fitted into the view (square cells at the top left, the colour bar
beside them). A deep grid (:meth:`~app.widgets.head_grid.grid.HeadMosaic.set_scrolling`) is kept
readable instead, in this order:

1. **bands**: the rows are set in up to ``max_bands`` bands side by side (30 layers at 1280×800:
   L0–L14 | L15–L29) when that draws a cell at least a quarter larger, an empty cell or more between
   two bands for the row names;
2. **scrolling**: when even the best arrangement gives cells under ``fit_px`` pixels, they are drawn
   ``scroll_px`` pixels wide in one band and the rows scroll (the axes stay; see
   :class:`~app.widgets.head_grid.scroll.RowScroll`).

Readable grids are also drawn near the screen's resolution: a head of ``S`` pixels (already pooled
by the model's ``block``) shown ``s`` pixels wide is max-pooled by ``f = ceil(S / (1.5·s))``
(:func:`~model.interp.pooling.pool_max`; the largest difference for ``A − B``) and the image is
scaled down smoothly (:class:`~app.widgets.screen_image.SmoothImage`), so a one-token diagonal or a
first-token column stays a line on screen instead of the dotted or missing one a plainly scaled
image shows; a smaller image is also a quicker paint. Zooming in draws finer again (after the wheel
stops). The readouts keep reading the full-resolution values.

A zoom or pan by the user (``zoomed``) is kept until the view is reset. **Fit** (``whole``, the
grid's :meth:`~app.widgets.head_grid.grid.HeadMosaic.fit_all`) fits every drawn row in the view
however small its heads then are (in the bands that draw them largest): nothing scrolls until the
grid is set readable again (:meth:`~app.widgets.head_grid.grid.HeadMosaic.set_scrolling`).

The fit reads what the grid draws through :class:`FitHost`; what the grid does with it as its size,
zoom and rows change is :class:`~app.widgets.head_grid.readable.ReadableRows`.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer

from app.widgets.head_grid.geometry import Drawn
from app.widgets.head_grid.scroll import Content, RowScroll
from app.widgets.legend import ColorLegend
from app.widgets.matrix_view import TopLeftFit
from app.widgets.screen_image import screen_block
from model.interp.pooling import pool_absmax, pool_max

#: ms of quiet after a zoom before the heads are drawn again at the new resolution
REZOOM_MS = 120
#: A readable grid (``set_scrolling``) fits every layer when a head then is at least this many pixels
#: wide, …
FIT_PX = 20
#: … else draws heads this wide and scrolls through the layers.
SCROLL_PX = 28
#: A deep grid is set in up to this many bands of layers side by side when that draws heads larger.
MAX_BANDS = 4


class FitHost(Drawn, Protocol):
    """What a :class:`MosaicFit` reads of its grid: what is drawn now, and the grid's width."""

    @property
    def flow(self) -> bool: ...

    @property
    def canvas(self) -> np.ndarray | None: ...

    @property
    def row_labels(self) -> list[str]: ...

    def width(self) -> int: ...


def scroll_content(grid: FitHost) -> Content | None:
    """What a grid's scroll bar moves through: (top, height, one row) in view units (None: nothing,
    a flowing or empty grid)."""
    canvas, g = grid.canvas, grid.geom
    if canvas is None or g is None or grid.flow:
        return None
    H, _ = canvas.shape
    return -g.g / 2, float(H), float(g.S + g.g)


class MosaicFit:
    """The arrangement and view range of one mosaic (see the module docstring)."""

    def __init__(
        self,
        grid: FitHost,
        plot: pg.PlotItem,
        legend: ColorLegend,
        fitter: TopLeftFit,
        scroll: RowScroll,
    ):
        self.grid, self.plot, self.vb, self.legend = grid, plot, plot.getViewBox(), legend
        self.fitter, self.scroll = fitter, scroll
        self.fit_px = self.scroll_px = 0  # 0: always fit every row
        self.max_bands = 1
        self.scrolling = False  # the cells are drawn at scroll_px and the rows scroll
        self.zoomed = False  # the user zoomed or panned: no refitting until a reset
        self.whole = False  # Fit: every drawn row in view, however small (never scrolled)
        self.f = 1  # the heads' pixels are max-pooled by this (to the screen's resolution)
        self._pooled: tuple | None = None  # (base, mode, {f: pooled})
        self.rezoom = QTimer()
        self.rezoom.setSingleShot(True)
        self.rezoom.setInterval(REZOOM_MS)

    def configure(self, fit_px: int, scroll_px: int, bands: int) -> None:
        self.fit_px, self.scroll_px = int(fit_px), int(scroll_px)
        self.max_bands = max(1, int(bands))

    # ---- where the heads go --------------------------------------------------------------------
    def room(self) -> tuple[float, float]:
        """(width, height) in pixels the heads could take: the view box's height, and the widget's
        width less the row labels, the colour bar and the scroll bar (whether shown or not, so that
        showing it changes no choice)."""
        margins = self.plot.layout.getContentsMargins()
        beside = self.plot.getAxis("left").width() + margins[0] + margins[2] + 2
        legend = self.legend.geometry().width() + 12
        bar = self.scroll.bar.sizeHint().width()
        return self.grid.width() - beside - legend - bar, self.vb.height()

    def arrange(self, n: int, C: int, S: int, gap: int) -> tuple[int, int, int]:
        """(bands, empty cells between two, pooling ``f``) that draw ``n`` rows of ``C`` cells of
        ``S`` pixels (a gap of ``S // gap``) the largest in the room there is: more bands only for
        cells a quarter larger, one when even the best gives cells under ``fit_px`` (they scroll
        instead, ``scroll_px`` wide, unless ``whole``); ``f``: what brings ``S`` down to the cells' size
        on screen."""
        grid = self.grid
        if self.max_bands <= 1 or grid.flow or not self.scroll_px:
            return 1, 1, 1
        vw, vh = self.room()
        if vw <= 1 or vh <= 1:  # not laid out yet: as it was
            return (grid.geom.bands, grid.geom.band_gap, self.f) if grid.geom is not None else (1, 1, 1)
        cell = S / (S + max(1, S // gap))  # of a step, the cell (the rest is the gap)
        names = max((len(t) for t in grid.row_labels), default=3)
        label = 7.0 * names + 10  # px the row names beside a band take
        best, best_step = (1, 1), 0.0
        for bands in range(1, self.max_bands + 1):
            rows = math.ceil(n / bands)
            if bands > 1 and math.ceil(n / rows) < bands:
                break  # a band would be empty
            step = 0.0
            for band_gap in (1, 2, 3):
                step = min(vh / rows, vw / (bands * C + (bands - 1) * band_gap))
                if bands == 1 or step * band_gap >= label:
                    break
            if step > best_step * 1.25:
                best, best_step = (bands, band_gap), step
        if best_step * cell < self.fit_px and not self.whole:
            return 1, 1, screen_block(S, self.scroll_px)
        return (*best, screen_block(S, best_step * cell))

    def pooled(self, base: np.ndarray, f: int, mode: str) -> np.ndarray:
        """``base`` (the heads' pixels [R, C, S, S]) max-pooled by ``f`` (kept while ``base`` is the
        one shown: folding and unfolding go back and forth between two poolings)."""
        self.f = f
        if f <= 1:
            return base
        if self._pooled is None or self._pooled[0] is not base or self._pooled[1] != mode:
            self._pooled = (base, mode, {})
        cache = self._pooled[2]
        if f not in cache:
            cache[f] = (pool_absmax if mode == "difference" else pool_max)(base, f)
        return cache[f]

    def zoom_block(self, S: int) -> int:
        """The pooling a zoomed view asks for: cells of ``S`` pixels at their size on screen now."""
        g = self.grid.geom
        assert g is not None  # zoomed into drawn heads
        return screen_block(S, self.cell_px() * g.S / (g.S + g.g))

    def scroll_scale(self) -> float | None:
        """Screen pixels per canvas pixel while scrolling, or None when every row fits readably (or
        has to: ``whole``)."""
        canvas, g = self.grid.canvas, self.grid.geom
        if not self.scroll_px or self.whole or canvas is None or g is None or self.grid.flow:
            return None
        vw, vh = self.room()
        if vh <= 1 or vw <= 1:
            return None  # not laid out yet
        H, W = canvas.shape
        S = g.S
        fit = min(vw / W, vh / H)
        if fit * S >= self.fit_px:
            return None
        k = min(self.scroll_px / S, max(fit, vw / W))  # no wider than the room
        return None if k <= fit * 1.001 else k

    # ---- the view range ------------------------------------------------------------------------
    def apply(self, *, keep_top: bool, top: float | None = None) -> None:
        """Fit the heads to the view, or (scrolling) show them at ``scroll_px`` from the first row,
        from ``top`` (view units), or from where the view is when ``keep_top``."""
        canvas, geom, flow, vb = self.grid.canvas, self.grid.geom, self.grid.flow, self.vb
        if canvas is not None and geom is not None:
            H, W = canvas.shape
            g = geom.g
            k = None if flow else self.scroll_scale()
            self.scrolling = k is not None
            if flow:
                vb.setRange(xRange=(0, W - g), yRange=(0, H - g), padding=0.0)
            elif k is None:
                self.fitter.fit(W - g, H - g, margin=g / 2)  # half a gap around: room for the frames
            else:
                self.fitter.size = None  # the fitter would show every row
                if top is None:
                    top = vb.viewRange()[1][0] if keep_top else -g / 2
                vw, vh = max(vb.width(), 1.0), max(vb.height(), 1.0)
                vb.setRange(xRange=(-g / 2, -g / 2 + vw / k), yRange=(top, top + vh / k), padding=0.0)
                self.scroll.show_from(top)  # within the content
        self.fit_width()
        self.scroll.sync()

    def fit_width(self) -> None:
        """Give the plot no more width than the heads take at its height (square cells; scrolling,
        at their readable size), so the legend sits beside them; flowing cells take all of it."""
        plot, canvas = self.plot, self.grid.canvas
        limit = 1e6
        vh = self.vb.height()
        if not self.grid.flow and canvas is not None and vh > 1:
            H, W = canvas.shape  # the content and its margins: a gap in all
            # what the plot takes beside its view box: the row labels and the layout's margins (read
            # from the axis, fixed by the labels: the view box's own width may still be the one from
            # before the last resize, and a limit made from it shrank the plot under the heads)
            margins = plot.layout.getContentsMargins()
            beside = plot.getAxis("left").width() + margins[0] + margins[2] + 2
            k = self.scroll_scale() if self.scrolling else None
            limit = beside + (W * k if k is not None else vh * W / H) + 1
        if abs(plot.maximumWidth() - limit) > 0.5:
            plot.setMaximumWidth(limit)

    def top_row(self) -> float:
        """The row at the top of the view (in rows, from the first drawn one)."""
        g = self.grid.geom
        assert g is not None  # rows are drawn
        return (self.vb.viewRange()[1][0] + g.g / 2) / (g.S + g.g)

    def cell_px(self) -> float:
        """A cell's step (cell and gap) on screen, in pixels."""
        (x0, x1), _ = self.vb.viewRange()
        g = self.grid.geom
        assert g is not None  # cells are drawn
        return (g.S + g.g) * self.vb.width() / max(1e-9, x1 - x0)


__all__ = [
    "FIT_PX",
    "MAX_BANDS",
    "SCROLL_PX",
    "FitHost",
    "MosaicFit",
    "scroll_content",
]
