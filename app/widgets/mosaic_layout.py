"""Where the cells of a :class:`~app.widgets.head_mosaic.HeadMosaic` go, and what is drawn over them.

:class:`MosaicGeometry`: ``R × C`` heads of ``S × S`` pixels, a gap of ``g`` pixels after each, laid
out ``cols`` to a row on screen (``cols = C`` for the L×H grid; fewer or more when the cells flow).
Head ``(r, c)`` is the ``n = r·C + c``-th cell; it sits at screen place ``(i, j) = divmod(n, cols)``,
its top-left pixel at ``(x, y) = (j·(S+g), i·(S+g))``. A pixel ``(x, y)`` inside a cell shows the
``block × block`` tokens from query ``y_in·block`` and key ``x_in·block``.

:class:`CellMarks`: role names (top left), "OFF" marks with a red dashed frame, cell names (top
right, when flowing), the orange selection frame and, for grouped-query attention, a blue frame
around the ``kv_group`` columns of heads that share one key/value head, as items of the ViewBox.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsRectItem

_SELECT_PEN = QPen(QColor(255, 140, 0), 3)
_SELECT_PEN.setCosmetic(True)
_MARK_PEN = QPen(QColor(220, 20, 20), 2, Qt.PenStyle.DashLine)
_MARK_PEN.setCosmetic(True)
_GROUP_PEN = QPen(QColor(40, 90, 200), 2)
_GROUP_PEN.setCosmetic(True)
_LABEL_FILL = QColor(255, 255, 255, 200)
_TEXT = QColor(20, 20, 20)
_OFF_TEXT = QColor(200, 0, 0)


def flow_columns(n: int, width: float, height: float) -> int:
    """How many columns give ``n`` cells in a ``width × height`` area the largest square inside each
    cell (on a tie, the fewest empty places, then the fewest rows)."""
    if n <= 1 or width <= 1 or height <= 1:
        return max(1, n)

    def score(c: int):
        rows = math.ceil(n / c)
        return (round(min(width / c, height / rows), 6), -(rows * c - n), c)

    return max(range(1, n + 1), key=score)


@dataclass(frozen=True)
class MosaicGeometry:
    R: int
    C: int
    S: int
    g: int
    cols: int

    @classmethod
    def of(cls, R: int, C: int, S: int, cols: int | None = None, gap: int = 12) -> MosaicGeometry:
        """The geometry of R×C heads drawn at S pixels (a gap of ``max(1, S // gap)``)."""
        return cls(R, C, S, max(1, S // gap), C if cols is None else max(1, cols))

    @property
    def rows(self) -> int:
        return math.ceil(self.R * self.C / self.cols)

    @property
    def canvas_shape(self) -> tuple[int, int]:
        return self.rows * (self.S + self.g), self.cols * (self.S + self.g)

    def origin(self, r: int, c: int) -> tuple[int, int]:
        """(x, y) of the top-left pixel of head (r, c)."""
        i, j = divmod(r * self.C + c, self.cols)
        return j * (self.S + self.g), i * (self.S + self.g)

    def cell_rect(self, r: int, c: int) -> QRectF:
        x, y = self.origin(r, c)
        return QRectF(x, y, self.S, self.S)

    def locate(self, x: float, y: float, T: int, block: int) -> tuple[int, int, int, int] | None:
        """(r, c, query, key) at canvas coordinates (x, y), or None in a gap or outside."""
        step = self.S + self.g
        i, j = int(y // step), int(x // step)
        n = i * self.cols + j
        if not (0 <= j < self.cols and 0 <= i and n < self.R * self.C):
            return None
        yin, xin = y - i * step, x - j * step
        if not (0 <= yin < self.S and 0 <= xin < self.S):
            return None
        r, c = divmod(n, self.C)
        return r, c, min(T - 1, int(yin * block)), min(T - 1, int(xin * block))

    def place(self, canvas: np.ndarray, cells: np.ndarray) -> None:
        """Write ``cells`` [R, C, S, S] (or one [S, S] for every head) into ``canvas`` in place."""
        step = self.S + self.g
        view = canvas.reshape(-1, step, self.cols, step)[:, : self.S, :, : self.S].transpose(0, 2, 1, 3)
        if cells.ndim == 2:
            cells = np.broadcast_to(cells, (self.R, self.C, self.S, self.S))
        flat = cells.reshape(self.R * self.C, self.S, self.S)
        for i in range(view.shape[0]):
            part = flat[i * self.cols : (i + 1) * self.cols]
            view[i, : len(part)] = part


class LabelLayer(QGraphicsItem):
    """Short labels pinned to points of the view, each on a translucent white box, drawn at a fixed
    font size whatever the zoom (like ``pg.TextItem``) but all in one ``paint``.

    ``labels``: ``(x, y, text, right, off)`` with ``(x, y)`` in view coordinates, the box's top-left
    corner there (top-right when ``right``); ``off`` draws the text red. ``bounds`` (view coordinates)
    is what the labels lie over (the canvas), used for culling.
    """

    def __init__(self, labels: list[tuple[float, float, str, bool, bool]], font: QFont, bounds: QRectF):
        super().__init__()
        self._labels = labels
        self._font = font
        self._bounds = bounds
        self._metrics = QFontMetricsF(font)
        self.setZValue(10)

    def texts(self) -> list[str]:
        return [t for _, _, t, _, _ in self._labels]

    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(self, painter, option, widget=None) -> None:
        to_device = painter.transform()
        fm = self._metrics
        h = fm.height() + 2
        painter.save()
        painter.resetTransform()
        painter.setFont(self._font)
        painter.setPen(Qt.PenStyle.NoPen)
        clip = painter.viewport()
        boxes = []
        for x, y, text, right, off in self._labels:
            p = to_device.map(QPointF(x, y))
            w = fm.horizontalAdvance(text) + 6
            box = QRectF(p.x() - w if right else p.x(), p.y(), w, h)
            if box.intersects(QRectF(clip)):
                boxes.append((box, text, off))
        for box, _, _ in boxes:
            painter.fillRect(box, _LABEL_FILL)
        for box, text, off in boxes:
            painter.setPen(_OFF_TEXT if off else _TEXT)
            painter.drawText(box, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()


class CellMarks:
    """Role names, OFF marks, flowing cell names and the selection frame over a mosaic's cells."""

    def __init__(self, vb: pg.ViewBox):
        self.vb = vb
        self.roles: list[list[str]] = []
        self.role_tips: list[list[str]] = []
        self.marked: set[tuple[int, int]] = set()
        self.selected: tuple[int, int] | None = None
        self.names: list[list[str]] | None = None  # [R][C], written in the top-right corners
        self.kv_group = 1  # > 1: frame each group of this many columns (heads sharing a K/V head)
        self._items: list = []
        self._key = None
        self._select_item: QGraphicsRectItem | None = None

    def role_tip(self, r: int, c: int) -> str:
        tips = self.role_tips
        return tips[r][c] if r < len(tips) and c < len(tips[r]) else ""

    def place(self, geom: MosaicGeometry | None) -> None:
        """(Re)draw the labels and frames for ``geom``; items are rebuilt only when what they show
        changed."""
        self._place_selection(geom)
        names = self.names
        key = (
            geom,
            tuple(map(tuple, self.roles)),
            tuple(sorted(self.marked)),
            names and tuple(map(tuple, names)),
            self.kv_group,
        )
        if key == self._key:
            return
        self._key = key
        for item in self._items:
            self.vb.removeItem(item)
        self._items = []
        if geom is None:
            return
        R, C = geom.R, geom.C
        font = QFont()
        font.setPointSizeF(7.5)
        texts = {
            (r, c): name for r, row in enumerate(self.roles[:R]) for c, name in enumerate(row[:C]) if name
        }
        for r, c in self.marked:
            if r < R and c < C:
                texts[(r, c)] = "OFF " + texts.get((r, c), "")
                rect = QGraphicsRectItem(geom.cell_rect(r, c))
                rect.setPen(_MARK_PEN)
                self.vb.addItem(rect)
                self._items.append(rect)
        n_rep = self.kv_group
        if n_rep > 1 and geom.cols == C and C % n_rep == 0:  # one frame per K/V head, all layers
            step = geom.S + geom.g
            for first in range(0, C, n_rep):
                frame = QGraphicsRectItem(
                    QRectF(first * step - geom.g / 2, -geom.g / 2, n_rep * step, geom.rows * step)
                )
                frame.setPen(_GROUP_PEN)
                frame.setZValue(5)
                self.vb.addItem(frame)
                self._items.append(frame)
        corner = [((r, c), name, False) for (r, c), name in texts.items()]
        if names:
            corner += [((r, c), names[r][c], True) for r in range(R) for c in range(C)]
        labels = []
        for (r, c), name, right in corner:
            x, y = geom.origin(r, c)
            labels.append((x + geom.S if right else x, y, name.strip(), right, name.startswith("OFF")))
        if labels:  # one item paints them all: 144 TextItems cost ~40 ms a repaint, this ~3 ms
            H, W = geom.canvas_shape
            layer = LabelLayer(labels, font, QRectF(0, 0, W, H))
            self.vb.addItem(layer)
            self._items.append(layer)

    def texts(self) -> list[str]:
        """The labels written in the cells (role names, OFF marks, flowing cell names)."""
        return [t for item in self._items if isinstance(item, LabelLayer) for t in item.texts()]

    def _place_selection(self, geom: MosaicGeometry | None) -> None:
        cell = self.selected
        if geom is None or cell is None or cell[0] >= geom.R or cell[1] >= geom.C:
            if self._select_item is not None:
                self._select_item.setVisible(False)
            return
        rect = geom.cell_rect(*cell).adjusted(-0.5, -0.5, 0.5, 0.5)
        if self._select_item is None:
            self._select_item = QGraphicsRectItem(rect)
            self._select_item.setPen(_SELECT_PEN)
            self.vb.addItem(self._select_item)
        else:
            self._select_item.setRect(rect)
        self._select_item.setVisible(True)


__all__ = ["CellMarks", "LabelLayer", "MosaicGeometry", "flow_columns"]
