"""CompareLossPlot: the loss curves of several runs overlaid, one colour per run.

Solid: the train loss (debiased EMA, as the Train tab draws it); dashed with dots: the validation
loss at the steps it was measured. Curves are created once per run and updated with ``setData``.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from app.widgets.palette import run_color  # noqa: F401 (re-exported for the Compare tab)
from model.comparison import loss_curves
from model.smoothing import ema


class CompareLossPlot(QWidget):
    """``set_history(name, history, color)`` draws (or redraws) one run; ``remove(name)``."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(QLabel("Smoothing"))
        self.smoothing = QDoubleSpinBox()
        self.smoothing.setRange(0.0, 0.99)
        self.smoothing.setSingleStep(0.05)
        self.smoothing.setValue(0.8)
        self.smoothing.setToolTip("Exponential moving average of the train loss (0 = raw)")
        self.smoothing.valueChanged.connect(lambda *_: self._redraw_all())
        row.addWidget(self.smoothing)
        self.log_y = QCheckBox("Log-scale loss")
        self.log_y.toggled.connect(lambda on: self.plot.setLogMode(y=on))
        row.addWidget(self.log_y)
        row.addWidget(
            QLabel(
                "<span style='color:#555'>solid: train loss (smoothed) · "
                "dashed with dots: validation loss</span>"
            )
        )
        row.addStretch(1)
        layout.addLayout(row)
        self.plot = pg.PlotWidget()
        self.plot.setBackground("w")
        self.plot.setTitle("Loss of every run on the same batches", color="#222", size="10pt")
        self.plot.setLabel("left", "cross-entropy (nats/token)")
        self.plot.setLabel("bottom", "training step")
        self.plot.showGrid(x=True, y=True, alpha=0.25)
        self.plot.setClipToView(True)
        self.plot.setDownsampling(auto=True, mode="peak")
        self.legend = self.plot.addLegend(offset=(-10, 10))
        layout.addWidget(self.plot, 1)
        self.train: dict[str, pg.PlotDataItem] = {}
        self.val: dict[str, pg.PlotDataItem] = {}
        self.histories: dict[str, list[dict]] = {}

    def set_history(self, name: str, history: list[dict], color: tuple[int, int, int]) -> None:
        if name not in self.train:
            self.train[name] = self.plot.plot([], [], pen=pg.mkPen(*color, width=2), name=name)
            self.val[name] = self.plot.plot(
                [],
                [],
                pen=pg.mkPen(*color, width=1.5, style=Qt.PenStyle.DashLine),
                symbol="o",
                symbolSize=6,
                symbolBrush=pg.mkBrush(*color),
                symbolPen=None,
            )
        self.histories[name] = history
        self._redraw(name)

    def _redraw(self, name: str) -> None:
        c = loss_curves(self.histories.get(name, []))
        y = ema(c["train_loss"], float(self.smoothing.value())) if len(c["step"]) else c["train_loss"]
        self.train[name].setData(c["step"], np.asarray(y, dtype=np.float64), skipFiniteCheck=True)
        self.val[name].setData(c["val_step"], c["val_loss"], skipFiniteCheck=True)

    def _redraw_all(self) -> None:
        for name in self.train:
            self._redraw(name)

    def remove(self, name: str) -> None:
        for d in (self.train, self.val):
            item = d.pop(name, None)
            if item is not None:
                self.plot.removeItem(item)
        self.histories.pop(name, None)

    def clear(self) -> None:
        for name in list(self.train):
            self.remove(name)

    def points(self, name: str) -> int:
        """Number of train-loss points drawn for ``name`` (0 when it has no curve)."""
        item = self.train.get(name)
        if item is None:
            return 0
        x = item.xData  # the data given, not what clipping and downsampling draw
        return 0 if x is None else len(x)
