"""A word-wrapped label that is never shorter than its lines.

Qt sizes a layout row by a wrapped label's height at the label's *widest* (its size hint), so in a
narrow column the label wraps onto more lines than its row holds and the last ones are cut (a form
label's grey field name in the Model dock, the end of a lab's "What to notice" on a 1024 px screen,
the Budget's FLOPs note). :class:`WrappedLabel` holds its minimum height at ``heightForWidth`` of the
width it is given, so the layout grows the row (or the page scrolls) instead.
"""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget


class WrappedLabel(QLabel):
    """A word-wrapped :class:`QLabel` as tall as its lines at its width."""

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(text, parent)
        self.setWordWrap(True)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit(event.size().width())

    def setText(self, text: str) -> None:
        super().setText(text)
        self._fit(self.width())

    def _fit(self, width: int) -> None:
        need = self.heightForWidth(width) if width > 0 else -1
        if need > 0 and need != self.minimumHeight():
            self.setMinimumHeight(need)  # the layout places it again, at the same width


__all__ = ["WrappedLabel"]
