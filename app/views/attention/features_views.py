"""The SAE page's bars: the parts of the site's direct contribution to a logit
(:func:`~app.views.attention.features_state.attribution_bars`), one horizontal bar each, the largest
feature first, blue up and red down as the Logit attribution page draws them. A click on a feature's
bar asks for that feature (``featureClicked(index)``)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.views.attention.attribution_page import NEGATIVE, POSITIVE
from app.views.attention.features_state import Bar
from app.widgets.token_axis import TokenAxis

#: The grey of the bars that are no feature (the rest summed, b_dec, the error term).
OTHER = pg.mkBrush(150, 150, 150)


class FeatureBars(QWidget):
    """Horizontal bars of :class:`~app.views.attention.features_state.Bar` (module docstring)."""

    featureClicked = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.axis = TokenAxis("left", offset=0.0)
        self.plot = self.view.addPlot(axisItems={"left": self.axis})
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.getAxis("bottom").enableAutoSIPrefix(False)
        self.plot.setLabel("bottom", "part of the logit")
        self.plot.getViewBox().invertY(True)  # the largest part on top
        self.plot.addItem(pg.InfiniteLine(pos=0, angle=90, pen=pg.mkPen("#888")))
        self.bars_item = pg.BarGraphItem(x0=[], y=[], width=[], height=0.7)
        self.plot.addItem(self.bars_item)
        lay.addWidget(self.view)
        self.bars: list[Bar] = []
        self.view.scene().sigMouseClicked.connect(self._on_click)

    @property
    def values(self) -> np.ndarray:
        """The bars' values as drawn [n]."""
        return np.array([b.value for b in self.bars], dtype=np.float64)

    def set_bars(self, bars: list[Bar]) -> None:
        """Draw ``bars`` top to bottom (none: an empty plot)."""
        self.bars = list(bars)
        values = self.values
        y = np.arange(len(bars), dtype=float)
        brushes = [(POSITIVE if b.value >= 0 else NEGATIVE) if b.feature is not None else OTHER for b in bars]
        self.bars_item.setOpts(
            x0=np.minimum(values, 0.0), y=y, width=np.abs(values), height=0.7, brushes=brushes, pen=None
        )
        self.axis.set_labels([b.label for b in bars])
        if not len(bars):
            return
        self.plot.setYRange(-0.6, len(bars) - 0.4, padding=0)
        lo, hi = min(0.0, float(values.min())), max(0.0, float(values.max()))
        pad = 0.06 * (hi - lo or 1.0)
        self.plot.setXRange(lo - pad, hi + pad, padding=0)

    def bar_at(self, scene_pos) -> int | None:
        """The index of the bar under ``scene_pos``, or None."""
        if not self.plot.sceneBoundingRect().contains(scene_pos):
            return None
        y = self.plot.getViewBox().mapSceneToView(scene_pos).y()
        i = round(y)
        return i if 0 <= i < len(self.bars) and abs(y - i) <= 0.35 else None

    def _on_click(self, ev) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        i = self.bar_at(ev.scenePos())
        feature = self.bars[i].feature if i is not None else None
        if feature is not None:
            self.featureClicked.emit(feature)


__all__ = ["FeatureBars"]
