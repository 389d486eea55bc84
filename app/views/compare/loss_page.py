"""The Loss page: every run's loss curves overlaid, and the summary table under them."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHeaderView, QSplitter, QVBoxLayout

from app.views.compare import words
from app.views.compare.base import ComparePage, cell, make_table
from app.widgets.curves import Curves
from app.widgets.table_width import keep_columns_whole


class LossPage(ComparePage):
    title = "Loss curves"
    key = "loss"
    blurb = "Every run's loss on the same batches, and a table of final losses, speed and sizes."

    def __init__(self, state, parent=None):
        super().__init__(state, parent)
        self.follow(state.history_changed, self._on_history)

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        split = QSplitter(Qt.Orientation.Vertical)
        self.loss_plot = Curves(
            "Loss of every run on the same batches",
            "cross-entropy (nats/token)",
            "training step",
            smoothing=0.8,
            hint="faint: train loss · solid: smoothed · dashed with dots: validation loss",
        )
        split.addWidget(self.loss_plot)
        self.summary_table = make_table([h for h, _, _ in words.SUMMARY_COLUMNS])
        self.summary_table.setObjectName("compareSummary")
        hdr = self.summary_table.horizontalHeader()
        hdr.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hdr.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        keep_columns_whole(self.summary_table)
        self.summary_table.setToolTip(
            "Final train loss, last validation loss, latest training speed; parameters, forward FLOPs per "
            "token (2·N_mm + attention scores at the training context) and KV cache per token from the "
            "budget calculator"
        )
        split.addWidget(self.summary_table)
        split.setSizes([560, 220])
        lay.addWidget(split)

    def draw(self) -> None:
        names = self.state.names()
        for name in list(self.loss_plot.series):
            if name not in names:
                self.loss_plot.remove(name)
        for r in self.state.runs:
            if r.record.history:
                self.loss_plot.set_history(r.name, r.record.history, self.color(r))
            else:
                self.loss_plot.remove(r.name)
        self._draw_summary()

    def _on_history(self, names) -> None:
        if not self.in_view():
            self.stale = True
            return
        for name in names:
            r = self.state.run(name)
            self.loss_plot.set_history(name, r.record.history, self.color(r))
        self._draw_summary()

    def _draw_summary(self) -> None:
        rows = self.state.summary_rows()
        t = self.summary_table
        t.setSortingEnabled(False)
        t.setRowCount(len(rows))
        for i, (r, row) in enumerate(zip(self.state.runs, rows, strict=True)):
            for c, text in enumerate(words.summary_cells(r.name, r.kind, row)):
                t.setItem(i, c, cell(text, right=c >= 2, color=self.color(r) if c == 0 else None))

    def clear(self) -> None:
        if self.built:
            self.loss_plot.clear()

    def export_targets(self):
        return {"loss": self.loss_plot.view} if self.built else {}


__all__ = ["LossPage"]
