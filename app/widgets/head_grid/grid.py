"""The head grid's widget, :class:`HeadMosaic`: what it shows, and the parts it holds (the package's
docstring says what it draws and how)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial

import numpy as np
from PySide6.QtCore import QPoint, QPointF, QRectF, Signal
from PySide6.QtWidgets import QWidget

from app.widgets.head_grid.axis import kv_groups
from app.widgets.head_grid.fit import MosaicFit, scroll_content
from app.widgets.head_grid.geometry import MosaicGeometry, flow_columns
from app.widgets.head_grid.keys import GridKeys
from app.widgets.head_grid.marks import CellMarks
from app.widgets.head_grid.painter import MosaicPainter
from app.widgets.head_grid.pointer import Hit, MosaicPointer
from app.widgets.head_grid.readable import ReadableRows
from app.widgets.head_grid.scene import GridScene
from app.widgets.head_grid.scroll import RowScroll
from app.widgets.head_grid.values import MaskArg, check_values, split_mask
from app.widgets.palette import DEFAULT_CMAP
from model.interp.frame import carried_mask
from model.interp.pooling import block_size, pool_absmax, pool_max


class HeadMosaic(QWidget):
    """An R×C grid of heads in one image, with labels, roles, selection and marks.

    ``headClicked(r, c)`` on a left click (or Enter, with ``keys``); ``headMenuRequested(r, c, screen
    pos)`` on a right click; ``cellHovered(r, c, query, key)`` under the pointer (``-1`` everywhere
    when it leaves); ``headStepped(r, c)``: an arrow key asks for the neighbour of the selected cell.
    ``cell_name(r, c)`` names a head in the readout.
    """

    headClicked = Signal(int, int)
    cellHovered = Signal(int, int, int, int)
    headMenuRequested = Signal(int, int, object)
    headStepped = Signal(int, int)

    #: the row scroller (its bar beside the view). It hides QWidget.scroll(dx, dy), which scrolls a
    #: widget's children and which nothing calls on the grid: the name is the grid's, read by its users
    scroll: RowScroll  # type: ignore[assignment]

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        cmap: str = DEFAULT_CMAP,
        title: str = "",
        row_name: str = "layer",
        col_name: str = "head",
        gamma: float = 1.0,
        interactive: bool = True,
        compact: bool = False,
        keys: bool = False,
    ):
        super().__init__(parent)
        self.row_name, self.col_name = row_name, col_name
        self.compact = compact  # layer and head numbers, each word once as its axis title; thinner gaps
        self.cmap, self.gamma = cmap, float(gamma)
        self.scene = GridScene(
            self, partial(scroll_content, self), cmap=cmap, gamma=self.gamma, interactive=interactive
        )
        sc = self.scene
        self.view, self.plot, self.vb, self.image = sc.view, sc.plot, sc.vb, sc.image
        self.top_axis, self.legend, self.fitter, self.scroll = sc.top_axis, sc.legend, sc.fitter, sc.scroll
        self.placeholder, self.readout, self.title_label = sc.placeholder, sc.readout, sc.title_label
        self.painter = MosaicPainter(self.plot, self.top_axis, self.image, self.legend)
        self.marks = CellMarks(self.vb)
        if title:
            self.set_title(title)

        self.mode = "weights"  # or "difference"
        self.values: np.ndarray | None = None  # full resolution [R, C, T, T], kept by reference
        self.tokens: list[str] = []
        self._mask: np.ndarray | None = None  # [T, T], one mask for every row (None: see row_masks)
        self.row_masks: list[np.ndarray | None] | None = None  # one [T, T] per row, when they differ
        self.block = 1
        self.log = False
        self.flow = False
        self.levels: tuple[float, float] = (0.0, 1.0)
        self.names: tuple[str, str] = ("A", "B")
        self.row_labels: list[str] = []
        self.col_labels: list[str] = []
        self.kv_group = 1  # query heads per key/value head (GQA); 1: every head has its own
        self.geom: MosaicGeometry | None = None
        self.rows_shown: tuple[int, ...] | None = None  # the rows drawn (None: all)
        self._overview: np.ndarray | None = None  # the cells drawn [R, C, S, S], pooled to the screen
        self._base: np.ndarray | None = None  # the cells as given (pooled by the model's block)
        self._base_block = 1
        self.cell_name: Callable[[int, int], str] = self._default_cell_name
        self.fit = MosaicFit(self, self.plot, self.legend, self.fitter, self.scroll)  # fit, bands or scroll
        signals = self.cellHovered.emit, self.headClicked.emit, self.headMenuRequested.emit
        self.pointer = MosaicPointer(self, self.vb, self.readout, *signals)
        self.keys: GridKeys | None = None  # the arrows, Enter and Page Up/Down (``keys``)
        if keys:
            opened, stepped = self.headClicked.emit, self.headStepped.emit
            self.keys = GridKeys(self.view, self, self.fit, self.scroll, self.marks, opened, stepped)
        self.view.scene().sigMouseMoved.connect(self.pointer.on_move)
        self.view.viewport().installEventFilter(self.pointer)
        self.view.scene().sigMouseClicked.connect(self.pointer.on_click)
        self.readable = ReadableRows(self, self.fit, self.scroll, self.marks, self.image)
        self.clear()

    def _default_cell_name(self, r: int, c: int) -> str:
        name = f"{self.row_name} {r}, {self.col_name} {c}"
        return name + (f" (K/V head {c // self.kv_group})" if self.kv_group > 1 else "")

    # ---- what is shown -------------------------------------------------------------------------
    @property
    def weights(self) -> np.ndarray | None:
        """The attention weights [R, C, T, T] shown (None in difference mode)."""
        return self.values if self.mode == "weights" else None

    @property
    def diff(self) -> np.ndarray | None:
        """The differences A − B [R, C, T, T] shown (None in weights mode)."""
        return self.values if self.mode == "difference" else None

    @property
    def shape(self) -> tuple[int, int]:
        return (0, 0) if self.geom is None else (self.geom.R, self.geom.C)

    def mask_of(self, r: int) -> np.ndarray | None:
        """The mask [T, T] row ``r``'s heads are drawn under (True = may attend; None: none)."""
        if self.row_masks is not None:
            return self.row_masks[r] if 0 <= r < len(self.row_masks) else None
        return self._mask

    @property
    def base_size(self) -> int:
        """A head's pixels as given (pooled by the model's block), before the fit pools it further."""
        return 0 if self._base is None else self._base.shape[-1]

    # ---- geometry ------------------------------------------------------------------------------
    def cell_rect(self, r: int, c: int) -> QRectF:
        assert self.geom is not None  # asked of drawn heads
        return self.geom.cell_rect(r, c)

    def locate(self, x: float, y: float) -> Hit | None:
        """(r, c, query, key) at view coordinates (x, y), or None in a gap or outside."""
        if self.geom is None or self.values is None:
            return None
        return self.geom.locate(x, y, self.values.shape[-1], self.block)

    def scene_pos_of(self, r: int, c: int, q: int = -1, k: int = -1) -> QPointF:
        """Scene position of token pair (q, k) in cell (r, c) (the cell's centre by default)."""
        geom = self.geom
        assert geom is not None  # asked of drawn heads
        x, y = geom.origin(r, c)
        S, b = geom.S, self.block
        if q < 0:
            return self.vb.mapViewToScene(QPointF(x + S / 2, y + S / 2))
        return self.vb.mapViewToScene(QPointF(x + (k + 0.5) / b, y + (q + 0.5) / b))

    def widget_pos_of(self, r: int, c: int, q: int = -1, k: int = -1) -> QPoint:
        """Position in ``self.view`` (widget coordinates) of :meth:`scene_pos_of`."""
        return self.view.mapFromScene(self.scene_pos_of(r, c, q, k))

    def columns(self, n: int, C: int) -> int:
        """Cells on a row of the screen for ``n`` rows of ``C`` heads: ``C``, unless they flow."""
        if not self.flow:
            return C
        w, h = self.vb.width(), self.vb.height()
        if w <= 1 or h <= 1:
            w, h = self.view.width(), self.view.height()
        return flow_columns(n * C, w, h)

    # ---- data ----------------------------------------------------------------------------------
    def set_data(
        self,
        weights: np.ndarray,
        tokens: list[str] | None = None,
        *,
        mask: MaskArg = None,
        overview: np.ndarray | None = None,
        block: int | None = None,
        row_labels: list[str] | None = None,
        col_labels: list[str] | None = None,
        flow: bool = False,
        title: str | None = None,
        kv_group: int = 1,
    ) -> None:
        """Draw attention ``weights`` [R, C, T, T] (any float dtype, kept by reference for readouts).

        ``overview`` (already ``pool_max``-ed by ``block``) saves the pooling when a worker did it;
        ``mask`` [T, T] bool (True = may attend) greys out what a query cannot see (None: the mask the
        weights carry, :func:`model.interp.frame.carried_mask`), or one such mask (or None) per row,
        e.g. a local layer's window beside global layers (rows sharing one array cost one); ``flow`` wraps
        the cells to fill the widget, each named in its corner; ``kv_group`` > 1 (GQA: query heads per
        key/value head) frames and labels the heads that share a K/V head.
        """
        w = check_values(weights, "weights")
        C = w.shape[1]
        self.kv_group = kv_group if kv_group > 1 and C % kv_group == 0 and not flow else 1
        if self.kv_group > 1 and col_labels is None:
            col_labels = [f"h{c}" for c in range(C)]  # the groups are named above them
        b = block if block is not None else block_size(w.shape[-1], w.shape[0] * w.shape[1])
        ov = overview if overview is not None else pool_max(w, b)
        if mask is None:
            mask = carried_mask(w)
        self._show("weights", w, ov, b, tokens, mask, row_labels, col_labels, flow, title)

    def set_difference(
        self,
        diff: np.ndarray,
        tokens: list[str] | None = None,
        levels: tuple[float, float] | None = None,
        names: tuple[str, str] = ("A", "B"),
        title: str | None = None,
        mask: np.ndarray | None = None,
    ) -> None:
        """Draw ``diff`` [L, H, T, T] = A − B at symmetric ``levels`` (default ``±max |diff|``);
        ``mask`` [T, T] (True = seen) greys the pairs neither model may see."""
        d = check_values(diff, "a difference")
        if levels is None:
            m = float(np.abs(d).max()) if d.size else 0.0
            levels = (-m or -1e-3, m or 1e-3)
        self.levels, self.names = (float(levels[0]), float(levels[1])), (names[0], names[1])
        b = block_size(d.shape[-1], d.shape[0] * d.shape[1])
        self._show("difference", d, pool_absmax(d, b), b, tokens, mask, None, None, False, title)

    def _show(
        self,
        mode: str,
        values: np.ndarray,
        ov: np.ndarray,
        b: int,
        tokens: list[str] | None,
        mask: MaskArg,
        row_labels: list[str] | None,
        col_labels: list[str] | None,
        flow: bool,
        title: str | None,
    ) -> None:
        R, C, T, _ = values.shape
        self.mode = mode
        self._set_colours()  # no-op unless the mode (or A, B) changed: the tables are cached
        self._mask, self.row_masks = split_mask(mask, R)
        self.values, self.block, self._overview = values, b, ov
        self._base, self._base_block = ov, b  # as given; drawn pooled further to the screen (fit)
        if flow != self.flow:
            self.flow = flow
            self.geom = None
            self.fitter.size = None
            self.vb.setAspectLocked(not flow)  # flowing cells fill the widget
        self.tokens = list(tokens) if tokens is not None else [str(i) for i in range(T)]
        rn = "" if self.compact else f"{self.row_name} "
        self.row_labels = row_labels or [f"{rn}{r}" for r in range(R)]
        cn = "" if self.compact else f"{self.col_name} "
        self.col_labels = col_labels or [f"{cn}{c}" for c in range(C)]
        if title is not None:
            self.set_title(title)
        self.placeholder.setText("")
        self.redraw()
        self.pointer.refresh()

    @property
    def gap(self) -> int:
        """A gap is a cell's size over this (at least a pixel)."""
        return 24 if self.compact else 12

    def redraw(self, *, keep_view: bool = False, pool: int | None = None, from_top: bool = False) -> None:
        """Lay the cells out again and paint them (``keep_view``: the same heads stay in view, at the
        same size on screen, whatever the new geometry; ``pool``: pool the pixels by that, not by
        what the layout asks; ``from_top``: a scrolled grid shows its first row, not the one at the
        top of the view now)."""
        assert self.values is not None and self._base is not None  # drawn after set_data
        R, C = self.values.shape[:2]
        gap, fit, old = self.gap, self.fit, self.geom
        shown = tuple(r for r in self.rows_shown or () if 0 <= r < R) or None
        n = len(shown) if shown else R
        bands, band_gap, f = fit.arrange(n, C, self._base.shape[-1], gap)
        f = f if pool is None else pool
        self._overview, self.block = fit.pooled(self._base, f, self.mode), self._base_block * f
        S = self._overview.shape[-1]
        geom = MosaicGeometry.of(R, C, S, self.columns(n, C), gap, shown, bands, band_gap)
        new_geom = geom != old
        # scrolled through the same rows: a new geometry (another prompt length) keeps the top row
        keep = (
            fit.scrolling and not fit.zoomed and not from_top and old is not None and old.drawn == geom.drawn
        )
        top_row = fit.top_row() if keep and new_geom else None
        view = self.vb.viewRange() if keep_view and old is not None else None
        if new_geom:
            self.geom = geom
            self.painter.new_canvas(geom)
        kv_group = self.kv_group if self.mode == "weights" else 1
        self.marks.label(geom, self.row_labels, self.col_labels, flow=self.flow, kv_group=kv_group)
        names = (self.row_name, self.col_name)
        self.painter.set_ticks(geom, self.row_labels, self.col_labels, names, self.compact, self.flow)
        self.top_axis.set_groups([] if self.flow else kv_groups(geom, kv_group))
        self._fill(geom)
        if new_geom:
            # after setImage: an ImageItem's rect is a scale of its current image size
            H, W = geom.canvas_shape
            self.image.setRect(QRectF(0, 0, W, H))
            if view is not None and old is not None:  # the same place, in the new geometry's pixels
                k = (geom.S + geom.g) / (old.S + old.g)
                (x0, x1), (y0, y1) = view
                self.vb.setRange(xRange=(x0 * k, x1 * k), yRange=(y0 * k, y1 * k), padding=0.0)
            elif top_row is None:
                self.reset_view()
            else:
                fit.apply(keep_top=False, top=top_row * (geom.S + geom.g) - geom.g / 2)

    @property
    def canvas(self) -> np.ndarray | None:
        """The values drawn (float32, the pooled cells placed with their gaps; what the colours show)."""
        return self.painter.canvas

    def _fill(self, geom: MosaicGeometry) -> None:
        assert self._overview is not None  # pooled by redraw
        self.painter.paint(
            geom,
            self._overview,
            mode=self.mode,
            log=self.log,
            levels=self.levels,
            mask=self._mask if self.row_masks is None else self.row_masks,
            block=self.block,
        )

    def _set_colours(self) -> None:
        self.painter.set_colours(self.mode, self.cmap, self.gamma, log=self.log, names=self.names)

    def set_log(self, log: bool) -> None:
        """Colour log10(weight) from 10⁻⁴ to 1 (weights mode)."""
        if log != self.log:
            self.log = log
            self._set_colours()
            if self.values is not None and self.mode == "weights" and self.geom is not None:
                self._fill(self.geom)

    def set_gamma(self, gamma: float) -> None:
        """Colour scale of the weights: 1 linear, 0.5 square root (small weights visible)."""
        self.gamma = float(gamma)
        self._set_colours()

    def set_title(self, text: str) -> None:
        """The line over the heads (wrapped when the widget is narrow; "" for none)."""
        self.scene.set_title(text)

    @property
    def title(self) -> str:
        return self.scene.title

    def clear(self, message: str = "no attention to show yet") -> None:
        """Show nothing but ``message`` (the title stays)."""
        self.values = self._overview = self.geom = None
        self.painter.clear()
        self.marks.place(None)
        self.fit.scrolling = self.fit.zoomed = False
        self.scene.clear(message)

    # ---- roles, selection and marks ------------------------------------------------------------
    def set_roles(
        self,
        short: list[list[str]],
        tips: list[list[str]] | None = None,
        colors: list[list[str | None]] | None = None,
    ) -> None:
        """A short name written in the corner of each cell ("" for none; only where it fits in the
        cell); ``tips`` for the readout; ``colors``: a frame of that colour around the cell (None:
        none)."""
        self.marks.roles, self.marks.role_tips = short, tips or short
        self.marks.role_colors = colors or []
        self.marks.place(self.geom)

    def set_selected(self, cell: tuple[int, int] | None) -> None:
        """The cell drawn with an orange frame (the head open elsewhere)."""
        self.marks.selected = cell
        self.marks.place(self.geom)

    def set_marked(self, cells: Iterable[tuple[int, int]]) -> None:
        """Cells drawn with a red dashed frame and "OFF" (e.g. switched-off heads)."""
        self.marks.marked = set(cells)
        self.marks.place(self.geom)

    @property
    def marked(self) -> set[tuple[int, int]]:
        return self.marks.marked

    def hover_at(self, r: int, c: int, q: int, k: int) -> None:
        """Read out token pair (q, k) of cell (r, c) as if the pointer were there (``r`` < 0: none)."""
        self.pointer.hover_at(r, c, q, k)

    # ---- deep grids ----------------------------------------------------------------------------
    def reset_view(self) -> None:
        """Show the heads as laid out again, after a zoom: fitted, or from the first row at the
        readable size when they scroll (:meth:`ReadableRows.reset_view`)."""
        self.readable.reset_view()

    def fit_all(self) -> None:
        """Fit: every drawn head in the view, however small (:meth:`ReadableRows.fit_all`)."""
        self.readable.fit_all()

    @property
    def scrolling(self) -> bool:
        """Whether the cells are drawn at the readable size and the rows scroll (:meth:`set_scrolling`)."""
        return self.fit.scrolling

    def set_scrolling(self, fit_px: int, scroll_px: int, bands: int = 1) -> None:
        """Keep cells readable: in bands, or scrolling (:meth:`ReadableRows.set_scrolling`)."""
        self.readable.set_scrolling(fit_px, scroll_px, bands)

    def set_rows(self, rows: Iterable[int] | None) -> None:
        """Draw only ``rows`` (real row numbers, e.g. a range of layers; None: all of them). Clicks,
        hovers, marks and selection keep naming the real rows."""
        shown = None if rows is None else tuple(sorted({int(r) for r in rows}))
        if shown == self.rows_shown:
            return
        self.rows_shown = shown
        if self.values is not None:
            self.redraw()
            self.pointer.refresh()

    @property
    def drawn_rows(self) -> tuple[int, ...]:
        """The rows on screen, top first (none before the first data)."""
        return () if self.geom is None else self.geom.drawn

    def ensure_visible(self, r: int, c: int) -> bool:
        """Scroll so head (r, c) is in view; False when its row is folded away (or nothing is drawn)."""
        return self.readable.ensure_visible(r, c)


__all__ = ["HeadMosaic"]
