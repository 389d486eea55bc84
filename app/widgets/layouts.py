"""Small layout pieces several tabs and panels share: scroll columns and wrapping control rows."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLayoutItem,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)


class VerticalScroll(QScrollArea):
    """A scroll area that scrolls only up and down: it is never narrower than its body's minimum
    width plus its scroll bar, so the body is never cut at the right (a dock or column holding it
    grows instead)."""

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        body = self.widget()
        if body is None:
            return hint
        frame = 2 * self.frameWidth()
        width = body.minimumSizeHint().expandedTo(body.minimumSize()).width()
        return QSize(
            max(hint.width(), width + self.verticalScrollBar().sizeHint().width() + frame), hint.height()
        )


def compact_combo(combo: QComboBox, chars: int = 8) -> QComboBox:
    """Let ``combo`` be as narrow as ``chars`` characters (its arrow always in sight; the open list
    shows every item whole, and a wider layout still widens it), not as wide as its longest item."""
    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
    combo.setMinimumContentsLength(chars)
    return combo


def vertical_scroll(*, frame: bool = True) -> tuple[QScrollArea, QVBoxLayout]:
    """A :class:`VerticalScroll` (its body always fits its width), and the layout of its body: a
    setup panel or editor column taller than the window."""
    scroll = VerticalScroll()
    scroll.setWidgetResizable(True)
    if not frame:
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
    scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
    body = QWidget()
    scroll.setWidget(body)
    return scroll, QVBoxLayout(body)


def scrolled(widget: QWidget) -> QVBoxLayout:
    """Fill ``widget`` with a frameless :func:`vertical_scroll`; the layout to add its content to."""
    outer = QVBoxLayout(widget)
    outer.setContentsMargins(0, 0, 0, 0)
    scroll, layout = vertical_scroll(frame=False)
    outer.addWidget(scroll)
    return layout


def pin_above(widget: QWidget, pinned: QWidget) -> None:
    """Put ``pinned`` (a panel's error line) above the :func:`scrolled` body of ``widget``: it stays
    in sight however far the form is scrolled."""
    outer = widget.layout()
    if not isinstance(outer, QVBoxLayout):
        raise TypeError(f"pin_above: {type(widget).__name__} has no scrolled() body to pin above")
    pinned.setContentsMargins(8, 4, 8, 4)
    outer.insertWidget(0, pinned)


__all__ = ["VerticalScroll", "compact_combo", "pin_above", "scrolled", "vertical_scroll"]


class FlowLayout(QLayout):
    """A row of controls that wraps onto more lines when the page is narrow (like words in a line).

    A drop-in for a ``QHBoxLayout`` of controls: ``addWidget``; ``addStretch`` is accepted and does
    nothing (the rest of the line stays empty anyway). Its minimum width is that of its widest item,
    so a page of many controls still fits a small screen; its height follows the width
    (``heightForWidth``). Keep a label with its control by adding them as one widget
    (:func:`labelled`).
    """

    def __init__(self, parent: QWidget | None = None, spacing: int = 6):
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self.setContentsMargins(0, 0, 0, 0)
        self.setSpacing(spacing)

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def addStretch(self, _stretch: int = 0) -> None:
        """Nothing to do: a line's free space is always at its end."""

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:
        """All items on one line."""
        w = sum(i.sizeHint().width() for i in self._visible()) + self.spacing() * max(
            0, len(self._visible()) - 1
        )
        h = max((i.sizeHint().height() for i in self._visible()), default=0)
        m = self.contentsMargins()
        return QSize(w + m.left() + m.right(), h + m.top() + m.bottom())

    def minimumSize(self) -> QSize:
        """One item per line at the narrowest: the widest item decides."""
        size = QSize()
        for item in self._visible():
            size = size.expandedTo(item.minimumSize())
        m = self.contentsMargins()
        return size + QSize(m.left() + m.right(), m.top() + m.bottom())

    def _visible(self) -> list[QLayoutItem]:
        return [i for i in self._items if not ((w := i.widget()) is not None and w.isHidden())]

    def _place(self, rect: QRect, *, move: bool) -> int:
        """Lay the items out left to right in ``rect``, wrapping; returns the height used."""
        m = self.contentsMargins()
        area = rect.adjusted(m.left(), m.top(), -m.right(), -m.bottom())
        x, y, line_h, gap = area.x(), area.y(), 0, self.spacing()
        for item in self._visible():
            hint = item.sizeHint()
            if x > area.x() and x + hint.width() > area.right() + 1:
                x, y, line_h = area.x(), y + line_h + gap, 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + gap
            line_h = max(line_h, hint.height())
        return y + line_h - rect.y() + m.bottom()


def labelled(row: QLayout, text: str, widget: QWidget) -> QWidget:
    """Add ``text`` and ``widget`` to ``row`` as one unit (a wrapping row keeps them together);
    returns ``widget``."""
    pair = QWidget()
    lay = QHBoxLayout(pair)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.setSpacing(4)
    lay.addWidget(QLabel(text))
    lay.addWidget(widget)
    row.addWidget(pair)
    return widget
