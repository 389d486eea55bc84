"""The head grid's top axis: :class:`GroupAxis`, named groups of columns.

A label per column (``h0``, ``h1``, …; :meth:`GroupAxis.set_columns`) and, above them, one name per
group of columns with a bracket under it (grouped-query attention: the query heads that share a
key/value head, ``K/V head 0`` or ``kv0`` when the group is narrow; :func:`kv_groups`). The groups
are given in view coordinates, so they follow zoom and pan like the tick labels; their texts are part
of the axis's draw specs, where the tick labels are.

pyqtgraph writes every tick it is given, overlapping or not (32 query heads in 850 px ran into each
other): the column names are thinned to every ``k``-th head of a band, ``k`` the smallest power of two
that leaves the widest name room at the current zoom (all of them again when zoomed in).
"""

from __future__ import annotations

import math

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
        # the first head's name may reach past the axis's end, into the empty corner over the row
        # names: pyqtgraph would leave it out
        self.setStyle(hideOverlappingLabels=False)
        #: (x0, x1, text, short text) in view coordinates, left to right
        self.groups: list[tuple[float, float, str, str]] = []
        #: (x, name) of each column in view coordinates, band by band, ``per_band`` columns a band
        self.columns: list[tuple[float, str]] = []
        self.per_band = 1
        self._bracket = QPen(GROUP_COLOR, 1.5)
        self._bracket.setCosmetic(True)

    def set_groups(self, groups: list[tuple[float, float, str, str]]) -> None:
        if groups == self.groups:
            return
        self.groups = list(groups)
        self._updateHeight()
        self.picture = None
        self.update()

    def set_columns(self, columns: list[tuple[float, str]], per_band: int) -> None:
        """Name the columns (``(x, name)`` each, band after band of ``per_band``); thinned when drawn."""
        self.columns, self.per_band = list(columns), max(1, int(per_band))
        self.setTicks([self.columns])

    def column_stride(self) -> int:
        """Every how many columns of a band a name is written at the current size and zoom: the
        smallest power of two whose names stay at least a space apart."""
        lo, hi = self.range
        width = self.mapRectFromParent(self.geometry()).width()
        if len(self.columns) < 2 or hi == lo or width <= 0:
            return 1
        pitch = abs(self.columns[1][0] - self.columns[0][0]) * width / abs(hi - lo)  # px per column
        fm = self._metrics()
        need = max(fm.horizontalAdvance(t) for _, t in self.columns) + fm.horizontalAdvance(" ")
        k = 2 ** math.ceil(math.log2(max(1.0, need / max(pitch, 1e-9))))
        return min(k, 2 ** math.ceil(math.log2(self.per_band)))

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
        if self.columns:  # the names that fit now (setTicks would redraw: set the levels directly)
            k = self.column_stride()
            self._tickLevels = [[t for i, t in enumerate(self.columns) if (i % self.per_band) % k == 0]]
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
