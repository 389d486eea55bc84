"""Heatmaps with token axes for the Attention tab: :class:`HeatPlot` (one plot inside any
``GraphicsLayout``) and :class:`TokenHeatmap` (a widget: one HeatPlot, its colour bar and a readout).

Rows are queries (top = first token) and columns keys, labelled with the tokens by
:class:`~app.widgets.attention_axis.TokenAxis`, which thins the labels to what fits at the current
zoom. The mouse wheel zooms and dragging pans (within the matrix), so a 1024×1024 head is readable.

Values drawn: ``setImage(m, levels=..., autoLevels=False)`` on one ImageItem created once, with a
256-entry lookup table: 254 colours for ``[lo, hi]`` and a grey for *hidden* cells (``-inf``, a masked
score, and NaN). ``log=True`` draws ``log10(max(m, floor))`` so weights of 0.001 and 0.01 get
different colours; the colour bar then reads in log10 units.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Signal
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.widgets.attention_axis import TokenAxis
from app.widgets.attention_legend import ColorLegend
from app.widgets.palette import DEFAULT_CMAP, colormap

#: The colour behind hidden (masked / NaN) cells.
HIDDEN_COLOR = "#d4d4d4"
#: Diverging map for signed values (scores, queries, keys): blue < 0 < red.
DIVERGING_CMAP = "CET-D1A"
#: The smallest weight the log colour scale tells apart (everything below looks like it).
LOG_FLOOR = 1e-4


_N_COLOURS = 253.99  # [lo, hi] spans LUT entries 0..253


@functools.lru_cache(maxsize=16)
def hidden_lut(cmap: str) -> np.ndarray:
    """uint8 [256, 3]: 254 colours of ``cmap``, the hidden grey, and white."""
    from PySide6.QtGui import QColor

    lut = colormap(cmap).getLookupTable(0.0, 1.0, 254, alpha=False)
    grey = QColor(HIDDEN_COLOR)
    extra = [[grey.red(), grey.green(), grey.blue()], [255, 255, 255]]
    return np.ascontiguousarray(np.vstack([lut, extra]), dtype=np.uint8)


def log_weights(m: np.ndarray, floor: float = LOG_FLOOR) -> np.ndarray:
    """``log10(max(m, floor))`` as float32 (NaN stays NaN): what the log colour scale draws."""
    with np.errstate(invalid="ignore"):
        return np.log10(np.maximum(m, np.float32(floor))).astype(np.float32, copy=False)


def symmetric_levels(m: np.ndarray) -> tuple[float, float]:
    """(−a, a) with ``a`` the largest finite |value| (1 when there is none): centres a diverging map on 0."""
    finite = m[np.isfinite(m)]
    a = float(np.abs(finite).max()) if finite.size else 1.0
    a = a if a > 0 else 1.0
    return (-a, a)


class TopLeftFit:
    """Keeps an aspect-locked view's content (``W × H`` from the origin) at the top left.

    pyqtgraph centres locked content in a wider (or taller) view, which leaves the matrix far from
    its axis labels. This sets the range so the content starts at the axes, again after every resize,
    until the user zooms or pans (then "reset" brings it back).
    """

    def __init__(self, vb: pg.ViewBox):
        self.vb = vb
        self.size: tuple[float, float] | None = None
        self.user_moved = False
        vb.sigResized.connect(self._on_resized)
        vb.sigRangeChangedManually.connect(self._on_manual)

    def _on_manual(self, *_):
        self.user_moved = True

    def _on_resized(self, *_):
        if not self.user_moved:
            self.apply()

    def fit(self, W: float, H: float) -> None:
        self.size = (float(W), float(H))
        self.user_moved = False
        self.apply()

    def apply(self) -> None:
        if self.size is None:
            return
        W, H = self.size
        vw, vh = self.vb.width(), self.vb.height()
        if vw <= 1 or vh <= 1 or W <= 0 or H <= 0:
            self.vb.setRange(QRectF(0, 0, W, H), padding=0.0)
            return
        if vw / vh > W / H:  # the view is wider than the content: extra room on the right
            self.vb.setRange(xRange=(0, H * vw / vh), yRange=(0, H), padding=0.0)
        else:  # taller: extra room at the bottom
            self.vb.setRange(xRange=(0, W), yRange=(0, W * vh / vw), padding=0.0)


class HeatPlot:
    """One labelled heatmap placed in a ``pg.GraphicsLayout`` at ``(row, col)`` (a colour bar in
    ``col + 1`` when ``colorbar``). Not a widget: several share one scene (and one SVG export)."""

    def __init__(
        self,
        layout: pg.GraphicsLayout,
        row: int,
        col: int,
        *,
        title: str = "",
        cmap: str = DEFAULT_CMAP,
        square: bool = True,
        colorbar: bool = True,
        colorbar_label: str = "weight",
        interactive: bool = True,
        row_title: str = "query",
        col_title: str = "key",
        index_labels: bool = False,
        rowspan: int = 1,
    ):
        self.left_axis = TokenAxis("left", index=index_labels)
        self.top_axis = TokenAxis("top", index=index_labels)
        self.plot: pg.PlotItem = layout.addPlot(
            row=row, col=col, rowspan=rowspan, axisItems={"left": self.left_axis, "top": self.top_axis}
        )
        p = self.plot
        p.hideAxis("bottom")
        p.showAxis("top")
        p.invertY(True)
        p.setMenuEnabled(False)
        p.hideButtons()
        if row_title:
            p.setLabel("left", row_title)
        if col_title:
            p.setLabel("top", col_title)
        if title:
            p.setTitle(title, color="#222")
        self.vb: pg.ViewBox = p.getViewBox()
        self.vb.setDefaultPadding(0.0)
        self.fitter: TopLeftFit | None = None
        if square:
            self.vb.setAspectLocked(True)
            self.fitter = TopLeftFit(self.vb)
        self.vb.setMouseEnabled(interactive, interactive)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.cmap_name = cmap
        self.image.setLookupTable(hidden_lut(cmap))
        p.addItem(self.image)
        self.colorbar: ColorLegend | None = None
        self.colorbar_label = colorbar_label
        if colorbar:
            self.colorbar = ColorLegend(cmap, colorbar_label, width=10)
            layout.addItem(self.colorbar, row=row, col=col + 1, rowspan=rowspan)
        self.matrix: np.ndarray | None = None  # the values as given (not log-transformed)
        self.row_labels: list[str] = []
        self.col_labels: list[str] = []
        self.levels = (0.0, 1.0)
        self.log = False
        self._shape: tuple[int, int] | None = None

    # ---- data ----------------------------------------------------------------------------------
    def set_matrix(
        self,
        matrix: np.ndarray,
        row_labels: list[str] | None = None,
        col_labels: list[str] | None = None,
        *,
        levels: tuple[float, float] | None = (0.0, 1.0),
        log: bool = False,
        cmap: str | None = None,
        colorbar_label: str | None = None,
    ) -> None:
        """Draw ``matrix`` [R, C]; ``levels=None`` centres a diverging scale on 0 (signed values)."""
        m = np.asarray(matrix, dtype=np.float32)
        if m.ndim != 2:
            raise ValueError(f"a heatmap needs a 2-D matrix, got shape {m.shape}")
        R, C = m.shape
        self.matrix = m
        self.row_labels = list(row_labels) if row_labels is not None else [str(i) for i in range(R)]
        self.col_labels = list(col_labels) if col_labels is not None else [str(i) for i in range(C)]
        if cmap is not None and cmap != self.cmap_name:
            self.cmap_name = cmap
            self.image.setLookupTable(hidden_lut(cmap))
            if self.colorbar is not None:
                self.colorbar.set_cmap(cmap)
        hidden = ~np.isfinite(m)
        if log:
            shown = log_weights(m)
            levels = (float(np.log10(LOG_FLOOR)), 0.0)
        else:
            shown = m
            if levels is None:
                levels = symmetric_levels(m)
        self.log = log
        lo, hi = self.levels = (float(levels[0]), float(levels[1]))
        if hi <= lo:
            hi = lo + 1.0
        # LUT entries 0..253 span [lo, hi]; 254 is the hidden grey. No NaN reaches pyqtgraph: NaN makes
        # it paint with alpha blending, several times slower.
        top = lo + (hi - lo) * 256.0 / _N_COLOURS
        shown = np.clip(shown, np.float32(lo), np.float32(hi))
        if hidden.any():
            shown[hidden] = np.float32(lo + 254.5 * (top - lo) / 256.0)
        self.image.setImage(shown, levels=(lo, top), autoLevels=False)
        if self.colorbar is not None:
            self.colorbar.set_levels(*self.levels)
            if colorbar_label is not None:
                self.colorbar_label = colorbar_label
            self.colorbar.set_label(f"log₁₀ {self.colorbar_label}" if log else self.colorbar_label)
        if self._shape != (R, C):
            self._shape = (R, C)
            self.image.setRect(QRectF(0, 0, C, R))
            if self.vb.state["aspectLocked"]:
                # room to show a square matrix in a wide or tall plot without cropping it
                self.vb.setLimits(xMin=-2 * C, xMax=3 * C, yMin=-2 * R, yMax=3 * R)
            else:
                self.vb.setLimits(xMin=0, xMax=C, yMin=0, yMax=R)
            self.reset_view()
        self.left_axis.set_labels(self.row_labels)
        self.top_axis.set_labels(self.col_labels)

    def reset_view(self) -> None:
        if self._shape is not None:
            R, C = self._shape
            if self.fitter is not None:
                self.fitter.fit(C, R)
            else:
                self.vb.setRange(QRectF(0, 0, C, R), padding=0.0)

    def set_title(self, text: str, *, lines: int = 1, **style) -> None:
        """The plot's title; ``lines`` > 1 makes room for that many lines (``style``: color, size)."""
        style.setdefault("color", "#222")
        if self.fitter is not None:  # the matrix sits at the left: so does its title
            style.setdefault("justify", "left")
        self.plot.setTitle(text, **style)
        if lines > 1:
            h = 15 * lines + 6
            self.plot.titleLabel.setMaximumHeight(h)
            self.plot.layout.setRowFixedHeight(0, h)

    # ---- geometry ------------------------------------------------------------------------------
    def cell_at(self, scene_pos: QPointF) -> tuple[int, int] | None:
        """(row, col) under a scene position, or None outside the matrix."""
        if self.matrix is None or not self.vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.vb.mapSceneToView(scene_pos)
        r, c = int(np.floor(p.y())), int(np.floor(p.x()))
        R, C = self.matrix.shape
        return (r, c) if 0 <= r < R and 0 <= c < C else None

    def scene_pos_of(self, row: int, col: int) -> QPointF:
        """The scene position of the centre of cell (row, col) (tests, tool tips)."""
        return self.vb.mapViewToScene(QPointF(col + 0.5, row + 0.5))

    def value(self, row: int, col: int) -> float:
        return float(self.matrix[row, col]) if self.matrix is not None else float("nan")


def describe_value(v: float) -> str:
    if np.isneginf(v):
        return "−∞ (masked)"
    if np.isnan(v):
        return "hidden"
    return f"{v:.4g}"


class TokenHeatmap(QWidget):
    """A zoomable heatmap with token axes, a colour bar and a readout line under it.

    ``hovered(row, col)`` (``-1, -1`` when the pointer leaves the matrix) and ``clicked(row, col)``.
    ``describe(row, col) -> str`` writes the readout (default: the two labels and the value).
    """

    hovered = Signal(int, int)
    clicked = Signal(int, int)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        title: str = "",
        cmap: str = DEFAULT_CMAP,
        square: bool = True,
        colorbar_label: str = "weight",
        row_title: str = "query",
        col_title: str = "key",
    ):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.heat = HeatPlot(
            self.view.ci,
            0,
            0,
            title=title,
            cmap=cmap,
            square=square,
            colorbar_label=colorbar_label,
            row_title=row_title,
            col_title=col_title,
        )
        layout.addWidget(self.view, 1)
        self.readout = QLabel(" ")
        self.readout.setObjectName("heatmapReadout")
        self.readout.setTextInteractionFlags(self.readout.textInteractionFlags())
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.readout)
        self.describe: Callable[[int, int], str] = self._default_describe
        self._last: tuple[int, int] = (-1, -1)
        self.view.scene().sigMouseMoved.connect(self._on_move)
        self.view.scene().sigMouseClicked.connect(self._on_click)

    @property
    def matrix(self) -> np.ndarray | None:
        return self.heat.matrix

    def set_matrix(self, matrix, row_labels=None, col_labels=None, **kwargs) -> None:
        self.heat.set_matrix(matrix, row_labels, col_labels, **kwargs)
        if self._last != (-1, -1):
            r, c = self._last
            if (
                self.heat.matrix is not None
                and r < self.heat.matrix.shape[0]
                and c < self.heat.matrix.shape[1]
            ):
                self.readout.setText(self.describe(r, c))

    def set_title(self, text: str) -> None:
        self.heat.set_title(text)

    def reset_view(self) -> None:
        self.heat.reset_view()

    def _default_describe(self, r: int, c: int) -> str:
        h = self.heat
        return f"row {r} '{h.row_labels[r]}', column {c} '{h.col_labels[c]}': {describe_value(h.value(r, c))}"

    def hover_at(self, row: int, col: int) -> None:
        """Report cell (row, col) as hovered: what a pointer over it does."""
        self._last = (row, col)
        if row < 0:
            self.readout.setText(" ")
        else:
            self.readout.setText(self.describe(row, col))
        self.hovered.emit(row, col)

    def _on_move(self, pos: QPointF) -> None:
        cell = self.heat.cell_at(pos)
        cell = cell if cell is not None else (-1, -1)
        if cell != self._last:
            self.hover_at(*cell)

    def _on_click(self, ev) -> None:
        if ev.button() != pg.QtCore.Qt.MouseButton.LeftButton:
            return
        cell = self.heat.cell_at(ev.scenePos())
        if cell is not None:
            self.clicked.emit(*cell)

    def widget_pos_of(self, row: int, col: int):
        """Widget coordinates (QPoint, relative to ``self.view``) of the centre of cell (row, col)."""
        return self.view.mapFromScene(self.heat.scene_pos_of(row, col))


__all__ = [
    "TopLeftFit",
    "DIVERGING_CMAP",
    "HIDDEN_COLOR",
    "LOG_FLOOR",
    "HeatPlot",
    "TokenHeatmap",
    "describe_value",
    "hidden_lut",
    "log_weights",
    "symmetric_levels",
]
