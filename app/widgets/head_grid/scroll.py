"""How a tall head grid is scrolled: :class:`RowScroll`.

A vertical scroll bar kept in step with a view box's y range: it shows while the view shows less than
the whole height of the content, moving it moves the view, and the wheel over the view scrolls (Ctrl +
wheel still zooms). Scrolling moves by whole rows of cells.
"""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QRectF, Qt, QTimer
from PySide6.QtGui import QWheelEvent
from PySide6.QtWidgets import QAbstractScrollArea, QScrollBar

#: (top, height, one row) of what a :class:`RowScroll` moves through, in view units
Content = tuple[float, float, float]


class RowScroll(QObject):
    """A vertical scroll bar over ``vb``'s y range (see the module docstring).

    ``content()`` gives ``(top, height, row step)`` of what may be scrolled through, in view units
    (``None``: nothing, the bar hides). ``enabled`` False: the bar stays hidden and the wheel zooms.
    """

    def __init__(self, vb: pg.ViewBox, view: QAbstractScrollArea, content: Callable[[], Content | None]):
        super().__init__(view)
        self.vb, self.view, self.content = vb, view, content
        self.enabled = False
        self.bar = QScrollBar(Qt.Orientation.Vertical)
        self.bar.setFixedWidth(self.bar.sizeHint().width())  # a layout short of room gave it none
        self.bar.setVisible(False)
        self._unit = 1.0  # view units per scroll-bar step (the bar counts in whole numbers)
        self.bar.valueChanged.connect(self._on_bar)
        vb.sigRangeChanged.connect(lambda *_: self.sync())
        view.viewport().installEventFilter(self)

    # ---- view → bar ----------------------------------------------------------------------------
    def sync(self) -> None:
        """Show the bar where the view shows less than the content's height, at the view's place."""
        got = self.content() if self.enabled else None
        if got is None:
            self._show_bar(False)
            return
        top, height, step = got
        (_, _), (y0, y1) = self.vb.viewRange()
        shown = y1 - y0
        if shown >= height - 0.5:
            self._show_bar(False)
            return
        self._unit = max(step / 8.0, 1e-6)
        self.bar.blockSignals(True)
        self.bar.setRange(0, max(1, round((height - shown) / self._unit)))
        self.bar.setPageStep(max(1, round(shown / self._unit)))
        self.bar.setSingleStep(max(1, round(step / self._unit)))
        self.bar.setValue(round((y0 - top) / self._unit))
        self.bar.blockSignals(False)
        self._show_bar(True)

    def _show_bar(self, shown: bool) -> None:
        if shown == self.bar.isVisibleTo(self.bar.parentWidget() or self.bar):
            return
        self.bar.setVisible(shown)
        # shown while its layout was being set (a resize of the view): the layout placed it as if
        # hidden, beside the view's new edge; lay it out again once this resize is over
        QTimer.singleShot(0, self._relayout)

    def _relayout(self) -> None:
        parent = self.bar.parentWidget()
        lay = parent.layout() if parent is not None else None
        if lay is not None:
            lay.invalidate()

    @property
    def active(self) -> bool:
        """Whether the content is taller than the view (the bar is there)."""
        return self.enabled and not self.bar.isHidden()

    # ---- bar → view ----------------------------------------------------------------------------
    def _on_bar(self, value: int) -> None:
        got = self.content()
        if got is None:
            return
        top = got[0]
        self.show_from(top + value * self._unit)

    def show_from(self, y: float) -> None:
        """Show the content from ``y`` (view units) down, the view's width and scale kept."""
        got = self.content()
        (x0, x1), (y0, y1) = self.vb.viewRange()
        shown = y1 - y0
        if got is not None:
            top, height, _ = got
            y = max(top, min(y, top + height - shown))
        self.vb.setRange(xRange=(x0, x1), yRange=(y, y + shown), padding=0.0)

    def scroll_rows(self, rows: float) -> None:
        """Scroll by ``rows`` rows (negative: up), snapped to the start of a row."""
        got = self.content()
        if got is None:
            return
        top, _, step = got
        y0 = self.vb.viewRange()[1][0]
        i = round((y0 - top) / step) + rows
        self.show_from(top + round(i) * step)

    def ensure_visible(self, rect: QRectF, margin: float = 0.0) -> None:
        """Scroll (and pan sideways) as little as shows ``rect`` (view units) whole."""
        (x0, x1), (y0, y1) = self.vb.viewRange()
        dx = dy = 0.0
        if rect.top() - margin < y0:
            dy = rect.top() - margin - y0
        elif rect.bottom() + margin > y1:
            dy = min(rect.bottom() + margin - y1, rect.top() - margin - y0)
        if rect.left() - margin < x0:
            dx = rect.left() - margin - x0
        elif rect.right() + margin > x1:
            dx = min(rect.right() + margin - x1, rect.left() - margin - x0)
        if dx or dy:
            self.vb.setRange(xRange=(x0 + dx, x1 + dx), yRange=(y0 + dy, y1 + dy), padding=0.0)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if not isinstance(event, QWheelEvent) or not self.active:
            return False
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            return False  # Ctrl + wheel: the view box zooms
        notches = event.angleDelta().y() / 120.0
        if notches:
            self.scroll_rows(-notches)
        event.accept()
        return True


__all__ = ["Content", "RowScroll"]
