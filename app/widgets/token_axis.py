"""TokenAxis: an axis that labels integer positions with token texts, thinned to what fits.

A heatmap cell ``i`` spans ``[i, i + 1)`` and is labelled at ``i + offset`` (``offset = 0.5``, the
cell centre); a lines view labels the points ``i`` (``offset = 0``). Whatever the zoom, the axis picks
the smallest stride ``s`` in 1, 2, 5, 10, 20, 50, ... for which labels ``s`` units apart do not
overlap on screen, so a 1024-token prompt shows every 50th token zoomed out and every token zoomed in.
"""

from __future__ import annotations

import math

import pyqtgraph as pg

#: Labels longer than this are cut with an ellipsis (BPE tokens can be long).
MAX_LABEL_CHARS = 14
#: Pixels a top or bottom axis takes for one line of labels and their offset (outward ticks add theirs).
TEXT_HEIGHT = 20


def nice_stride(min_units: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that is ≥ ``min_units``."""
    if min_units <= 1:
        return 1
    exp = 10 ** math.floor(math.log10(min_units))
    for m in (1, 2, 5, 10):
        if m * exp >= min_units:
            return int(m * exp)
    return int(10 * exp)  # pragma: no cover (the loop always returns)


class TokenAxis(pg.AxisItem):
    """An :class:`pyqtgraph.AxisItem` showing ``labels[i]`` at ``i + offset`` for the ``i`` in view.

    ``index=True`` prefixes each label with its position (``"12 e"``), which helps on long prompts.
    """

    #: px across the axis the labels take (fixed once set); None: pyqtgraph's own size. Declared
    #: here as well, as pyqtgraph's ``__init__`` already sizes the axis before ours sets it
    _text_extent: int | None = None

    def __init__(self, orientation: str, *, offset: float = 0.5, index: bool = False, **kwargs):
        super().__init__(orientation, **kwargs)
        self.offset = float(offset)
        self.index = index
        self._labels: list[str] = []
        self._text_extent = None
        self._char_px = 7.0
        self.enableAutoSIPrefix(False)

    @property
    def labels(self) -> list[str]:
        return self._labels

    def set_labels(self, labels: list[str], *, index: bool | None = None) -> None:
        self._labels = [self._cut(str(s)) for s in labels]
        if index is not None:
            self.index = index
        if self.orientation in ("left", "right"):
            # a fixed width that fits the longest label: pyqtgraph would otherwise skip every label
            # on the first paint and only widen the axis on the next one
            n = len(self._labels)
            longest = max((len(self._text(i)) for i in range(n)), default=1) if n <= 4096 else 8
            self._text_extent = int(self._char_px * longest + 22 + max(0, self.style["tickLength"]))
            self._updateWidth()
        else:  # the same for the height of a top or bottom axis (one line of text)
            self._text_extent = TEXT_HEIGHT + max(0, self.style["tickLength"])
            self._updateHeight()
        self.picture = None
        self.update()

    def _title_extent(self) -> float:
        """Room the axis title (e.g. "query") takes beside the tick labels (0 when hidden)."""
        return self.label.boundingRect().height() if self.label.isVisible() else 0.0

    # the fixed extent plus the title: pyqtgraph adds the title only to an automatic size, so a fixed
    # one would draw the title over the tick labels
    def _updateWidth(self) -> None:
        if self._text_extent is not None and self.orientation in ("left", "right"):
            self.fixedWidth = int(self._text_extent + self._title_extent())
        super()._updateWidth()

    def _updateHeight(self) -> None:
        if self._text_extent is not None and self.orientation in ("top", "bottom"):
            self.fixedHeight = int(self._text_extent + self._title_extent())
        super()._updateHeight()

    @staticmethod
    def _cut(s: str) -> str:
        return s if len(s) <= MAX_LABEL_CHARS else s[: MAX_LABEL_CHARS - 1] + "…"

    def _text(self, i: int) -> str:
        lab = self._labels[i]
        return f"{i} {lab}" if self.index else lab

    def _label_px(self) -> float:
        """Room one label needs along the axis, in pixels."""
        if self.orientation in ("left", "right"):
            return 13.0
        step = max(1, len(self._labels) // 64)
        longest = max((len(self._text(i)) for i in range(0, len(self._labels), step)), default=1)
        return self._char_px * longest + 8.0

    def tickValues(self, minVal, maxVal, size):
        n = len(self._labels)
        if minVal > maxVal:  # an inverted view (rows from the top) hands the range over reversed
            minVal, maxVal = maxVal, minVal
        if n == 0 or size <= 0 or maxVal <= minVal:
            return []
        px_per_unit = size / (maxVal - minVal)
        stride = nice_stride(self._label_px() / max(px_per_unit, 1e-9))
        first = max(0, math.ceil(minVal - self.offset))
        last = min(n - 1, math.floor(maxVal - self.offset))
        if last < first:
            return []
        start = first + (-first) % stride
        return [(float(stride), [i + self.offset for i in range(start, last + 1, stride)])]

    def tickStrings(self, values, scale, spacing):
        out = []
        for v in values:
            i = round(float(v) - self.offset)
            out.append(self._text(i) if 0 <= i < len(self._labels) else "")
        return out


__all__ = ["MAX_LABEL_CHARS", "TokenAxis", "nice_stride"]
