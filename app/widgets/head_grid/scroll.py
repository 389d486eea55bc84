"""How a tall :class:`~app.widgets.head_grid.grid.HeadMosaic` is read: named column groups and a scroll bar.

:class:`GroupAxis` is the grid's top axis: a label per column (``h0``, ``h1``, …) and, above them,
one name per group of columns with a bracket under it (grouped-query attention: the query heads that
share a key/value head, ``K/V head 0`` or ``kv0`` when the group is narrow). The groups are given
in view coordinates, so they follow zoom and pan like the tick labels; their texts are part of the
axis's draw specs, where the tick labels are.

:class:`RowScroll` is a vertical scroll bar kept in step with a view box's y range: it shows while
the view shows less than the whole height of the content, moving it moves the view, and the wheel
over the view scrolls (Ctrl + wheel still zooms). Scrolling moves by whole rows of cells.

:class:`KeyFilter` hands the keys pressed on the view to a callback (the mosaic's arrows, Enter,
Page Up/Down); :func:`step_from` is where an arrow key goes from a cell: Left/Right through the heads
(on to the next or previous drawn row at the ends), Up/Down through the drawn rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QRectF, Qt, QTimer
from PySide6.QtGui import QColor, QFontMetricsF, QImage, QPainter, QPen
from PySide6.QtWidgets import QScrollBar, QWidget

#: (top, height, one row) of what a :class:`RowScroll` moves through, in view units
Content = tuple[float, float, float]

#: The colour of a group's bracket (the blue of the frames around the heads sharing a K/V head).
GROUP_COLOR = QColor(40, 90, 200)


class GroupAxis(pg.AxisItem):
    """A top axis that also names groups of columns (see the module docstring)."""

    def __init__(self, orientation: str = "top", **kwargs):
        super().__init__(orientation, **kwargs)
        #: (x0, x1, text, short text) in view coordinates, left to right
        self.groups: list[tuple[float, float, str, str]] = []
        self._bracket = QPen(GROUP_COLOR, 1.5)
        self._bracket.setCosmetic(True)

    def set_groups(self, groups: list[tuple[float, float, str, str]]) -> None:
        if groups == self.groups:
            return
        self.groups = list(groups)
        self._updateHeight()
        self.picture = None
        self.update()

    def _band(self) -> float:
        """Height of the band of group names (above the tick labels)."""
        return self._metrics().height() + 6 if self.groups else 0.0

    def _metrics(self) -> QFontMetricsF:
        font = self.style.get("tickFont")
        return QFontMetricsF(font) if font is not None else QFontMetricsF(self.font())

    def _updateHeight(self) -> None:
        super()._updateHeight()
        if getattr(self, "groups", None) and self.isVisible():  # (pyqtgraph calls it from __init__)
            h = self.maximumHeight() + self._band()
            self.setMaximumHeight(h)
            self.setMinimumHeight(h)

    def generateDrawSpecs(self, p):
        specs = super().generateDrawSpecs(p)
        if specs is None or not self.groups or self.range[1] == self.range[0]:
            return specs
        axis_spec, tick_specs, text_specs = specs
        bounds = self.mapRectFromParent(self.geometry())
        lo, hi = self.range
        scale = bounds.width() / (hi - lo)
        fm = self._metrics()
        h = fm.height()
        y_line = bounds.top() + h + 2
        for x0, x1, text, short in self.groups:
            a = bounds.left() + (x0 - lo) * scale
            b = bounds.left() + (x1 - lo) * scale
            a, b = max(a, bounds.left()), min(b, bounds.right())
            if b - a < 8:
                continue
            tick_specs.append((self._bracket, pg.Point(a + 3, y_line), pg.Point(b - 3, y_line)))
            for x in (a + 3, b - 3):
                tick_specs.append((self._bracket, pg.Point(x, y_line), pg.Point(x, y_line + 3)))
            room = b - a - 6
            shown = next((t for t in (text, short) if fm.horizontalAdvance(t) + 4 <= room), "")
            if shown:
                text_specs.append((QRectF(a, bounds.top(), b - a, h), Qt.AlignmentFlag.AlignCenter, shown))
        return axis_spec, tick_specs, text_specs

    def group_texts(self) -> list[str]:
        """The group names the axis draws at its current size and range."""
        image = QImage(8, 8, QImage.Format.Format_ARGB32)
        painter = QPainter(image)
        try:
            specs = self.generateDrawSpecs(painter)
        finally:
            painter.end()
        if specs is None:
            return []
        names = {t for g in self.groups for t in g[2:]}
        return [t for _rect, _flags, t in specs[2] if t in names]


class SmoothImage(pg.ImageItem):
    """An ImageItem that, once ``smooth``, is scaled down smoothly (bilinear) instead of by dropping
    rows and columns: drawn with up to 1.5 image pixels per screen pixel, every image pixel still
    shows. Enlarged, its pixels stay sharp squares."""

    smooth = False

    def paint(self, painter, *args):
        if self.smooth:
            t = painter.transform()
            smaller = math.hypot(t.m11(), t.m12()) < 0.999 or math.hypot(t.m21(), t.m22()) < 0.999
            painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform, smaller)
        super().paint(painter, *args)


class RowScroll(QObject):
    """A vertical scroll bar over ``vb``'s y range (see the module docstring).

    ``content()`` gives ``(top, height, row step)`` of what may be scrolled through, in view units
    (``None``: nothing, the bar hides). ``enabled`` False: the bar stays hidden and the wheel zooms.
    """

    def __init__(self, vb: pg.ViewBox, view: QWidget, content: Callable[[], Content | None]):
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
        if event.type() != QEvent.Type.Wheel or not self.active:
            return False
        if event.modifiers() & Qt.KeyboardModifier.ControlModifier:
            return False  # Ctrl + wheel: the view box zooms
        notches = event.angleDelta().y() / 120.0
        if notches:
            self.scroll_rows(-notches)
        event.accept()
        return True


def kv_groups(geom, n: int) -> list[tuple[float, float, str, str]]:
    """The groups of ``n`` columns sharing a K/V head in each band of ``geom`` (a
    :class:`~app.widgets.head_grid.geometry.MosaicGeometry`), for :meth:`GroupAxis.set_groups`; none unless
    ``n`` > 1 and the columns are the heads."""
    if n <= 1 or geom.cols != geom.C:
        return []
    step, half = geom.S + geom.g, geom.g / 2
    groups = []
    for b in range(geom.bands):
        x = geom.band_x(b) - half
        for i, first in enumerate(range(0, geom.C, n)):
            groups.append((x + first * step, x + (first + n) * step, f"K/V head {i}", f"kv{i}"))
    return groups


def step_from(geom, cell: tuple[int, int] | None, key: int) -> tuple[int, int] | None:
    """The head an arrow ``key`` moves to from ``cell`` in ``geom`` (a
    :class:`~app.widgets.head_grid.geometry.MosaicGeometry`; within its drawn rows), or None for
    another key. From no cell (or one folded away), the first drawn head."""
    if key not in (Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_Up, Qt.Key.Key_Down):
        return None
    drawn = geom.drawn
    if cell is None or not geom.shows(cell[0]):
        return drawn[0], 0
    r, c = cell
    i, last = drawn.index(r), len(drawn) - 1
    if key == Qt.Key.Key_Left:
        return (r, c - 1) if c > 0 else (drawn[i - 1], geom.C - 1) if i > 0 else (r, c)
    if key == Qt.Key.Key_Right:
        return (r, c + 1) if c + 1 < geom.C else (drawn[i + 1], 0) if i < last else (r, c)
    if key == Qt.Key.Key_Up:
        return drawn[max(0, i - 1)], c
    return drawn[min(last, i + 1)], c


class KeyFilter(QObject):
    """Gives the keys pressed on ``view`` to ``on_key(key) -> handled`` (the view then takes the
    focus by click or Tab)."""

    def __init__(self, view: QWidget, on_key: Callable[[int], bool]):
        super().__init__(view)
        self.on_key = on_key
        view.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        view.installEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() != QEvent.Type.KeyPress or event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            return False
        return bool(self.on_key(event.key()))


__all__ = ["GROUP_COLOR", "GroupAxis", "KeyFilter", "RowScroll", "SmoothImage", "kv_groups", "step_from"]
