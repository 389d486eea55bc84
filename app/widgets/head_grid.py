"""HeadGrid: an L×H grid of attention heatmaps (rows = layers, columns = heads), updated in place.

Cells are created once per shape; a new frame only calls ``ImageItem.setImage(w, levels=(0, 1),
autoLevels=False)`` on the existing items with C-contiguous float32 views and a 256-entry lookup
table, so redrawing 36 heads of 256×256 costs ~18 ms and 16 heads of 64×64 ~2 ms. In every cell
rows are queries (top = first token) and columns are keys, so a causal model's weights fill the
lower-left triangle.

Signals: ``headClicked(layer, head)`` and ``cellHovered(layer, head, query, key, weight)``
(``query = -1`` when the pointer leaves). ``describe_hover`` turns a hover into a sentence with the
tokens, for a status line.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.widgets.palette import DEFAULT_CMAP, colormap, lookup_table

_BORDER = pg.mkPen(120, 120, 120, 160)


class _CellImage(pg.ImageItem):
    """One head's image; reports clicks and hovers with its (layer, head)."""

    def __init__(self, grid: HeadGrid, layer: int, head: int):
        super().__init__(axisOrder="row-major")
        self._grid = grid
        self.layer = layer
        self.head = head
        self.setAcceptHoverEvents(True)

    def mouseClickEvent(self, ev):  # noqa: N802 (Qt naming)
        ev.accept()
        self._grid.headClicked.emit(self.layer, self.head)

    def hoverEvent(self, ev):  # noqa: N802
        if ev.isExit():
            self._grid._hover(self.layer, self.head, -1, -1)
            return
        pos = ev.pos()
        self._grid._hover(self.layer, self.head, int(pos.y()), int(pos.x()))


class HeadGrid(QWidget):
    """Reusable L×H heatmap grid; ``set_weights(weights [L, H, T, T], tokens)`` redraws in place."""

    headClicked = Signal(int, int)
    cellHovered = Signal(int, int, int, int, float)

    def __init__(
        self, parent: QWidget | None = None, *, cmap: str = DEFAULT_CMAP, title: str = "", gamma: float = 1.0
    ):
        super().__init__(parent)
        self._cmap = cmap
        self._gamma = float(gamma)
        self._lut = lookup_table(cmap, 256, self._gamma)
        self._colorbar = None
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.view.ci.setSpacing(2)
        self.view.setMinimumSize(160, 140)
        layout.addWidget(self.view)
        self.hover_label = QLabel(" ")
        self.hover_label.setObjectName("headGridHover")
        layout.addWidget(self.hover_label)
        self._title_text = title
        self._title = None
        self._shape: tuple[int, int] = (0, 0)
        self._T = -1
        self._images: list[list[_CellImage]] = []
        self._boxes: list[list[pg.ViewBox]] = []
        self.weights: np.ndarray | None = None
        self.tokens: list[str] = []
        self.cellHovered.connect(self._show_hover)
        self._build(0, 0)

    # ---- building ------------------------------------------------------------------------------
    def _build(self, n_layers: int, n_heads: int) -> None:
        self.view.clear()
        self._colorbar = None
        self._images, self._boxes = [], []
        self._shape = (n_layers, n_heads)
        self._T = -1
        label_style = {"color": "#444", "size": "9pt"}
        self._title = self.view.addLabel(self._title_text, row=0, col=0, colspan=max(1, n_heads + 2))
        if n_layers == 0 or n_heads == 0:
            self.view.addLabel("no attention to show yet", row=1, col=0, color="#888")
            return
        for h in range(n_heads):
            self.view.addLabel(f"head {h}", row=1, col=h + 1, **label_style)
        for layer in range(n_layers):
            self.view.addLabel(f"layer {layer}", row=layer + 2, col=0, angle=-90, **label_style)
            row_imgs, row_boxes = [], []
            for h in range(n_heads):
                vb = self.view.addViewBox(
                    row=layer + 2,
                    col=h + 1,
                    lockAspect=True,
                    invertY=True,
                    enableMouse=False,
                    enableMenu=False,
                )
                vb.setDefaultPadding(0.0)
                img = _CellImage(self, layer, h)
                img.setLookupTable(self._lut)
                img.setBorder(_BORDER)
                vb.addItem(img)
                row_imgs.append(img)
                row_boxes.append(vb)
            self._images.append(row_imgs)
            self._boxes.append(row_boxes)
        bar = pg.ColorBarItem(
            values=(0.0, 1.0),
            colorMap=colormap(self._cmap, self._gamma),
            interactive=False,
            width=12,
            label="weight",
        )
        self.view.addItem(bar, row=2, col=n_heads + 1, rowspan=n_layers)
        self._colorbar = bar

    # ---- updating ------------------------------------------------------------------------------
    @property
    def gamma(self) -> float:
        return self._gamma

    def set_gamma(self, gamma: float) -> None:
        """Colour scale: 1 linear, 0.5 square root (small weights visible); redraws in place."""
        self._gamma = float(gamma)
        self._lut = lookup_table(self._cmap, 256, self._gamma)
        for row in self._images:
            for img in row:
                img.setLookupTable(self._lut)
        if self._colorbar is not None:
            self._colorbar.setColorMap(colormap(self._cmap, self._gamma))

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    def set_title(self, text: str) -> None:
        self._title_text = text
        if self._title is not None:
            self._title.setText(text, color="#222", size="10pt")

    def set_weights(
        self, weights: np.ndarray, tokens: list[str] | None = None, title: str | None = None
    ) -> None:
        """Draw ``weights`` [L, H, T, T] (any float dtype; values in [0, 1]) with token labels."""
        weights = np.asarray(weights)
        if weights.ndim != 4 or weights.shape[-1] != weights.shape[-2]:
            raise ValueError(f"weights must be [L, H, T, T], got shape {weights.shape}")
        L, H, T, _ = weights.shape
        if (L, H) != self._shape:
            self._build(L, H)
        w = np.ascontiguousarray(weights, dtype=np.float32)
        self.weights = w
        self.tokens = list(tokens) if tokens is not None else [str(i) for i in range(T)]
        rect = QRectF(0, 0, T, T) if T != self._T else None
        for layer in range(L):
            for h in range(H):
                img = self._images[layer][h]
                img.setImage(w[layer, h], levels=(0.0, 1.0), autoLevels=False)
                if rect is not None:
                    img.setRect(rect)
                    self._boxes[layer][h].setRange(rect, padding=0.0)
        self._T = T
        if title is not None:
            self.set_title(title)

    def clear(self) -> None:
        self.weights = None
        self._build(0, 0)

    # ---- hover ---------------------------------------------------------------------------------
    def _hover(self, layer: int, head: int, q: int, k: int) -> None:
        w = self.weights
        if w is None or q < 0 or k < 0 or q >= w.shape[2] or k >= w.shape[3]:
            self.cellHovered.emit(layer, head, -1, -1, 0.0)
            return
        self.cellHovered.emit(layer, head, q, k, float(w[layer, head, q, k]))

    def describe_hover(self, layer: int, head: int, q: int, k: int, value: float) -> str:
        if q < 0:
            return " "

        def tok(i: int) -> str:
            return self.tokens[i] if 0 <= i < len(self.tokens) else str(i)

        return f"layer {layer}, head {head}: query {q} '{tok(q)}' → key {k} '{tok(k)}': weight {value:.3f}"

    def _show_hover(self, layer: int, head: int, q: int, k: int, value: float) -> None:
        self.hover_label.setText(self.describe_hover(layer, head, q, k, value))
