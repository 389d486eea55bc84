"""A one-line label that never widens its row and never cuts its text mid-letter: it shows as much
of its text as fits, ending in "…", and says the whole of it in its tooltip (:class:`ElidedLabel`)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QWidget


class ElidedLabel(QLabel):
    """``setText`` keeps the whole text (``text()`` returns it); the label paints what fits.

    Its minimum width is 0 (a long model name gives way to the window, not the other way round);
    its tooltip is the whole text, then ``detail`` (:meth:`set_detail`) when there is one.
    """

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.setTextFormat(Qt.TextFormat.PlainText)
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.setProperty("elides", True)  # for layout checks: a shortened text here is by design
        self._full, self._detail = "", ""
        self.setText(text)

    def setText(self, text: str) -> None:
        self._full = text
        self._refresh()

    def text(self) -> str:
        return self._full

    def set_detail(self, detail: str) -> None:
        """More for the tooltip, under the whole text (e.g. a path)."""
        self._detail = detail
        self._refresh()

    def shown_text(self) -> str:
        """What the label paints now (the text, or its start and "…")."""
        return super().text()

    def minimumSizeHint(self) -> QSize:
        return QSize(0, super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:
        m = self.contentsMargins()
        width = self.fontMetrics().horizontalAdvance(self._full) + m.left() + m.right()
        return QSize(width, super().sizeHint().height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._refresh()

    def _refresh(self) -> None:
        room = max(0, self.contentsRect().width())
        shown = self.fontMetrics().elidedText(self._full, Qt.TextElideMode.ElideRight, room)
        super().setText(shown)
        tip = "\n\n".join(part for part in (self._full if shown != self._full else "", self._detail) if part)
        self.setToolTip(tip)
