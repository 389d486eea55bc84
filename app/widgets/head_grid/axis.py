"""The head grid's top axis: :class:`GroupAxis`, named groups of columns.

A label per column (``h0``, ``h1``, …) and, above them, one name per group of columns with a bracket
under it (grouped-query attention: the query heads that share a key/value head, ``K/V head 0`` or
``kv0`` when the group is narrow; :func:`kv_groups`). The groups are given in view coordinates, so
they follow zoom and pan like the tick labels; their texts are part of the axis's draw specs, where the
tick labels are.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFontMetricsF, QImage, QPainter, QPen

from app.widgets.head_grid.geometry import MosaicGeometry

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


def kv_groups(geom: MosaicGeometry, n: int) -> list[tuple[float, float, str, str]]:
    """The groups of ``n`` columns sharing a K/V head in each band of ``geom``, for
    :meth:`GroupAxis.set_groups`; none unless ``n`` > 1 and the columns are the heads."""
    if n <= 1 or geom.cols != geom.C:
        return []
    step, half = geom.S + geom.g, geom.g / 2
    groups = []
    for b in range(geom.bands):
        x = geom.band_x(b) - half
        for i, first in enumerate(range(0, geom.C, n)):
            groups.append((x + first * step, x + (first + n) * step, f"K/V head {i}", f"kv{i}"))
    return groups


__all__ = ["GROUP_COLOR", "GroupAxis", "kv_groups"]
