"""MatrixView: a [R, C] matrix with token labels, −∞ cells drawn grey, and the numbers written in
the cells when the matrix is small enough to read them.

Rows are queries (top = first token), columns are keys, as in every attention plot of the app.
Non-finite cells (a masked score is −∞) cannot be coloured by a colour map: they are drawn in a
neutral grey on an overlay and, when annotated, labelled ``−∞``. The base image takes the lower
level there, so the colour bar stays honest.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.widgets.palette import lookup_table

#: Cells are numbered only up to this many rows and columns (beyond, the text would not fit).
ANNOTATE_MAX = 16
MASKED_RGBA = (200, 200, 200, 255)
MAX_TICKS = 40


def _ticks(labels: list[str]) -> list[list[tuple[float, str]]]:
    step = max(1, int(np.ceil(len(labels) / MAX_TICKS)))
    return [[(i + 0.5, labels[i]) for i in range(0, len(labels), step)]]


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
    if text.startswith("-"):
        text = "−" + text[1:]
    return text


class MatrixView(QWidget):
    """One labelled matrix; ``set_matrix(m, rows, cols, levels=...)`` redraws in place.

    ``square`` keeps cells square (else the matrix fills the widget); ``digits`` for the cell texts.
    """

    cellHovered = Signal(int, int, float)

    def __init__(
        self,
        title: str = "",
        *,
        cmap: str = "viridis",
        colorbar: bool = True,
        digits: int = 2,
        square: bool = False,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.plot = pg.PlotWidget(title=title)
        self.plot.setBackground("w")
        self.plot.setAspectLocked(square)
        self.plot.invertY(True)
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.showAxis("top")
        self.plot.hideAxis("bottom")
        self.plot.getAxis("left").setLabel("query")
        self.plot.getAxis("top").setLabel("key")
        self.cmap = cmap
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setLookupTable(lookup_table(cmap))
        self.plot.addItem(self.image)
        self.overlay = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.overlay)
        self.levels = (0.0, 1.0)
        self.colorbar = None
        if colorbar:
            self.colorbar = pg.ColorBarItem(
                values=self.levels, colorMap=pg.colormap.get(cmap), interactive=False, width=12
            )
            self.colorbar.setImageItem(self.image, insert_in=self.plot.getPlotItem())
        layout.addWidget(self.plot)
        self.hover_label = QLabel(" ")
        layout.addWidget(self.hover_label)
        self.digits = digits
        self.matrix: np.ndarray | None = None
        self.row_labels: list[str] = []
        self.col_labels: list[str] = []
        self._texts: list[pg.TextItem] = []
        self._shape = None
        self._font = QFont()
        self._font.setPointSize(7)
        self.plot.scene().sigMouseMoved.connect(self._on_mouse)

    def set_title(self, text: str) -> None:
        self.plot.setTitle(text)

    def set_axis_titles(self, rows: str, cols: str) -> None:
        """Name the axes (default: rows "query", columns "key")."""
        self.plot.getAxis("left").setLabel(rows)
        self.plot.getAxis("top").setLabel(cols)

    def set_cmap(self, cmap: str) -> None:
        if cmap != self.cmap:
            self.cmap = cmap
            self.image.setLookupTable(lookup_table(cmap))
            if self.colorbar is not None:
                self.colorbar.setColorMap(pg.colormap.get(cmap))

    def set_matrix(
        self,
        matrix,
        row_labels: list[str] | None = None,
        col_labels: list[str] | None = None,
        *,
        levels: tuple[float, float] | None = None,
        annotate: bool | None = None,
    ) -> None:
        """Draw ``matrix`` [R, C]; ``levels`` None → the finite min/max; ``annotate`` None → when small."""
        m = np.asarray(matrix, dtype=np.float64)
        if m.ndim != 2:
            raise ValueError(f"a matrix view needs a 2-D matrix, got shape {m.shape}")
        R, C = m.shape
        finite = np.isfinite(m)
        if levels is None:
            vals = m[finite]
            lo, hi = (float(vals.min()), float(vals.max())) if vals.size else (0.0, 1.0)
            if hi <= lo:
                hi = lo + 1.0
            levels = (lo, hi)
        self.levels = (float(levels[0]), float(levels[1]))
        self.matrix = m
        self.row_labels = list(row_labels) if row_labels is not None else [str(i) for i in range(R)]
        self.col_labels = list(col_labels) if col_labels is not None else [str(j) for j in range(C)]
        base = np.where(finite, m, self.levels[0]).astype(np.float32)
        self.image.setImage(np.ascontiguousarray(base), levels=self.levels, autoLevels=False)
        over = np.zeros((R, C, 4), dtype=np.uint8)
        over[~finite] = MASKED_RGBA
        self.overlay.setImage(over, levels=(0, 255), autoLevels=False)
        if self.colorbar is not None:
            self.colorbar.setLevels(self.levels)
        if self._shape != (R, C):
            rect = QRectF(0, 0, C, R)
            self.image.setRect(rect)
            self.overlay.setRect(rect)
            self.plot.setRange(rect, padding=0.0)
            self._shape = (R, C)
        self.plot.getAxis("left").setTicks(_ticks(self.row_labels))
        self.plot.getAxis("top").setTicks(_ticks(self.col_labels))
        if annotate is None:
            annotate = R <= ANNOTATE_MAX and C <= ANNOTATE_MAX
        self._annotate(m if annotate else None)
        if self.colorbar is not None:
            self.colorbar.setVisible(not annotate)  # the numbers are in the cells: the bar only takes room

    def cell_texts(self) -> list[list[str]]:
        """The texts written in the cells (empty when the matrix is too large to annotate)."""
        if not self._texts or self.matrix is None or not self._texts[0].isVisible():
            return []
        R, C = self.matrix.shape
        return [[self._texts[i * C + j].toPlainText() for j in range(C)] for i in range(R)]

    def _annotate(self, m: np.ndarray | None) -> None:
        if m is None:
            for t in self._texts:
                t.hide()
            return
        R, C = m.shape
        while len(self._texts) < R * C:
            t = pg.TextItem(anchor=(0.5, 0.5))
            t.setFont(self._font)
            self.plot.addItem(t, ignoreBounds=True)
            self._texts.append(t)
        lo, hi = self.levels
        lut = lookup_table(self.cmap)
        for k, t in enumerate(self._texts):
            if k >= R * C:
                t.hide()
                continue
            i, j = divmod(k, C)
            v = m[i, j]
            t.setText(format_cell(v, self.digits))
            if np.isfinite(v):
                frac = 0.0 if hi <= lo else min(1.0, max(0.0, (v - lo) / (hi - lo)))
                r, g, b = lut[int(frac * (len(lut) - 1))][:3]
                dark = 0.299 * r + 0.587 * g + 0.114 * b < 140
                t.setColor((255, 255, 255) if dark else (20, 20, 20))
            else:
                t.setColor((70, 70, 70))
            t.setPos(j + 0.5, i + 0.5)
            t.show()

    def _on_mouse(self, pos: QPointF) -> None:
        if self.matrix is None:
            return
        p = self.plot.getPlotItem().vb.mapSceneToView(pos)
        r, c = int(np.floor(p.y())), int(np.floor(p.x()))
        R, C = self.matrix.shape
        if 0 <= r < R and 0 <= c < C:
            v = float(self.matrix[r, c])
            self.hover_label.setText(
                f"query {r} '{self.row_labels[r]}', key {c} '{self.col_labels[c]}': {format_cell(v, 4)}"
            )
            self.cellHovered.emit(r, c, v)
        else:
            self.hover_label.setText(" ")
