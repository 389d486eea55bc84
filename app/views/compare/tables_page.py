"""Two table pages: per-head metrics aligned by (layer, head), and the config fields that differ."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QVBoxLayout

from app.views.compare import words
from app.views.compare.base import ComparePage, cell, make_table, note, number_cell
from app.widgets.layouts import compact_combo
from app.widgets.table_width import set_header_labels
from model.compare.tables import config_table


class MetricsPage(ComparePage):
    """One metric of every head in every run; the Δ column of two runs tinted by sign and size."""

    title = "Head metrics"
    key = "metrics"
    blurb = "Each head's metric on the prompt, in every run, aligned by (layer, head)."
    redraw_on = ("runs_changed", "attention_changed")

    def build(self) -> None:
        ml = QVBoxLayout(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("Metric"))
        self.metric_combo = compact_combo(QComboBox(), 16)
        self.metric_combo.setObjectName("compareMetric")
        for key, label in words.METRIC_CHOICES:
            self.metric_combo.addItem(label, key)
        self.metric_combo.currentIndexChanged.connect(lambda *_: self.refresh())
        row.addWidget(self.metric_combo)
        row.addStretch(1)
        ml.addLayout(row)
        self.metric_table = make_table(["layer", "head"])
        self.metric_table.setObjectName("compareMetrics")
        self.metric_table.setSortingEnabled(True)
        ml.addWidget(self.metric_table, 1)
        self.metric_note = note(self.blurb)  # wrapped: a long note must not widen the tab
        ml.addWidget(self.metric_note)

    def draw(self) -> None:
        names, rows = self.state.metric_rows(self.metric_combo.currentData())
        two = len(names) == 2
        headers = ["layer", "head"] + names + ([f"Δ ({names[1]} − {names[0]})"] if two else [])
        t = self.metric_table
        t.setSortingEnabled(False)
        t.clear()
        t.setColumnCount(len(headers))
        set_header_labels(t, headers)
        t.setRowCount(len(rows))
        deltas = [abs(r["delta"]) for r in rows if r.get("delta") is not None]
        biggest = max(deltas) if deltas else 0.0
        for i, row in enumerate(rows):
            values = [row["layer"], row["head"]] + [row[n] for n in names] + ([row["delta"]] if two else [])
            for c, v in enumerate(values):
                it = cell("–", right=True) if v is None else number_cell(v, integer=c < 2)
                if c == len(names) + 2 and v is not None and biggest > 0:  # Δ: tinted by sign and size
                    alpha = int(150 * abs(v) / biggest)
                    it.setBackground(QColor(178, 24, 43, alpha) if v > 0 else QColor(33, 102, 172, alpha))
                t.setItem(i, c, it)
        t.setSortingEnabled(True)
        t.sortItems(0, Qt.SortOrder.AscendingOrder)  # (layer, head) order; the sort is stable
        self.metric_note.setText(
            "Each head's metric on the prompt, in every run, aligned by (layer, head); “–” where a run has "
            "no such head. Click a column header to sort."
            if rows
            else "Run a prompt to measure every head."
        )


class ConfigPage(ComparePage):
    """The config fields that differ across the runs, one column per run."""

    title = "Config differences"
    key = "config"
    blurb = "Only the config fields that differ between the runs."

    def build(self) -> None:
        cl = QVBoxLayout(self)
        self.config_label = note(color=None)
        cl.addWidget(self.config_label)
        self.config_table = make_table(["field"])
        self.config_table.setObjectName("compareConfigDiff")
        cl.addWidget(self.config_table, 1)

    def draw(self) -> None:
        configs = {r.name: r.config for r in self.state.runs}
        rows = config_table(configs) if len(configs) > 1 else []
        t = self.config_table
        t.clear()
        t.setColumnCount(1 + len(configs))
        t.setHorizontalHeaderLabels(["field", *configs])
        t.setRowCount(len(rows))
        for i, (field, _values) in enumerate(rows):
            t.setItem(i, 0, cell(field))
            for c, cfg in enumerate(configs.values(), start=1):
                t.setItem(i, c, cell(words.field_text(cfg, field), right=True))
        self.config_label.setText(words.config_diff_note(len(configs), len(rows)))


__all__ = ["ConfigPage", "MetricsPage"]
