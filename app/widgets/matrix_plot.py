"""One matrix with token axes and hover: :class:`MatrixPanel` (one plot inside any ``GraphicsLayout``)
and :class:`MatrixPlot` (a widget: one panel, its colour legend and a readout line).

Every single matrix of the app is drawn by these: one head's weights, a pipeline stage (Q, K, V,
scores), a lab's scores, mask and weights, a table of positional encodings, per-head metric maps.
Rows are queries (top = first token) and columns keys unless the axes are named otherwise; the labels
come from :class:`~app.widgets.token_axis.TokenAxis`, thinned to what fits at the current zoom.

Values drawn: ``setImage(m, levels=..., autoLevels=False)`` on one ImageItem created once, with the
256-entry :func:`~app.widgets.palette.matrix_lut`: 254 colours for ``[lo, hi]`` and a grey for
*hidden* cells (``−∞``, a masked score, NaN, or ``mask=False``), the same grey as every head grid's
masked cells, named by a grey square under the colour bar. Options:

- ``levels``: fixed ``(lo, hi)``; ``None`` = ``(−a, a)``, ``a = max |m|``, for a ``diverging`` map
  (blue < 0 < red), else the finite ``(min, max)``;
- ``log=True`` draws ``log10(max(m, LOG_FLOOR))`` so weights of 0.001 and 0.01 differ; the legend then
  reads in log10 units;
- ``numbers``: the values written in the cells (``None`` = when at most :data:`ANNOTATE_MAX` rows and
  columns), in black or white, whichever contrasts more with the cell (WCAG ratio ≥ 4.5 on every
  colour of every map).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.widgets.cell_numbers import CellNumbers
from app.widgets.legend import ColorLegend
from app.widgets.levels import LOG_FLOOR, finite_range, log_weights, lut_levels, symmetric_levels
from app.widgets.palette import (
    DEFAULT_CMAP,
    DIVERGING_CMAP,
    N_MAP_COLOURS,
    matrix_lut,
    text_colors,
)
from app.widgets.titles import wrapping_title
from app.widgets.token_axis import TokenAxis

#: ``numbers=None`` writes the values in the cells up to this many rows and columns.
ANNOTATE_MAX = 16


def format_cell(v: float, digits: int = 2) -> str:
    """How one cell is written: ``−∞``/``+∞`` for infinities, else ``digits`` decimals (``−`` sign)."""
    if np.isneginf(v):
        return "−∞"
    if np.isposinf(v):
        return "+∞"
    if np.isnan(v):
        return ""
    if abs(v) >= 10 and digits > 1:
        digits = 1  # keep the text about as wide as the cell
    text = f"{v:.{digits}f}"
    return "−" + text[1:] if text.startswith("-") else text


def describe_value(v: float) -> str:
    """A value for a readout: ``−∞ (masked)``, ``hidden`` (NaN) or 4 significant digits."""
    if np.isneginf(v):
        return "−∞ (masked)"
    if np.isnan(v):
        return "hidden"
    return f"{v:.4g}"


def matrix_axes(p: pg.PlotItem) -> pg.PlotItem:
    """Lay ``p`` out as a matrix is read: row 0 at the top, column labels along the top axis (ticks
    pointing out), no bottom axis, context menu or auto-range button (used by MatrixPanel and
    HeadMosaic)."""
    p.hideAxis("bottom")
    p.showAxis("top")
    for name in ("left", "top"):  # ticks point out, beside the labels: none is drawn on the data
        p.getAxis(name).setStyle(tickLength=4)
    p.invertY(True)
    p.setMenuEnabled(False)
    p.hideButtons()
    return p


class TopLeftFit:
    """Keeps an aspect-locked view's content (``W × H`` from the origin) at the top left.

    pyqtgraph centres locked content in a wider (or taller) view, which leaves the matrix far from
    its axis labels. This sets the range so the content starts at the axes, again after every resize,
    until the user zooms or pans (then "reset" brings it back).
    """

    def __init__(self, vb: pg.ViewBox):
        self.vb = vb
        self.size: tuple[float, float] | None = None
        self.margin = 0.0
        self.user_moved = False
        vb.sigResized.connect(self._on_resized)
        vb.sigRangeChangedManually.connect(self._on_manual)

    def _on_manual(self, *_):
        self.user_moved = True

    def _on_resized(self, *_):
        if not self.user_moved:
            self.apply()

    def fit(self, W: float, H: float, margin: float = 0.0) -> None:
        """Show ``[−margin, W + margin] × [−margin, H + margin]`` (the margin: room for frames)."""
        self.size = (float(W) + 2 * margin, float(H) + 2 * margin)
        self.margin = float(margin)
        self.user_moved = False
        self.apply()

    def apply(self) -> None:
        if self.size is None:
            return
        W, H = self.size
        m = self.margin
        vw, vh = self.vb.width(), self.vb.height()
        if vw <= 1 or vh <= 1 or W <= 0 or H <= 0:
            self.vb.setRange(QRectF(-m, -m, W, H), padding=0.0)
            return
        if vw / vh > W / H:  # the view is wider than the content: extra room on the right
            self.vb.setRange(xRange=(-m, H * vw / vh - m), yRange=(-m, H - m), padding=0.0)
        else:  # taller: extra room at the bottom
            self.vb.setRange(xRange=(-m, W - m), yRange=(-m, W * vh / vw - m), padding=0.0)


class MatrixPanel:
    """One labelled matrix placed in a ``pg.GraphicsLayout`` at ``(row, col)`` (its legend in
    ``col + 1`` when ``legend``). Not a widget: several share one scene (and one SVG export).

    ``diverging`` picks the diverging map and symmetric default levels; ``square`` keeps cells
    square (the matrix at the top left), else the matrix fills the plot; ``interactive`` lets the
    wheel zoom and a drag pan; ``numbers`` (``None`` = when small) writes the values in the cells,
    with ``digits`` decimals, in a ``number_pt`` font.
    """

    def __init__(
        self,
        layout: pg.GraphicsLayout,
        row: int,
        col: int,
        *,
        title: str = "",
        cmap: str | None = None,
        diverging: bool = False,
        square: bool = True,
        legend: bool = True,
        legend_label: str = "weight",
        interactive: bool = True,
        row_title: str = "query",
        col_title: str = "key",
        index_labels: bool = False,
        numbers: bool | None = False,
        digits: int = 2,
        number_pt: float = 7.0,
        rowspan: int = 1,
    ):
        self.left_axis = TokenAxis("left", index=index_labels)
        self.top_axis = TokenAxis("top", index=index_labels)
        self.plot: pg.PlotItem = layout.addPlot(
            row=row, col=col, rowspan=rowspan, axisItems={"left": self.left_axis, "top": self.top_axis}
        )
        p = matrix_axes(self.plot)
        wrapping_title(p)  # a long title wraps over the matrix: never wider than its plot
        self.row_title, self.col_title = row_title, col_title
        self.set_axis_titles(row_title, col_title)
        if title:
            p.setTitle(title, color="#222")
        self.vb: pg.ViewBox = p.getViewBox()
        self.vb.setDefaultPadding(0.0)
        self.fitter: TopLeftFit | None = None
        if square:
            self.vb.setAspectLocked(True)
            self.fitter = TopLeftFit(self.vb)
        self.vb.setMouseEnabled(interactive, interactive)
        self.diverging = diverging
        self.cmap_name = cmap or (DIVERGING_CMAP if diverging else DEFAULT_CMAP)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setLookupTable(matrix_lut(self.cmap_name))
        p.addItem(self.image)
        self.legend: ColorLegend | None = None
        self.legend_label = legend_label
        if legend:
            self.legend = ColorLegend(self.cmap_name, legend_label, width=10)
            layout.addItem(self.legend, row=row, col=col + 1, rowspan=rowspan)
        self.numbers, self.digits = numbers, digits
        self._font = QFont()
        self._font.setPointSizeF(number_pt)
        self.numbers_item = CellNumbers(self._font)
        self.matrix: np.ndarray | None = None  # the values as given (not log-transformed)
        self.hidden: np.ndarray | None = None  # bool [R, C]: drawn grey
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
        levels: tuple[float, float] | None = None,
        mask: np.ndarray | None = None,
        log: bool = False,
        numbers: bool | str | None = "default",
        cmap: str | None = None,
        legend_label: str | None = None,
        hidden_label: str = "masked",
    ) -> None:
        """Draw ``matrix`` [R, C]; ``mask`` [R, C] bool (False = hidden, grey) adds to the non-finite
        cells; ``levels``, ``log`` and ``numbers`` as in the module doc (``numbers`` defaults to the
        panel's). The legend's grey square names hidden cells ``hidden_label`` (none when no cell, or
        every cell, is hidden: an empty placeholder)."""
        m = np.asarray(matrix, dtype=np.float32)
        if m.ndim != 2:
            raise ValueError(f"a matrix plot needs a 2-D matrix, got shape {m.shape}")
        R, C = m.shape
        self.matrix = m
        self.row_labels = list(row_labels) if row_labels is not None else [str(i) for i in range(R)]
        self.col_labels = list(col_labels) if col_labels is not None else [str(i) for i in range(C)]
        if cmap is not None and cmap != self.cmap_name:
            self.cmap_name = cmap
            self.image.setLookupTable(matrix_lut(cmap))
            if self.legend is not None:
                self.legend.set_cmap(cmap)
        hidden = ~np.isfinite(m)
        if mask is not None:
            hidden |= ~np.asarray(mask, dtype=bool)
        self.hidden = hidden
        if log:
            shown = log_weights(m)
            levels = (float(np.log10(LOG_FLOOR)), 0.0)
        else:
            shown = m
            if levels is None:
                levels = symmetric_levels(m) if self.diverging else finite_range(np.where(hidden, np.nan, m))
        self.log = log
        lo, hi = self.levels = (float(levels[0]), float(levels[1]))
        if hi <= lo:
            hi = lo + 1.0
        lo, top, grey, _ = lut_levels(lo, hi)
        shown = np.clip(shown, np.float32(lo), np.float32(hi))  # also turns ±∞ into a level (NaN stays)
        if hidden.any():
            shown[hidden] = np.float32(grey)
        self.image.setImage(shown, levels=(lo, top), autoLevels=False)
        if self.legend is not None:
            self.legend.set_levels(*self.levels)
            self.legend.set_hidden(hidden_label if hidden.any() and not hidden.all() else None)
            if legend_label is not None:
                self.legend_label = legend_label
            self.legend.set_label(f"log₁₀ {self.legend_label}" if log else self.legend_label)
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
        if numbers == "default":
            numbers = self.numbers
        if numbers is None:
            numbers = R <= ANNOTATE_MAX and C <= ANNOTATE_MAX
        self._write_numbers(m, hidden, bool(numbers))

    def set_axis_titles(self, rows: str, cols: str) -> None:
        """Name the axes (default: rows "query", columns "key"); also used by the readout."""
        self.row_title, self.col_title = rows, cols
        self.plot.setLabel("left", rows or None)
        self.plot.setLabel("top", cols or None)
        if not rows:
            self.plot.getAxis("left").showLabel(False)
        if not cols:
            self.plot.getAxis("top").showLabel(False)

    def reset_view(self) -> None:
        if self._shape is not None:
            R, C = self._shape
            if self.fitter is not None:
                self.fitter.fit(C, R)
            else:
                self.vb.setRange(QRectF(0, 0, C, R), padding=0.0)

    def set_title(self, text: str, **style) -> None:
        """The plot's title (``style``: color, size), wrapped onto as many lines as the plot's width
        needs (``<br>`` breaks a line where you want it)."""
        style.setdefault("color", "#222")
        if self.fitter is not None:  # the matrix sits at the left: so does its title
            style.setdefault("justify", "left")
        self.plot.setTitle(text, **style)

    # ---- numbers in the cells ------------------------------------------------------------------
    def _write_numbers(self, m: np.ndarray, hidden: np.ndarray, on: bool) -> None:
        """Write ``m``'s values in its cells (``on``; else none), in grey where ``hidden``."""
        if self.numbers_item.scene() is None:
            self.plot.addItem(self.numbers_item, ignoreBounds=True)
        R, C = m.shape
        cells = []
        if on:
            lo, hi = self.levels
            # black or white by the cell's luminance (WCAG: contrast ≥ 4.5 on every colour of the map)
            ink = [QColor(*rgb) for rgb in text_colors(self.cmap_name)]
            grey = ink[N_MAP_COLOURS]  # the hidden entry
            for i in range(R):
                for j in range(C):
                    v = float(m[i, j])
                    if hidden[i, j]:
                        colour = grey
                    else:
                        x = float(np.log10(max(v, LOG_FLOOR))) if self.log else v
                        frac = 0.0 if hi <= lo else min(1.0, max(0.0, (x - lo) / (hi - lo)))
                        colour = ink[int(frac * (N_MAP_COLOURS - 1))]
                    cells.append((i, j, format_cell(v, self.digits), colour))
        self.numbers_item.set_cells(cells, (R, C))

    def cell_texts(self) -> list[list[str]]:
        """The texts written in the cells ([] when no numbers are shown)."""
        cells = self.numbers_item.cells
        if self.matrix is None or not cells:
            return []
        R, C = self.matrix.shape
        return [[cells[i * C + j][2] for j in range(C)] for i in range(R)]

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

    def describe(self, r: int, c: int) -> str:
        """The default readout of cell (r, c): both labels and the value."""
        v = self.value(r, c)
        masked = self.hidden is not None and self.hidden[r, c] and np.isfinite(v)
        what = "masked" if masked else describe_value(v)
        rows, cols = self.row_title or "row", self.col_title or "column"
        return f"{rows} {r} '{self.row_labels[r]}', {cols} {c} '{self.col_labels[c]}': {what}"


class MatrixPlot(QWidget):
    """A matrix widget: one :class:`MatrixPanel` (options as there), a readout line under it.

    ``hovered(row, col)`` (``-1, -1`` when the pointer leaves the matrix) and ``clicked(row, col)``.
    ``describe(row, col) -> str`` writes the readout (default: the two labels and the value). When
    the numbers are written in the cells, the colour legend is hidden: it would only take room.
    """

    hovered = Signal(int, int)
    clicked = Signal(int, int)

    def __init__(self, parent: QWidget | None = None, *, title: str = "", **options):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.panel = MatrixPanel(self.view.ci, 0, 0, title=title, **options)
        layout.addWidget(self.view, 1)
        self.readout = QLabel(" ")
        self.readout.setTextFormat(Qt.TextFormat.PlainText)  # token texts such as <|im_start|>
        self.readout.setObjectName("matrixReadout")
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.readout)
        self.describe: Callable[[int, int], str] = self.panel.describe
        self.last_hover: tuple[int, int] = (-1, -1)
        self.view.scene().sigMouseMoved.connect(self._on_move)
        self.view.scene().sigMouseClicked.connect(self._on_click)

    @property
    def matrix(self) -> np.ndarray | None:
        return self.panel.matrix

    @property
    def row_labels(self) -> list[str]:
        return self.panel.row_labels

    def set_matrix(self, matrix, row_labels=None, col_labels=None, **kwargs) -> None:
        """Draw ``matrix`` [R, C] (keywords of :meth:`MatrixPanel.set_matrix`)."""
        self.panel.set_matrix(matrix, row_labels, col_labels, **kwargs)
        legend = self.panel.legend
        if legend is not None and legend.isVisible() == bool(self.panel.cell_texts()):
            # out of the layout while hidden, or its column would still take the room
            if legend.isVisible():
                self.view.ci.removeItem(legend)
                legend.setVisible(False)
            else:
                self.view.ci.addItem(legend, row=0, col=1)
                legend.setVisible(True)
        self.refresh_readout()

    def set_title(self, text: str) -> None:
        self.panel.set_title(text)

    def set_axis_titles(self, rows: str, cols: str) -> None:
        self.panel.set_axis_titles(rows, cols)

    def cell_texts(self) -> list[list[str]]:
        return self.panel.cell_texts()

    def reset_view(self) -> None:
        self.panel.reset_view()

    def refresh_readout(self) -> None:
        """Rewrite the readout of the cell under a still pointer (after new data)."""
        r, c = self.last_hover
        m = self.panel.matrix
        if r >= 0 and m is not None and r < m.shape[0] and c < m.shape[1]:
            self.readout.setText(self.describe(r, c))

    def hover_at(self, row: int, col: int) -> None:
        """Report cell (row, col) as hovered: what a pointer over it does."""
        self.last_hover = (row, col)
        self.readout.setText(" " if row < 0 else self.describe(row, col))
        self.hovered.emit(row, col)

    def _on_move(self, pos: QPointF) -> None:
        cell = self.panel.cell_at(pos)
        cell = cell if cell is not None else (-1, -1)
        if cell != self.last_hover:
            self.hover_at(*cell)

    def _on_click(self, ev) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        cell = self.panel.cell_at(ev.scenePos())
        if cell is not None:
            self.clicked.emit(*cell)

    def widget_pos_of(self, row: int, col: int):
        """Widget coordinates (QPoint, relative to ``self.view``) of the centre of cell (row, col)."""
        return self.view.mapFromScene(self.panel.scene_pos_of(row, col))


__all__ = [
    "ANNOTATE_MAX",
    "MatrixPanel",
    "MatrixPlot",
    "TopLeftFit",
    "describe_value",
    "format_cell",
]
