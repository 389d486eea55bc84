"""The look every plot of the app shares: :func:`style_plot` (a title that wraps, axis labels, plain
numbers) and :class:`ReadableAxis`, whose tick labels never overlap and whose title wraps beside a
short plot. :class:`~app.widgets.curves.Curves` and the labs' static plots draw on these axes.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pyqtgraph as pg
from PySide6.QtGui import QFont, QFontMetricsF

from app.widgets.titles import wrapping_title


class ReadableAxis(pg.AxisItem):
    """A value axis whose tick labels never overlap: pyqtgraph always writes its major ticks, and a
    plot 60 px tall got six labels 10 px apart. Levels closer than a label needs are dropped, and a
    major level that is still too dense keeps every k-th tick.

    :meth:`set_categories` names the integer positions 0, 1, … instead (bars, the sublayers of a
    model): every ``k``-th name is written, ``k`` the smallest that keeps the names apart at the
    plot's current width.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.categories: list[str] | None = None
        self._label_wrap = -1.0
        super().__init__(*args, **kwargs)

    # an axis title longer than a short plot's height wraps onto a second line beside it instead of
    # running past the plot into its title
    def _updateLabel(self) -> None:
        label = getattr(self, "label", None)
        if label is not None:
            label.setTextWidth(-1)
            self._label_wrap = -1.0
        super()._updateLabel()
        self._fit_label()

    def resizeEvent(self, ev=None) -> None:
        self._fit_label()
        super().resizeEvent(ev)

    def _updateWidth(self) -> None:
        super()._updateWidth()  # it counts 0.8 of the title's height: a wrapped title then touches the ticks
        label = getattr(self, "label", None)
        if label is not None and self.fixedWidth is None and self.isVisible() and label.isVisible():
            w = self.maximumWidth() + 0.25 * label.boundingRect().height()
            self.setMaximumWidth(w)
            self.setMinimumWidth(w)

    def _fit_label(self) -> None:
        label = getattr(self, "label", None)
        if label is None or self.orientation not in ("left", "right"):
            return
        room = self.size().height() - 4
        label.setTextWidth(-1)
        wrap = max(40.0, room) if room > 10 and label.boundingRect().width() > room else -1.0
        label.setTextWidth(wrap)
        if abs(wrap - self._label_wrap) > 0.5:
            self._label_wrap = wrap
            self._adjustSize()

    def set_categories(self, labels: list[str] | None) -> None:
        self.categories = None if labels is None else [str(s) for s in labels]
        self.picture = None
        self.update()

    def tickValues(self, minVal, maxVal, size):
        if self.categories is None:
            return self._thin(super().tickValues(minVal, maxVal, size), minVal, maxVal, size)
        n = len(self.categories)
        lo, hi = sorted((minVal, maxVal))
        if n == 0 or size <= 0 or hi <= lo:
            return []
        fm = QFontMetricsF(self.style["tickFont"] or QFont())
        if self.orientation in ("left", "right"):
            need = 1.3 * fm.height()
        else:
            need = max(fm.horizontalAdvance(c) for c in self.categories) + 10
        stride = max(1, math.ceil(need / (size / (hi - lo))))
        first, last = max(0, math.ceil(lo)), min(n - 1, math.floor(hi))
        start = first + (-first) % stride
        return [(float(stride), [float(i) for i in range(start, last + 1, stride)])]

    def tickStrings(self, values, scale, spacing):
        if self.categories is None:
            return super().tickStrings(values, scale, spacing)
        n = len(self.categories)
        return [self.categories[round(float(v))] if 0 <= round(float(v)) < n else "" for v in values]

    def _min_tick_px(self, lo: float, hi: float) -> float:
        fm = QFontMetricsF(self.style["tickFont"] or QFont())
        if self.orientation in ("left", "right"):
            return 1.3 * fm.height() + 2
        digits = max(len(f"{v:.4g}") for v in (lo, hi))  # about as wide as the widest label
        return fm.horizontalAdvance("8" * digits) + 14

    def _thin(self, levels: list, minVal: float, maxVal: float, size: float) -> list:
        """Keep the tick levels whose labels, together, stay a label apart on screen (log axes too:
        their minor 2…9 labels crowd near each power of ten); thin the first level if even it is
        too dense."""
        dif = abs(maxVal - minVal)
        if not levels or size <= 0 or dif == 0:
            return levels
        px = size / dif
        need = self._min_tick_px(minVal, maxVal)
        kept: list = []
        shown: list[float] = []
        if self.orientation in ("left", "right"):  # a label centred on the top end would stick out
            top = max(minVal, maxVal)  # into the title or legend over the plot: leave it out
            margin = 0.5 * QFontMetricsF(self.style["tickFont"] or QFont()).height() / px
            levels = [(s, [v for v in vals if v <= top - margin]) for s, vals in levels]
        for spacing, values in levels:
            union = sorted(shown + list(values))
            gaps = [b - a for a, b in itertools.pairwise(union)]
            if not gaps or min(gaps) * px >= need:
                kept.append((spacing, values))
                shown = union
            elif not kept:  # the major level itself is crowded: every k-th of it
                step = math.ceil(need / max(min(gaps) * px, 1e-9))
                values = sorted(values)[::step]
                kept.append((None if spacing is None else spacing * step, values))  # None: a log axis
                shown = values
            else:
                break
        return kept


#: A plot's smallest height, px, where its page can scroll: below it the page scrolls down
#: instead of squashing the plot until its title, ticks and guide labels run into each other.
PLOT_MIN_HEIGHT = 220


def style_plot(plot: pg.PlotItem, title: str = "", x_label: str = "", y_label: str = "") -> pg.PlotItem:
    """The look every plot of the app shares: title (wrapped when long), axis labels, tick labels
    that never overlap (:class:`ReadableAxis`), plain numbers (no "(x0.001)")."""
    wrapping_title(plot)  # a long title wraps: it never widens the scene or runs over a neighbour
    plot.setAxisItems({name: ReadableAxis(name) for name in ("left", "bottom")})
    if title:
        plot.setTitle(title)
    for axis, label in (("bottom", x_label), ("left", y_label)):
        plot.getAxis(axis).enableAutoSIPrefix(False)
        if label:
            plot.setLabel(axis, label)
    return plot


__all__ = ["PLOT_MIN_HEIGHT", "ReadableAxis", "style_plot"]
