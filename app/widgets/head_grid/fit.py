"""How the cells of a :class:`~app.widgets.head_grid.grid.HeadMosaic` fill its view: :class:`MosaicFit`.

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
scaled down smoothly (:class:`~app.widgets.head_grid.scroll.SmoothImage`), so a one-token diagonal or a
first-token column stays a line on screen instead of the dotted or missing one a plainly scaled
image shows; a smaller image is also a quicker paint. Zooming in draws finer again (after the wheel
stops). The readouts keep reading the full-resolution values.

A zoom or pan by the user (``zoomed``) is kept until the view is reset.

:class:`ReadableRows` is the mosaic's side of it (a base of
:class:`~app.widgets.head_grid.grid.HeadMosaic`): folding rows away (:meth:`ReadableRows.set_rows`: every
position and signal still names the real row), bands and scrolling
(:meth:`ReadableRows.set_scrolling`), bringing a head into view, and the keys (``keys=True``: the
arrows ask to move the selected head, ``headStepped(r, c)``, the owner selects it; Enter opens it,
``headClicked``; Page Up/Down scroll).
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import Qt, QTimer

from app.widgets.head_grid.scroll import step_from
from model.interp.pooling import pool_absmax, pool_max

#: ms of quiet after a zoom before the heads are drawn again at the new resolution
REZOOM_MS = 120
#: Image pixels per screen pixel a readable grid is drawn with (at most): a smooth scaling by up to
#: this much still gives every image pixel a share of a screen pixel
OVERSAMPLE = 1.5
#: A readable grid (``set_scrolling``) fits every layer when a head then is at least this many pixels
#: wide, …
FIT_PX = 20
#: … else draws heads this wide and scrolls through the layers.
SCROLL_PX = 28
#: A deep grid is set in up to this many bands of layers side by side when that draws heads larger.
MAX_BANDS = 4


def screen_block(S: int, px: float) -> int:
    """The pooling that draws a head of ``S`` pixels ``px`` screen pixels wide with at most
    :data:`OVERSAMPLE` image pixels per screen pixel."""
    return max(1, math.ceil(S / max(OVERSAMPLE * px, 1.0)))


class MosaicFit:
    """The arrangement and view range of one mosaic (see the module docstring)."""

    def __init__(self, mosaic):
        self.m = mosaic
        self.fit_px = self.scroll_px = 0  # 0: always fit every row
        self.max_bands = 1
        self.scrolling = False  # the cells are drawn at scroll_px and the rows scroll
        self.zoomed = False  # the user zoomed or panned: no refitting until a reset
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
        m = self.m
        margins = m.plot.layout.getContentsMargins()
        beside = m.plot.getAxis("left").width() + margins[0] + margins[2] + 2
        legend = m.legend.geometry().width() + 12
        bar = m.scroll.bar.sizeHint().width()
        return m.width() - beside - legend - bar, m.vb.height()

    def arrange(self, n: int, C: int, S: int, gap: int) -> tuple[int, int, int]:
        """(bands, empty cells between two, pooling ``f``) that draw ``n`` rows of ``C`` cells of
        ``S`` pixels (a gap of ``S // gap``) the largest in the room there is: more bands only for
        cells a quarter larger, one when even the best gives cells under ``fit_px`` (they scroll
        instead, ``scroll_px`` wide); ``f``: what brings ``S`` down to the cells' size on screen."""
        m = self.m
        if self.max_bands <= 1 or m.flow or not self.scroll_px:
            return 1, 1, 1
        vw, vh = self.room()
        if vw <= 1 or vh <= 1:  # not laid out yet: as it was
            return (m.geom.bands, m.geom.band_gap, self.f) if m.geom is not None else (1, 1, 1)
        cell = S / (S + max(1, S // gap))  # of a step, the cell (the rest is the gap)
        names = max((len(t) for t in m.row_labels), default=3)
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
        if best_step * cell < self.fit_px:
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
        g = self.m.geom
        return screen_block(S, self.cell_px() * g.S / (g.S + g.g))

    def scroll_scale(self) -> float | None:
        """Screen pixels per canvas pixel while scrolling, or None when every row fits readably."""
        m = self.m
        if not self.scroll_px or m.canvas is None or m.flow:
            return None
        vw, vh = self.room()
        if vh <= 1 or vw <= 1:
            return None  # not laid out yet
        H, W = m.canvas.shape
        S = m.geom.S
        fit = min(vw / W, vh / H)
        if fit * S >= self.fit_px:
            return None
        k = min(self.scroll_px / S, max(fit, vw / W))  # no wider than the room
        return None if k <= fit * 1.001 else k

    # ---- the view range ------------------------------------------------------------------------
    def apply(self, *, keep_top: bool, top: float | None = None) -> None:
        """Fit the heads to the view, or (scrolling) show them at ``scroll_px`` from the first row,
        from ``top`` (view units), or from where the view is when ``keep_top``."""
        m = self.m
        if m.canvas is not None:
            H, W = m.canvas.shape
            g = m.geom.g
            k = None if m.flow else self.scroll_scale()
            self.scrolling = k is not None
            if m.flow:
                m.vb.setRange(xRange=(0, W - g), yRange=(0, H - g), padding=0.0)
            elif k is None:
                m.fitter.fit(W - g, H - g, margin=g / 2)  # half a gap around: room for the frames
            else:
                m.fitter.size = None  # the fitter would show every row
                if top is None:
                    top = m.vb.viewRange()[1][0] if keep_top else -g / 2
                vw, vh = max(m.vb.width(), 1.0), max(m.vb.height(), 1.0)
                m.vb.setRange(xRange=(-g / 2, -g / 2 + vw / k), yRange=(top, top + vh / k), padding=0.0)
                m.scroll.show_from(top)  # within the content
        self.fit_width()
        m.scroll.sync()

    def fit_width(self) -> None:
        """Give the plot no more width than the heads take at its height (square cells; scrolling,
        at their readable size), so the legend sits beside them; flowing cells take all of it."""
        m = self.m
        limit = 1e6
        vh = m.vb.height()
        if not m.flow and m.canvas is not None and vh > 1:
            H, W = m.canvas.shape  # the content and its margins: a gap in all
            # what the plot takes beside its view box: the row labels and the layout's margins (read
            # from the axis, fixed by the labels: the view box's own width may still be the one from
            # before the last resize, and a limit made from it shrank the plot under the heads)
            margins = m.plot.layout.getContentsMargins()
            beside = m.plot.getAxis("left").width() + margins[0] + margins[2] + 2
            k = self.scroll_scale() if self.scrolling else None
            limit = beside + (W * k if k is not None else vh * W / H) + 1
        if abs(m.plot.maximumWidth() - limit) > 0.5:
            m.plot.setMaximumWidth(limit)

    def top_row(self) -> float:
        """The row at the top of the view (in rows, from the first drawn one)."""
        g = self.m.geom
        return (self.m.vb.viewRange()[1][0] + g.g / 2) / (g.S + g.g)

    def cell_px(self) -> float:
        """A cell's step (cell and gap) on screen, in pixels."""
        m = self.m
        (x0, x1), _ = m.vb.viewRange()
        g = m.geom
        return (g.S + g.g) * m.vb.width() / max(1e-9, x1 - x0)


class ReadableRows:
    """What a :class:`~app.widgets.head_grid.grid.HeadMosaic` does for deep grids (see the module
    docstring); it uses the mosaic's ``fit`` (:class:`MosaicFit`), ``scroll``, ``geom`` and signals."""

    def reset_view(self) -> None:
        """Show every head again (after a zoom); with scrolling, from the first row at the readable
        size."""
        self.fit.zoomed = False
        ready = self.values is not None and self.geom is not None and not self.flow
        if ready and self.fit.scroll_px and self._relayout_due():
            self._redraw()  # drawn for a zoom: as the layout asks
            return
        self.fit.apply(keep_top=False)

    def _relayout_due(self) -> bool:
        """Whether the room there is now asks for other bands or another pooling than drawn."""
        g = self.geom
        want = self.fit.arrange(g.n_drawn, g.C, self._base.shape[-1], self._gap)
        return want != (g.bands, g.band_gap, self.fit.f)

    @property
    def scrolling(self) -> bool:
        """Whether the cells are drawn at the readable size and the rows scroll (:meth:`set_scrolling`)."""
        return self.fit.scrolling

    def set_scrolling(self, fit_px: int, scroll_px: int, bands: int = 1) -> None:
        """Keep cells readable: set the rows in up to ``bands`` bands side by side when that draws
        them larger, and when even then every drawn row fitted in the view gives cells under
        ``fit_px`` pixels, draw them ``scroll_px`` pixels wide in one band and scroll through the
        rows (``0, 0, 1``: always fit in one band, the default)."""
        self.fit.configure(fit_px, scroll_px, bands)
        self.scroll.enabled = self.image.smooth = self.fit.scroll_px > 0
        if self.values is not None:
            self._redraw()

    def _scroll_content(self) -> tuple[float, float, float] | None:
        """What the scroll bar moves through: (top, height, one row) in view units."""
        if self.canvas is None or self.flow:
            return None
        H, _ = self.canvas.shape
        g = self.geom
        return -g.g / 2, float(H), float(g.S + g.g)

    def _on_manual_range(self, *_) -> None:
        self.fit.zoomed = True
        if self.fit.scroll_px:
            self.fit.rezoom.start()  # drawn again at the new size once the wheel stops

    def _rezoom(self) -> None:
        """After a zoom: draw the heads at the resolution they now take on screen."""
        if self.values is None or self.geom is None or self.flow:
            return
        f = self.fit.zoom_block(self._base.shape[-1])
        if f != self.fit.f:
            self._redraw(keep_view=True, pool=f)

    def _on_resized(self, *_) -> None:
        if self.flow and self.geom is not None and self.values is not None:
            n = self.geom.n_drawn
            if self._columns(n, self.geom.C) != self.geom.cols:
                self._redraw()
            else:
                self.reset_view()
        elif self.fit.scroll_px and self.values is not None and not self.fit.zoomed:
            if self._relayout_due():
                self._redraw()  # more or fewer bands, larger or smaller cells
            else:
                self.fit.apply(keep_top=True)  # fit, or scroll, whichever the new size calls for
            if self.marks.selected is not None:  # the selected head stays in view
                self.ensure_visible(*self.marks.selected)
        else:
            self.fit.fit_width()
            self.scroll.sync()

    # ---- rows shown ----------------------------------------------------------------------------
    def set_rows(self, rows) -> None:
        """Draw only ``rows`` (real row numbers, e.g. a range of layers; None: all of them). Clicks,
        hovers, marks and selection keep naming the real rows."""
        shown = None if rows is None else tuple(sorted({int(r) for r in rows}))
        if shown == self.rows_shown:
            return
        self.rows_shown = shown
        if self.values is not None:
            self._redraw()
            self._refresh_readout()

    @property
    def drawn_rows(self) -> tuple[int, ...]:
        """The rows on screen, top first (none before the first data)."""
        return () if self.geom is None else self.geom.drawn

    def ensure_visible(self, r: int, c: int) -> bool:
        """Scroll so head (r, c) is in view; False when its row is folded away (or nothing is drawn)."""
        g = self.geom
        if g is None or not g.shows(r) or not 0 <= c < g.C:
            return False
        self.scroll.ensure_visible(g.cell_rect(r, c), margin=g.g / 2 + 0.5)
        return True

    def _on_key(self, key: int) -> bool:
        """An arrow asks for the next head (``headStepped``), Enter opens the selected one, Page Up /
        Down scroll; False for any other key."""
        if self.geom is None:
            return False
        if key in (Qt.Key.Key_PageUp, Qt.Key.Key_PageDown):
            if self.scroll.active:
                rows = max(1, int(self.vb.height() / max(1.0, self.fit.cell_px())) - 1)
                self.scroll.scroll_rows(-rows if key == Qt.Key.Key_PageUp else rows)
            return True
        cell = self.marks.selected
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if cell is not None and self.geom.shows(cell[0]):
                self.headClicked.emit(*cell)
            return True
        to = step_from(self.geom, cell, key)
        if to is None:
            return False
        self.headStepped.emit(*to)
        return True


__all__ = ["OVERSAMPLE", "MosaicFit", "ReadableRows", "screen_block"]
