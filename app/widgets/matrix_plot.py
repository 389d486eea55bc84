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
- ``scale`` (:data:`~app.widgets.levels.SCALES`): ``"linear"`` the values; ``"row"`` each row over its
  largest value, so a long causal map, whose weights fall like ``1/i`` down the rows, shows where every
  row looks; ``"log"`` ``log10(max(m, LOG_FLOOR))``, so weights of 0.001 and 0.01 differ. The legend
  names the scale ("weight ÷ row max", "log₁₀ weight"); the readout always gives the values as given;
- a matrix of non-negative values with more rows or columns than the plot has pixels is max-pooled
  to the screen (:mod:`~app.widgets.screen_image`: a pixel shows the largest value of its block,
  again after a zoom), so a one-token diagonal of 3,000 tokens is still a line;
- ``numbers``: the values written in the cells (``None`` = when at most :data:`ANNOTATE_MAX` rows and
  columns), in black or white, whichever contrasts more with the cell (WCAG ratio ≥ 4.5 on every
  colour of every map).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.widgets.cell_numbers import CellNumbers
from app.widgets.legend import ColorLegend
from app.widgets.levels import (
    LOG_FLOOR,
    finite_range,
    log_weights,
    lut_levels,
    row_normalised,
    scale_label,
    symmetric_levels,
)
from app.widgets.matrix_view import TopLeftFit, matrix_axes
from app.widgets.palette import (
    DEFAULT_CMAP,
    DIVERGING_CMAP,
    N_MAP_COLOURS,
    matrix_lut,
    text_colors,
)
from app.widgets.screen_image import SmoothImage, screen_block
from app.widgets.titles import wrapping_title
from app.widgets.token_axis import TokenAxis
from model.interp.pooling import pool_max, pool_visible

#: ``numbers=None`` writes the values in the cells up to this many rows and columns.
ANNOTATE_MAX = 16
#: ms of quiet after a zoom or resize before a pooled matrix is drawn again at its new resolution
REPOOL_MS = 120


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
        self.image = SmoothImage(axisOrder="row-major")
        self.image.smooth = True  # pooled to at most 1.5 image pixels a screen pixel: scaled down smoothly
        self.image.setLookupTable(matrix_lut(self.cmap_name))
        p.addItem(self.image)
        self.repool = QTimer()  # a zoom or resize that stopped: pool to the new resolution
        self.repool.setSingleShot(True)
        self.repool.setInterval(REPOOL_MS)
        self.repool.timeout.connect(self._render)
        self.legend: ColorLegend | None = None
        self.legend_label = legend_label
        if legend:
            self.legend = ColorLegend(self.cmap_name, legend_label, width=10)
            layout.addItem(self.legend, row=row, col=col + 1, rowspan=rowspan)
        self.numbers, self.digits = numbers, digits
        self._font = QFont()
        self._font.setPointSizeF(number_pt)
        self.numbers_item = CellNumbers(self._font)
        self.matrix: np.ndarray | None = None  # the values as given (not scaled)
        self.hidden: np.ndarray | None = None  # bool [R, C]: drawn grey
        self.row_labels: list[str] = []
        self.col_labels: list[str] = []
        self.levels = (0.0, 1.0)
        self.scale = "linear"
        self._shape: tuple[int, int] | None = None
        #: the values the colours show before any log (hidden cells 0 when ``poolable``) [R, C]
        self._colour_values: np.ndarray | None = None
        self.poolable = False  # ≥ 0 where seen: max-pooled to the screen when larger than it
        self.pool = 1  # the block the image is pooled by now
        self.vb.sigRangeChanged.connect(self._view_changed)
        self.vb.sigResized.connect(self._view_changed)

    # ---- data ----------------------------------------------------------------------------------
    def set_matrix(
        self,
        matrix: np.ndarray,
        row_labels: list[str] | None = None,
        col_labels: list[str] | None = None,
        *,
        levels: tuple[float, float] | None = None,
        mask: np.ndarray | None = None,
        scale: str = "linear",
        numbers: bool | str | None = "default",
        cmap: str | None = None,
        legend_label: str | None = None,
        hidden_label: str = "masked",
    ) -> None:
        """Draw ``matrix`` [R, C]; ``mask`` [R, C] bool (False = hidden, grey) adds to the non-finite
        cells; ``levels``, ``scale`` and ``numbers`` as in the module doc (``numbers`` defaults to the
        panel's; ``levels`` are those of the scaled values, fixed for ``"log"``). The legend's grey
        square names hidden cells ``hidden_label`` (none when no cell, or every cell, is hidden: an
        empty placeholder)."""
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
        self.scale = scale
        values = row_normalised(m, hidden) if scale == "row" else m
        # pooled to the screen when large: a square map of values ≥ 0 (weights, shares)
        self.poolable = R == C and not self.diverging and bool((values[~hidden] >= 0).all())
        if self.poolable and hidden.any():  # hidden cells 0: never the largest of a block with a seen cell
            values = values.copy() if values is m else values  # (the caller's matrix stays as given)
            values[hidden] = 0.0
        self._colour_values = values
        if scale == "log":
            levels = (float(np.log10(LOG_FLOOR)), 0.0)
        elif levels is None:
            seen = np.where(hidden, np.nan, values)
            levels = symmetric_levels(values) if self.diverging else finite_range(seen)
        lo, hi = self.levels = (float(levels[0]), float(levels[1]))
        self.levels = (lo, hi if hi > lo else lo + 1.0)
        if self.legend is not None:
            self.legend.set_levels(*self.levels)
            self.legend.set_hidden(hidden_label if hidden.any() and not hidden.all() else None)
            if legend_label is not None:
                self.legend_label = legend_label
            self.legend.set_label(scale_label(scale, self.legend_label))
        if self._shape != (R, C):
            self._shape = (R, C)
            if self.vb.state["aspectLocked"]:
                # room to show a square matrix in a wide or tall plot without cropping it
                self.vb.setLimits(xMin=-2 * C, xMax=3 * C, yMin=-2 * R, yMax=3 * R)
            else:
                self.vb.setLimits(xMin=0, xMax=C, yMin=0, yMax=R)
            self.reset_view()
        self._render(force=True)  # in the view as it is now: pooled to its resolution
        self.left_axis.set_labels(self.row_labels)
        self.top_axis.set_labels(self.col_labels)
        if numbers == "default":
            numbers = self.numbers
        if numbers is None:
            numbers = R <= ANNOTATE_MAX and C <= ANNOTATE_MAX
        self._write_numbers(m, hidden, bool(numbers))

    # ---- the image -----------------------------------------------------------------------------
    def screen_pool(self) -> int:
        """The block a poolable matrix is max-pooled by to be drawn at the plot's size and zoom now:
        at most :data:`~app.widgets.screen_image.OVERSAMPLE` values a screen pixel on either axis."""
        if not self.poolable or self._colour_values is None:
            return 1
        (x0, x1), (y0, y1) = self.vb.viewRange()
        w, h = self.vb.width(), self.vb.height()
        if w <= 1 or h <= 1:
            return self.pool  # not laid out yet
        R, C = self._colour_values.shape
        return max(screen_block(min(C, round(x1 - x0)), w), screen_block(min(R, round(y1 - y0)), h))

    def _view_changed(self, *_: object) -> None:
        if self.poolable and self.screen_pool() != self.pool:
            self.repool.start()

    def _render(self, force: bool = False) -> None:
        """Draw the colour values through the scale and levels, pooled to the screen (:meth:`screen_pool`),
        hidden cells grey."""
        values, hidden = self._colour_values, self.hidden
        if values is None or hidden is None:
            return
        R, C = values.shape
        f = self.screen_pool()
        if f == self.pool and not force:
            return
        self.pool = f
        if f > 1:
            values, hidden = pool_max(values, f), ~pool_visible(~hidden, f)
        if self.scale == "log":
            values = log_weights(values)
        lo, top, grey, _ = lut_levels(*self.levels)
        shown = np.clip(values, np.float32(lo), np.float32(self.levels[1]))  # ±∞ too (NaN stays)
        if hidden.any():
            shown[hidden] = np.float32(grey)
        self.image.setImage(shown, levels=(lo, top), autoLevels=False)
        self.image.setRect(QRectF(0, 0, C, R))  # the pooled pixels over the matrix's own coordinates

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
                        x = float(self._colour_values[i, j]) if self._colour_values is not None else v
                        x = float(np.log10(max(x, LOG_FLOOR))) if self.scale == "log" else x
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
    the numbers are written in the cells, the colour legend is hidden: it would only take room; so it
    is while the widget is narrower than ``legend_min_width`` pixels (default 0: never), where the
    legend's ~70 px would leave the matrix nothing (the readout still gives each cell's value).
    """

    hovered = Signal(int, int)
    clicked = Signal(int, int)

    def __init__(
        self, parent: QWidget | None = None, *, title: str = "", legend_min_width: int = 0, **options
    ):
        super().__init__(parent)
        self.legend_min_width = int(legend_min_width)
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
        self._fit_legend()
        self.refresh_readout()

    def _fit_legend(self) -> None:
        """Show the legend unless the cells carry their numbers or the widget is too narrow for it."""
        legend = self.panel.legend
        want = not self.panel.cell_texts() and self.width() >= self.legend_min_width
        if legend is not None and legend.isVisible() != want:
            # out of the layout while hidden, or its column would still take the room
            if legend.isVisible():
                self.view.ci.removeItem(legend)
                legend.setVisible(False)
            else:
                self.view.ci.addItem(legend, row=0, col=1)
                legend.setVisible(True)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.legend_min_width:
            self._fit_legend()

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
    "describe_value",
    "format_cell",
]
