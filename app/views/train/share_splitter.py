"""A splitter that keeps its first part's share of the length, whatever the window's size, until the
user drags its divider (then their sizes stand, as in any splitter)."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QWidget


class ShareSplitter(QSplitter):
    """Two parts; the first gets ``share`` of the length, but at least ``least`` pixels (and its
    minimum size), the second the rest, on every resize until :attr:`dragged`. A plain splitter
    gives the extra space by stretch factors over the parts' size hints, which left the Train tab's
    Generate box 3 lines tall at 1280×800."""

    def __init__(
        self, orientation: Qt.Orientation, share: float, least: int = 0, parent: QWidget | None = None
    ):
        super().__init__(orientation, parent)
        self.share, self.least = share, least
        self.dragged = False
        self.splitterMoved.connect(self._on_moved)

    def _on_moved(self, *_: int) -> None:
        self.dragged = True

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if not self.dragged and self.count() == 2:
            self.apply_share()

    def apply_share(self) -> None:
        """Sizes of ``share`` and the rest of the length now."""
        total = sum(self.sizes())
        if total <= 0:
            return
        first = min(total, max(self.least, round(total * self.share)))
        self.setSizes([first, total - first])


__all__ = ["ShareSplitter"]
