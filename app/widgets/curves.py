"""Curves: training curves (several named series, each train + optional validation points).

One widget draws every loss curve of the app: the Train tab's live plots, the runs of the Compare tab
and the variants a lab trains side by side; the labs' static x–y plots are Curves too. It has ONE
smoothing control, a debiased exponential moving average (as TensorBoard draws it, see
:func:`model.train.smoothing.ema`)::

    m_t = a·m_{t-1} + (1-a)·x_t,   shown as  m_t / (1 - a^t)      (a in [0, 1); 0 = raw)

and a log-y toggle. A smoothed series is drawn as a faint raw curve under the smoothed one; its
validation points (if any) as a dashed line with dots in the same colour. The legend is a row between
the title and the curves (:class:`~app.widgets.legend.LegendRow`), so it never covers one; a title too
long for its plot wraps (:func:`~app.widgets.titles.wrapping_title`).

Cheap redraws: plot items are created once per series and updated with ``setData(...,
skipFiniteCheck=True)`` (non-finite points are dropped on the way in); new data only marks a series
dirty and the curves are repainted at most every :attr:`Curves.REDRAW_MS` (the first change after a
quiet spell at the next turn of the event loop; ``redraw_ms=0``: at once);
clip-to-view and peak downsampling keep long runs cheap; no grid by default (pyqtgraph draws grid lines
with alpha blending through the whole plot, which made one repaint of the Train tab's four plots cost
~20 ms instead of ~3 ms, measured).

Several plots can share one control row and one repaint (:meth:`Curves.add_panel`): the main panel
follows the log-y toggle, added panels keep their own axes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QPen
from PySide6.QtWidgets import (
    QCheckBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.widgets.axes import style_plot
from app.widgets.column import Column
from app.widgets.legend import legend_row
from app.widgets.palette import run_color
from model.compare.tables import loss_curves
from model.train.smoothing import ema

MAIN = "main"
GUIDE_COLOR = (90, 90, 90)


def history_points(history: Sequence[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Training events ``{"step", "train_loss", "val_loss", ...}`` → (steps, train, val_steps, val).

    Only finite values are kept: an event without a train loss adds no train point.
    """
    c = loss_curves(list(history))
    keep = np.isfinite(c["train_loss"])
    return c["step"][keep], c["train_loss"][keep], c["val_step"], c["val_loss"]


@dataclass
class _Series:
    panel: str
    smooth: bool
    color: tuple[int, int, int]
    pen: QPen  # width, dash and alpha of the main line (its colour follows ``color``)
    curve: pg.PlotDataItem
    raw: pg.PlotDataItem | None
    val: pg.PlotDataItem
    val_color: tuple[int, int, int] | None  # None: the series colour
    x: Column = field(default_factory=lambda: Column())
    y: Column = field(default_factory=lambda: Column())
    vx: Column = field(default_factory=lambda: Column())
    vy: Column = field(default_factory=lambda: Column())
    sm: Column = field(default_factory=lambda: Column())  # ema(y, sm_a) for the first len(sm) points
    sm_a: float = -1.0
    m: float = 0.0  # EMA state after len(sm) points (not debiased)
    dirty: bool = True


def _finite(x, y) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64).ravel()
    y = np.asarray(y, dtype=np.float64).ravel()
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


class Curves(QWidget):
    """Named curves over training steps with one smoothing control, log-y, a legend.

    ``set_series(name, x, y, val_x=, val_y=, color=...)`` creates a series on first use (style
    arguments apply then; a new colour re-pens it) and replaces its points afterwards;
    ``extend(name, x, y, ...)`` appends points; ``set_history(name, events, color)`` and
    ``extend_history`` take training events. ``remove(name)``, ``clear()``. The items drawn are in
    :attr:`curves` (main line), :attr:`raw_curves` and :attr:`val_curves`, by series name.
    """

    REDRAW_MS = 200

    def __init__(
        self,
        title: str = "",
        y_label: str = "",
        x_label: str = "step",
        *,
        smoothing: float = 0.9,
        controls: bool = True,
        log_x: bool = False,
        log_y: bool = False,
        log_y_text: str = "Log-scale loss",
        hint: str = "",
        legend: bool = True,
        legend_offset: tuple[int, int] = (-10, 10),
        legend_text_size: str | None = None,
        grid: bool = False,
        colspan: int = 1,
        redraw_ms: int | None = None,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.controls = QWidget()
        row = QHBoxLayout(self.controls)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Smoothing"))
        self.smoothing = QDoubleSpinBox()
        self.smoothing.setRange(0.0, 0.99)
        self.smoothing.setSingleStep(0.05)
        self.smoothing.setValue(smoothing)
        self.smoothing.setToolTip("Exponential moving average factor of the train loss (0 = raw)")
        self.smoothing.valueChanged.connect(self._resmooth)
        row.addWidget(self.smoothing)
        self.log_y = QCheckBox(log_y_text)
        self.log_y.setToolTip("Draw the y axis on a logarithmic scale")
        self.log_y.setChecked(log_y)
        self.log_y.toggled.connect(self.set_log_y)
        row.addWidget(self.log_y)
        if hint:  # wraps under the controls when narrow, instead of widening the whole tab
            note = QLabel(f"<span style='color:#555'>{hint}</span>")
            note.setWordWrap(True)
            note.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
            row.addWidget(note, 1)
        else:
            row.addStretch(1)
        self.controls.setVisible(controls)
        layout.addWidget(self.controls)

        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.view.setMinimumSize(220, 200)  # below this the plots squeeze instead of being clipped
        self.view.ci.setContentsMargins(0, 0, 0, 0)  # as a PlotWidget: the plots reach the edges
        layout.addWidget(self.view, 1)
        self.panels: dict[str, pg.PlotItem] = {}
        self._log: dict[str, tuple[bool, bool]] = {}
        self._grid = grid
        self.plot = self.add_panel(MAIN, title, y_label, x_label, row=0, col=0, colspan=colspan)
        self._log[MAIN] = (log_x, log_y)
        self.plot.setLogMode(x=log_x, y=log_y)
        # a row of entries between the title and the curves, never over them (legend_offset: unused)
        self.legend = legend_row(self.plot, text_size=legend_text_size or "9pt") if legend else None

        self.series: dict[str, _Series] = {}
        self.curves: dict[str, pg.PlotDataItem] = {}
        self.raw_curves: dict[str, pg.PlotDataItem] = {}
        self.val_curves: dict[str, pg.PlotDataItem] = {}
        self.marker: pg.InfiniteLine | None = None
        self._marker_x: float | None = None
        self._hlines: dict[str, tuple[pg.InfiniteLine, float]] = {}
        self.redraw_ms = self.REDRAW_MS if redraw_ms is None else int(redraw_ms)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.timeout.connect(self.redraw)
        self._last_draw = -math.inf

    # ---- layout --------------------------------------------------------------------------------
    def add_panel(
        self,
        key: str,
        title: str = "",
        y_label: str = "",
        x_label: str = "step",
        *,
        row: int,
        col: int = 0,
        colspan: int = 1,
        log_y: bool = False,
    ) -> pg.PlotItem:
        """Another plot in the same view (own axes; its series are added with ``panel=key``)."""
        p = self.view.addPlot(row=row, col=col, colspan=colspan)
        style_plot(p, title, x_label, y_label)
        p.setClipToView(True)
        p.setDownsampling(auto=True, mode="peak")
        if self._grid:
            p.showGrid(x=True, y=True, alpha=0.2)
        if log_y:
            p.setLogMode(y=True)
        self.panels[key] = p
        self._log[key] = (False, log_y)
        return p

    def set_title(self, text: str) -> None:
        self.plot.setTitle(text)

    def set_x_ticks(self, labels: list[str]) -> None:
        """Name the integer x positions 0, 1, ... (as many of the names as fit side by side)."""
        self.plot.getAxis("bottom").set_categories(labels)

    # ---- series --------------------------------------------------------------------------------
    def _series(
        self,
        name: str,
        *,
        panel: str = MAIN,
        color=None,
        label: str | None = None,
        smooth: bool = True,
        raw_label: str = "",
        val_label: str = "",
        val_color=None,
        width: float = 2.0,
        dashed: bool = False,
        alpha: int = 255,
        symbol: str | None = None,
    ) -> _Series:
        s = self.series.get(name)
        if s is not None:
            if color is not None and tuple(color[:3]) != s.color:
                self._repen(s, tuple(color[:3]))
            return s
        color = tuple((color if color is not None else run_color(len(self.series)))[:3])
        plot = self.panels[panel]
        raw = None
        if smooth:
            raw = plot.plot([], [], name=raw_label or None)
            self.raw_curves[name] = raw
        curve = plot.plot(
            [],
            [],
            name=(name if label is None else label) or None,
            symbol=symbol,
            symbolSize=6,
            symbolBrush=pg.mkBrush(*color) if symbol else None,
            symbolPen=None,
        )
        vc = tuple((val_color or color)[:3])
        val = plot.plot([], [], name=val_label or None, symbol="o", symbolSize=5, symbolPen=None)
        self.val_curves[name] = val
        pen = pg.mkPen(
            (0, 0, 0, alpha), width=width, style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine
        )
        s = _Series(panel, smooth, color, pen, curve, raw, val, None if val_color is None else vc)
        self._repen(s, color)
        self.series[name] = s
        self.curves[name] = curve
        return s

    def _repen(self, s: _Series, color: tuple[int, int, int]) -> None:
        s.color = color
        pen = pg.mkPen(s.pen)
        pen.setColor(pg.mkColor(*color, s.pen.color().alpha()))
        s.curve.setPen(pen)
        if s.curve.opts.get("symbol"):
            s.curve.setSymbolBrush(pg.mkBrush(*color))
        if s.raw is not None:
            s.raw.setPen(pg.mkPen((*color, 80), width=1))
        vc = s.val_color or color
        s.val.setPen(pg.mkPen(*vc, width=2, style=Qt.PenStyle.DashLine))
        s.val.setSymbolBrush(pg.mkBrush(*vc))

    def set_series(
        self, name: str, x, y, val_x=(), val_y=(), *, now: bool = False, **style
    ) -> pg.PlotDataItem:
        """Replace the points of ``name`` (creating it with ``style`` on first use); its main item.

        ``style``: panel, color, label (legend; "" = none), smooth (follow the smoothing control),
        raw_label, val_label, val_color, width, dashed, alpha, symbol. Once the series exists only a
        new ``color`` changes its look.
        """
        s = self._series(name, **style)
        s.x, s.y = map(Column, _finite(x, y))
        s.vx, s.vy = map(Column, _finite(val_x, val_y))
        s.sm, s.sm_a = Column(), -1.0
        self._touch(s, now)
        return s.curve

    def extend(self, name: str, x, y, val_x=(), val_y=(), *, now: bool = False, **style) -> None:
        """Append points to ``name`` (creating it with ``style`` on first use)."""
        s = self._series(name, **style)
        x, y = _finite(x, y)
        vx, vy = _finite(val_x, val_y)
        s.x.extend(x)
        s.y.extend(y)
        s.vx.extend(vx)
        s.vy.extend(vy)
        self._touch(s, now)

    def set_history(self, name: str, history: Sequence[dict], color=None, **style) -> None:
        """Draw a run's training events (train loss and the measured validation losses)."""
        self.set_series(name, *history_points(history), color=color, **style)

    def extend_history(self, name: str, events: Sequence[dict], **style) -> None:
        self.extend(name, *history_points(events), **style)

    def remove(self, name: str) -> None:
        s = self.series.pop(name, None)
        if s is None:
            return
        for d in (self.curves, self.raw_curves, self.val_curves):
            d.pop(name, None)
        plot = self.panels[s.panel]
        for item in (s.curve, s.raw, s.val):
            if item is not None:
                plot.removeItem(item)  # also takes it out of the legend

    def clear(self) -> None:
        for name in list(self.series):
            self.remove(name)

    def points(self, name: str) -> int:
        """Number of (finite) train points of ``name`` (0 when there is no such series)."""
        s = self.series.get(name)
        return 0 if s is None else len(s.x)

    def smoothed(self, name: str) -> np.ndarray:
        """The y values the main line of ``name`` shows (smoothed when the series follows the control)."""
        s = self.series[name]
        return np.asarray(self._smoothed(s), dtype=np.float64)

    # ---- guides --------------------------------------------------------------------------------
    def set_marker(self, x: float | None, label: str = "", color=GUIDE_COLOR, position: float = 0.04) -> None:
        """A vertical line at ``x`` on the main plot (None hides it; give the value, not its log); its
        label at ``position`` of the height (0 = foot), beside the line."""
        if x is None:
            if self.marker is not None:
                self.marker.hide()
            return
        if self.marker is None:
            self.marker = pg.InfiniteLine(
                angle=90,
                pen=pg.mkPen(*color, 200, width=1, style=Qt.PenStyle.DashLine),
                movable=False,
                label=label,
                # near the foot of the plot, right of the line (left of it near the right edge): the
                # top is where the legend row and the early, high part of a loss curve are
                labelOpts={"position": position, "color": color, "anchors": [(0, 1), (1, 1)]},
            )
            self.plot.addItem(self.marker, ignoreBounds=True)
        self._marker_x = float(x)
        self.marker.setPos(self._to_axis(float(x), 0))
        if label:
            self.marker.label.setFormat(label)
        self.marker.show()

    def set_hline(self, key: str, y: float | None, label: str = "", position: float = 0.03) -> None:
        """A dashed horizontal reference at ``y`` on the main plot (None or non-finite: hidden); its
        label sits at ``position`` (0 = left end, 1 = right end), on the side of the line with more
        of the plot: below it while the line is in the upper half of the view, above it in the lower
        half, so the text is never cut at the plot's edge."""
        entry = self._hlines.get(key)
        if y is None or not math.isfinite(y):
            if entry is not None:
                entry[0].hide()
            return
        if entry is None:
            line = pg.InfiniteLine(
                angle=0,
                pen=pg.mkPen(120, 120, 120, 180, width=1, style=Qt.PenStyle.DashLine),
                movable=False,
                label=label,
                # the text's own point at ``position`` along it (its left end at the left, its right
                # end at the right), so a label at either end stays inside the plot
                labelOpts={
                    "position": position,
                    "color": GUIDE_COLOR,
                    # pyqtgraph takes the first while the line is above the view's centre
                    # (the text hangs below it), the second below the centre (the text sits on it)
                    "anchors": [(position, 0.0), (position, 1.0)],
                },
            )
            self.plot.addItem(line)
        else:
            line = entry[0]
        self._hlines[key] = (line, float(y))
        line.setPos(self._to_axis(float(y), 1))
        if label:
            line.label.setFormat(label)
        line.show()

    def hline(self, key: str) -> pg.InfiniteLine | None:
        entry = self._hlines.get(key)
        return None if entry is None else entry[0]

    def _to_axis(self, v: float, axis: int) -> float:
        """A data value where the main plot draws it (log10 on a log axis)."""
        if self._log[MAIN][axis]:
            return math.log10(v) if v > 0 else float("nan")
        return v

    # ---- drawing -------------------------------------------------------------------------------
    def set_log_y(self, on: bool) -> None:
        """Log-y for the main plot (the reference lines follow)."""
        if self.log_y.isChecked() != bool(on):
            self.log_y.setChecked(bool(on))  # re-enters through toggled
            return
        self._log[MAIN] = (self._log[MAIN][0], bool(on))
        self.plot.setLogMode(x=self._log[MAIN][0], y=bool(on))
        for line, y in self._hlines.values():
            line.setPos(self._to_axis(y, 1))
        for s in self.series.values():
            s.dirty = True
        self.redraw()

    def _resmooth(self) -> None:
        for s in self.series.values():
            if s.smooth:
                s.dirty = True
        self.redraw()

    def _touch(self, s: _Series, now: bool) -> None:
        s.dirty = True
        if now or self.redraw_ms <= 0:
            self.redraw()
        else:
            self.request_redraw()

    def request_redraw(self) -> None:
        """Repaint soon, at most once per :attr:`redraw_ms` (the throttle every data call goes through).

        After a quiet spell the repaint comes at the next turn of the event loop (so a burst of calls
        costs one repaint), else :attr:`redraw_ms` after the previous one.
        """
        if not self._timer.isActive():
            since_ms = (time.monotonic() - self._last_draw) * 1000
            self._timer.start(int(max(0.0, self.redraw_ms - since_ms)))

    def _smoothed(self, s: _Series) -> np.ndarray:
        a = float(self.smoothing.value())
        if not s.smooth or a <= 0:
            return s.y.values
        if s.sm_a != a or len(s.sm) > len(s.y):
            s.sm = Column(ema(s.y.values, a))
            s.m = float(s.sm.values[-1]) * (1 - a ** len(s.sm)) if len(s.sm) else 0.0
            s.sm_a = a
            return s.sm.values
        new: list[float] = []
        for x in s.y.values[len(s.sm) :].tolist():  # the same recurrence as ema, continued
            s.m = a * s.m + (1 - a) * x
            new.append(s.m / (1 - a ** (len(s.sm) + len(new) + 1)))
        s.sm.extend(new)
        return s.sm.values

    def redraw(self) -> None:
        """Draw every series changed since the last redraw (at once)."""
        self._timer.stop()
        self._last_draw = time.monotonic()
        a = float(self.smoothing.value())
        for s in self.series.values():
            if not s.dirty:
                continue
            s.dirty = False
            skip = not any(self._log[s.panel])  # log of a value ≤ 0 is not finite: let pyqtgraph check
            x = s.x.values
            s.curve.setData(x, self._smoothed(s), skipFiniteCheck=skip)
            if s.raw is not None:
                shown = s.smooth and a > 0
                s.raw.setData(x if shown else [], s.y.values if shown else [], skipFiniteCheck=skip)
            s.val.setData(s.vx.values, s.vy.values, skipFiniteCheck=skip)

    def export_targets(self) -> dict[str, QWidget]:
        return {"curves": self.view}
