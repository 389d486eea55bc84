"""ColorLegend: a vertical colour bar with a value axis and a title, for a ``GraphicsLayout``.

A light stand-in for ``pg.ColorBarItem`` (which is a whole PlotItem with menus: ~10× the cost to
build, and every matrix of the app has a legend beside it). It only shows; it never edits levels.
With ``gamma`` ≠ 1 the bar shows the colours a gamma-scaled lookup table gives each value (see
:mod:`app.widgets.palette`), so the axis still reads in values.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QLinearGradient, QPen
from PySide6.QtWidgets import QGraphicsLinearLayout, QGraphicsWidget

from app.widgets.palette import colormap


class _Bar(QGraphicsWidget):
    """The gradient itself: top = high values."""

    def __init__(self, cmap: str, width: float):
        super().__init__()
        self.setMinimumWidth(width)
        self.setMaximumWidth(width)
        self.set_cmap(cmap)

    def set_cmap(self, cmap: str, gamma: float = 1.0) -> None:
        self._lut = colormap(cmap, gamma).getLookupTable(0.0, 1.0, 64, alpha=False)
        self.update()

    def paint(self, p, *args):
        r = self.rect()
        grad = QLinearGradient(0, r.bottom(), 0, r.top())
        n = len(self._lut)
        for i, (cr, cg, cb) in enumerate(self._lut):
            grad.setColorAt(i / (n - 1), QColor(int(cr), int(cg), int(cb)))
        p.setPen(QPen(QColor(120, 120, 120), 0))
        p.setBrush(QBrush(grad))
        p.drawRect(QRectF(r.left(), r.top(), r.width() - 1, r.height() - 1))


class ColorLegend(QGraphicsWidget):
    """Colour bar of ``cmap`` from ``lo`` (bottom) to ``hi`` (top) with a labelled axis."""

    def __init__(self, cmap: str = "viridis", label: str = "", *, width: float = 12, gamma: float = 1.0):
        super().__init__()
        lay = QGraphicsLinearLayout(Qt.Orientation.Horizontal)
        lay.setContentsMargins(2, 8, 2, 8)
        lay.setSpacing(0)
        self.bar = _Bar(cmap, width)
        self.cmap, self.gamma = cmap, float(gamma)
        if self.gamma != 1.0:
            self.bar.set_cmap(cmap, self.gamma)
        self.axis = pg.AxisItem("right")
        self.axis.enableAutoSIPrefix(False)
        self.axis.setTextPen(pg.mkPen("#444"))
        self.axis.setPen(pg.mkPen("#999"))
        lay.addItem(self.bar)
        lay.addItem(self.axis)
        self.setLayout(lay)
        self.levels = (0.0, 1.0)
        self.label = ""
        self.set_levels(0.0, 1.0)
        self.set_label(label)

    def set_levels(self, lo: float, hi: float) -> None:
        self.levels = (float(lo), float(hi))
        self.axis.setRange(lo, hi)

    def set_label(self, text: str) -> None:
        if text != self.label:
            self.label = text
            self.axis.setLabel(text)

    def set_cmap(self, cmap: str, gamma: float = 1.0) -> None:
        if (cmap, float(gamma)) != (self.cmap, self.gamma):
            self.cmap, self.gamma = cmap, float(gamma)
            self.bar.set_cmap(cmap, self.gamma)


__all__ = ["ColorLegend"]
