"""Budgets side by side: one column per config (presets or the edited one), differences highlighted.

Every column is evaluated at the same context ``T`` and batch (a learned-position model is capped
at its own table and says so in its header). A cell that differs from the first column is
highlighted, its tooltip gives the ratio to the first column.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.views.budget.common import BOLD, HIGHLIGHT, item, make_table
from app.views.page import PushedPage
from model.budget import presets
from model.budget.side_by_side import differs, display, side_by_side_table, side_kind
from model.budget.table import BudgetSettings
from model.config import ConfigError, GPTConfig

#: The columns a new tab starts with.
DEFAULT_COLUMNS = ("llama2-7b", "mistral-7b", "llama3-8b")


class SideBySidePage(PushedPage):
    """Columns of budgets; ``columns`` is a list of (title, GPTConfig). New settings redraw it when in
    view, else mark it ``stale`` (every column is a whole report)."""

    title = "Side by side"
    key = "side-by-side"

    #: the "edited config" entry of the add menu needs the tab's current config
    wantCurrent = Signal()
    exportRequested = Signal(str)  # "csv" | "md"

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.columns: list[tuple[str, GPTConfig]] = [
            (presets.get(n).title, presets.get(n).gpt_config()) for n in DEFAULT_COLUMNS
        ]
        self.settings = BudgetSettings()
        self.header: list[str] = []
        self.rows: list[list[Any]] = []
        layout = QVBoxLayout(self)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Add a column:"))
        self.add_combo = QComboBox()
        self.add_combo.setObjectName("sideAddCombo")
        self.add_combo.addItem("the config being edited", "")
        for name in presets.names():
            self.add_combo.addItem(presets.get(name).title, name)
        bar.addWidget(self.add_combo)
        self.add_button = QPushButton("Add")
        self.add_button.clicked.connect(self._add_clicked)
        bar.addWidget(self.add_button)
        self.remove_button = QPushButton("Remove selected column")
        self.remove_button.clicked.connect(self.remove_selected)
        bar.addWidget(self.remove_button)
        bar.addStretch(1)
        layout.addLayout(bar)
        bar = QHBoxLayout()  # a second row, so the page fits a narrow window
        bar.addWidget(QLabel("All at context T ="))
        self.t_spin = QSpinBox()
        self.t_spin.setObjectName("sideSeqLen")
        self.t_spin.setRange(1, 10_000_000)
        self.t_spin.setValue(4096)
        self.t_spin.setGroupSeparatorShown(True)
        self.t_spin.setToolTip("FLOPs, KV cache and activation memory are compared at this context length")
        self.t_spin.valueChanged.connect(lambda *_: self.refresh())
        bar.addWidget(self.t_spin)
        bar.addStretch(1)
        self.csv_button = QPushButton("Export CSV…")
        self.csv_button.clicked.connect(lambda: self.exportRequested.emit("csv"))
        self.md_button = QPushButton("Export Markdown…")
        self.md_button.clicked.connect(lambda: self.exportRequested.emit("md"))
        bar.addWidget(self.csv_button)
        bar.addWidget(self.md_button)
        layout.addLayout(bar)
        self.table = make_table(["quantity"])
        self.table.setObjectName("sideBySideTable")
        layout.addWidget(self.table, 1)
        self.note = QLabel(
            "Highlighted: differs from the first column (hover for the ratio). Batch and KV bytes come from "
            "the settings on the left, the precision from the Memory page, tokens, peak, MFU and devices "
            "from the Cost page."
        )
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #555;")
        layout.addWidget(self.note)
        self._current: tuple[str, GPTConfig] | None = None

    # ---- columns -------------------------------------------------------------------------------
    def set_current(self, title: str, cfg: GPTConfig) -> None:
        self._current = (title, cfg)

    def add_column(self, title: str, cfg: GPTConfig) -> None:
        taken = {t for t, _ in self.columns}
        base, i = title, 2
        while title in taken:
            title = f"{base} ({i})"
            i += 1
        self.columns.append((title, cfg))
        self.refresh()

    def _add_clicked(self) -> None:
        key = self.add_combo.currentData()
        if key:
            p = presets.get(key)
            self.add_column(p.title, p.gpt_config())
        elif self._current is not None:
            self.add_column(self._current[0], self._current[1])

    def remove_selected(self) -> None:
        cols = sorted({i.column() for i in self.table.selectedIndexes() if i.column() > 0}, reverse=True)
        if not cols and self.table.currentColumn() > 0:
            cols = [self.table.currentColumn()]
        for c in cols:
            if 0 < c <= len(self.columns):
                del self.columns[c - 1]
        self.refresh()

    def set_settings(self, settings: BudgetSettings) -> None:
        """The tab's settings: drawn now if in view (or never drawn yet), else when next shown."""
        self.settings = settings
        self.stale = True
        if self.isVisibleTo(self.window()) or not self.rows:
            self.refresh()

    # ---- drawing -------------------------------------------------------------------------------
    def reports(self) -> list[tuple[str, dict[str, Any] | None, str]]:
        """(header title, report or None, problem text) per column at the common T."""
        out: list[tuple[str, dict[str, Any] | None, str]] = []
        T = int(self.t_spin.value())
        for title, cfg in self.columns:
            t_col = T
            head = title
            if cfg.positional.positions == "learned" and T > cfg.core.context_length:
                t_col = cfg.core.context_length
                head = f"{title}\n(T capped at {t_col:,})"
            s = BudgetSettings(**{**self.settings.to_dict(), "seq_len": t_col})
            try:
                out.append((head, s.report(cfg, title), ""))
            except ConfigError as exc:
                out.append((head, None, "; ".join(exc.problems)))
        return out

    def refresh(self) -> None:
        self.stale = False
        reps = self.reports()
        header, rows = side_by_side_table([(h, r) for h, r, _ in reps])
        self.header, self.rows = header, rows
        t = self.table
        t.setColumnCount(len(header))
        t.setHorizontalHeaderLabels(header)
        t.setRowCount(len(rows))
        for r, row in enumerate(rows):
            label = row[0]
            kind = side_kind(label)
            t.setItem(r, 0, item(label, bold=True))
            marks = differs(row[1:])
            first = row[1] if len(row) > 1 else None
            for c, (v, mark) in enumerate(zip(row[1:], marks), start=1):
                tip = ""
                if mark and isinstance(v, (int, float)) and isinstance(first, (int, float)) and first:
                    tip = f"{v / first:.3g}× the first column ({header[1]})"
                problem = reps[c - 1][2]
                it = item(display(v, kind), right=kind != "text", tip=problem or tip)
                if mark:
                    it.setBackground(QBrush(HIGHLIGHT))
                    it.setFont(BOLD)
                t.setItem(r, c, it)

    def differing_cells(self) -> list[tuple[int, int]]:
        """(row, column) of every highlighted cell (for tests and the export)."""
        out = []
        for r, row in enumerate(self.rows):
            for c, mark in enumerate(differs(row[1:]), start=1):
                if mark:
                    out.append((r, c))
        return out
