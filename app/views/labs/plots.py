"""Plots of the Labs: static x–y curves (:class:`LinePlot`, a :class:`~app.widgets.curves.Curves`
without smoothing, controls or throttling) and grouped bars (:class:`BarPlot`).

Items are created once per key and updated afterwards (cheap redraws, no leaks when a lab recomputes
many times). Colours come from :func:`app.widgets.palette.color_for`, so "unmasked" or "Post-LN" has
the same colour in every plot of a lab.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.widgets.axes import style_plot
from app.widgets.curves import Curves
from app.widgets.legend import legend_row
from app.widgets.palette import color_for


class LinePlot(Curves):
    """A titled plot of named curves with axis labels, a grid and a legend, drawn at once.

    ``set_series(key, x, y, label=..., color=..., dashed=..., symbol=...)`` creates the curve on first
    use and updates it afterwards; ``set_marker(x)`` draws a vertical line (the current slider value);
    ``set_hline(key, y, label)`` a dashed reference. Unnamed curves take :func:`color_for` their key.
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
        super().__init__(
            title,
            y_label,
            x_label,
            smoothing=0.0,
            controls=False,
            log_x=log_x,
            log_y=log_y,
            legend=legend,
            legend_offset=(8, 8),
            legend_text_size="8pt",
            grid=True,
            redraw_ms=0,
            parent=parent,
        )
        self.plot.setMenuEnabled(False)
        self.view.setMinimumSize(0, 0)

    def set_series(self, name: str, x, y, val_x=(), val_y=(), **style) -> pg.PlotDataItem:
        if name not in self.series:
            style.setdefault("color", color_for(name, len(self.series)))
        style.setdefault("smooth", False)
        return super().set_series(name, x, y, val_x, val_y, **style)


class BarPlot(QWidget):
    """Grouped bars: one group per category (x tick labels), one bar per series in each group."""

    def __init__(self, title: str = "", y_label: str = "", *, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.view = pg.PlotWidget()
        self.view.setBackground("w")
        self.plot = style_plot(self.view.getPlotItem(), title, "", y_label)
        self.plot.setMenuEnabled(False)
        self.plot.showGrid(y=True, alpha=0.2)
        self.legend = legend_row(self.plot, text_size="8pt")  # above the bars, never on them
        layout.addWidget(self.view)
        self.bars: dict[str, pg.BarGraphItem] = {}
        self.categories: list[str] = []
        self.values: dict[str, np.ndarray] = {}
        self.reference: pg.InfiniteLine | None = None

    def set_reference(self, y: float | None, label: str = "") -> None:
        """A dashed horizontal line at ``y`` (None removes it), named ``label`` at its left end."""
        if self.reference is not None:
            self.plot.removeItem(self.reference)
            self.reference = None
        if y is None:
            return
        self.reference = pg.InfiniteLine(
            pos=y,
            angle=0,
            pen=pg.mkPen((90, 90, 90), width=1, style=Qt.PenStyle.DashLine),
            label=label,
            labelOpts={"position": 0.02, "color": (60, 60, 60), "anchors": [(0, 1), (0, 1)]},
        )
        self.plot.addItem(self.reference)

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
        self.plot.getAxis("bottom").set_categories(self.categories)  # as many names as fit
        self.plot.setXRange(-0.6, len(categories) - 0.4, padding=0)
        finite = [v[np.isfinite(v)] for v in self.values.values()]
        hi = max([float(f.max()) for f in finite if f.size] + [0.0])
        lo = min([float(f.min()) for f in finite if f.size] + [0.0])
        if self.reference is not None:  # room above the line for its label, under the legend row
            ref = float(self.reference.value())
            hi = max(hi, ref + 0.2 * ((max(hi, ref) - lo) or 1.0))
        span = (hi - lo) or 1.0
        self.plot.setYRange(lo - (0.05 * span if lo < 0 else 0), hi + 0.05 * span, padding=0)
