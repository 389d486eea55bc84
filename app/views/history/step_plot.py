"""The History tab's plot: each kind's best head (or every head of one kind) against the training
step, on a log axis with step 0 drawn at :data:`~app.views.history.state.STEP0_X`, over the
revisions traced so far. Clicking a point asks for that step; "Trace all" for the rest; the table
(CSV) and the plot (PNG or SVG) are written where the last export went (File → Export's folder).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.session.settings import window_settings
from app.views.history.state import PLOT_CHOICES, STEP0_X, HistoryState, plot_x, step_ticks
from app.widgets.curves import Curves
from app.widgets.exporting import write_png, write_svg


class StepPlot(QGroupBox):
    """Heads against training step (see the module docstring)."""

    #: a point was clicked: the step it stands for
    stepClicked = Signal(int)
    #: "Trace all" was pressed
    traceAllRequested = Signal()

    def __init__(self, state: HistoryState, parent: QWidget | None = None):
        super().__init__("Heads against training step", parent)
        self.state = state
        self._plot_steps: dict[str, list[float]] = {}
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        self.plot_combo = QComboBox()
        self.plot_combo.setObjectName("historyPlotChoice")
        for key, label in PLOT_CHOICES:
            self.plot_combo.addItem(label, key)
        self.plot_combo.currentIndexChanged.connect(self._on_plot_choice)
        row.addWidget(self.plot_combo, 1)
        self.fill_button = QPushButton("Trace all")
        self.fill_button.setToolTip("Fetch and trace every revision not traced yet, one after another")
        self.fill_button.clicked.connect(self.traceAllRequested)
        row.addWidget(self.fill_button)
        self.csv_button = QPushButton("Table (CSV)…")
        self.csv_button.setToolTip("The metric-vs-step table: one row per traced revision, every head")
        self.csv_button.clicked.connect(self._export_csv_dialog)
        row.addWidget(self.csv_button)
        self.png_button = QPushButton("Plot…")
        self.png_button.setToolTip("Save the plot as PNG or SVG")
        self.png_button.clicked.connect(self._export_plot_dialog)
        row.addWidget(self.png_button)
        layout.addLayout(row)
        self.curves = Curves(
            "",
            "score",
            f"training step (log; step 0 at {STEP0_X:g})",
            smoothing=0.0,
            controls=False,
            log_x=True,
            grid=True,
            legend_text_size="8pt",
            legend_offset=(-10, 120),
        )
        self.curves.setMinimumSize(280, 220)
        layout.addWidget(self.curves, 1)
        state.opened.connect(self._on_opened)
        state.table_changed.connect(self._draw_plot)
        self._on_opened()

    def _on_opened(self) -> None:
        """A history was opened (or none is): an empty plot, the buttons usable when there is one."""
        self.curves.clear()
        self._plot_steps.clear()
        for w in (self.fill_button, self.csv_button, self.png_button):
            w.setEnabled(self.state.history is not None)
        if self.state.history is not None:
            self.curves.plot.setXRange(0, 1)  # re-fit once points arrive

    def mark_step(self, step: int) -> None:
        """The vertical line at the step the grid shows."""
        self.curves.set_marker(plot_x(step), f"step {step}")

    def _on_plot_choice(self) -> None:
        self.state.plot = self.plot_combo.currentData()
        self.curves.clear()
        self._plot_steps.clear()
        self._draw_plot()

    def _draw_plot(self) -> None:
        lines = self.state.series()
        names = {n for n, _, _ in lines}
        for name in [n for n in self.curves.series if n not in names]:
            self.curves.remove(name)
        for name, steps, values in lines:
            xs = [plot_x(s) for s in steps]
            new = name not in self.curves.series
            item = self.curves.set_series(name, xs, values, smooth=False, symbol="o", width=1.5, now=True)
            self._plot_steps[name] = list(steps)
            if new:
                item.sigPointsClicked.connect(lambda _item, points, *_, n=name: self._on_point(n, points))
        if lines:
            self.curves.plot.getAxis("bottom").setTicks([step_ticks(lines[0][1])])
            self.curves.plot.enableAutoRange()

    def _on_point(self, name: str, points) -> None:
        if not len(points) or self.state.history is None:
            return
        steps = self._plot_steps.get(name, [])
        k = points[0].index()
        if 0 <= k < len(steps):
            self.stepClicked.emit(int(steps[k]))

    def export_csv(self, path: str) -> Path:
        h = self.state.history
        if h is None:
            raise ValueError("no history is open: there is no table to write")
        return h.write_csv(path)

    def export_plot(self, path: str) -> Path:
        return (
            write_svg(self.curves.view, path)
            if str(path).lower().endswith(".svg")
            else write_png(self.curves.view, path)
        )

    def _export_start(self, name: str) -> str:
        """Where an export dialog starts: ``name`` in the last export folder (File → Export's)."""
        settings = window_settings(self)
        return str(Path(settings.last_dir("export")) / name) if settings is not None else name

    def _exported_to(self, path: str) -> None:
        settings = window_settings(self)
        if settings is not None:
            settings.set_last_dir("export", Path(path).parent)

    def _export_csv_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Metric-vs-step table", self._export_start("history.csv"), "CSV (*.csv)"
        )
        if path:
            self._exported_to(path)
            self.state.say(f"Wrote {self.export_csv(path)}")

    def _export_plot_dialog(self) -> None:
        path, chosen = QFileDialog.getSaveFileName(
            self, "Plot", self._export_start("history.png"), "PNG image (*.png);;SVG drawing (*.svg)"
        )
        if path:
            if not Path(path).suffix:
                path += ".svg" if "svg" in (chosen or "").lower() else ".png"
            self._exported_to(path)
            self.state.say(f"Wrote {self.export_plot(path)}")


__all__ = ["StepPlot"]
