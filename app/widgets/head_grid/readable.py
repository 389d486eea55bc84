"""What the head grid does to stay readable as its size, zoom and rows change: :class:`ReadableRows`.

A deep grid (:meth:`~app.widgets.head_grid.grid.HeadMosaic.set_scrolling`) is set in bands or scrolls
(:class:`~app.widgets.head_grid.fit.MosaicFit` says which); this is what the grid does with that: lay
the cells out again when the room there is asks for other bands or another pooling, draw them finer
again once a zoom stops, keep the selected head in view across a resize, and bring a head into view.
It reads the grid through :class:`ReadableHost` and asks it to lay its cells out again
(:meth:`ReadableHost.redraw`).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from app.widgets.head_grid.fit import FitHost, MosaicFit
from app.widgets.head_grid.marks import CellMarks
from app.widgets.head_grid.scroll import RowScroll
from app.widgets.screen_image import SmoothImage


class ReadableHost(FitHost, Protocol):
    """What :class:`ReadableRows` reads of its grid and asks of it."""

    @property
    def values(self) -> np.ndarray | None: ...

    @property
    def base_size(self) -> int: ...

    @property
    def gap(self) -> int: ...

    def columns(self, n: int, C: int) -> int: ...

    def redraw(self, *, keep_view: bool = False, pool: int | None = None, from_top: bool = False) -> None: ...


class ReadableRows:
    """Bands, scrolling, zoom and resizes of one grid (see the module docstring)."""

    def __init__(
        self,
        grid: ReadableHost,
        fit: MosaicFit,
        scroll: RowScroll,
        marks: CellMarks,
        image: SmoothImage,
    ):
        self.grid, self.fit, self.scroll, self.marks, self.image = grid, fit, scroll, marks, image
        fit.rezoom.timeout.connect(self.rezoom)
        fit.vb.sigResized.connect(self.on_resized)
        fit.vb.sigRangeChangedManually.connect(self.on_manual_range)

    def reset_view(self) -> None:
        """Show every head again (after a zoom); with scrolling, from the first row at the readable
        size (laid out again first when the room there is asks for other bands or pooling)."""
        self.fit.zoomed = False
        grid = self.grid
        ready = grid.values is not None and grid.geom is not None and not grid.flow
        if ready and self.fit.scroll_px and self.relayout_due():
            grid.redraw(from_top=True)  # drawn for a zoom: as the layout asks, from the first row
            return
        self.fit.apply(keep_top=False)

    def fit_all(self) -> None:
        """Fit every drawn row in the view, however small its heads then are (the Fit button): the
        rows no longer scroll, through resizes and new data, until :meth:`set_scrolling`."""
        self.fit.whole = True
        self.reset_view()

    def relayout_due(self) -> bool:
        """Whether the room there is now asks for other bands or another pooling than drawn."""
        g = self.grid.geom
        assert g is not None  # asked of a drawn grid
        want = self.fit.arrange(g.n_drawn, g.C, self.grid.base_size, self.grid.gap)
        return want != (g.bands, g.band_gap, self.fit.f)

    def set_scrolling(self, fit_px: int, scroll_px: int, bands: int = 1) -> None:
        """Keep cells readable: set the rows in up to ``bands`` bands side by side when that draws
        them larger, and when even then every drawn row fitted in the view gives cells under
        ``fit_px`` pixels, draw them ``scroll_px`` pixels wide in one band and scroll through the
        rows (``0, 0, 1``: always fit in one band, the default)."""
        self.fit.configure(fit_px, scroll_px, bands)
        self.fit.whole = False
        self.scroll.enabled = self.image.smooth = self.fit.scroll_px > 0
        if self.grid.values is not None:
            self.grid.redraw()

    def on_manual_range(self, *_: object) -> None:
        self.fit.zoomed = True
        if self.fit.scroll_px:
            self.fit.rezoom.start()  # drawn again at the new size once the wheel stops

    def rezoom(self) -> None:
        """After a zoom: draw the heads at the resolution they now take on screen."""
        grid = self.grid
        if grid.values is None or grid.geom is None or grid.flow:
            return
        f = self.fit.zoom_block(grid.base_size)
        if f != self.fit.f:
            grid.redraw(keep_view=True, pool=f)

    def on_resized(self, *_: object) -> None:
        grid, fit = self.grid, self.fit
        if grid.flow and grid.geom is not None and grid.values is not None:
            if grid.columns(grid.geom.n_drawn, grid.geom.C) != grid.geom.cols:
                grid.redraw()
            else:
                self.reset_view()
        elif fit.scroll_px and grid.values is not None and not fit.zoomed:
            if self.relayout_due():
                grid.redraw()  # more or fewer bands, larger or smaller cells
            else:
                fit.apply(keep_top=True)  # fit, or scroll, whichever the new size calls for
            if self.marks.selected is not None:  # the selected head stays in view
                self.ensure_visible(*self.marks.selected)
        else:
            fit.fit_width()
            self.scroll.sync()

    def ensure_visible(self, r: int, c: int) -> bool:
        """Scroll so head (r, c) is in view; False when its row is folded away (or nothing is drawn)."""
        g = self.grid.geom
        if g is None or not g.shows(r) or not 0 <= c < g.C:
            return False
        self.scroll.ensure_visible(g.cell_rect(r, c), margin=g.g / 2 + 0.5)
        return True


__all__ = ["ReadableHost", "ReadableRows"]
