"""What the head grid draws over its cells: :class:`CellMarks`.

Role names (top left, when they fit in the cell) with a frame in the role's colour, "OFF" marks with a
red dashed frame, cell names (top right, when flowing), the orange selection frame and, for
grouped-query attention, a blue frame around the ``kv_group`` columns of heads that share one
key/value head, as items of the ViewBox, placed on a :class:`~app.widgets.head_grid.geometry.MosaicGeometry`.
The labels are painted by one :class:`LabelLayer` and the frames by one :class:`FrameLayer` each (a
hundred and more items each cost a repaint).
"""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QPainter, QPen
from PySide6.QtWidgets import QGraphicsItem, QGraphicsRectItem, QStyleOptionGraphicsItem, QWidget

from app.widgets.head_grid.geometry import MAJOR_ROWS, MosaicGeometry

_SELECT_PEN = QPen(QColor(255, 140, 0), 3)
_SELECT_PEN.setCosmetic(True)
_MARK_PEN = QPen(QColor(220, 20, 20), 2, Qt.PenStyle.DashLine)
_MARK_PEN.setCosmetic(True)
_GROUP_PEN = QPen(QColor(40, 90, 200), 2)
_GROUP_PEN.setCosmetic(True)
_LABEL_FILL = QColor(255, 255, 255, 200)
_TEXT = QColor(20, 20, 20)
_OFF_TEXT = QColor(200, 0, 0)

#: A label of a :class:`LabelLayer`: (x, y, text, right, off)
Label = tuple[float, float, str, bool, bool]


class LabelLayer(QGraphicsItem):
    """Short labels pinned to points of the view, each on a translucent white box, drawn at a fixed
    font size whatever the zoom (like ``pg.TextItem``) but all in one ``paint``.

    ``labels``: ``(x, y, text, right, off)`` with ``(x, y)`` in view coordinates, the box's top-left
    corner there (top-right when ``right``); ``off`` draws the text red. ``bounds`` (view coordinates)
    is what the labels lie over (the canvas), used for culling. ``fit`` > 0 (view units, a cell's
    width): a label wider on screen than that is not drawn (it would cover the next cell), so small
    cells keep their colours and only their frames say what they are. ``middle``: ``y`` is the
    label's vertical centre (row names beside a band of cells). ``minor`` (one bool per label): labels
    left out when the labels would overlap on screen (every fifth row name is kept, as on the axis).
    """

    def __init__(
        self,
        labels: list[Label],
        font: QFont,
        bounds: QRectF,
        fit: float = 0.0,
        middle: bool = False,
        minor: list[bool] | None = None,
    ):
        super().__init__()
        self._labels = labels
        self._minor = minor
        self._font = font
        self._bounds = bounds
        self._fit = float(fit)
        self._middle = middle
        self._metrics = QFontMetricsF(font)
        self.drawn: list[str] = []  # the texts the last paint drew (those that fit)
        self.kind = "cells"  # or "rows": the names of the rows of a band
        self.setZValue(10)

    def texts(self) -> list[str]:
        return [t for _, _, t, _, _ in self._labels]

    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        to_device = painter.transform()
        fm = self._metrics
        h = fm.height() + 2
        room = self._fit * math.hypot(to_device.m11(), to_device.m12()) if self._fit > 0 else math.inf
        painter.save()
        painter.resetTransform()
        painter.setFont(self._font)
        painter.setPen(Qt.PenStyle.NoPen)
        clip = QRectF(painter.viewport())
        boxes, minor = [], []
        for j, (x, y, text, right, off) in enumerate(self._labels):
            w = fm.horizontalAdvance(text) + 6
            if w > room + 1:
                continue
            p = to_device.map(QPointF(x, y))
            box = QRectF(p.x() - w if right else p.x(), p.y() - (h / 2 if self._middle else 0), w, h)
            if box.intersects(clip):
                boxes.append((box, text, off))
                minor.append(self._minor is not None and self._minor[j])
        if any(minor) and _overlapping([b for b, _, _ in boxes]):
            boxes = [entry for entry, small in zip(boxes, minor, strict=True) if not small]
        for box, _, _ in boxes:
            painter.fillRect(box, _LABEL_FILL)
        for box, text, off in boxes:
            painter.setPen(_OFF_TEXT if off else _TEXT)
            painter.drawText(box, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()
        self.drawn = [text for _, text, _ in boxes]


def _overlapping(boxes: list[QRectF]) -> bool:
    """Whether two of ``boxes`` overlap (beyond a pixel)."""
    return any(a.adjusted(0, 1, 0, -1).intersects(b) for i, a in enumerate(boxes) for b in boxes[i + 1 :])


class FrameLayer(QGraphicsItem):
    """Coloured frames around cells (``frames``: ``(rect, colour)`` in view coordinates), a cosmetic
    pen ``width`` px wide, all in one ``paint`` (270 rectangle items cost a repaint each)."""

    def __init__(self, frames: list[tuple[QRectF, QColor]], bounds: QRectF, width: float = 2.0):
        super().__init__()
        by_colour: dict[int, tuple[QColor, list[QRectF]]] = {}
        for rect, colour in frames:
            by_colour.setdefault(colour.rgba(), (colour, []))[1].append(rect)
        self._groups = list(by_colour.values())
        self._bounds = bounds
        self._width = float(width)
        self.setZValue(4)

    def frames(self) -> list[tuple[QRectF, QColor]]:
        return [(r, c) for c, rects in self._groups for r in rects]

    def boundingRect(self) -> QRectF:
        return self._bounds

    def paint(
        self, painter: QPainter, option: QStyleOptionGraphicsItem, widget: QWidget | None = None
    ) -> None:
        painter.setBrush(Qt.BrushStyle.NoBrush)
        for colour, rects in self._groups:
            pen = QPen(colour, self._width)
            pen.setCosmetic(True)
            pen.setJoinStyle(Qt.PenJoinStyle.MiterJoin)
            painter.setPen(pen)
            painter.drawRects(rects)


class CellMarks:
    """Role names (and role frames), OFF marks, flowing cell names and the selection frame over a
    mosaic's cells; cells of rows the geometry does not draw (folded away) get none."""

    def __init__(self, vb: pg.ViewBox):
        self.vb = vb
        self.roles: list[list[str]] = []
        self.role_tips: list[list[str]] = []
        #: [R][C] colour of a frame around each cell with a role ("" or None: no frame)
        self.role_colors: list[list[str | None]] = []
        self.marked: set[tuple[int, int]] = set()
        self.selected: tuple[int, int] | None = None
        self.names: list[list[str]] | None = None  # [R][C], written in the top-right corners
        self.kv_group = 1  # > 1: frame each group of this many columns (heads sharing a K/V head)
        self.row_labels: list[str] = []  # [R]: written beside each band after the first
        self._items: list[QGraphicsItem] = []
        self._key: tuple[object, ...] | None = None
        self._select_item: QGraphicsRectItem | None = None

    def role_tip(self, r: int, c: int) -> str:
        tips = self.role_tips
        return tips[r][c] if r < len(tips) and c < len(tips[r]) else ""

    def label(
        self, geom: MosaicGeometry, row_labels: list[str], col_labels: list[str], *, flow: bool, kv_group: int
    ) -> None:
        """Place the marks on ``geom`` for rows and columns named so: flowing cells are each named in
        their corner (``flow``), the bands after the first name their rows, groups of ``kv_group``
        columns are framed (> 1)."""
        names = None
        if flow:
            R = geom.R
            names = [
                [col_labels[c] if R == 1 else f"{row_labels[r]} · {col_labels[c]}" for c in range(geom.C)]
                for r in range(R)
            ]
        self.names, self.row_labels, self.kv_group = names, row_labels, kv_group
        self.place(geom)

    def place(self, geom: MosaicGeometry | None) -> None:
        """(Re)draw the labels and frames for ``geom``; items are rebuilt only when what they show
        changed."""
        self._place_selection(geom)
        names = self.names
        key = (
            geom,
            tuple(map(tuple, self.roles)),
            tuple(map(tuple, self.role_colors)),
            tuple(sorted(self.marked)),
            names and tuple(map(tuple, names)),
            self.kv_group,
            tuple(self.row_labels) if geom is not None and geom.bands > 1 else (),
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
        H, W = geom.canvas_shape
        bounds = QRectF(-geom.g, -geom.g, W + geom.g, H + geom.g)
        font = QFont()
        font.setPointSizeF(7.5)
        texts = {
            (r, c): name
            for r, row in enumerate(self.roles[:R])
            for c, name in enumerate(row[:C])
            if name and geom.shows(r)
        }
        frames = [
            (geom.cell_rect(r, c), QColor(colour))
            for r, row in enumerate(self.role_colors[:R])
            for c, colour in enumerate(row[:C])
            if colour and geom.shows(r)
        ]
        if frames:
            self._add(FrameLayer(frames, bounds))
        for r, c in self.marked:
            if geom.shows(r) and c < C:
                texts[(r, c)] = "OFF " + texts.get((r, c), "")
                rect = QGraphicsRectItem(geom.cell_rect(r, c))
                rect.setPen(_MARK_PEN)
                rect.setZValue(6)
                self._add(rect)
        self._place_groups(geom)
        if geom.bands > 1 and self.row_labels:  # the bands after the first name their rows
            self._place_band_rows(geom, bounds)
        corner: list[Label] = []
        for (r, c), name in texts.items():
            x, y = geom.origin(r, c)
            corner.append((x, y, name.strip(), False, name.startswith("OFF")))
        if corner:  # one item paints them all: 144 TextItems cost ~40 ms a repaint, this ~3 ms
            self._add(LabelLayer(corner, font, bounds, fit=geom.S))
        if names:
            flowing: list[Label] = []
            for r in geom.drawn:
                for c in range(C):
                    x, y = geom.origin(r, c)
                    flowing.append((x + geom.S, y, names[r][c].strip(), True, False))
            self._add(LabelLayer(flowing, font, bounds))

    def _place_groups(self, geom: MosaicGeometry) -> None:
        """One frame per K/V head (``kv_group`` columns), over all the rows of each band."""
        n_rep, C, step = self.kv_group, geom.C, geom.S + geom.g
        if n_rep <= 1 or geom.cols != C or C % n_rep != 0:
            return
        for b in range(geom.bands):
            n_b = min(geom.per_band, geom.n_drawn - b * geom.per_band) if geom.bands > 1 else geom.rows
            for first in range(0, C, n_rep):
                x = geom.band_x(b) + first * step - geom.g / 2
                frame = QGraphicsRectItem(QRectF(x, -geom.g / 2, n_rep * step, n_b * step))
                frame.setPen(_GROUP_PEN)
                frame.setZValue(5)
                self._add(frame)

    def _place_band_rows(self, geom: MosaicGeometry, bounds: QRectF) -> None:
        """The row names beside each band after the first (every fifth kept when they crowd)."""
        step = geom.S + geom.g
        beside: list[Label] = []
        minor: list[bool] = []
        for r in geom.drawn:
            b, i = geom.band_of(r)
            if b and r < len(self.row_labels):
                y = i * step + geom.S / 2
                beside.append((geom.band_x(b) - geom.g - 1, y, self.row_labels[r], True, False))
                minor.append(i % MAJOR_ROWS != 0)
        rows = LabelLayer(beside, QFont(), bounds, middle=True, minor=minor)  # the axes' font
        rows.kind = "rows"
        self._add(rows)

    def _add(self, item: QGraphicsItem) -> None:
        self.vb.addItem(item)
        self._items.append(item)

    def texts(self) -> list[str]:
        """The labels written in the cells (role names, OFF marks, flowing cell names)."""
        return [t for item in self._layers("cells") for t in item.texts()]

    def row_texts(self) -> list[str]:
        """The row names written beside the bands after the first (the axis names the first's)."""
        return [t for item in self._layers("rows") for t in item.texts()]

    def _layers(self, kind: str) -> list[LabelLayer]:
        return [i for i in self._items if isinstance(i, LabelLayer) and i.kind == kind]

    def frames(self) -> list[tuple[QRectF, QColor]]:
        """The role frames drawn: (cell rect, colour)."""
        return [f for item in self._items if isinstance(item, FrameLayer) for f in item.frames()]

    def _place_selection(self, geom: MosaicGeometry | None) -> None:
        cell = self.selected
        if geom is None or cell is None or not geom.shows(cell[0]) or cell[1] >= geom.C:
            if self._select_item is not None:
                self._select_item.setVisible(False)
            return
        rect = geom.cell_rect(*cell).adjusted(-0.5, -0.5, 0.5, 0.5)
        if self._select_item is None:
            self._select_item = QGraphicsRectItem(rect)
            self._select_item.setPen(_SELECT_PEN)
            self._select_item.setZValue(8)
            self.vb.addItem(self._select_item)
        else:
            self._select_item.setRect(rect)
        self._select_item.setVisible(True)


__all__ = ["CellMarks", "FrameLayer", "LabelLayer"]
