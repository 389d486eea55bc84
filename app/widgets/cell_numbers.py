"""Numbers written in a matrix's cells, painted by one graphics item (:class:`CellNumbers`)."""

from __future__ import annotations

from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF
from PySide6.QtWidgets import QGraphicsItem


class CellNumbers(QGraphicsItem):
    """The numbers written in a matrix's cells, all in one ``paint`` (one ``pg.TextItem`` per cell
    cost tens of ms a repaint for a few hundred cells). ``cells``: ``(row, col, text, colour)``, each
    centred on ``(col + 0.5, row + 0.5)`` in view coordinates, at a fixed font size whatever the zoom;
    a number that does not fit its cell at the current size is left out (zoom in, or hover)."""

    def __init__(self, font: QFont):
        super().__init__()
        self._font = font
        self._metrics = QFontMetricsF(font)
        self.cells: list[tuple[int, int, str, QColor]] = []
        self._shape = (0, 0)
        self.setZValue(10)

    def set_cells(self, cells: list[tuple[int, int, str, QColor]], shape: tuple[int, int]) -> None:
        self.prepareGeometryChange()
        self.cells, self._shape = cells, shape
        self.update()

    def boundingRect(self) -> QRectF:
        R, C = self._shape
        return QRectF(0, 0, C, R)

    def paint(self, painter, option, widget=None) -> None:
        if not self.cells:
            return
        to_device = painter.transform()
        fm = self._metrics
        h = fm.height()
        painter.save()
        painter.resetTransform()
        painter.setFont(self._font)
        clip = QRectF(painter.viewport())
        origin, corner = to_device.map(QPointF(0, 0)), to_device.map(QPointF(1, 1))
        cell_w, cell_h = abs(corner.x() - origin.x()), abs(corner.y() - origin.y())
        for r, c, text, colour in self.cells:
            p = to_device.map(QPointF(c + 0.5, r + 0.5))
            w = fm.horizontalAdvance(text) + 4
            if w > cell_w + 2 or h > cell_h + 4:
                continue  # a number wider than its cell would run over its neighbours: the readout has it
            box = QRectF(p.x() - w / 2, p.y() - h / 2, w, h)
            if box.intersects(clip):
                painter.setPen(colour)
                painter.drawText(box, Qt.AlignmentFlag.AlignCenter, text)
        painter.restore()


__all__ = ["CellNumbers"]
