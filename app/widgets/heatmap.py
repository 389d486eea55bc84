"""Heatmap: one matrix with token labels on both axes (rows = queries, columns = keys).

``set_matrix(m [R, C], row_labels, col_labels, levels=(0, 1))`` updates the one ImageItem in
place. Axis ticks show every label while they fit and thin out for long prompts. Hovering emits
``cellHovered(row, col, value)`` and shows the cell in the label underneath.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.widgets.palette import DEFAULT_CMAP, colormap, lookup_table

MAX_TICKS = 48


def _ticks(labels: list[str]) -> list[list[tuple[float, str]]]:
    n = len(labels)
    step = max(1, int(np.ceil(n / MAX_TICKS)))
    return [[(i + 0.5, labels[i]) for i in range(0, n, step)]]


class Heatmap(QWidget):
    """A labelled heatmap; reusable by any tab (one head, a mask, a difference map, ...)."""

    cellHovered = Signal(int, int, float)

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        cmap: str = DEFAULT_CMAP,
        title: str = "",
        colorbar: bool = True,
    ):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.plot = pg.PlotWidget(title=title)
        self.plot.setBackground("w")
        self.plot.setAspectLocked(True)
        self.plot.invertY(True)
        self.plot.setMenuEnabled(False)
        self.plot.showAxis("top")
        self.plot.hideAxis("bottom")
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setLookupTable(lookup_table(cmap))
        self.plot.addItem(self.image)
        self.levels = (0.0, 1.0)
        if colorbar:
            self.colorbar = pg.ColorBarItem(
                values=self.levels, colorMap=colormap(cmap), interactive=False, width=12
            )
            self.colorbar.setImageItem(self.image, insert_in=self.plot.getPlotItem())
        else:
            self.colorbar = None
        layout.addWidget(self.plot)
        self.hover_label = QLabel(" ")
        layout.addWidget(self.hover_label)
        self.matrix: np.ndarray | None = None
        self.row_labels: list[str] = []
        self.col_labels: list[str] = []
        self._shape = None
        self.plot.scene().sigMouseMoved.connect(self._on_mouse)

    def set_title(self, text: str) -> None:
        self.plot.setTitle(text)

    def set_matrix(
        self,
        matrix: np.ndarray,
        row_labels: list[str] | None = None,
        col_labels: list[str] | None = None,
        levels: tuple[float, float] = (0.0, 1.0),
    ) -> None:
        m = np.ascontiguousarray(matrix, dtype=np.float32)
        if m.ndim != 2:
            raise ValueError(f"a heatmap needs a 2-D matrix, got shape {m.shape}")
        R, C = m.shape
        self.matrix = m
        self.row_labels = list(row_labels) if row_labels is not None else [str(i) for i in range(R)]
        self.col_labels = list(col_labels) if col_labels is not None else [str(i) for i in range(C)]
        self.levels = (float(levels[0]), float(levels[1]))
        self.image.setImage(m, levels=self.levels, autoLevels=False)
        if self.colorbar is not None:
            self.colorbar.setLevels(self.levels)
        if self._shape != (R, C):
            self.image.setRect(QRectF(0, 0, C, R))
            self.plot.setRange(QRectF(0, 0, C, R), padding=0.0)
            self._shape = (R, C)
        self.plot.getAxis("left").setTicks(_ticks(self.row_labels))
        self.plot.getAxis("top").setTicks(_ticks(self.col_labels))

    def _on_mouse(self, pos: QPointF) -> None:
        if self.matrix is None:
            return
        p = self.plot.getPlotItem().vb.mapSceneToView(pos)
        r, c = int(np.floor(p.y())), int(np.floor(p.x()))
        R, C = self.matrix.shape
        if 0 <= r < R and 0 <= c < C:
            v = float(self.matrix[r, c])
            self.hover_label.setText(
                f"row {r} '{self.row_labels[r]}', column {c} '{self.col_labels[c]}': {v:.4g}"
            )
            self.cellHovered.emit(r, c, v)
        else:
            self.hover_label.setText(" ")
