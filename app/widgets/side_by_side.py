"""Two widgets side by side when the page has room for both, else one above the other.

A page with a plot beside a table needs, side by side, the sum of their widths; on a small screen
that makes the whole tab scroll sideways. :class:`SideBySide` asks only for the wider of the two and
stacks them when its width is below ``first_min`` (the least the first one is drawn at beside the
second) plus the second one's minimum.
"""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QBoxLayout, QWidget


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
