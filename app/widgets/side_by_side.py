"""Two widgets side by side when the page has room for both, else one above the other.

A page with a plot beside a table needs, side by side, the sum of their widths; on a small screen
that makes the whole tab scroll sideways. :class:`SideBySide` asks only for the wider of the two and
stacks them when its width is below ``first_min`` (the least the first one is drawn at beside the
second) plus the second one's minimum. :class:`PlotGrid` does the same for a row of plots: as many
columns as fit.
"""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QBoxLayout, QGridLayout, QWidget


class SideBySide(QWidget):
    """``first`` left of ``second`` (stretch ``stretch``), or ``first`` above ``second``."""

    def __init__(self, first: QWidget, second: QWidget, *, first_min: int, stretch=(1, 1), parent=None):
        super().__init__(parent)
        self.first, self.second, self.first_min = first, second, first_min
        self.box = QBoxLayout(QBoxLayout.Direction.LeftToRight, self)
        self.box.setContentsMargins(0, 0, 0, 0)
        self.box.addWidget(first, stretch[0])
        self.box.addWidget(second, stretch[1])

    def _need(self) -> int:
        """px: the width below which the two are stacked."""
        second = self.second.minimumSizeHint().expandedTo(self.second.minimumSize()).width()
        return self.first_min + self.box.spacing() + second

    def side_by_side(self) -> bool:
        return self.box.direction() == QBoxLayout.Direction.LeftToRight

    def minimumSizeHint(self) -> QSize:
        a = self.first.minimumSizeHint().expandedTo(self.first.minimumSize())
        b = self.second.minimumSizeHint().expandedTo(self.second.minimumSize())
        if self.side_by_side():
            return QSize(max(a.width(), b.width()), max(a.height(), b.height()))
        return QSize(max(a.width(), b.width()), a.height() + self.box.spacing() + b.height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        want = (
            QBoxLayout.Direction.LeftToRight
            if event.size().width() >= self._need()
            else QBoxLayout.Direction.TopToBottom
        )
        if self.box.direction() != want:
            self.box.setDirection(want)
            self.updateGeometry()


class PlotGrid(QWidget):
    """``widgets`` in as many columns as fit at ``min_width`` px each (at most ``columns``), row by
    row: three plots in a row at 1920 px, two at 1280, one under the other at 1024 (each keeps its
    own minimum height, so the page scrolls down rather than squash them)."""

    def __init__(self, widgets: list[QWidget], *, min_width: int, columns: int | None = None, parent=None):
        super().__init__(parent)
        self.widgets, self.min_width = list(widgets), min_width
        self.most = columns or len(self.widgets)
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.columns = 0
        self._place(self.most)

    def _place(self, columns: int) -> None:
        if columns == self.columns:
            return
        self.columns = columns
        for w in self.widgets:
            self.grid.removeWidget(w)
        for i, w in enumerate(self.widgets):
            self.grid.addWidget(w, i // columns, i % columns)
        for c in range(self.most):
            self.grid.setColumnStretch(c, 1 if c < columns else 0)
        self.updateGeometry()

    def minimumSizeHint(self) -> QSize:
        sizes = [w.minimumSizeHint().expandedTo(w.minimumSize()) for w in self.widgets]
        rows = -(-len(self.widgets) // max(1, self.columns))
        tallest = max((s.height() for s in sizes), default=0)
        return QSize(
            max((s.width() for s in sizes), default=0), rows * tallest + (rows - 1) * self.grid.spacing()
        )

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        fit = (event.size().width() + self.grid.spacing()) // (self.min_width + self.grid.spacing())
        self._place(max(1, min(self.most, fit)))
