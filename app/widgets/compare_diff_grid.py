"""DiffGrid: an L×H grid of A − B attention differences, diverging colours on symmetric levels.

Each cell is one head's ``weights_A − weights_B`` [T, T] (rows = queries, columns = keys). Zero is
the middle (white) colour of a diverging map; red where A attends more, blue where B does, both at
the same levels ``(−m, m)`` (``m = max |A − B|`` over the whole grid), so equal differences look
equally strong in every head. Items are created once per shape and updated in place.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Signal
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

#: Diverging map: blue (negative) – white (0) – red (positive), ColorBrewer's RdBu end points.
DIFF_COLORS = [(33, 102, 172), (146, 197, 222), (247, 247, 247), (244, 165, 130), (178, 24, 43)]


def diverging_cmap() -> pg.ColorMap:
    return pg.ColorMap(pos=np.linspace(0.0, 1.0, len(DIFF_COLORS)), color=DIFF_COLORS)


def diverging_lut(n: int = 256) -> np.ndarray:
    """uint8 [n, 3] lookup table of :func:`diverging_cmap` (≤ 256 entries keeps setImage cheap)."""
    return np.ascontiguousarray(diverging_cmap().getLookupTable(0.0, 1.0, n, alpha=False), dtype=np.uint8)


_BORDER = pg.mkPen(120, 120, 120, 160)


class _Cell(pg.ImageItem):
    def __init__(self, grid: DiffGrid, layer: int, head: int):
        super().__init__(axisOrder="row-major")
        self._grid, self.layer, self.head = grid, layer, head
        self.setAcceptHoverEvents(True)

    def hoverEvent(self, ev):  # noqa: N802 (Qt naming)
        if ev.isExit():
            self._grid._hover(self.layer, self.head, -1, -1)
            return
        pos = ev.pos()
        self._grid._hover(self.layer, self.head, int(pos.y()), int(pos.x()))


class DiffGrid(QWidget):
    """``set_difference(diff [L, H, T, T], tokens, levels)`` draws every head's A − B."""

    cellHovered = Signal(int, int, int, int, float)

    def __init__(self, parent: QWidget | None = None, *, title: str = ""):
        super().__init__(parent)
        self._lut = diverging_lut()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.view.ci.setSpacing(2)
        layout.addWidget(self.view, 1)
        self.hover_label = QLabel(" ")
        self.hover_label.setObjectName("diffGridHover")
        layout.addWidget(self.hover_label)
        self._title_text = title
        self._shape: tuple[int, int] = (-1, -1)
        self._T = -1
        self._images: list[list[_Cell]] = []
        self._boxes: list[list[pg.ViewBox]] = []
        self.diff: np.ndarray | None = None
        self.levels: tuple[float, float] = (-1.0, 1.0)
        self.tokens: list[str] = []
        self.names = ("A", "B")
        self._bar: pg.ColorBarItem | None = None
        self._build(0, 0)

    def _build(self, n_layers: int, n_heads: int) -> None:
        self.view.clear()
        self._images, self._boxes = [], []
        self._shape = (n_layers, n_heads)
        self._T = -1
        self._title = self.view.addLabel(self._title_text, row=0, col=0, colspan=max(1, n_heads + 2))
        if n_layers == 0 or n_heads == 0:
            self.view.addLabel("no difference to show yet", row=1, col=0, color="#888")
            self._bar = None
            return
        style = {"color": "#444", "size": "9pt"}
        for h in range(n_heads):
            self.view.addLabel(f"head {h}", row=1, col=h + 1, **style)
        for layer in range(n_layers):
            self.view.addLabel(f"layer {layer}", row=layer + 2, col=0, angle=-90, **style)
            imgs, boxes = [], []
            for h in range(n_heads):
                vb = self.view.addViewBox(
                    row=layer + 2,
                    col=h + 1,
                    lockAspect=True,
                    invertY=True,
                    enableMouse=False,
                    enableMenu=False,
                )
                vb.setBorder(_BORDER)
                vb.setDefaultPadding(0.0)
                img = _Cell(self, layer, h)
                img.setLookupTable(self._lut)
                vb.addItem(img)
                imgs.append(img)
                boxes.append(vb)
            self._images.append(imgs)
            self._boxes.append(boxes)
        self._bar = pg.ColorBarItem(
            values=self.levels, colorMap=diverging_cmap(), interactive=False, width=12, label="A − B"
        )
        self.view.addItem(self._bar, row=2, col=n_heads + 1, rowspan=n_layers)

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    def set_title(self, text: str) -> None:
        self._title_text = text
        self._title.setText(text, color="#222", size="10pt")

    def set_difference(
        self,
        diff: np.ndarray,
        tokens: list[str] | None = None,
        levels: tuple[float, float] | None = None,
        names: tuple[str, str] = ("A", "B"),
        title: str | None = None,
    ) -> None:
        """Draw ``diff`` [L, H, T, T] at symmetric ``levels`` (default ``±max |diff|``)."""
        d = np.asarray(diff)
        if d.ndim != 4 or d.shape[-1] != d.shape[-2]:
            raise ValueError(f"a difference must be [L, H, T, T], got shape {d.shape}")
        L, H, T, _ = d.shape
        if levels is None:
            m = float(np.abs(d).max()) if d.size else 0.0
            levels = (-m or -1e-3, m or 1e-3)
        if (L, H) != self._shape:
            self._build(L, H)
        self.diff = np.ascontiguousarray(d, dtype=np.float32)
        self.levels = (float(levels[0]), float(levels[1]))
        self.tokens = list(tokens) if tokens is not None else [str(i) for i in range(T)]
        self.names = names
        rect = QRectF(0, 0, T, T) if T != self._T else None
        for layer in range(L):
            for h in range(H):
                img = self._images[layer][h]
                img.setImage(self.diff[layer, h], levels=self.levels, autoLevels=False)
                if rect is not None:
                    img.setRect(rect)
                    self._boxes[layer][h].setRange(rect, padding=0.0)
        self._T = T
        if self._bar is not None:
            self._bar.setLevels(self.levels)
            self._bar.setLabel("left", f"{names[0]} − {names[1]}")
        if title is not None:
            self.set_title(title)

    def clear(self, message: str = "") -> None:
        self.diff = None
        self._build(0, 0)
        if message:
            self.set_title(message)

    def _hover(self, layer: int, head: int, q: int, k: int) -> None:
        d = self.diff
        if d is None or q < 0 or k < 0 or q >= d.shape[2] or k >= d.shape[3]:
            self.hover_label.setText(" ")
            self.cellHovered.emit(layer, head, -1, -1, 0.0)
            return
        v = float(d[layer, head, q, k])

        def tok(i: int) -> str:
            return self.tokens[i] if 0 <= i < len(self.tokens) else str(i)

        a, b = self.names
        self.hover_label.setText(
            f"layer {layer}, head {head}: query {q} '{tok(q)}' → key {k} '{tok(k)}': {a} − {b} = {v:+.4f}"
        )
        self.cellHovered.emit(layer, head, q, k, v)
