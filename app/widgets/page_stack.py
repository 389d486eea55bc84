"""Stacks of pages that ask for the room of the page in front only.

Qt sizes a ``QStackedWidget`` or a ``QTabWidget`` to the largest minimum of all its pages, shown or
not: once a wide page has been built, every other page of the tab is held at that width and the tab
scrolls sideways on a small screen. These two report the current page's minimum (and size hint)
instead, and ask their parent to lay out again when the page changes.
"""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QStackedWidget, QStyle, QTabWidget, QWidget


def _minimum(page: QWidget) -> QSize:
    return page.minimumSizeHint().expandedTo(page.minimumSize())


class CurrentPageStack(QStackedWidget):
    """A ``QStackedWidget`` whose minimum and preferred size are its current page's."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.currentChanged.connect(lambda _i: self.updateGeometry())

    def minimumSizeHint(self) -> QSize:
        page = self.currentWidget()
        return super().minimumSizeHint() if page is None else _minimum(page)

    def sizeHint(self) -> QSize:
        page = self.currentWidget()
        return super().sizeHint() if page is None else page.sizeHint().expandedTo(_minimum(page))


class CurrentPageTabs(QTabWidget):
    """A ``QTabWidget`` whose minimum size is its tab bar above its current page's minimum."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.currentChanged.connect(lambda _i: self.updateGeometry())

    def _around(self, inner: QSize) -> QSize:
        frame = (
            0
            if self.documentMode()
            else 2 * self.style().pixelMetric(QStyle.PixelMetric.PM_DefaultFrameWidth)
        )
        bar = self.tabBar().minimumSizeHint() if self.tabBar().isVisible() else QSize(0, 0)
        return QSize(max(bar.width(), inner.width() + frame), bar.height() + inner.height() + frame)

    def minimumSizeHint(self) -> QSize:
        page = self.currentWidget()
        return super().minimumSizeHint() if page is None else self._around(_minimum(page))
