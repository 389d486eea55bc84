"""HeadMosaic: the L×H grid of heads, every head a [T, T] cell of one image.

Why one image and not L·H plot items: a new prompt (or a new training frame) then costs one array
copy and one ``setImage`` (no per-item layout or repaint bookkeeping), hit-testing is arithmetic, and
zoom/pan over the whole grid comes for free, which is what a 12×12 model on a long prompt needs. Cell
``(r, c)`` (layer, head) occupies pixels ``[y, y + S) × [x, x + S)`` of the canvas, ``x = j·(S+g)``,
``y = i·(S+g)`` with ``(i, j)`` its place on screen, ``S`` the drawn size of a head and ``g`` a gap.
Inside a cell rows are queries (top = first token) and columns keys.

Modes:

- **weights** (:meth:`HeadMosaic.set_data`): attention weights in [0, 1] (``log``: log10 weights in
  [−4, 0]; ``gamma`` < 1 brightens small weights); cells a query may not see are grey
  (:data:`~app.widgets.palette.HIDDEN_COLOR`, as in every matrix of the app, the legend's grey square
  says "masked"): the ``mask`` given, else the one the weights carry (exact zeros in every head above
  the diagonal, or outside a sliding window: :func:`model.interp.frame.carried_mask`), so a training frame or
  a checkpoint's snapshot is drawn by the same rule as an inspection; ``mask`` may also be one per row
  (a model of local and global layers: a local layer's cells grey out what its window hides);
- **difference** (:meth:`HeadMosaic.set_difference`): ``A − B`` per head on a diverging map, at
  symmetric levels ``(−m, m)`` shared by every head, so equal differences look equally strong;
- **pooled overview** (either mode, long prompts): a head of ``T`` tokens is drawn at
  ``S = ceil(T / b)`` pixels with ``b = model.pooling.block_size``; a pixel shows the largest weight
  (the largest |difference|) of its ``b × b`` block. Readouts always use the full-resolution values.

**Grouped-query attention** (``kv_group`` = query heads per key/value head, ``n_heads / n_kv_heads``):
the columns of each K/V head are framed together (a blue border around the group, every layer); the
top axis names each group (``K/V head g``, ``kvg`` when narrow) over a blue bracket, and each column
``h c``; the readout names the K/V head.

**Deep models** (30 layers × 9 heads): ``set_rows`` folds rows away, ``set_scrolling`` sets the rows in
bands or scrolls them and pools cells to the screen's resolution, ``keys=True`` lets the arrow keys move
the selection (:mod:`app.widgets.head_grid.fit`).

``flow=True`` wraps the cells into as many rows as fill the widget best (a handful of averaged heads
instead of a thin strip); each cell is then named in its top-right corner instead of on the axes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtWidgets import QGraphicsWidget, QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.widgets.head_grid.fit import MosaicFit, ReadableRows
from app.widgets.head_grid.geometry import CellMarks, MosaicGeometry, flow_columns
from app.widgets.head_grid.painter import MosaicPainter
from app.widgets.head_grid.pointer import MosaicMarksAndPointer, readout_text
from app.widgets.head_grid.scroll import GroupAxis, KeyFilter, RowScroll, SmoothImage, kv_groups
from app.widgets.legend import ColorLegend
from app.widgets.matrix_plot import TopLeftFit, matrix_axes
from app.widgets.palette import DEFAULT_CMAP, matrix_lut
from app.widgets.titles import WrapLabel
from model.interp.frame import carried_mask
from model.interp.pooling import block_size, pool_absmax, pool_max


class HeadMosaic(ReadableRows, MosaicMarksAndPointer, QWidget):
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
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        # the title: a row of its own over the heads and the colour bar, wrapped to the widget's width
        self.title_label = WrapLabel("", justify="left", color="#222", size="10pt")
        self.title_label.setVisible(False)
        self.view.addItem(self.title_label, row=0, col=0, colspan=3)
        self.view.ci.layout.setRowFixedHeight(0, 0)
        self.title_label.set_on_height(lambda h: self.view.ci.layout.setRowFixedHeight(0, h))
        self.top_axis = GroupAxis("top")
        self.plot: pg.PlotItem = self.view.addPlot(row=1, col=0, axisItems={"top": self.top_axis})
        p = matrix_axes(self.plot)
        for name in ("left", "top"):
            ax = p.getAxis(name)
            ax.setStyle(tickLength=0, autoReduceTextSpace=False)  # no shrinking while empty
            ax.setPen(pg.mkPen(None))
            ax.setTextPen(pg.mkPen("#333"))
            ax.enableAutoSIPrefix(False)  # names, not numbers: no label rewritten on every pan
        self.vb: pg.ViewBox = p.getViewBox()
        self.vb.setAspectLocked(True)
        self.vb.setDefaultPadding(0.0)
        self.vb.setMouseEnabled(interactive, interactive)
        self.fitter = TopLeftFit(self.vb)
        self.image = SmoothImage(axisOrder="row-major")
        self.cmap, self.gamma = cmap, float(gamma)
        self.image.setLookupTable(matrix_lut(cmap, self.gamma))
        p.addItem(self.image)
        self.legend = ColorLegend(cmap, "weight", width=10, gamma=self.gamma)
        self.view.addItem(self.legend, row=1, col=1)
        self.painter = MosaicPainter(self.plot, self.image, self.legend)
        spare = QGraphicsWidget()  # takes the width the heads do not need: the legend stays beside them
        spare.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        spare.setPreferredWidth(0)
        self.view.addItem(spare, row=1, col=2)
        self.view.ci.layout.setColumnStretchFactor(0, 1000)  # the spare gets only what the plot cannot take
        self.view.ci.layout.setColumnStretchFactor(2, 1)
        self.placeholder = pg.TextItem("", color="#888", anchor=(0.5, 0.5))
        p.addItem(self.placeholder, ignoreBounds=True)
        self.marks = CellMarks(self.vb)
        self.scroll = RowScroll(self.vb, self.view, self._scroll_content)
        row = QHBoxLayout()
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(0)
        row.addWidget(self.view, 1)
        row.addWidget(self.scroll.bar)
        layout.addLayout(row, 1)
        self.readout = QLabel(" ")
        self.readout.setTextFormat(Qt.TextFormat.PlainText)  # token texts such as <|im_start|>
        self.readout.setObjectName("mosaicReadout")
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.readout)
        if title:
            self.set_title(title)

        self.mode = "weights"  # or "difference"
        self.values: np.ndarray | None = None  # full resolution [R, C, T, T], kept by reference
        self.tokens: list[str] = []
        self.mask: np.ndarray | None = None  # [T, T], one mask for every row (None: see row_masks)
        self.row_masks: list[np.ndarray | None] | None = None  # one [T, T] per row, when they differ
        self.block = 1
        self.log = False
        self.flow = False
        self.levels: tuple[float, float] = (0.0, 1.0)
        self.names = ("A", "B")
        self.row_labels: list[str] = []
        self.col_labels: list[str] = []
        self.kv_group = 1  # query heads per key/value head (GQA); 1: every head has its own
        self.geom: MosaicGeometry | None = None
        self.rows_shown: tuple[int, ...] | None = None  # the rows drawn (None: all)
        self.fit = MosaicFit(self)  # fit every row, set them in bands, or scroll
        self.fit.rezoom.timeout.connect(self._rezoom)
        self.keys = KeyFilter(self.view, self._on_key) if keys else None
        self._overview: np.ndarray | None = None
        self.cell_name: Callable[[int, int], str] = self._default_cell_name
        self._last_hover = (-1, -1, -1, -1)
        self.view.scene().sigMouseMoved.connect(self._on_move)
        self.view.scene().sigMouseClicked.connect(self._on_click)
        self.vb.sigResized.connect(self._on_resized)
        self.vb.sigRangeChangedManually.connect(self._on_manual_range)
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
        return self.mask

    # ---- geometry ------------------------------------------------------------------------------
    def cell_rect(self, r: int, c: int) -> QRectF:
        return self.geom.cell_rect(r, c)

    def locate(self, x: float, y: float) -> tuple[int, int, int, int] | None:
        """(r, c, query, key) at view coordinates (x, y), or None in a gap or outside."""
        if self.geom is None or self.values is None:
            return None
        return self.geom.locate(x, y, self.values.shape[-1], self.block)

    def scene_pos_of(self, r: int, c: int, q: int = -1, k: int = -1) -> QPointF:
        """Scene position of token pair (q, k) in cell (r, c) (the cell's centre by default)."""
        x, y = self.geom.origin(r, c)
        S, b = self.geom.S, self.block
        if q < 0:
            return self.vb.mapViewToScene(QPointF(x + S / 2, y + S / 2))
        return self.vb.mapViewToScene(QPointF(x + (k + 0.5) / b, y + (q + 0.5) / b))

    def widget_pos_of(self, r: int, c: int, q: int = -1, k: int = -1):
        """Position in ``self.view`` (widget coordinates) of :meth:`scene_pos_of`."""
        return self.view.mapFromScene(self.scene_pos_of(r, c, q, k))

    def _columns(self, R: int, C: int) -> int:
        if not self.flow:
            return C
        w, h = self.vb.width(), self.vb.height()
        if w <= 1 or h <= 1:
            w, h = self.view.width(), self.view.height()
        return flow_columns(R * C, w, h)

    # ---- data ----------------------------------------------------------------------------------
    def set_data(
        self,
        weights: np.ndarray,
        tokens: list[str] | None = None,
        *,
        mask: np.ndarray | Sequence[np.ndarray | None] | None = None,
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
        w = self._check(weights, "weights")
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
        d = self._check(diff, "a difference")
        if levels is None:
            m = float(np.abs(d).max()) if d.size else 0.0
            levels = (-m or -1e-3, m or 1e-3)
        self.levels, self.names = (float(levels[0]), float(levels[1])), tuple(names)
        b = block_size(d.shape[-1], d.shape[0] * d.shape[1])
        self._show("difference", d, pool_absmax(d, b), b, tokens, mask, None, None, False, title)

    @staticmethod
    def _check(values, what: str) -> np.ndarray:
        # an array-like computing one head when indexed (a long prompt's patterns) is kept as it is
        v = (
            values
            if getattr(values, "ndim", None) == 4 and not isinstance(values, np.ndarray)
            else np.asarray(values)
        )
        if v.ndim != 4 or v.shape[-1] != v.shape[-2]:
            raise ValueError(f"{what} must be [R, C, T, T], got shape {v.shape}")
        return v

    @staticmethod
    def _split_mask(mask, R: int) -> tuple[np.ndarray | None, list[np.ndarray | None] | None]:
        """(one mask for every row, None) or (None, one per row) from what ``set_data`` was given."""
        if mask is None or (isinstance(mask, np.ndarray) and mask.ndim == 2):
            return mask, None
        rows = list(mask)
        if len(rows) != R:
            raise ValueError(f"{len(rows)} row masks for {R} rows")
        if all(m is rows[0] for m in rows):
            return rows[0], None
        return None, rows

    def _show(self, mode, values, ov, b, tokens, mask, row_labels, col_labels, flow, title) -> None:
        R, C, T, _ = values.shape
        self.mode = mode
        self._set_colours()  # no-op unless the mode (or A, B) changed: the tables are cached
        self.mask, self.row_masks = self._split_mask(mask, R)
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
        self._redraw()
        self._refresh_readout()

    @property
    def _gap(self) -> int:
        """A gap is a cell's size over this (at least a pixel)."""
        return 24 if self.compact else 12

    def _redraw(self, *, keep_view: bool = False, pool: int | None = None) -> None:
        """Lay the cells out again and paint them (``keep_view``: the same heads stay in view, at the
        same size on screen, whatever the new geometry; ``pool``: pool the pixels by that, not by
        what the layout asks)."""
        R, C = self.values.shape[:2]
        gap, fit, old = self._gap, self.fit, self.geom
        shown = tuple(r for r in self.rows_shown or () if 0 <= r < R) or None
        n = len(shown) if shown else R
        bands, band_gap, f = fit.arrange(n, C, self._base.shape[-1], gap)
        f = f if pool is None else pool
        self._overview, self.block = fit.pooled(self._base, f, self.mode), self._base_block * f
        S = self._overview.shape[-1]
        geom = MosaicGeometry.of(R, C, S, self._columns(n, C), gap, shown, bands, band_gap)
        new_geom = geom != old
        # scrolled through the same rows: a new geometry (another prompt length) keeps the top row
        keep = fit.scrolling and not fit.zoomed and old is not None and old.drawn == geom.drawn
        top_row = fit.top_row() if keep and new_geom else None
        view = self.vb.viewRange() if keep_view and old is not None else None
        if new_geom:
            self.geom = geom
            self.painter.new_canvas(geom)
        names = None
        if self.flow:
            rl, cl = self.row_labels, self.col_labels
            names = [[cl[c] if R == 1 else f"{rl[r]} · {cl[c]}" for c in range(C)] for r in range(R)]
        self.marks.names = names
        self.marks.row_labels = self.row_labels
        self.marks.kv_group = self.kv_group if self.mode == "weights" else 1
        self.marks.place(geom)
        self._set_ticks()
        self.top_axis.set_groups([] if self.flow else kv_groups(geom, self.marks.kv_group))
        self._fill()
        if new_geom:
            # after setImage: an ImageItem's rect is a scale of its current image size
            H, W = self.canvas.shape
            self.image.setRect(QRectF(0, 0, W, H))
            if view is not None:  # the same place, in the new geometry's pixels
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

    def _set_ticks(self) -> None:
        self.painter.set_ticks(
            self.geom,
            self.row_labels,
            self.col_labels,
            (self.row_name, self.col_name),
            self.compact,
            self.flow,
        )

    def _fill(self) -> None:
        self.painter.paint(
            self.geom,
            self._overview,
            mode=self.mode,
            log=self.log,
            levels=self.levels,
            mask=self.mask if self.row_masks is None else self.row_masks,
            block=self.block,
        )

    def _set_colours(self) -> None:
        self.painter.set_colours(self.mode, self.cmap, self.gamma, log=self.log, names=self.names)

    def set_log(self, log: bool) -> None:
        """Colour log10(weight) from 10⁻⁴ to 1 (weights mode)."""
        if log != self.log:
            self.log = log
            self._set_colours()
            if self.values is not None and self.mode == "weights":
                self._fill()

    def set_gamma(self, gamma: float) -> None:
        """Colour scale of the weights: 1 linear, 0.5 square root (small weights visible)."""
        self.gamma = float(gamma)
        self._set_colours()

    def set_title(self, text: str) -> None:
        """The line over the heads (wrapped when the widget is narrow; "" for none)."""
        shown = bool(text and text.strip())
        self.title_label.setVisible(shown)
        self.title_label.setText(text if shown else " ")
        if not shown:
            self.view.ci.layout.setRowFixedHeight(0, 0)

    @property
    def title(self) -> str:
        return self.title_label.text if self.title_label.isVisible() else ""

    def clear(self, message: str = "no attention to show yet") -> None:
        """Show nothing but ``message`` (the title stays)."""
        self.values = self._overview = self.geom = None
        self.painter.clear()
        self.marks.place(None)
        self.placeholder.setText(message)
        self.placeholder.setPos(0.5, 0.5)
        self.fitter.size = None
        self.fit.scrolling = self.fit.zoomed = False
        self.top_axis.set_groups([])
        self.vb.setRange(QRectF(0, 0, 1, 1), padding=0.0)
        self.scroll.sync()
        self.readout.setText(" ")


__all__ = ["HeadMosaic", "readout_text"]
