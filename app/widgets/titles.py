"""Titles that wrap: :class:`WrapLabel`, a ``pg.LabelItem`` whose text breaks onto as many lines as the
width the layout gives it needs, and :func:`wrapping_title`, which gives a plot such a title.

pyqtgraph's labels are one line as wide as their text: a long title either widened the scene past
its view (the plot cut off at the right) or, made shrinkable, ran over its neighbours (two titles side
by side under 1100 px, a title under a colour bar). A wrapped title takes no width of its own (the
columns are shared by the plots, not by the titles' lengths) and exactly the height of its lines.
"""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import QSizeF, Qt

_ALIGN = {
    "left": Qt.AlignmentFlag.AlignLeft,
    "center": Qt.AlignmentFlag.AlignHCenter,
    "right": Qt.AlignmentFlag.AlignRight,
}


class WrapLabel(pg.LabelItem):
    """A label whose text wraps to its width (``justify`` aligns every line); ``on_height(h)`` hears
    the height its lines need, after each change of text or width."""

    def __init__(self, text: str = " ", *, on_height: Callable[[float], None] | None = None, **opts):
        self._on_height = on_height
        self._wrap_width = -1.0
        super().__init__(text, **opts)

    def set_on_height(self, on_height: Callable[[float], None] | None) -> None:
        self._on_height = on_height
        self.updateMin()

    def _set_wrap_width(self, width: float) -> None:
        option = self.item.document().defaultTextOption()
        option.setAlignment(_ALIGN.get(self.opts.get("justify", "center"), Qt.AlignmentFlag.AlignHCenter))
        self.item.document().setDefaultTextOption(option)
        self._wrap_width = width
        self.item.setTextWidth(width if width > 1 else -1)

    def resizeEvent(self, ev) -> None:
        width = self.size().width()
        if abs(width - self._wrap_width) > 0.5:
            self._set_wrap_width(width)
        super().resizeEvent(ev)

    def updateMin(self) -> None:
        if not hasattr(self, "_wrap_width"):  # called from LabelItem.__init__ before ours ran
            return
        self._set_wrap_width(self.size().width())
        h = self.itemRect().height()
        self.setMinimumWidth(0)
        self.setMinimumHeight(h)
        self._sizeHint = {
            Qt.SizeHint.MinimumSize: (0, h),
            Qt.SizeHint.PreferredSize: (0, h),
            Qt.SizeHint.MaximumSize: (-1, -1),
            Qt.SizeHint.MinimumDescent: (0, 0),
        }
        if self._on_height is not None and self.isVisible():
            self._on_height(h)
        self.updateGeometry()

    def sizeHint(self, hint, constraint=None) -> QSizeF:
        return QSizeF(*self._sizeHint.get(hint, (0, 0)))


def wrapping_title(plot: pg.PlotItem) -> pg.PlotItem:
    """Give ``plot`` a :class:`WrapLabel` title: ``plot.setTitle`` works as before, and a title wider
    than the plot wraps onto more lines (its row grows to fit) instead of being cut or running over
    its neighbours. Idempotent."""
    old = plot.titleLabel
    if isinstance(old, WrapLabel):
        return plot

    def fit_row(h: float) -> None:
        plot.layout.setRowFixedHeight(0, h)
        label.setMaximumHeight(h)

    label = WrapLabel("", justify=old.opts.get("justify", "center"))
    label.opts.update({k: v for k, v in old.opts.items() if k != "justify"})
    plot.layout.removeItem(old)
    old.setParentItem(None)
    if old.scene() is not None:
        old.scene().removeItem(old)
    label.setParentItem(plot)
    plot.layout.addItem(label, 0, 0, 1, 3)  # over the axes too: the whole plot's width to wrap in
    plot.titleLabel = label
    label.set_on_height(fit_row)
    if old.isVisible() and old.text.strip():
        plot.setTitle(old.text)
    else:
        plot.setTitle(None)
    return plot


__all__ = ["WrapLabel", "wrapping_title"]
