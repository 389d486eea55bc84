"""Plots for the Labs: named line curves with a legend, grouped bars, one shared colour per variant.

Items are created once per key and updated with ``setData`` afterwards (cheap redraws, no leaks when
a lab recomputes many times). Colours come from :func:`color_for`, so "unmasked" or "Post-LN" has
the same colour in every plot of a lab.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.widgets.palette import run_color

#: Fixed colours for the variants the labs compare (anything else cycles through PALETTE).
NAMED_COLORS: dict[str, tuple[int, int, int]] = {
    "masked": (31, 119, 180),
    "with mask": (31, 119, 180),
    "unmasked": (214, 39, 40),
    "without mask": (214, 39, 40),
    "scaled": (31, 119, 180),
    "unscaled": (214, 39, 40),
    "temperature": (44, 160, 44),
    "cosine": (148, 103, 189),
    "init": (255, 127, 14),
    "Pre-LN": (31, 119, 180),
    "Post-LN": (214, 39, 40),
    "model's scale": (31, 119, 180),
    "scale removed": (214, 39, 40),
    "attention": (31, 119, 180),
    "MLP": (255, 127, 14),
    "theory": (120, 120, 120),
}


def color_for(name: str, index: int = 0) -> tuple[int, int, int]:
    """The colour of a named variant (fixed for known names, else the ``index``-th palette entry)."""
    return NAMED_COLORS.get(name, run_color(index))


def _pen(color, width: float = 2.0, dashed: bool = False, alpha: int = 255):
    style = Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine
    return pg.mkPen((*color[:3], alpha), width=width, style=style)


class LinePlot(QWidget):
    """A titled plot of named curves with axis labels and a legend.

    ``set_curve(key, x, y, label=..., color=..., dashed=..., symbol=...)`` creates the curve on first
    use and updates it afterwards; ``set_marker(x)`` draws a vertical line (the current slider value);
    ``add_hline(y, label)`` a dashed reference.
    """

    def __init__(
        self,
        title: str = "",
        x_label: str = "",
        y_label: str = "",
        *,
        log_x: bool = False,
        log_y: bool = False,
        legend: bool = True,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.plot = pg.PlotWidget(title=title)
        self.plot.setBackground("w")
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(x=True, y=True, alpha=0.2)
        for axis in ("left", "bottom"):
            self.plot.getAxis(axis).enableAutoSIPrefix(False)  # "(x0.001)" scaling confuses readers
        if x_label:
            self.plot.setLabel("bottom", x_label)
        if y_label:
            self.plot.setLabel("left", y_label)
        self.plot.setLogMode(x=log_x, y=log_y)
        self._log_x, self._log_y = log_x, log_y
        self.legend = self.plot.addLegend(offset=(8, 8), labelTextSize="8pt") if legend else None
        layout.addWidget(self.plot)
        self.curves: dict[str, pg.PlotDataItem] = {}
        self._hlines: dict[str, pg.InfiniteLine] = {}
        self.marker: pg.InfiniteLine | None = None

    def set_title(self, text: str) -> None:
        self.plot.setTitle(text)

    def set_curve(
        self,
        key: str,
        x,
        y,
        *,
        label: str | None = None,
        color=None,
        width: float = 2.0,
        dashed: bool = False,
        alpha: int = 255,
        symbol: str | None = None,
    ) -> pg.PlotDataItem:
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        curve = self.curves.get(key)
        if curve is None:
            color = color if color is not None else color_for(key, len(self.curves))
            curve = self.plot.plot(
                name=label if label is not None else key,
                pen=_pen(color, width, dashed, alpha),
                symbol=symbol,
                symbolSize=6,
                symbolBrush=pg.mkBrush(*color[:3]) if symbol else None,
                symbolPen=None,
            )
            if label == "" and self.legend is not None:
                self.legend.removeItem(curve)
            self.curves[key] = curve
        curve.setData(x, y)
        return curve

    def set_x_ticks(self, labels: list[str], max_ticks: int = 30) -> None:
        """Name the integer x positions 0, 1, ... (e.g. the checkpoints of the residual stream)."""
        step = max(1, int(np.ceil(len(labels) / max_ticks)))
        self.plot.getAxis("bottom").setTicks([[(i, s) for i, s in enumerate(labels) if i % step == 0]])

    def remove_curve(self, key: str) -> None:
        curve = self.curves.pop(key, None)
        if curve is not None:
            self.plot.removeItem(curve)
            if self.legend is not None:
                self.legend.removeItem(curve)

    def clear_curves(self) -> None:
        for key in list(self.curves):
            self.remove_curve(key)

    def set_marker(self, x: float | None, label: str = "") -> None:
        """A vertical line at ``x`` (None hides it); in log-x mode give the value, not its log."""
        if x is None:
            if self.marker is not None:
                self.marker.hide()
            return
        pos = np.log10(x) if self._log_x and x > 0 else x
        if self.marker is None:
            self.marker = pg.InfiniteLine(
                pos=pos,
                angle=90,
                pen=pg.mkPen(90, 90, 90, 200, width=1, style=Qt.PenStyle.DashLine),
                label=label,
                labelOpts={"position": 0.95, "color": (60, 60, 60)},
            )
            self.plot.addItem(self.marker, ignoreBounds=True)
        self.marker.setPos(pos)
        if label:
            self.marker.label.setFormat(label)
        self.marker.show()

    def add_hline(self, key: str, y: float, label: str = "") -> None:
        """A dashed horizontal reference line (e.g. the entropy of a uniform row)."""
        line = self._hlines.get(key)
        pos = np.log10(y) if self._log_y and y > 0 else y
        if line is None:
            line = pg.InfiniteLine(
                pos=pos,
                angle=0,
                pen=pg.mkPen(120, 120, 120, 180, width=1, style=Qt.PenStyle.DashLine),
                label=label,
                labelOpts={"position": 0.03, "color": (90, 90, 90), "anchors": [(0, 1), (0, 1)]},
            )
            self.plot.addItem(line, ignoreBounds=False)
            self._hlines[key] = line
        line.setPos(pos)
        if label:
            line.label.setFormat(label)


class BarPlot(QWidget):
    """Grouped bars: one group per category (x tick labels), one bar per series in each group."""

    def __init__(self, title: str = "", y_label: str = "", *, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.plot = pg.PlotWidget(title=title)
        self.plot.setBackground("w")
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(y=True, alpha=0.2)
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        if y_label:
            self.plot.setLabel("left", y_label)
        self.legend = self.plot.addLegend(offset=(8, 8), labelTextSize="8pt")
        layout.addWidget(self.plot)
        self.bars: dict[str, pg.BarGraphItem] = {}
        self.categories: list[str] = []
        self.values: dict[str, np.ndarray] = {}

    def set_title(self, text: str) -> None:
        self.plot.setTitle(text)

    def set_groups(self, categories: list[str], series: dict[str, np.ndarray], colors=None) -> None:
        """Draw ``series`` {name: values [C]} over ``categories`` [C]; replaces the previous bars."""
        for item in self.bars.values():
            self.plot.removeItem(item)
        self.legend.clear()
        self.bars.clear()
        self.categories = list(categories)
        self.values = {k: np.asarray(v, dtype=np.float64) for k, v in series.items()}
        n = max(1, len(series))
        width = 0.8 / n
        x0 = np.arange(len(categories), dtype=np.float64)
        for i, (name, values) in enumerate(self.values.items()):
            color = (colors or {}).get(name) or color_for(name, i)
            item = pg.BarGraphItem(
                x=x0 - 0.4 + width * (i + 0.5),
                height=np.nan_to_num(values),
                width=width * 0.95,
                brush=pg.mkBrush(*color[:3], 220),
                pen=pg.mkPen(*color[:3]),
            )
            self.plot.addItem(item)
            self.legend.addItem(item, name)
            self.bars[name] = item
        step = max(1, int(np.ceil(len(categories) / 24)))
        self.plot.getAxis("bottom").setTicks([[(i, c) for i, c in enumerate(categories) if i % step == 0]])
        self.plot.setXRange(-0.6, len(categories) - 0.4, padding=0)
        finite = [v[np.isfinite(v)] for v in self.values.values()]
        hi = max([float(f.max()) for f in finite if f.size] + [0.0])
        lo = min([float(f.min()) for f in finite if f.size] + [0.0])
        span = (hi - lo) or 1.0
        self.plot.setYRange(
            lo - (0.05 * span if lo < 0 else 0), hi + 0.3 * span, padding=0
        )  # room for the legend
