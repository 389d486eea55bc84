"""AttentionMosaic: every head of a model as one image, an R×C mosaic of [T, T] cells.

Why one image and not R·C plot items: a new prompt then costs one array copy and one ``setImage``
(no per-item layout or repaint bookkeeping), hit-testing is arithmetic, and zoom/pan over the whole
grid comes for free, which is what a 12×12 model on a long prompt needs. Cell ``(r, c)`` (layer,
head) occupies pixels ``[r·(S+g), r·(S+g)+S) × [c·(S+g), c·(S+g)+S)`` of the canvas, ``S`` the drawn
size of a head and ``g`` a gap. Inside a cell rows are queries (top = first token) and columns keys.

Long prompts: a head of ``T`` tokens is drawn at ``S = ceil(T / b)`` pixels, where the block ``b`` is
the smallest integer keeping the canvas under :data:`MAX_CANVAS_PIXELS` (and a head under
:data:`MAX_CELL` pixels). Each pixel then shows the *largest* weight of its ``b × b`` block
(:func:`pool_max`), so thin patterns (a previous-token diagonal) stay visible in the overview.
Hover readouts always use the full-resolution weights; open a head for every token.

Colours: 254 entries of the colour map for weights in [0, 1] (or log10 weights in [−4, 0]), a 256th,
white, for the gaps between cells; cells a query may not see (the causal mask) get a 255th, grey.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QPen
from PySide6.QtWidgets import QGraphicsRectItem, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.widgets.attention_heatmap import LOG_FLOOR, TopLeftFit, hidden_lut
from app.widgets.attention_legend import ColorLegend
from app.widgets.palette import DEFAULT_CMAP
from model.inspection import pool_max, pool_visible

#: Largest canvas drawn (pixels); beyond it heads are max-pooled.
MAX_CANVAS_PIXELS = 4_500_000
#: Largest drawn size of one head (pixels per side).
MAX_CELL = 256

_SELECT_PEN = QPen(QColor(255, 140, 0), 3)
_SELECT_PEN.setCosmetic(True)
_MARK_PEN = QPen(QColor(220, 20, 20), 2, Qt.PenStyle.DashLine)
_MARK_PEN.setCosmetic(True)


def block_size(T: int, n_cells: int, *, max_pixels: int = MAX_CANVAS_PIXELS, max_cell: int = MAX_CELL) -> int:
    """The pooling block ``b`` (1 = every token drawn) for ``n_cells`` heads of ``T`` tokens."""
    if T <= 0:
        return 1
    side = min(max_cell, max(16, int(math.sqrt(max_pixels / max(1, n_cells)))))
    return max(1, math.ceil(T / side))


_N_COLOURS = 253.99  # [lo, hi] spans LUT entries 0..253; 254 = masked grey; 255 = gap white


class AttentionMosaic(QWidget):
    """An R×C grid of attention patterns in one image, with labels, roles, selection and marks.

    ``set_data(weights [R, C, T, T], tokens)`` draws; ``headClicked(r, c)`` on a click;
    ``cellHovered(r, c, query, key)`` under the pointer (``-1`` everywhere when it leaves).
    """

    headClicked = Signal(int, int)
    cellHovered = Signal(int, int, int, int)
    #: right click on a cell: (r, c, global screen position) for a context menu
    headMenuRequested = Signal(int, int, object)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        cmap: str = DEFAULT_CMAP,
        row_name: str = "layer",
        col_name: str = "head",
    ):
        super().__init__(parent)
        self.row_name, self.col_name = row_name, col_name
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.plot: pg.PlotItem = self.view.addPlot(row=0, col=0)
        p = self.plot
        p.hideAxis("bottom")
        p.showAxis("top")
        p.invertY(True)
        p.setMenuEnabled(False)
        p.hideButtons()
        for name in ("left", "top"):
            ax = p.getAxis(name)
            ax.setStyle(tickLength=0)
            ax.setPen(pg.mkPen(None))
            ax.setTextPen(pg.mkPen("#333"))
        self.vb: pg.ViewBox = p.getViewBox()
        self.vb.setAspectLocked(True)
        self.vb.setDefaultPadding(0.0)
        self.fitter = TopLeftFit(self.vb)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.cmap = cmap
        self.image.setLookupTable(hidden_lut(cmap))
        p.addItem(self.image)
        self.colorbar = ColorLegend(cmap, "weight", width=10)
        self.view.addItem(self.colorbar, row=0, col=1)
        layout.addWidget(self.view, 1)
        self.readout = QLabel(" ")
        self.readout.setObjectName("mosaicReadout")
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.readout)

        self.weights: np.ndarray | None = None  # full resolution [R, C, T, T]
        self.tokens: list[str] = []
        self.mask: np.ndarray | None = None
        self.block = 1
        self.log = False
        self._geom: tuple[int, int, int, int] | None = None  # R, C, S, gap
        self._canvas: np.ndarray | None = None
        self._hidden: np.ndarray | None = None
        self._hidden_key = None
        self._roles: list[list[str]] = []
        self._role_tips: list[list[str]] = []
        self._role_items: list[pg.TextItem] = []
        self._selected: tuple[int, int] | None = None
        self._select_item: QGraphicsRectItem | None = None
        self._marked: set[tuple[int, int]] = set()
        self._mark_items: list[QGraphicsRectItem] = []
        self._labels_key = None
        self.row_labels: list[str] = []
        self.col_labels: list[str] = []
        self.cell_name: Callable[[int, int], str] = lambda r, c: f"{self.row_name} {r}, {self.col_name} {c}"
        self._last_hover = (-1, -1, -1, -1)
        self.view.scene().sigMouseMoved.connect(self._on_move)
        self.view.scene().sigMouseClicked.connect(self._on_click)

    # ---- geometry ------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (0, 0) if self._geom is None else self._geom[:2]

    def _origin(self, r: int, c: int) -> tuple[float, float]:
        R, C, S, g = self._geom
        return c * (S + g), r * (S + g)

    def cell_rect(self, r: int, c: int) -> QRectF:
        x, y = self._origin(r, c)
        S = self._geom[2]
        return QRectF(x, y, S, S)

    def locate(self, x: float, y: float) -> tuple[int, int, int, int] | None:
        """(r, c, query, key) at view coordinates (x, y), or None in a gap or outside."""
        if self._geom is None or self.weights is None:
            return None
        R, C, S, g = self._geom
        r, c = int(y // (S + g)), int(x // (S + g))
        if not (0 <= r < R and 0 <= c < C):
            return None
        yin, xin = y - r * (S + g), x - c * (S + g)
        if not (0 <= yin < S and 0 <= xin < S):
            return None
        T = self.weights.shape[-1]
        q = min(T - 1, int(yin * self.block))
        k = min(T - 1, int(xin * self.block))
        return r, c, q, k

    def scene_pos_of(self, r: int, c: int, q: int = -1, k: int = -1) -> QPointF:
        """Scene position of token pair (q, k) in cell (r, c) (the cell's centre by default)."""
        x, y = self._origin(r, c)
        S = self._geom[2]
        if q < 0:
            return self.vb.mapViewToScene(QPointF(x + S / 2, y + S / 2))
        b = self.block
        return self.vb.mapViewToScene(QPointF(x + (k + 0.5) / b, y + (q + 0.5) / b))

    def widget_pos_of(self, r: int, c: int, q: int = -1, k: int = -1):
        """Position in ``self.view`` (widget coordinates) of :meth:`scene_pos_of`."""
        return self.view.mapFromScene(self.scene_pos_of(r, c, q, k))

    # ---- data ----------------------------------------------------------------------------------
    def set_data(
        self,
        weights: np.ndarray,
        tokens: list[str] | None = None,
        *,
        mask: np.ndarray | None = None,
        overview: np.ndarray | None = None,
        block: int | None = None,
        row_labels: list[str] | None = None,
        col_labels: list[str] | None = None,
    ) -> None:
        """Draw ``weights`` [R, C, T, T] (any float dtype, kept by reference for readouts).

        ``overview`` (already :func:`pool_max`-ed by ``block``) saves the pooling when a worker did
        it; ``mask`` [T, T] bool (True = may attend) greys out what a query cannot see.
        """
        w = np.asarray(weights)
        if w.ndim != 4 or w.shape[-1] != w.shape[-2]:
            raise ValueError(f"weights must be [R, C, T, T], got shape {w.shape}")
        R, C, T, _ = w.shape
        b = block if block is not None else block_size(T, R * C)
        ov = overview if overview is not None else pool_max(w, b)
        S = ov.shape[-1]
        g = max(1, S // 12)
        self.weights, self.block, self.mask = w, b, mask
        self.tokens = list(tokens) if tokens is not None else [str(i) for i in range(T)]
        self.row_labels = row_labels or [f"{self.row_name} {r}" for r in range(R)]
        self.col_labels = col_labels or [f"{self.col_name} {c}" for c in range(C)]
        geom = (R, C, S, g)
        new_geom = geom != self._geom
        if new_geom:
            self._geom = geom
            self._canvas = np.empty((R * (S + g), C * (S + g)), dtype=np.float32)
            self._hidden_key = None
            self._place_overlays()
        self._set_ticks()
        self._fill(ov)
        if new_geom:
            # after setImage: an ImageItem's rect is a scale of its current image size
            H, W = self._canvas.shape
            self.image.setRect(QRectF(0, 0, W, H))
            self.reset_view()
        self._refresh_readout()

    def _set_ticks(self) -> None:
        R, C, S, g = self._geom
        left = self.plot.getAxis("left")
        left.setTicks([[(r * (S + g) + S / 2, self.row_labels[r]) for r in range(R)]])
        left.setWidth(int(7 * max(len(s) for s in self.row_labels) + 12))
        self.plot.getAxis("top").setTicks([[(c * (S + g) + S / 2, self.col_labels[c]) for c in range(C)]])

    def _fill(self, ov: np.ndarray) -> None:
        R, C, S, g = self._geom
        canvas = self._canvas
        lo, hi = (float(np.log10(LOG_FLOOR)), 0.0) if self.log else (0.0, 1.0)
        # LUT entries 0..253: the colour map over [lo, hi]; 254: masked grey; 255: gap white. No NaN on
        # purpose: NaN makes pyqtgraph render RGBA with alpha blending, several times slower to paint.
        top = lo + (hi - lo) * 256.0 / _N_COLOURS
        unit = (top - lo) / 256.0
        canvas.fill(np.float32(lo + 1000.0 * unit))
        c4 = canvas.reshape(R, S + g, C, S + g)
        cells = c4[:, :S, :, :S]
        cells[...] = ov.transpose(0, 2, 1, 3)
        if self.log:
            np.log10(np.maximum(cells, np.float32(LOG_FLOOR)), out=cells)
        hidden = self._hidden_canvas()
        if hidden is not None:
            np.copyto(canvas, np.float32(lo + 254.5 * unit), where=hidden)
        self.image.setImage(canvas, levels=(lo, top), autoLevels=False)
        self.colorbar.set_levels(lo, hi)

    def _hidden_canvas(self) -> np.ndarray | None:
        """bool canvas of the masked pixels (cached per mask and geometry), or None when none is masked."""
        if self.mask is None:
            return None
        vis = pool_visible(self.mask, self.block)
        if vis.all():
            return None
        key = (self._geom, self.block, vis.tobytes())
        if key != self._hidden_key:
            R, C, S, g = self._geom
            hidden = np.zeros(self._canvas.shape, dtype=bool)
            h4 = hidden.reshape(R, S + g, C, S + g)
            h4[:, :S, :, :S] = (~vis)[None, :, None, :]
            self._hidden, self._hidden_key = hidden, key
        return self._hidden

    def set_log(self, log: bool) -> None:
        if log == self.log:
            return
        self.log = log
        self.colorbar.set_label("log₁₀ weight" if log else "weight")
        if self.weights is not None:
            self.set_data(
                self.weights,
                self.tokens,
                mask=self.mask,
                block=self.block,
                row_labels=self.row_labels,
                col_labels=self.col_labels,
            )

    def clear(self) -> None:
        self.weights = None
        self.image.clear()
        self.readout.setText(" ")

    # ---- roles, selection, marks ---------------------------------------------------------------
    def set_roles(self, short: list[list[str]], tips: list[list[str]] | None = None) -> None:
        """A short name written in the corner of each cell ("" for none); ``tips`` for the readout."""
        self._roles = short
        self._role_tips = tips or short
        self._place_labels()

    def set_selected(self, cell: tuple[int, int] | None) -> None:
        self._selected = cell
        self._place_selection()

    def set_marked(self, cells) -> None:
        """Cells drawn with a red dashed frame and "OFF" (e.g. switched-off heads)."""
        cells = set(cells)
        if cells != self._marked:
            self._marked = cells
            self._place_labels()

    def _place_overlays(self) -> None:
        self._place_labels()
        self._place_selection()

    def _place_labels(self) -> None:
        """Role names and OFF marks; items are rebuilt only when what they show changed."""
        key = (self._geom, tuple(tuple(r) for r in self._roles), tuple(sorted(self._marked)))
        if key == self._labels_key:
            return
        self._labels_key = key
        for item in self._role_items + self._mark_items:
            self.vb.removeItem(item)
        self._role_items, self._mark_items = [], []
        if self._geom is None:
            return
        R, C, S, g = self._geom
        font = QFont()
        font.setPointSizeF(7.5)
        names = {
            (r, c): name for r, row in enumerate(self._roles[:R]) for c, name in enumerate(row[:C]) if name
        }
        for r, c in self._marked:
            if r < R and c < C:
                names[(r, c)] = "OFF " + names.get((r, c), "")
                rect = QGraphicsRectItem(self.cell_rect(r, c))
                rect.setPen(_MARK_PEN)
                self.vb.addItem(rect)
                self._mark_items.append(rect)
        for (r, c), name in names.items():
            off = name.startswith("OFF")
            item = pg.TextItem(
                name.strip(),
                color=(200, 0, 0) if off else (20, 20, 20),
                fill=pg.mkBrush(255, 255, 255, 200),
                anchor=(0, 0),
            )
            item.setFont(font)
            item.setPos(*self._origin(r, c))
            self.vb.addItem(item)
            self._role_items.append(item)

    def _place_selection(self) -> None:
        cell = self._selected
        if self._geom is None or cell is None or cell[0] >= self._geom[0] or cell[1] >= self._geom[1]:
            if self._select_item is not None:
                self._select_item.setVisible(False)
            return
        rect = self.cell_rect(*cell).adjusted(-0.5, -0.5, 0.5, 0.5)
        if self._select_item is None:
            self._select_item = QGraphicsRectItem(rect)
            self._select_item.setPen(_SELECT_PEN)
            self.vb.addItem(self._select_item)
        else:
            self._select_item.setRect(rect)
        self._select_item.setVisible(True)

    def reset_view(self) -> None:
        if self._canvas is not None:
            H, W = self._canvas.shape
            g = self._geom[3]
            self.fitter.fit(W - g, H - g)

    # ---- pointer -------------------------------------------------------------------------------
    def describe(self, r: int, c: int, q: int, k: int) -> str:
        """The readout sentence for token pair (q, k) of cell (r, c), from full-resolution weights."""

        def tok(i: int) -> str:
            return self.tokens[i] if 0 <= i < len(self.tokens) else str(i)

        role = ""
        if r < len(self._role_tips) and c < len(self._role_tips[r]) and self._role_tips[r][c]:
            role = f" [{self._role_tips[r][c]}]"
        head = f"{self.cell_name(r, c)}{role}"
        if self.mask is not None and not self.mask[q, k]:
            return f"{head}: query {q} '{tok(q)}' cannot see key {k} '{tok(k)}' (masked)"
        w = float(self.weights[r, c, q, k])
        text = f"{head}: query {q} '{tok(q)}' → key {k} '{tok(k)}': weight {w:.3f}"
        if self.block > 1:
            text += f"  (overview: {self.block}×{self.block} tokens per pixel; click to open the head)"
        return text

    def hover_at(self, r: int, c: int, q: int, k: int) -> None:
        self._last_hover = (r, c, q, k)
        self.readout.setText(" " if r < 0 else self.describe(r, c, q, k))
        self.cellHovered.emit(r, c, q, k)

    def _refresh_readout(self) -> None:
        r, c, q, k = self._last_hover
        if r >= 0 and self.weights is not None:
            R, C, T, _ = self.weights.shape
            if r < R and c < C and q < T and k < T:
                self.readout.setText(self.describe(r, c, q, k))
                return
        self.readout.setText(" ")

    def _on_move(self, pos: QPointF) -> None:
        if self._geom is None or not self.vb.sceneBoundingRect().contains(pos):
            hit = None
        else:
            p = self.vb.mapSceneToView(pos)
            hit = self.locate(p.x(), p.y())
        hit = hit if hit is not None else (-1, -1, -1, -1)
        if hit != self._last_hover:
            self.hover_at(*hit)

    def _on_click(self, ev) -> None:
        if self._geom is None or ev.button() not in (Qt.MouseButton.LeftButton, Qt.MouseButton.RightButton):
            return
        pos = ev.scenePos()
        if not self.vb.sceneBoundingRect().contains(pos):
            return
        p = self.vb.mapSceneToView(pos)
        hit = self.locate(p.x(), p.y())
        if hit is None:
            return
        if ev.button() == Qt.MouseButton.LeftButton:
            self.headClicked.emit(hit[0], hit[1])
        else:
            ev.accept()
            self.headMenuRequested.emit(hit[0], hit[1], ev.screenPos().toPoint())


__all__ = ["MAX_CANVAS_PIXELS", "MAX_CELL", "AttentionMosaic", "block_size", "pool_max", "pool_visible"]
