"""The setup docks give way on a small screen, so a tab keeps the room its pages need.

A dock is 390 px wide by default. On a window narrower than about 1220 px that would leave a tab less
than its pages' minimum (the tab would scroll sideways), so :class:`DockRoom` holds the docks beside
the tabs to at most ``DOCK_SHARE`` of the window's width (never under their own minimum), and gives
them back their width when the window grows again. A dock the user dragged wider on a big window
keeps its width there.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt, QTimer
from PySide6.QtWidgets import QDockWidget, QMainWindow

#: px: the docks' width on a screen that has room for it
DOCK_WIDTH = 390
#: px: the narrowest a dock may be (its forms wrap their long labels onto two lines to fit)
DOCK_MIN_WIDTH = 320
#: the largest part of the window's width the docks beside the tabs take on a small screen
DOCK_SHARE = 0.31


class DockRoom(QObject):
    """Keeps ``docks`` (left or right of the tabs) to their share of ``window``'s width."""

    def __init__(self, window: QMainWindow, docks: list[QDockWidget]):
        super().__init__(window)
        self.window, self.docks = window, docks
        self._shrunk = False
        # a resize before the window is shown (its first size) comes before the docks are laid out:
        # fit again once the event loop has placed them, and after each later resize
        self._later = QTimer(self)
        self._later.setSingleShot(True)
        self._later.setInterval(0)
        self._later.timeout.connect(self.fit)
        window.installEventFilter(self)

    def most(self) -> int:
        """The widest (px) a dock beside the tabs may be at the window's current width."""
        return max(DOCK_MIN_WIDTH, int(DOCK_SHARE * self.window.width()))

    def _in_front(self) -> list[QDockWidget]:
        """The docks shown beside the tabs (a tabbed dock behind another is moved out of the window)."""
        frame = QRect(QPoint(0, 0), self.window.size())
        return [
            d for d in self.docks if d.isVisible() and not d.isFloating() and frame.intersects(d.geometry())
        ]

    def fit(self) -> None:
        most = self.most()
        docks = self._in_front()
        wide = [d for d in docks if d.width() > most]
        if wide:
            self.window.resizeDocks(wide, [most] * len(wide), Qt.Orientation.Horizontal)
            self._shrunk = True
        elif self._shrunk and docks:
            width = min(DOCK_WIDTH, most)
            narrow = [d for d in docks if d.width() < width]
            if narrow:
                self.window.resizeDocks(narrow, [width] * len(narrow), Qt.Orientation.Horizontal)
            self._shrunk = width < DOCK_WIDTH

    def eventFilter(self, obj, event) -> bool:
        if obj is self.window and event.type() in (QEvent.Type.Resize, QEvent.Type.Show):
            self.fit()
            self._later.start()
        return False
