"""The Budget tab: parameters, FLOPs, KV cache, memory and training cost of any config, as you type.

Left: a preset of a real model (``model/budget/presets.py``), "Use the current model's config", "Open
config…", then every :class:`~model.config.GPTConfig` field as an editable control and the
settings the figures are computed at (context T, batch, KV bytes, precision, recomputation, tokens,
device peak, MFU, device count). Right: a headline with the totals and pages drawn from one
:func:`model.budget.arithmetic.report` — Parameters (per component, with formulas), FLOPs (and the attention
share vs context with the crossover marked), KV cache (vs context and batch, with the GQA/MQA
saving), Memory (per precision mode), Cost (GPU-hours, wall-clock), Side by side (budgets in
columns, differences highlighted) and Check (the built model's count and a measured speed).

The calculator is pure arithmetic, so every edit recomputes everything in the GUI thread in about
a millisecond; only the Check page's model building and timing go to the compute worker.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.session.config_files import read_config
from app.session.settings import window_settings
from app.views.budget.check import CheckPage
from app.views.budget.common import headline
from app.views.budget.inputs import DEVICES, KV_BYTES, BudgetInputs
from app.views.budget.last_valid import Entered, LastValid, grey_out, stale_label, stale_line
from app.views.budget.memory_pages import KVPage, MemoryPage
from app.views.budget.pages import CostPage, FlopsPage, ParamsPage
from app.views.budget.side_by_side import SideBySidePage
from app.views.page import PushedPage, bring_into_view, page_targets, panel_beside_pages, screenshot_steps
from app.views.tab import TabBase
from app.widgets.config_form import GROUPS, gpt_config_form
from app.widgets.layouts import vertical_scroll
from app.widgets.page_stack import CurrentPageTabs
from model.atomic import write_atomic
from model.budget import presets
from model.budget.exports import to_csv, to_markdown
from model.budget.table import BUDGET_HEADER, BudgetSettings, budget_table, table_cells
from model.config import ConfigError, GPTConfig

DEFAULT_PRESET = "llama2-7b"

#: Upper bounds of the integer fields (generous: 405B-class models and million-token contexts).
INT_MAX: dict[str, int] = {
    "vocab_size": 10_000_000,
    "context_length": 10_000_000,
    "n_layers": 10_000,
    "d_model": 1_000_000,
    "n_heads": 100_000,
    "n_kv_heads": 100_000,
    "head_dim": 100_000,
    "d_ff": 10_000_000,
}


def budget_config_form():
    """Every GPTConfig field, vocabulary included, for budgets of any size (a 405B config with a 128k
    vocabulary is as editable as a toy). The tab validates (the settings too) and shows the problems."""
    groups = [(t, (["vocab_size"] if t == "Size" else []) + names) for t, names in GROUPS]
    form = gpt_config_form(
        groups=groups, int_max=INT_MAX, check=None, group_separators=True, object_prefix="budget_"
    )
    form.error_label.setObjectName("budgetConfigErrors")
    return form


class BudgetTab(TabBase):
    """Budgets of any config. ``editor`` holds the config; ``recomputed`` fires after every update."""

    recomputed = Signal()
    #: the window's setup docks this tab wants beside it: none (it has its own config editor)
    docks: tuple[str, ...] = ()

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.preset: presets.Preset | None = None
        self.title = ""
        self.report: dict[str, Any] | None = None
        #: the report's rows (:func:`model.budget.table.budget_table`): what the pages and exports show
        self.rows: list = []
        self.problems: list[str] = []
        self._loading = False

        self.splitter = panel_beside_pages(self, self._build_left(), self._build_right(), 400)
        #: the budget the user last entered whole: shown, greyed, while a value is invalid
        self.last_valid = LastValid([*self.editor.widgets.values(), *self.inputs.widgets()])

        self.choose_preset(DEFAULT_PRESET)

    # ---- building ------------------------------------------------------------------------------
    def _build_left(self) -> QWidget:
        scroll, lay = vertical_scroll()
        scroll.setMinimumWidth(360)

        src = QGroupBox("Start from")
        sl = QVBoxLayout(src)
        row = QHBoxLayout()
        row.addWidget(QLabel("Real model:"))
        self.preset_combo = QComboBox()
        self.preset_combo.setObjectName("budgetPreset")
        self.preset_combo.addItem("(custom)", "")
        for name in presets.names():
            p = presets.get(name)
            self.preset_combo.addItem(p.title, name)
            self.preset_combo.setItemData(
                self.preset_combo.count() - 1, p.source, Qt.ItemDataRole.ToolTipRole
            )
        self.preset_combo.activated.connect(self._preset_activated)
        row.addWidget(self.preset_combo, 1)
        sl.addLayout(row)
        row = QHBoxLayout()
        self.current_button = QPushButton("Use the current model's config")
        self.current_button.setObjectName("useCurrentConfig")
        self.current_button.setToolTip(
            "The config of the model in the Train tab (vocabulary from its tokenizer)"
        )
        self.current_button.clicked.connect(self.use_current_config)
        row.addWidget(self.current_button)
        self.open_button = QPushButton("Open config…")
        self.open_button.setToolTip("A config .json file, or a checkpoint directory's config.json")
        self.open_button.clicked.connect(self._open_config_dialog)
        row.addWidget(self.open_button)
        sl.addLayout(row)
        self.source_label = QLabel()
        self.source_label.setWordWrap(True)
        self.source_label.setStyleSheet("color: #555;")
        sl.addWidget(self.source_label)
        lay.addWidget(src)
        self.inputs = BudgetInputs(self)
        self.inputs.changed.connect(self._settings_changed)
        lay.addWidget(self.inputs.box)

        self.editor = budget_config_form()
        self.editor.valueChanged.connect(self._on_config_edited)
        lay.addWidget(self.editor)
        lay.addStretch(1)
        return scroll

    def _build_right(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        lay.setContentsMargins(0, 0, 0, 0)
        head = QHBoxLayout()
        self.total_label = QLabel()
        self.total_label.setObjectName("budgetTotal")
        self.total_label.setTextFormat(Qt.TextFormat.RichText)
        self.total_label.setWordWrap(True)
        self.total_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        head.addWidget(self.total_label, 1)
        self.csv_button = QPushButton("Export CSV…")
        self.csv_button.setToolTip("Every figure of this budget, exact numbers, as CSV")
        self.csv_button.clicked.connect(lambda: self._export_dialog("csv"))
        self.md_button = QPushButton("Export Markdown…")
        self.md_button.setToolTip("Every figure of this budget as a Markdown table")
        self.md_button.clicked.connect(lambda: self._export_dialog("md"))
        buttons = QVBoxLayout()  # one above the other: the figures beside them keep the width
        buttons.setSpacing(2)
        buttons.addWidget(self.csv_button)
        buttons.addWidget(self.md_button)
        buttons.addStretch(1)
        head.addLayout(buttons)
        lay.addLayout(head)
        self.problem_label = QLabel()
        self.problem_label.setObjectName("budgetProblems")
        self.problem_label.setWordWrap(True)
        self.problem_label.setStyleSheet("color: #c02020; font-weight: bold;")
        self.problem_label.hide()
        lay.addWidget(self.problem_label)
        self.stale_label = stale_label()  # "showing the last valid config: …", while one is shown
        lay.addWidget(self.stale_label)

        self.page_tabs = CurrentPageTabs()
        self.page_tabs.setObjectName("budgetPages")
        self.params_page = ParamsPage()
        self.flops_page = FlopsPage()
        self.kv_page = KVPage()
        self.memory_page = MemoryPage()
        self.cost_page = CostPage()
        self.side_page = SideBySidePage()
        self.side_page.exportRequested.connect(lambda kind: self._export_dialog(kind, side=True))
        self.check_page = CheckPage(self.session)
        pages = (self.params_page, self.flops_page, self.kv_page, self.memory_page, self.cost_page)
        #: the pages ({key: page}, in the order of their tabs)
        self.pages: dict[str, PushedPage] = {p.key: p for p in (*pages, self.side_page, self.check_page)}
        for page in self.pages.values():
            self.page_tabs.addTab(page, page.title)
        self.memory_page.body.insertLayout(0, self.inputs.memory_bar())
        self.cost_page.body.insertLayout(0, self.inputs.cost_grid())
        self.page_tabs.currentChanged.connect(lambda *_: bring_into_view(self.current_page))
        lay.addWidget(self.page_tabs, 1)
        return w

    # ---- choosing a config ---------------------------------------------------------------------
    def _preset_activated(self, index: int) -> None:
        key = self.preset_combo.itemData(index)
        if key:
            self.choose_preset(key)

    def choose_preset(self, name: str) -> None:
        """Show the real model ``name`` with its training metadata (tokens, device, precision)."""
        p = presets.get(name)
        self._loading = True
        try:
            self.preset = p
            self.title = p.title
            self.preset_combo.setCurrentIndex(max(0, self.preset_combo.findData(p.name)))
            self.inputs.apply_preset(p)
            notes = f" {p.notes}." if p.notes else ""
            self.source_label.setText(f"{p.title}: {p.source}.{notes}")
            self.editor.set_value(p.gpt_config())
        finally:
            self._loading = False
        self.recompute()

    def use_current_config(self) -> None:
        """The session's config (the model the Train tab trains or loaded), vocabulary included."""
        cfg = self.session.config
        if self.session.model is not None:
            cfg = self.session.model.config
        elif cfg.core.vocab_size is None and self.session.tokenizer is not None:
            cfg = cfg.with_vocab(self.session.tokenizer.vocab_size)
        self.set_config(cfg, title="the current model", source="The model of the Train tab.")

    def set_config(self, cfg: GPTConfig, *, title: str = "custom config", source: str = "") -> None:
        self._loading = True
        try:
            self.preset = None
            self.title = title
            self.preset_combo.setCurrentIndex(0)
            self.source_label.setText(source)
            self.editor.set_value(cfg)
        finally:
            self._loading = False
        self.recompute()

    def _open_config_dialog(self) -> None:
        settings = window_settings(self)
        start = settings.last_dir("checkpoint") if settings is not None else ""
        path = QFileDialog.getExistingDirectory(
            self, "Open a checkpoint directory (or cancel for a file)", start
        )
        if not path:
            path, _ = QFileDialog.getOpenFileName(self, "Open a config file", start, "Config (*.json)")
        if path:
            if settings is not None:
                settings.set_last_dir("checkpoint", Path(path).parent if Path(path).is_dir() else path)
            self.open_config(path)

    def open_config(self, path: str) -> bool:
        try:
            cfg = read_config(path)
        except ConfigError as exc:
            self.problem_label.setText(f"Could not open {path}: {exc}")
            self.problem_label.show()
            return False
        self.set_config(
            cfg, title=Path(path).stem if Path(path).is_file() else Path(path).name, source=f"From {path}."
        )
        return True

    def _on_config_edited(self, cfg: GPTConfig | None) -> None:
        """An edit names what the values now are: the preset they equal (whichever it is, not the
        one the editing started from), else a custom config."""
        if self._loading:
            return
        self.preset = presets.matching(cfg) if isinstance(cfg, GPTConfig) else None  # None: unreadable
        self.title = self.preset.title if self.preset is not None else "custom config"
        self.preset_combo.setCurrentIndex(
            max(0, self.preset_combo.findData(self.preset.name)) if self.preset is not None else 0
        )
        if self.preset is not None:
            self.source_label.setText(f"{self.preset.title}: {self.preset.source}.")
        self.recompute()

    # ---- settings ------------------------------------------------------------------------------
    def _settings_changed(self, *_: Any) -> None:
        if not self._loading:
            self.recompute()

    def settings(self) -> BudgetSettings:
        """The settings the widgets describe (raises ValueError for unreadable tokens)."""
        return self.inputs.settings()

    def figures_shown(self) -> bool:
        """Whether the pages show a budget (False: greyed while the config or a setting is invalid)."""
        return self.params_page.table.isEnabled()

    def _show_figures(self, on: bool) -> None:
        """Grey every computed page's figures (not its inputs: the Cost page's and the Memory page's
        settings stay editable, or a value typed out of range there could not be corrected)."""
        inputs = set(self.inputs.widgets())
        for page in (self.params_page, self.flops_page, self.kv_page, self.memory_page, self.cost_page):
            for child in page.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly):
                if child not in inputs:
                    child.setEnabled(on)
                    grey_out(child, not on)
        for figures in (self.side_page.table, self.total_label):
            grey_out(figures, not on)

    # ---- computing -----------------------------------------------------------------------------
    def recompute(self) -> None:
        """Recompute the report of the edited config and redraw every page (cheap arithmetic)."""
        cfg = self.editor.value()
        # a number typed out of range stays in its box and is named first: the budget is not
        # computed from the last valid value behind it
        typed_config, typed_settings = self.editor.typed_problems(), self.inputs.typed_problems()
        try:
            settings = self.settings()
            self.inputs.settings_error.setText("\n".join(typed_settings))
        except ValueError as exc:
            self.inputs.settings_error.setText("\n".join([*typed_settings, str(exc)]))
            settings = BudgetSettings(**{**self._last_settings().to_dict(), "tokens": None})
        try:
            problems = settings.problems(cfg)
        except Exception as exc:  # a field that is not even a number
            problems = [str(exc)]
        self.editor.show_problems([*typed_config, *(p for p in problems if _is_config_problem(p))])
        problems = [*typed_config, *typed_settings, *problems]
        self.problems = problems
        if problems:
            self.report = None
            self.rows = []
            self.problem_label.setText("Cannot compute: " + "; ".join(problems))
            self.problem_label.show()
            self.last_valid.withdraw()
            self._show_entered()
            self.check_page.set_config(None, settings)
            self.csv_button.setEnabled(False)
            self.md_button.setEnabled(False)
            self.recomputed.emit()
            return
        self._settings = settings
        self.problem_label.hide()
        self.stale_label.hide()
        self._show_figures(True)
        self.csv_button.setEnabled(True)
        self.md_button.setEnabled(True)
        title = self.title or "custom config"
        rep = settings.report(cfg, title)
        self.report = rep
        if self.preset is not None and cfg.to_dict() == self.preset.gpt_config().to_dict():
            rep["preset"] = self.preset.to_dict()  # the authors' figures beside the estimate
        entered = Entered(cfg, settings, title, rep)
        self.rows = self._draw(entered)
        self.last_valid.offer(entered)
        self.check_page.set_config(cfg, settings)
        self.recomputed.emit()

    def _draw(self, budget_shown: Entered) -> list:
        """Every page, the side-by-side column and the headline from one budget; its table rows."""
        cfg, settings, rep = budget_shown.config, budget_shown.settings, budget_shown.report
        rows = budget_table(rep)
        for page in (self.params_page, self.flops_page, self.kv_page, self.memory_page, self.cost_page):
            page.update_report(cfg, settings, rep, rows)
        self.side_page.set_current(budget_shown.title, cfg)
        self.side_page.set_settings(settings)
        self.total_label.setText(headline(budget_shown.title, rep))
        return rows

    def _show_entered(self) -> None:
        """While a value is invalid: the last budget entered whole, greyed, and a line naming it (never
        a budget of a half-typed value)."""
        self._show_figures(False)
        entered = self.last_valid.entered
        if entered is None:
            self.total_label.setText("<span style='color:#888'>Fix the config to see its budget.</span>")
            self.stale_label.hide()
            return
        self._draw(entered)
        self.stale_label.setText(stale_line(entered))
        self.stale_label.show()

    def _last_settings(self) -> BudgetSettings:
        return getattr(self, "_settings", BudgetSettings())

    # ---- export --------------------------------------------------------------------------------
    def budget_rows(self) -> tuple[list[str], list[list[Any]]]:
        if self.report is None:
            return BUDGET_HEADER, []
        return BUDGET_HEADER, table_cells(self.rows)

    def export_table(self, path: str | Path, *, side: bool = False) -> Path:
        """Write this budget's table (or the side-by-side table) as CSV (``.csv``) or Markdown (``.md``)."""
        path = Path(path)
        header, rows = (self.side_page.header, self.side_page.rows) if side else self.budget_rows()
        if path.suffix.lower() == ".csv":
            text = to_csv(header, rows)
        elif path.suffix.lower() in (".md", ".markdown"):
            title = "Budgets side by side" if side else f"Budget: {self.title or 'custom config'}"
            text = f"# {title}\n\n" + to_markdown(header, rows)
        else:
            raise ValueError(f"export as .csv or .md, not {path.suffix or 'a file without extension'}")
        return write_atomic(path, text)  # whole or not at all: a failed write is one WriteError line

    def _export_dialog(self, kind: str, side: bool = False) -> None:
        suffix = ".csv" if kind == "csv" else ".md"
        name = (
            "budgets-side-by-side" if side else f"budget-{(self.title or 'custom').replace(' ', '-')}"
        ) + suffix
        filt = "CSV (*.csv)" if kind == "csv" else "Markdown (*.md)"
        path, _ = QFileDialog.getSaveFileName(self, "Export table", name, filt)
        if not path:
            return
        if not Path(path).suffix:
            path += suffix
        try:
            self.export_table(path, side=side)
        except (OSError, ValueError) as exc:
            self.problem_label.setText(f"Could not export: {exc}")
            self.problem_label.show()

    # ---- hooks for the window ------------------------------------------------------------------
    @property
    def current_page(self) -> PushedPage:
        return list(self.pages.values())[self.page_tabs.currentIndex()]  # (a tab per page, in order)

    def show_page(self, key: str) -> PushedPage:
        page = self.pages[key]
        self.page_tabs.setCurrentWidget(page)
        return page

    def export_targets(self) -> dict[str, QWidget]:
        """The plots of the page in view."""
        return page_targets(self.current_page)

    def screenshot_pages(self) -> list[tuple[str, Any]]:
        """Every page (the Check page counts the built model's parameters first)."""
        return screenshot_steps(self.pages, self.pages.__getitem__, self.show_page)

    def save_state(self, settings) -> None:
        try:
            settings.set_json("budget/config", self.editor.value().to_dict())
            settings.set_json(
                "budget/title", {"title": self.title, "preset": self.preset.name if self.preset else None}
            )
        except Exception:
            pass

    def restore_state(self, settings) -> None:
        meta = settings.get_json("budget/title") or {}
        cfg = settings.get_json("budget/config")
        if meta.get("preset") and cfg is None:
            self.choose_preset(meta["preset"])
            return
        if cfg:
            try:
                config = GPTConfig.from_dict(cfg, validate=False)
            except (ConfigError, TypeError):
                return
            if meta.get("preset"):
                self.choose_preset(meta["preset"])
                if config.to_dict() == self.editor.value().to_dict():
                    return
            self.set_config(config, title=str(meta.get("title") or "custom config"))


def _is_config_problem(p: str) -> bool:
    return not p.startswith(
        ("seq_len=", "batch=", "gpus=", "tokens=", "peak_flops=", "mfu=", "bytes_per_value=")
    )


__all__ = ["DEVICES", "KV_BYTES", "BudgetTab"]
