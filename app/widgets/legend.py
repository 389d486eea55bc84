"""Legends: :class:`ColorLegend`, a vertical colour bar with a value axis and a title, for a
``GraphicsLayout``; :class:`LegendRow` (installed by :func:`legend_row`), the curves' legend as a row
of entries between a plot's title and its data, never over the curves.

A light stand-in for ``pg.ColorBarItem`` (which is a whole PlotItem with menus: ~10× the cost to
build, and every matrix of the app has a legend beside it). It only shows; it never edits levels.
With ``gamma`` ≠ 1 the bar shows the colours a gamma-scaled lookup table gives each value (see
:mod:`app.widgets.palette`), so the axis still reads in values.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF, QSizeF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetricsF, QLinearGradient, QPen
from PySide6.QtWidgets import QGraphicsLinearLayout, QGraphicsWidget

from app.widgets.palette import HIDDEN_COLOR, colormap


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


class _Swatch(QGraphicsWidget):
    """A square of the hidden colour and what it stands for ("masked"): the key to grey cells."""

    def __init__(self, width: float):
        super().__init__()
        self.box = float(width)
        self.label_font = QFont()  # (not ``font``: that is QGraphicsWidget's own method)
        self.label_font.setPointSizeF(8)
        self.text = ""

    def set_text(self, text: str) -> None:
        self.text = text
        self.updateGeometry()
        self.update()

    def text_width(self) -> float:
        return QFontMetricsF(self.label_font).horizontalAdvance(self.text)

    def sizeHint(self, which, constraint=None):
        h = max(self.box, QFontMetricsF(self.label_font).height()) + 4
        w = self.box + 4 + self.text_width() + 2
        if which == Qt.SizeHint.MaximumSize:
            return QSizeF(1e6, h)
        return QSizeF(w, h)

    def paint(self, p, *args):
        h = self.rect().height()
        y = (h - self.box) / 2
        p.setPen(QPen(QColor(120, 120, 120), 0))
        p.setBrush(QBrush(QColor(*HIDDEN_COLOR)))
        p.drawRect(QRectF(0, y, self.box - 1, self.box - 1))
        p.setFont(self.label_font)
        p.setPen(QColor(68, 68, 68))
        p.drawText(
            QRectF(self.box + 4, 0, self.rect().width() - self.box - 4, h),
            int(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter),
            self.text,
        )


class ColorLegend(QGraphicsWidget):
    """Colour bar of ``cmap`` from ``lo`` (bottom) to ``hi`` (top) with a labelled axis; under it,
    when :meth:`set_hidden` names them, a grey square that says what grey cells are ("masked")."""

    def __init__(self, cmap: str = "viridis", label: str = "", *, width: float = 12, gamma: float = 1.0):
        super().__init__()
        outer = QGraphicsLinearLayout(Qt.Orientation.Vertical)
        outer.setContentsMargins(2, 8, 2, 8)
        outer.setSpacing(4)
        self._outer = outer
        top = QGraphicsWidget()
        lay = QGraphicsLinearLayout(Qt.Orientation.Horizontal)
        lay.setContentsMargins(0, 0, 0, 0)
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
        top.setLayout(lay)
        outer.addItem(top)
        self.setLayout(outer)
        self.swatch = _Swatch(width)
        self.swatch.setParentItem(self)
        self.swatch.hide()
        self.hidden_text = ""
        self.levels = (0.0, 1.0)
        self.label = ""
        self.set_levels(0.0, 1.0)
        self.set_label(label)

    def set_levels(self, lo: float, hi: float) -> None:
        self.levels = (float(lo), float(hi))
        self.axis.setRange(lo, hi)
        self._fit_axis()

    def set_label(self, text: str) -> None:
        if text != self.label:
            self.label = text
            self.axis.setLabel(text)
            self._fit_axis()

    def _fit_axis(self) -> None:
        """A fixed axis width that holds its widest tick text and its label: pyqtgraph's own
        (``autoExpandTextSpace``) only widens after a paint that already cut the numbers, and a
        layout short of room never gives the width back."""
        key = (self.levels, self.label)
        if key == getattr(self, "_fitted", None):
            return
        self._fitted = key
        lo, hi = self.levels
        ax = self.axis
        fm = QFontMetricsF(ax.style["tickFont"] or QFont())
        widest = 0.0
        if hi > lo:
            for size in (60.0, 200.0, 600.0):  # the tick density (so the decimals) follows the bar's height
                for spacing, values in ax.tickValues(lo, hi, size):
                    for text in ax.tickStrings(values, 1.0, spacing):
                        widest = max(widest, fm.horizontalAdvance(text))
        label = ax.label.boundingRect().height() * 0.8 if self.label else 0.0
        ax.setWidth(int(widest + ax.style["tickTextOffset"][0] + max(0, ax.style["tickLength"]) + label + 3))

    def set_cmap(self, cmap: str, gamma: float = 1.0) -> None:
        if (cmap, float(gamma)) != (self.cmap, self.gamma):
            self.cmap, self.gamma = cmap, float(gamma)
            self.bar.set_cmap(cmap, self.gamma)

    def set_hidden(self, text: str | None) -> None:
        """Show a grey square labelled ``text`` under the bar (what grey cells are), or none (None/"")."""
        text = text or ""
        if text == self.hidden_text:
            return
        self.hidden_text = text
        if text:
            self.swatch.set_text(text)
            if not self.swatch.isVisible():
                self._outer.addItem(self.swatch)
                self.swatch.show()
        elif self.swatch.isVisible():
            self._outer.removeItem(self.swatch)
            self.swatch.hide()


class LegendRow(pg.GraphicsWidget):
    """A plot's legend as a row of entries (a sample of the line, its name) above the data.

    pyqtgraph's legend floats over the view box and covers whatever curve passes under it (the Train
    tab's loss at its start, Compare's runs). This one sits in the plot's own layout, under the title
    and over the view box; entries flow left to right and wrap onto more lines when the plot is
    narrow; it takes no height when empty. A drop-in for ``plot.legend``: ``addItem(item, name)``,
    ``removeItem(item or name)``, ``clear()``, ``items`` [(sample, label)] (named items added to the
    plot join it by themselves).
    """

    GAP = 14  # px between entries
    SAMPLE = 20  # px of a sample (pyqtgraph's ItemSample)

    def __init__(self, *, text_size: str = "9pt", color: str = "#333"):
        super().__init__()
        self.items: list[tuple[pg.ItemSample, pg.LabelItem]] = []
        self.text_size, self.color = text_size, color
        self._height = -1.0
        self._wanted = True  # False after hide(): no entries shown and no height taken
        self._place()

    def setVisible(self, visible: bool) -> None:
        self._wanted = bool(visible)
        self._place()

    def hide(self) -> None:  # Qt's hide() and show() do not go through a Python setVisible
        self.setVisible(False)

    def show(self) -> None:
        self.setVisible(True)

    def addItem(self, item, name: str) -> None:
        label = pg.LabelItem(name, justify="left", size=self.text_size, color=self.color)
        label.natural_width = label.itemRect().width()  # on one line (the row wraps a longer one)
        sample = item if isinstance(item, pg.ItemSample) else pg.ItemSample(item)
        for part in (sample, label):
            part.setParentItem(self)
        self.items.append((sample, label))
        self._place()

    def removeItem(self, item) -> None:
        for sample, label in self.items:
            if sample.item is item or label.text == item:
                self.items.remove((sample, label))
                for part in (sample, label):
                    part.setParentItem(None)
                    if part.scene() is not None:
                        part.scene().removeItem(part)
                self._place()
                return

    def clear(self) -> None:
        for sample, _ in list(self.items):
            self.removeItem(sample.item)

    def getLabel(self, item):
        return next((label for sample, label in self.items if sample.item is item), None)

    def resizeEvent(self, ev) -> None:
        self._place()

    def _place(self) -> None:
        """Lay the entries out in lines as wide as the row; the row takes the lines' height."""
        width = self.size().width()
        width = width if width > 1 else 1e6
        x = y = line_h = 0.0
        for sample, label in self.items:
            # a name longer than the whole row wraps within it (else it would run out of the plot)
            room = width - self.SAMPLE - 2
            wrap = max(40.0, room) if label.natural_width > room else -1.0
            if abs(label.item.textWidth() - wrap) > 0.5:
                label.item.setTextWidth(wrap)
            text = label.itemRect()
            w = self.SAMPLE + 2 + text.width()
            h = max(float(self.SAMPLE), text.height())
            if x > 0 and x + w > width:
                x, y, line_h = 0.0, y + line_h, 0.0
            sample.setPos(x, y + (h - self.SAMPLE) / 2)
            label.setGeometry(QRectF(x + self.SAMPLE + 2, y, text.width(), text.height()))
            x += w + self.GAP
            line_h = max(line_h, h)
        height = y + line_h if self._wanted else 0.0
        super().setVisible(height > 0)
        if abs(height - self._height) > 0.5:
            self._height = height
            self.setMinimumHeight(height)
            self.setMaximumHeight(height)
            self.updateGeometry()

    def sizeHint(self, which, constraint=None) -> QSizeF:
        if which == Qt.SizeHint.MaximumSize:
            return QSizeF(1e6, max(0.0, self._height))
        return QSizeF(0, max(0.0, self._height))


def legend_row(plot: pg.PlotItem, *, text_size: str = "9pt") -> LegendRow:
    """Give ``plot`` a :class:`LegendRow` between its title and its view box as its legend: the curves
    added with a name show up in it. It takes the cell of the top axis, hidden in a curve plot (and
    taken out of the layout: don't show it afterwards)."""
    row = LegendRow(text_size=text_size)
    top = plot.getAxis("top")
    if not top.isVisible():  # its cell: a curve plot never shows a top axis
        plot.layout.removeItem(top)
    plot.layout.addItem(row, 1, 1)
    plot.legend = row
    return row


__all__ = ["ColorLegend", "LegendRow", "legend_row"]
