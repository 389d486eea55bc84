"""Live training curves: loss (train raw, train smoothed, validation), learning rate, grad norm, tokens/s.

Plot items are created once; new events only extend Python lists and ``setData`` the curves
(``skipFiniteCheck``, clip-to-view and automatic peak downsampling keep long runs cheap). The
smoothed train loss is a debiased exponential moving average (as TensorBoard draws it):
``m_t = a·m_{t-1} + (1-a)·x_t``, shown as ``m_t / (1 - a^t)``.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QCheckBox, QDoubleSpinBox, QHBoxLayout, QLabel, QVBoxLayout, QWidget

from model.smoothing import ema

RAW_PEN = pg.mkPen(80, 130, 200, 90, width=1)
SMOOTH_PEN = pg.mkPen(30, 90, 190, 255, width=2)
VAL_PEN = pg.mkPen(220, 110, 20, 255, width=2)
REF_PEN = pg.mkPen(150, 150, 150, 200, width=1, style=Qt.PenStyle.DashLine)


class TrainPlots(QWidget):
    """Four live plots over training steps; ``reset(history)`` then ``append(events)``.

    ``append`` redraws at most every :attr:`REDRAW_MS` (curves a few hundred ms old look live;
    repainting four plots on every training step would cost the GUI thread for nothing).
    """

    REDRAW_MS = 200

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Smoothing"))
        self.smoothing = QDoubleSpinBox()
        self.smoothing.setRange(0.0, 0.99)
        self.smoothing.setSingleStep(0.05)
        self.smoothing.setValue(0.9)
        self.smoothing.setToolTip("Exponential moving average factor for the train loss (0 = raw)")
        self.smoothing.valueChanged.connect(self._resmooth)
        controls.addWidget(self.smoothing)
        self.log_y = QCheckBox("Log-scale loss")
        self.log_y.setToolTip("Draw the loss axis on a logarithmic scale")
        self.log_y.toggled.connect(self._set_log)
        controls.addWidget(self.log_y)
        controls.addStretch(1)
        layout.addLayout(controls)

        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.view.setMinimumSize(220, 200)  # below this the plots squeeze instead of being clipped
        layout.addWidget(self.view, 1)
        self.loss_plot = self._plot(0, 0, "Loss (cross-entropy, nats/token)", colspan=2)
        self.loss_plot.addLegend(offset=(-10, 10))
        self.raw_curve = self.loss_plot.plot([], [], pen=RAW_PEN, name="train (raw)")
        self.smooth_curve = self.loss_plot.plot([], [], pen=SMOOTH_PEN, name="train (smoothed)")
        self.val_curve = self.loss_plot.plot(
            [],
            [],
            pen=VAL_PEN,
            name="validation",
            symbol="o",
            symbolSize=5,
            symbolBrush=VAL_PEN.color(),
            symbolPen=None,
        )
        self.ref_line = pg.InfiniteLine(
            angle=0,
            pen=REF_PEN,
            movable=False,
            label="uniform guess: ln V",
            labelOpts={"position": 0.5, "color": (120, 120, 120)},
        )
        self.ref_line.setVisible(False)
        self.loss_plot.addItem(self.ref_line)
        self.step_marker = pg.InfiniteLine(
            angle=90,
            pen=pg.mkPen(200, 40, 40, 160, width=1),
            movable=False,
            label="shown step",
            labelOpts={"position": 0.95, "color": (200, 40, 40)},
        )
        self.step_marker.setVisible(False)
        self.loss_plot.addItem(self.step_marker, ignoreBounds=True)
        self.lr_plot = self._plot(1, 0, "Learning rate")
        self.lr_curve = self.lr_plot.plot([], [], pen=pg.mkPen(40, 150, 80, width=2))
        self.gn_plot = self._plot(1, 1, "Gradient norm (before clipping)")
        self.gn_curve = self.gn_plot.plot([], [], pen=pg.mkPen(150, 60, 160, width=1))
        self.tps_plot = self._plot(2, 0, "Training tokens / s", colspan=2)
        self.tps_curve = self.tps_plot.plot([], [], pen=pg.mkPen(90, 90, 90, width=1))
        self.view.ci.layout.setRowStretchFactor(0, 3)

        self._steps: list[float] = []
        self._loss: list[float] = []
        self._val_steps: list[float] = []
        self._val: list[float] = []
        self._lr: list[float] = []
        self._gn: list[float] = []
        self._tps: list[float] = []
        self._m = 0.0  # EMA state
        self._smooth: list[float] = []
        # curves are redrawn at most every REDRAW_MS: new events only mark them dirty
        self._redraw_timer = QTimer(self)
        self._redraw_timer.setSingleShot(True)
        self._redraw_timer.setInterval(self.REDRAW_MS)
        self._redraw_timer.timeout.connect(self.redraw)

    def _plot(self, row: int, col: int, title: str, colspan: int = 1) -> pg.PlotItem:
        p = self.view.addPlot(row=row, col=col, colspan=colspan, title=title)
        # no grid: pyqtgraph draws grid lines through the axes with alpha blending, which made one
        # repaint of these four plots cost ~20 ms instead of ~3 ms (measured), stalling the GUI
        p.setClipToView(True)
        p.setDownsampling(auto=True, mode="peak")
        p.getAxis("bottom").setLabel("step")
        return p

    # ---- data ----------------------------------------------------------------------------------
    def set_reference_loss(self, value: float | None) -> None:
        """Draw a dashed line at ``value`` (ln V: the loss of a uniform guess), or hide it."""
        if value is None or not math.isfinite(value):
            self.ref_line.setVisible(False)
            return
        self.ref_line.setValue(math.log10(value) if self.log_y.isChecked() else value)
        self._ref = value
        self.ref_line.setVisible(True)

    def set_step_marker(self, step: int | None) -> None:
        """Mark the step whose attention the scrubber shows (None: hide the mark)."""
        if step is None:
            self.step_marker.setVisible(False)
        else:
            self.step_marker.setValue(step)
            self.step_marker.setVisible(True)

    def reset(self, history: list[dict] | None = None) -> None:
        for lst in (
            self._steps,
            self._loss,
            self._val_steps,
            self._val,
            self._lr,
            self._gn,
            self._tps,
            self._smooth,
        ):
            lst.clear()
        self._m = 0.0
        self.append(history or [], now=True)

    def append(self, events: list[dict], now: bool = False) -> None:
        """Add training events; the curves follow within ``REDRAW_MS`` (at once with ``now``)."""
        a = float(self.smoothing.value())
        for e in events:
            step = float(e.get("step", len(self._steps)))
            loss = e.get("train_loss")
            if loss is not None and math.isfinite(loss):
                self._steps.append(step)
                self._loss.append(float(loss))
                self._m = a * self._m + (1 - a) * float(loss)
                n = len(self._loss)
                self._smooth.append(self._m / (1 - a**n) if a > 0 else float(loss))
                self._lr.append(float(e.get("lr") or 0.0))
                self._gn.append(float(e.get("grad_norm") or 0.0))
                self._tps.append(float(e.get("tokens_per_s") or 0.0))
            val = e.get("val_loss")
            if val is not None and math.isfinite(val):
                self._val_steps.append(step)
                self._val.append(float(val))
        if now:
            self._redraw_timer.stop()
            self.redraw()
        elif not self._redraw_timer.isActive():
            self._redraw_timer.start()

    def _resmooth(self) -> None:
        a = float(self.smoothing.value())
        sm = ema(np.asarray(self._loss, dtype=np.float64), a)
        self._smooth = sm.tolist()
        self._m = float(sm[-1] * (1 - a ** len(sm))) if len(sm) else 0.0
        self.redraw()

    def _set_log(self, on: bool) -> None:
        self.loss_plot.setLogMode(y=on)
        if getattr(self, "_ref", None) is not None:
            self.set_reference_loss(self._ref)

    def redraw(self) -> None:
        steps = np.asarray(self._steps, dtype=np.float64)
        self.raw_curve.setData(steps, np.asarray(self._loss), skipFiniteCheck=True)
        self.smooth_curve.setData(steps, np.asarray(self._smooth), skipFiniteCheck=True)
        self.val_curve.setData(np.asarray(self._val_steps), np.asarray(self._val), skipFiniteCheck=True)
        self.lr_curve.setData(steps, np.asarray(self._lr), skipFiniteCheck=True)
        self.gn_curve.setData(steps, np.asarray(self._gn), skipFiniteCheck=True)
        self.tps_curve.setData(steps, np.asarray(self._tps), skipFiniteCheck=True)

    @property
    def n_points(self) -> int:
        return len(self._steps)

    def export_targets(self) -> dict[str, QWidget]:
        return {"curves": self.view}
