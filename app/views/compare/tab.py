"""The Compare tab: "what does this choice change?" — two or more runs side by side.

Left, the runs: variants of the Model panel's config ("the same but n_kv_heads = 1", or a quick
comparison such as Pre-LN vs Post-LN), the current model of the session, or checkpoints. The
variants train together (:class:`~app.workers.GroupWorker`: one
:class:`~model.multitrain.TrainerGroup` in its own thread, the same batches in the same order for
every variant), and the comparison saves to a JSON file that reopens as it was.

Right, the pages: overlaid loss curves with a table of final losses, speed, parameters, FLOPs
and KV cache per token; the same prompt through every model as head grids side by side; for two
models of the same shape the A − B difference of every head (diverging colours, symmetric levels)
with a per-head summary; per-head metrics aligned by (layer, head); and the config fields that
differ. Every number comes from ``model/`` (``model.comparison``, ``model.analysis.compare``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.views.compare.runs import Run
from app.widgets.curves import Curves
from app.widgets.head_mosaic import HeadMosaic
from app.widgets.palette import run_color
from app.workers import GroupSpec, GroupWorker, drain_timer
from model import comparison as cmp
from model.config import ConfigError, GPTConfig

#: Columns of the summary table: (header, key of model.comparison.summary_row, format).
SUMMARY_COLUMNS = [
    ("run", None, None),
    ("kind", None, None),
    ("steps", "steps", "{:,}"),
    ("train loss", "train_loss", "{:.4f}"),
    ("val loss", "val_loss", "{:.4f}"),
    ("tokens/s", "tokens_per_s", "{:,.0f}"),
    ("parameters", "params", "{:,}"),
    ("forward FLOPs/token", "flops_per_token", "{:,}"),
    ("KV cache/token (fp32)", "kv_cache_bytes_per_token", "{:,} B"),
]

METRICS = [
    ("entropy_norm", "normalised entropy (1 = uniform, 0 = one key)"),
    ("entropy", "entropy (nats)"),
    ("prev_token", "previous-token score"),
    ("sink", "first-token (sink) score"),
    ("self_score", "self (diagonal) score"),
]


def _quick(base: GPTConfig) -> list[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    """The issue's everyday questions, as (label, [(name, changes), ...]) for this base config."""
    h = base.n_heads
    out = [
        ("Pre-LN vs Post-LN", [("pre-LN", {"norm_position": "pre"}), ("post-LN", {"norm_position": "post"})]),
        (f"MHA vs MQA ({h} K/V heads vs 1)", [("MHA", {"n_kv_heads": None}), ("MQA", {"n_kv_heads": 1})]),
        (
            "scaled vs unscaled scores (1/√d_k)",
            [("scaled", {"attn_scale": "sqrt_dk"}), ("unscaled", {"attn_scale": "none"})],
        ),
        (
            "RoPE vs learned positions",
            [("RoPE", {"positions": "rope"}), ("learned", {"positions": "learned"})],
        ),
        (
            f"{h} heads vs {2 * h}",
            [
                (f"{h} heads", {"n_heads": h, "n_kv_heads": None}),
                (f"{2 * h} heads", {"n_heads": 2 * h, "n_kv_heads": None}),
            ],
        ),
        ("causal mask vs none", [("causal", {"causal": True}), ("no mask", {"causal": False})]),
    ]
    if h >= 4 and h % 2 == 0:
        out.insert(
            2,
            (
                f"MHA vs GQA vs MQA ({h}, {h // 2}, 1)",
                [
                    ("MHA", {"n_kv_heads": None}),
                    (f"GQA-{h // 2}", {"n_kv_heads": h // 2}),
                    ("MQA", {"n_kv_heads": 1}),
                ],
            ),
        )
    return out


def _visible_text(text: str, limit: int = 80) -> str:
    """A prompt shown on one line: new lines and tabs as visible marks, long ones shortened."""
    s = text.replace("\n", "⏎").replace("\t", "⇥")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _field_text(cfg: GPTConfig, name: str) -> str:
    """A config field as the config diff shows it: derived sizes with the value they take."""
    value = getattr(cfg, name)
    derived = {"n_kv_heads": cfg.kv_heads, "head_dim": cfg.d_head, "d_ff": cfg.hidden}
    if value is None and name in derived:
        return f"auto ({derived[name]})"
    return cmp.format_value(value)


def _fmt(value: Any, fmt: str | None) -> str:
    if value is None:
        return "–"
    if fmt is None:
        return str(value)
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def _table(headers: list[str]) -> QTableWidget:
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().setVisible(False)
    t.verticalHeader().setDefaultSectionSize(24)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setAlternatingRowColors(True)
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
    return t


def _cell(text: str, right: bool = False, color: tuple[int, int, int] | None = None) -> QTableWidgetItem:
    it = QTableWidgetItem(text)
    if right:
        it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    if color is not None:
        it.setForeground(QColor(*color))
    return it


class CompareTab(QWidget):
    """Compare runs. Public API (also what the tests drive): :meth:`add_variant`,
    :meth:`add_current_model`, :meth:`add_checkpoint`, :meth:`train_variants`, :meth:`run_prompt`,
    :meth:`set_pair`, :meth:`save_comparison`, :meth:`open_comparison`."""

    trainingFinished = Signal(str, str)
    attentionReady = Signal()
    runsChanged = Signal()
    #: a checkpoint could not be added: (path, message)
    loadFailed = Signal(str, str)

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.runs: list[Run] = []
        self.worker: GroupWorker | None = None
        self._target = 0
        self.comparison_path: str | None = None
        self.settings_used: dict[str, Any] = {}
        self.source_used = ""
        self.title = ""
        self.grids: dict[str, HeadMosaic] = {}
        self.diff: np.ndarray | None = None

        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self._build_left())
        split.addWidget(self._build_right())
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([380, 1100])
        root = QVBoxLayout(self)
        root.setContentsMargins(4, 4, 4, 4)
        root.addWidget(split)

        self._timer = drain_timer(self, self._drain)
        session.configChanged.connect(lambda *_: self._update_base_label())
        session.dataChanged.connect(lambda *_: self._update_base_label())
        session.modelChanged.connect(lambda *_: self._update_buttons())
        session.probePromptChanged.connect(self._on_probe_prompt)
        self._update_base_label()
        self._refresh_all()

    # ---- building ------------------------------------------------------------------------------
    def _build_left(self) -> QWidget:
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        scroll.setMinimumWidth(370)
        body = QWidget()
        scroll.setWidget(body)
        lay = QVBoxLayout(body)

        box = QGroupBox("Runs being compared")
        bl = QVBoxLayout(box)
        self.run_list = QListWidget()
        self.run_list.setObjectName("compareRuns")
        self.run_list.setMinimumHeight(120)
        self.run_list.setWordWrap(True)
        self.run_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.run_list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        bl.addWidget(self.run_list)
        row = QHBoxLayout()
        self.add_current_button = QPushButton("Add current model")
        self.add_current_button.setToolTip("A frozen copy of the Train tab's model, with its loss history")
        self.add_current_button.clicked.connect(lambda: self.add_current_model())
        row.addWidget(self.add_current_button)
        self.add_init_button = QPushButton("Add its initialisation")
        self.add_init_button.setToolTip(
            "The same config freshly initialised with the Training panel's seed: the weights a run with "
            "that seed starts from. Against the trained model: what training changed in every head"
        )
        self.add_init_button.clicked.connect(lambda: self.add_initial_model())
        row.addWidget(self.add_init_button)
        bl.addLayout(row)
        row = QHBoxLayout()
        self.add_ckpt_button = QPushButton("Add checkpoint…")
        self.add_ckpt_button.setToolTip(
            "An Attention Lab checkpoint, a Hugging Face GPT-2 folder or a nanoGPT ckpt.pt"
        )
        self.add_ckpt_button.clicked.connect(self._add_checkpoint_dialog)
        row.addWidget(self.add_ckpt_button)
        self.remove_button = QPushButton("Remove")
        self.remove_button.clicked.connect(self._remove_selected)
        row.addWidget(self.remove_button)
        bl.addLayout(row)
        lay.addWidget(box, 2)

        vbox = QGroupBox("Variants of the current config")
        vl = QVBoxLayout(vbox)
        self.base_label = QLabel()
        self.base_label.setWordWrap(True)
        self.base_label.setStyleSheet("color: #444;")
        vl.addWidget(self.base_label)
        row = QHBoxLayout()
        self.quick_combo = QComboBox()
        self.quick_combo.setObjectName("compareQuick")
        self.quick_combo.setToolTip("Add a ready-made set of variants of the base config")
        row.addWidget(self.quick_combo, 1)
        self.quick_button = QPushButton("Add these")
        self.quick_button.clicked.connect(self._add_quick)
        row.addWidget(self.quick_button)
        vl.addLayout(row)
        vl.addWidget(QLabel("Or: the same as the base, but …"))
        row = QHBoxLayout()
        self.field_combo = QComboBox()
        self.field_combo.addItem("field…", "")
        for name in GPTConfig.field_names():
            if name != "vocab_size":
                self.field_combo.addItem(name, name)
        self.field_combo.setToolTip("Insert a field name into the changes")
        self.field_combo.activated.connect(self._insert_field)
        row.addWidget(self.field_combo)
        self.changes_edit = QLineEdit()
        self.changes_edit.setObjectName("compareChanges")
        self.changes_edit.setPlaceholderText("n_kv_heads=1, norm_position=post")
        self.changes_edit.setToolTip("field=value pairs, separated by commas; empty = the base config itself")
        self.changes_edit.returnPressed.connect(self._add_variant_clicked)
        row.addWidget(self.changes_edit, 1)
        vl.addLayout(row)
        row = QHBoxLayout()
        self.variant_name_edit = QLineEdit()
        self.variant_name_edit.setPlaceholderText("name (optional)")
        row.addWidget(self.variant_name_edit, 1)
        self.add_variant_button = QPushButton("Add variant")
        self.add_variant_button.clicked.connect(self._add_variant_clicked)
        row.addWidget(self.add_variant_button)
        vl.addLayout(row)
        self.variant_error = QLabel()
        self.variant_error.setWordWrap(True)
        self.variant_error.setStyleSheet("color: #c02020;")
        vl.addWidget(self.variant_error)
        lay.addWidget(vbox)

        tbox = QGroupBox("Train the variants together")
        tl = QVBoxLayout(tbox)
        row = QHBoxLayout()
        row.addWidget(QLabel("Steps"))
        self.steps_spin = QSpinBox()
        self.steps_spin.setObjectName("compareSteps")
        self.steps_spin.setRange(1, 10_000_000)
        self.steps_spin.setValue(300)
        self.steps_spin.setToolTip("Training steps of every variant")
        row.addWidget(self.steps_spin)
        self.train_button = QPushButton("Train variants")
        self.train_button.setObjectName("compareTrain")
        self.train_button.clicked.connect(lambda: self.train_variants())
        row.addWidget(self.train_button)
        self.stop_button = QPushButton("Stop")
        self.stop_button.clicked.connect(self.stop_training)
        row.addWidget(self.stop_button)
        tl.addLayout(row)
        self.progress = QProgressBar()
        self.progress.setFormat("idle")
        self.progress.setTextVisible(True)
        tl.addWidget(self.progress)
        self.train_status = QLabel(
            "Every variant trains on the Data panel's source with the Training panel's settings and seed: "
            "the same batches in the same order, one step each in turn."
        )
        self.train_status.setWordWrap(True)
        self.train_status.setStyleSheet("color: #555;")
        tl.addWidget(self.train_status)
        lay.addWidget(tbox)

        fbox = QGroupBox("Comparison file")
        fl = QVBoxLayout(fbox)
        row = QHBoxLayout()
        self.save_button = QPushButton("Save comparison…")
        self.save_button.clicked.connect(self._save_dialog)
        row.addWidget(self.save_button)
        self.open_button = QPushButton("Open comparison…")
        self.open_button.clicked.connect(self._open_dialog)
        row.addWidget(self.open_button)
        fl.addLayout(row)
        self.with_models_check = QCheckBox("also save the trained models (a checkpoint per run)")
        self.with_models_check.setToolTip(
            "Without them a reopened comparison shows its curves, tables and attention, but cannot run a "
            "new prompt through variants trained here"
        )
        fl.addWidget(self.with_models_check)
        self.file_label = QLabel()
        self.file_label.setWordWrap(True)
        self.file_label.setStyleSheet("color: #555;")
        fl.addWidget(self.file_label)
        lay.addWidget(fbox)
        lay.addStretch(1)
        return scroll

    def _build_right(self) -> QWidget:
        self.pages = QTabWidget()
        self.pages.setObjectName("comparePages")

        # loss curves + summary
        loss = QSplitter(Qt.Orientation.Vertical)
        self.loss_plot = Curves(
            "Loss of every run on the same batches",
            "cross-entropy (nats/token)",
            "training step",
            smoothing=0.8,
            hint="faint: train loss · solid: smoothed · dashed with dots: validation loss",
        )
        loss.addWidget(self.loss_plot)
        self.summary_table = _table([h for h, _, _ in SUMMARY_COLUMNS])
        self.summary_table.setObjectName("compareSummary")
        hdr = self.summary_table.horizontalHeader()
        hdr.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        hdr.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.summary_table.setToolTip(
            "Final train loss, last validation loss, latest training speed; parameters, forward FLOPs per "
            "token (2·N_mm + attention scores at the training context) and KV cache per token from the "
            "budget calculator"
        )
        loss.addWidget(self.summary_table)
        loss.setSizes([560, 220])
        self.pages.addTab(loss, "Loss curves")

        # attention grids side by side
        att = QWidget()
        al = QVBoxLayout(att)
        row = QHBoxLayout()
        row.addWidget(QLabel("Prompt"))
        self.prompt_edit = QLineEdit()
        self.prompt_edit.setObjectName("comparePrompt")
        self.prompt_edit.setPlaceholderText("the same prompt goes through every model")
        self.prompt_edit.returnPressed.connect(lambda: self.run_prompt())
        row.addWidget(self.prompt_edit, 1)
        self.prompt_button = QPushButton("Run through every model")
        self.prompt_button.clicked.connect(lambda: self.run_prompt())
        row.addWidget(self.prompt_button)
        al.addLayout(row)
        self.prompt_status = QLabel("Add runs, then run a prompt through them.")
        self.prompt_status.setWordWrap(True)
        self.prompt_status.setStyleSheet("color: #555;")
        al.addWidget(self.prompt_status)
        self.grid_scroll = QScrollArea()
        self.grid_scroll.setWidgetResizable(True)
        self.grid_body = QWidget()
        self.grid_layout = QGridLayout(self.grid_body)
        self.grid_layout.setContentsMargins(0, 0, 0, 0)
        self.grid_scroll.setWidget(self.grid_body)
        al.addWidget(self.grid_scroll, 1)
        self.pages.addTab(att, "Attention side by side")

        # A − B
        dif = QWidget()
        dl = QVBoxLayout(dif)
        row = QHBoxLayout()
        row.addWidget(QLabel("A"))
        self.a_combo = QComboBox()
        self.a_combo.setObjectName("compareA")
        row.addWidget(self.a_combo, 1)
        row.addWidget(QLabel("−  B"))
        self.b_combo = QComboBox()
        self.b_combo.setObjectName("compareB")
        row.addWidget(self.b_combo, 1)
        self.a_combo.currentIndexChanged.connect(lambda *_: self._draw_diff())
        self.b_combo.currentIndexChanged.connect(lambda *_: self._draw_diff())
        dl.addLayout(row)
        self.diff_status = QLabel()
        self.diff_status.setObjectName("compareDiffStatus")
        self.diff_status.setWordWrap(True)
        dl.addWidget(self.diff_status)
        dsplit = QSplitter(Qt.Orientation.Horizontal)
        self.diff_grid = HeadMosaic(interactive=False, compact=True)
        self.diff_grid.clear("no difference to show yet")
        dsplit.addWidget(self.diff_grid)
        self.diff_table = _table(["layer", "head", "max |A−B|", "mean |A−B|", "TV distance"])
        self.diff_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.diff_table.setObjectName("compareDiffTable")
        self.diff_table.setToolTip(
            "Per head: the largest and mean absolute difference of the weights, and the mean over queries "
            "of the total-variation distance ½ Σ_j |A_ij − B_ij| (0 = same pattern, 1 = disjoint)"
        )
        self.diff_table.setSortingEnabled(True)
        dsplit.addWidget(self.diff_table)
        dsplit.setSizes([640, 480])
        dl.addWidget(dsplit, 1)
        self.pages.addTab(dif, "A − B difference")

        # head metrics aligned
        met = QWidget()
        ml = QVBoxLayout(met)
        row = QHBoxLayout()
        row.addWidget(QLabel("Metric"))
        self.metric_combo = QComboBox()
        self.metric_combo.setObjectName("compareMetric")
        for key, label in METRICS:
            self.metric_combo.addItem(label, key)
        self.metric_combo.currentIndexChanged.connect(lambda *_: self._draw_metrics())
        row.addWidget(self.metric_combo)
        row.addStretch(1)
        ml.addLayout(row)
        self.metric_table = _table(["layer", "head"])
        self.metric_table.setObjectName("compareMetrics")
        self.metric_table.setSortingEnabled(True)
        ml.addWidget(self.metric_table, 1)
        self.metric_note = QLabel("Each head's metric on the prompt, in every run, aligned by (layer, head).")
        self.metric_note.setStyleSheet("color: #555;")
        ml.addWidget(self.metric_note)
        self.pages.addTab(met, "Head metrics")

        # config diff
        cfgw = QWidget()
        cl = QVBoxLayout(cfgw)
        self.config_label = QLabel()
        self.config_label.setWordWrap(True)
        cl.addWidget(self.config_label)
        self.config_table = _table(["field"])
        self.config_table.setObjectName("compareConfigDiff")
        cl.addWidget(self.config_table, 1)
        self.pages.addTab(cfgw, "Config differences")
        return self.pages

    # ---- the base config -----------------------------------------------------------------------
    def base_config(self) -> GPTConfig:
        """The Model panel's config with the data's vocabulary (what variants change)."""
        cfg = self.session.config
        src = self.session.source
        if src is not None:
            cfg = cfg.with_vocab(src.tokenizer.vocab_size)
        return cfg

    def _update_base_label(self) -> None:
        cfg = self.base_config()
        src = self.session.source_spec or "no data source yet"
        kv = f", {cfg.kv_heads} K/V heads" if cfg.kv_heads != cfg.n_heads else ""
        self.base_label.setText(
            f"Base: the Model panel's config — {cfg.n_layers} layers, d = {cfg.d_model}, "
            f"{cfg.n_heads} heads{kv}, "
            f"{cfg.positions} positions, {cfg.norm_position}-{cfg.norm}; data: {src}."
        )
        current = self.quick_combo.currentIndex()
        self.quick_combo.clear()
        self._quick_items = _quick(cfg)
        for label, _ in self._quick_items:
            self.quick_combo.addItem(label)
        self.quick_combo.setCurrentIndex(max(0, current))

    def _on_probe_prompt(self, text: str) -> None:
        if not self.prompt_edit.text():
            self.set_prompt(text)

    # ---- adding runs ---------------------------------------------------------------------------
    def _names(self) -> list[str]:
        return [r.name for r in self.runs]

    def run(self, name: str) -> Run:
        for r in self.runs:
            if r.name == name:
                return r
        raise KeyError(name)

    def add_variant(self, changes: dict[str, Any] | str, name: str | None = None) -> Run:
        """A variant of :meth:`base_config`: ``changes`` as a dict or ``"field=value, ..."``.

        Raises :class:`ConfigError` naming the problem (unknown field, bad value, invalid result).
        """
        if isinstance(changes, str):
            changes = cmp.parse_changes(changes)
        base = self.base_config()
        cfg = base.replace(**changes)
        cfg.validate()
        name = cmp.unique_name(name or cmp.describe_changes(changes), self._names())
        record = cmp.RunRecord(name=name, kind="variant", config=cfg.to_dict(), changes=dict(changes))
        run = Run(record, status="not trained yet")
        self.runs.append(run)
        self._refresh_all()
        return run

    def _add_variant_clicked(self) -> None:
        try:
            self.add_variant(self.changes_edit.text(), self.variant_name_edit.text().strip() or None)
        except ConfigError as exc:
            self.variant_error.setText("; ".join(exc.problems))
            return
        self.variant_error.setText("")
        self.changes_edit.clear()
        self.variant_name_edit.clear()

    def _insert_field(self, index: int) -> None:
        name = self.field_combo.itemData(index)
        if not name:
            return
        text = self.changes_edit.text().rstrip()
        self.changes_edit.setText((text + ", " if text else "") + f"{name}=")
        self.changes_edit.setFocus()
        self.field_combo.setCurrentIndex(0)

    def _add_quick(self) -> None:
        i = self.quick_combo.currentIndex()
        if not 0 <= i < len(getattr(self, "_quick_items", [])):
            return
        problems = []
        for name, changes in self._quick_items[i][1]:
            try:
                self.add_variant(changes, name)
            except ConfigError as exc:
                problems.append(f"{name}: {'; '.join(exc.problems)}")
        self.variant_error.setText("\n".join(problems))

    def add_current_model(self, name: str | None = None) -> Run | None:
        """A frozen copy of the session's model with its loss history (None when there is none)."""
        s = self.session
        if s.model is None:
            self.variant_error.setText("There is no current model yet: build or train one in the Train tab.")
            return None
        import copy

        with s.compute_lock:
            model = copy.deepcopy(s.model)
        model.eval()
        name = cmp.unique_name(name or f"current model (step {s.step})", self._names())
        record = cmp.RunRecord(
            name=name,
            kind="session",
            config=model.config.to_dict(),
            path=s.checkpoint_path,
            history=cmp.history_points(s.history),
        )
        seq = getattr(s.train_settings, "seq_len", None)
        run = Run(
            record,
            model=model,
            tokenizer=s.tokenizer,
            status=f"step {s.step}",
            context=min(seq, model.config.context_length) if seq else None,
        )
        self.runs.append(run)
        self._refresh_all()
        return run

    def add_initial_model(self, name: str | None = None) -> bool:
        """The current model's config freshly initialised with the training seed (built off the GUI
        thread; ``runsChanged`` when it is added). False when there is no current model."""
        s = self.session
        if s.model is None:
            self.variant_error.setText("There is no current model yet: build or train one in the Train tab.")
            return False
        from model.gpt import build_model

        cfg, tok = s.model.config, s.tokenizer
        seed = int(getattr(s.train_settings, "seed", 0) or 0)
        seq = getattr(s.train_settings, "seq_len", None)
        context = min(seq, cfg.context_length) if seq else None

        def job():
            model = build_model(cfg, seed=seed)
            model.eval()
            return model

        def done(model, error):
            if error is not None:
                self.variant_error.setText(f"Could not build the initial model: {error}")
                return
            run_name = cmp.unique_name(name or f"initialisation (seed {seed})", self._names())
            record = cmp.RunRecord(name=run_name, kind="session", config=cfg.to_dict())
            self.runs.append(Run(record, model=model, tokenizer=tok, status="untrained", context=context))
            self._refresh_all()

        s.compute.submit("compare.init", job, done)
        return True

    def _add_checkpoint_dialog(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Add a checkpoint directory")
        if path:
            self.add_checkpoint(path)

    def add_checkpoint(self, path: str) -> None:
        """Load a checkpoint off the GUI thread and add it as a run (``runsChanged`` when done)."""
        from model.pretrained import open_model

        self.variant_error.setText(f"Loading {path}…")

        def job():
            return open_model(path, device="cpu")

        def done(ckpt, error):
            if error is not None:
                self.variant_error.setText(f"Could not open {path}: {error}")
                self.loadFailed.emit(str(path), str(error))
                return
            self.variant_error.setText("")
            meta = ckpt.meta or {}
            history = cmp.history_points((ckpt.train_state or {}).get("history") or [])
            name = cmp.unique_name(str(meta.get("name") or Path(path).name), self._names())
            record = cmp.RunRecord(
                name=name, kind="checkpoint", config=ckpt.config.to_dict(), path=str(path), history=history
            )
            ckpt.model.eval()
            self.runs.append(
                Run(
                    record,
                    model=ckpt.model,
                    tokenizer=ckpt.tokenizer,
                    status=str(meta.get("kind") or "checkpoint"),
                )
            )
            self._refresh_all()

        self.session.compute.submit(f"compare.open.{path}", job, done)

    def remove_run(self, name: str) -> None:
        if self.worker is not None and self.run(name).kind == "variant":
            return  # the group is training it
        self.runs = [r for r in self.runs if r.name != name]
        self.loss_plot.remove(name)
        self._refresh_all()

    def _remove_selected(self) -> None:
        for it in self.run_list.selectedItems():
            self.remove_run(it.data(Qt.ItemDataRole.UserRole))

    # ---- training ------------------------------------------------------------------------------
    @property
    def is_training(self) -> bool:
        return self.worker is not None

    def train_variants(self, steps: int | None = None) -> bool:
        """Train every variant run from scratch, together; False (and a message) when it cannot."""
        if self.worker is not None:
            return False
        s = self.session
        variants = [r for r in self.runs if r.kind == "variant"]
        if not variants:
            self.train_status.setText("Add at least one variant first (a quick comparison, or field=value).")
            return False
        if s.source is None:
            self.train_status.setText("Choose a data source in the Data panel first.")
            return False
        steps = int(steps or self.steps_spin.value())
        self.steps_spin.setValue(steps)
        from model.train import TrainSettings

        try:
            base = s.train_settings or TrainSettings()
            settings = base.replace(
                steps=steps, probe_every=0, probe_prompt=None, device=str(s.device or "cpu")
            ).validate()
            V = s.source.tokenizer.vocab_size
            configs = {r.name: r.record.gpt_config().with_vocab(V).validate() for r in variants}
        except ConfigError as exc:
            self.train_status.setText("Cannot train: " + "; ".join(exc.problems))
            return False
        for r in variants:
            r.record.history = []
            r.record.summary = {}
            r.record.attention = None
            r.record.config = configs[r.name].to_dict()
            r.model, r.tokenizer, r.metrics = None, None, None
            r.status = "training"
            self.loss_plot.remove(r.name)
        self.settings_used = settings.to_dict()
        self.source_used = s.source_spec
        self._target = steps
        worker = GroupWorker(GroupSpec(configs, s.source, settings))
        worker.finished.connect(self._on_finished)
        self.worker = worker
        self.progress.setRange(0, steps * len(configs))
        self.progress.setValue(0)
        self.progress.setFormat("building the models…")
        self.train_status.setText(
            f"Training {len(configs)} variants for {steps} steps each on {s.source_spec}, "
            f"batch {settings.batch_size} × {settings.seq_len or 'context'} tokens, seed {settings.seed}."
        )
        self._refresh_all()
        worker.start()
        self._timer.start()
        return True

    def stop_training(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.progress.setFormat("stopping after the current step…")

    def _drain(self) -> None:
        worker = self.worker
        if worker is None:
            self._timer.stop()
            return
        (events,) = worker.mailbox.take("events")
        if not events:
            return
        touched = set()
        for name, ev in events:
            try:
                run = self.run(name)
            except KeyError:
                continue
            run.record.history.append({k: ev.get(k) for k in cmp.HISTORY_KEYS})
            touched.add(name)
        for name in touched:
            run = self.run(name)
            self.loss_plot.set_history(name, run.record.history, self._color(run))
        done = sum(len(self.run(r).record.history) for r in worker.variants if r in self._names())
        self.progress.setValue(done)
        self.progress.setFormat(
            f"step {min(done // max(1, len(worker.variants)), self._target)} / {self._target}"
        )
        self._draw_summary()

    def _on_finished(self, reason: str, message: str) -> None:
        worker = self.worker
        if worker is None:
            return
        worker.join(10.0)
        self._drain()
        self._timer.stop()
        group = worker.group
        self.worker = None
        if group is not None:
            for name, trainer in group.trainers.items():
                try:
                    run = self.run(name)
                except KeyError:
                    continue
                run.model = trainer.model
                run.tokenizer = trainer.tokenizer
                run.context = trainer.seq_len
                run.record.history = cmp.history_points(trainer.history)
                run.status = (
                    f"trained {trainer.step} steps" if reason == "done" else f"stopped at step {trainer.step}"
                )
                if name in group.diverged:  # dropped by the group; the others went on
                    run.status = f"diverged after step {trainer.step}"
                self.loss_plot.set_history(name, run.record.history, self._color(run))
        if reason == "error":
            self.train_status.setText(f"Training stopped with an error: {message}")
            for r in self.runs:
                if r.kind == "variant" and r.status == "training":
                    r.status = "error"
        else:
            self.train_status.setText(f"Variants {message}. The prompt now runs through every model.")
        self.progress.setFormat(reason)
        self._refresh_all()
        self.trainingFinished.emit(reason, message)
        if reason != "error":
            self.run_prompt()

    # ---- one prompt through every model --------------------------------------------------------
    def set_prompt(self, prompt: str) -> None:
        """Show ``prompt`` in the one-line box; new lines it cannot show are kept for the run."""
        self._full_prompt = prompt
        self.prompt_edit.setText(prompt)
        self._shown_prompt = self.prompt_edit.text()

    def prompt(self) -> str:
        """The prompt to run: what was set (new lines included) unless the user has edited the box."""
        text = self.prompt_edit.text()
        if text and text == getattr(self, "_shown_prompt", None):
            return self._full_prompt
        return text or self.session.probe_prompt

    def run_prompt(self, prompt: str | None = None) -> bool:
        """The same prompt through every run that has a model (or saved weights), off the GUI thread;
        ``attentionReady`` when the grids, differences and metrics are drawn."""
        if prompt is not None:
            self.set_prompt(prompt)
        prompt = self.prompt()
        if not prompt:
            self.prompt_status.setText("Type a prompt first.")
            return False
        self.set_prompt(prompt)
        todo = []
        for r in self.runs:
            model = r.model
            if model is None and self.worker is not None and self.worker.group is not None:
                t = self.worker.group.trainers.get(r.name)
                model = t.model if t is not None else None
                tok = t.tokenizer if t is not None else None
            else:
                tok = r.tokenizer
            path = None
            if model is None and r.record.path:
                path = str(cmp.resolve_run_path(self.comparison_path or ".", r.record.path))
            if model is not None or path is not None:
                todo.append((r.name, model, tok, path))
        if not todo:
            self.prompt_status.setText("No run has a model yet: train the variants or add a model.")
            return False
        shown = _visible_text(prompt)
        self.prompt_status.setText(f"Running “{shown}” through {len(todo)} model(s)…")

        def job():
            from model.pretrained import open_model

            out = {}
            for name, model, tok, path in todo:
                try:
                    loaded = None
                    if model is None:
                        ckpt = open_model(path, device="cpu")
                        model, tok, loaded = ckpt.model, ckpt.tokenizer, ckpt
                    snap, metrics = cmp.attention_snapshot(model, tok, prompt)
                    out[name] = (snap, metrics, loaded, None)
                except Exception as exc:  # one run's failure must not hide the others
                    out[name] = (None, None, None, str(exc) or type(exc).__name__)
            return out

        def done(result, error):  # only the newest prompt's result arrives (ComputeWorker)
            if error is not None:
                self.prompt_status.setText(f"Could not run the prompt: {error}")
                return
            problems = []
            for name, (snap, metrics, loaded, err) in result.items():
                try:
                    run = self.run(name)
                except KeyError:
                    continue
                if err is not None:
                    problems.append(f"{name}: {err}")
                    continue
                if loaded is not None:
                    run.model, run.tokenizer = loaded.model, loaded.tokenizer
                    run.status = "weights loaded"
                run.record.attention = snap
                run.metrics = metrics
            n = len(result) - len(problems)
            text = f"“{shown}” through {n} model(s): every grid shows the same tokens."
            if problems:
                text += " Failed: " + "; ".join(problems)
            self.prompt_status.setText(text)
            self._refresh_all()
            self.attentionReady.emit()

        self.session.compute.submit("compare.prompt", job, done)
        return True

    # ---- drawing -------------------------------------------------------------------------------
    def _color(self, run: Run) -> tuple[int, int, int]:
        return run_color(self.runs.index(run)) if run in self.runs else (0, 0, 0)

    def _refresh_all(self) -> None:
        self._draw_list()
        for r in self.runs:
            if r.record.history:
                self.loss_plot.set_history(r.name, r.record.history, self._color(r))
        for name in list(self.loss_plot.series):
            if name not in self._names():
                self.loss_plot.remove(name)
        self._draw_summary()
        self._draw_grids()
        self._update_pair_combos()
        self._draw_diff()
        self._draw_metrics()
        self._draw_config_diff()
        self._update_buttons()
        self.runsChanged.emit()

    def _draw_list(self) -> None:
        self.run_list.clear()
        for r in self.runs:
            pix = QPixmap(14, 14)
            pix.fill(QColor(*self._color(r)))
            detail = cmp.describe_changes(r.record.changes) if r.kind == "variant" else r.kind
            it = QListWidgetItem(QIcon(pix), f"{r.name}  —  {detail} · {r.status}")
            it.setData(Qt.ItemDataRole.UserRole, r.name)
            cfg = r.config
            it.setToolTip(
                f"{r.kind}: {cfg.n_layers} layers, d = {cfg.d_model}, "
                f"{cfg.n_heads} heads ({cfg.kv_heads} K/V), "
                f"{cfg.positions}, {cfg.norm_position}-{cfg.norm}, attn_scale {cfg.attn_scale}"
                + (f"\nweights: {r.record.path}" if r.record.path else "")
            )
            self.run_list.addItem(it)

    def summary_rows(self) -> list[dict[str, Any]]:
        """One :func:`model.comparison.summary_row` per run (what the table shows)."""
        rows = []
        for r in self.runs:
            try:
                row = cmp.summary_row(r.config, r.record.history, context=r.context)
            except Exception:
                row = dict.fromkeys(cmp.SUMMARY_KEYS)
            if not r.record.history and r.record.summary:
                row.update({k: v for k, v in r.record.summary.items() if v is not None})
            r.record.summary = row
            rows.append(row)
        return rows

    def _draw_summary(self) -> None:
        rows = self.summary_rows()
        t = self.summary_table
        t.setSortingEnabled(False)
        t.setRowCount(len(rows))
        for i, (r, row) in enumerate(zip(self.runs, rows)):
            for c, (_h, key, fmt) in enumerate(SUMMARY_COLUMNS):
                if key is None:
                    text = r.name if c == 0 else r.kind
                    t.setItem(i, c, _cell(text, color=self._color(r) if c == 0 else None))
                else:
                    text = _fmt(row.get(key), fmt)
                    if key == "flops_per_token" and row.get(key) is not None and row.get("context"):
                        text += f" (T = {row['context']:,})"
                    t.setItem(i, c, _cell(text, right=True))

    def _draw_grids(self) -> None:
        with_att = [r for r in self.runs if r.record.attention is not None]
        names = [r.name for r in with_att]
        for name in list(self.grids):
            if name not in names:
                g = self.grids.pop(name)
                self.grid_layout.removeWidget(g)
                g.deleteLater()
        for r in with_att:
            g = self.grids.get(r.name)
            if g is None:
                g = HeadMosaic(title=r.name, interactive=False, compact=True)
                g.setMinimumSize(260, 220)
                self.grids[r.name] = g
            snap = r.record.attention
            g.set_data(
                snap.weights.astype(np.float32),
                snap.tokens,
                title=f"<span style='color:rgb{self._color(r)}'>■</span> {r.name}",
            )
        self._arrange_grids()

    def _arrange_grids(self) -> None:
        """Side by side in a row or stacked in a column, whichever gives each head the larger cell."""
        grids = [self.grids[r.name] for r in self.runs if r.name in self.grids]
        if not grids:
            return
        L = max(g.shape[0] for g in grids) or 1
        H = max(g.shape[1] for g in grids) or 1
        n = len(grids)
        vp = self.grid_scroll.viewport().size()
        W, Hh = max(vp.width(), 400), max(vp.height(), 300)
        row_cell = min(W / (n * (H + 1)), Hh / (L + 1))
        col_cell = min(W / (H + 1), Hh / (n * (L + 1)))
        vertical = col_cell > row_cell and n > 1
        for g in grids:
            self.grid_layout.removeWidget(g)
        for i, g in enumerate(grids):
            self.grid_layout.addWidget(g, i if vertical else 0, 0 if vertical else i)

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt naming)
        super().resizeEvent(event)
        self._arrange_grids()

    def _update_pair_combos(self) -> None:
        names = [r.name for r in self.runs if r.record.attention is not None]
        for combo, default in ((self.a_combo, 0), (self.b_combo, 1)):
            current = combo.currentText()
            combo.blockSignals(True)
            combo.clear()
            combo.addItems(names)
            if current in names:
                combo.setCurrentText(current)
            elif names:
                combo.setCurrentIndex(min(default, len(names) - 1))
            combo.blockSignals(False)

    def set_pair(self, a: str, b: str) -> None:
        """Show ``a − b`` on the difference page."""
        self.a_combo.setCurrentText(a)
        self.b_combo.setCurrentText(b)
        self._draw_diff()

    def _draw_diff(self) -> None:
        from model.analysis.compare import head_diff_summary, weights_difference

        self.diff = None
        a, b = self.a_combo.currentText(), self.b_combo.currentText()
        if not a or not b:
            self.diff_status.setText("Run a prompt through two or more models to compare their heads.")
            self.diff_grid.clear("no difference to show yet")
            self.diff_table.setRowCount(0)
            return
        ra, rb = self.run(a).record.attention, self.run(b).record.attention
        if not cmp.same_shape(ra.weights, rb.weights) or ra.tokens != rb.tokens:
            why = (
                f"{a} has {ra.weights.shape[0]}×{ra.weights.shape[1]} heads on {len(ra.tokens)} tokens, "
                f"{b} {rb.weights.shape[0]}×{rb.weights.shape[1]} on {len(rb.tokens)}"
            )
            if cmp.same_shape(ra.weights, rb.weights):
                why = "they read the prompt as different tokens (different tokenizers)"
            self.diff_status.setText(f"No difference map: {a} and {b} do not have the same shape — {why}.")
            self.diff_grid.clear("A − B needs two models of the same shape on the same tokens")
            self.diff_table.setRowCount(0)
            return
        diff = weights_difference(ra.weights, rb.weights)
        self.diff = diff
        levels = cmp.diff_levels(diff)
        m = float(np.abs(diff).max())
        self.diff_grid.set_difference(diff, ra.tokens, levels, names=(a, b), title=f"{a}  −  {b}")
        summ = head_diff_summary(diff)
        L, H = summ.max_abs.shape
        if m == 0:
            verdict = "every head attends exactly alike (A − B is zero everywhere)"
        else:
            li, hi = np.unravel_index(int(np.argmax(summ.row_tv)), summ.row_tv.shape)
            verdict = (
                f"largest difference {m:.3f}; the head that changed most is layer {li}, head {hi} "
                f"(total variation {summ.row_tv[li, hi]:.3f})"
            )
        self.diff_status.setText(
            f"{a} − {b} on the same {len(ra.tokens)} tokens: red where {a} attends more, "
            f"blue where {b} does; "
            f"colours span ±{levels[1]:.3g} in every head. {verdict.capitalize()}."
        )
        t = self.diff_table
        t.setSortingEnabled(False)
        t.setRowCount(L * H)
        for i, (li, hi) in enumerate((li, hi) for li in range(L) for hi in range(H)):
            for c, v in enumerate((li, hi, summ.max_abs[li, hi], summ.mean_abs[li, hi], summ.row_tv[li, hi])):
                it = QTableWidgetItem()
                it.setData(Qt.ItemDataRole.DisplayRole, int(v) if c < 2 else round(float(v), 4))
                it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                t.setItem(i, c, it)
        t.setSortingEnabled(True)
        t.sortItems(4, Qt.SortOrder.DescendingOrder)  # the heads that changed most first

    def _draw_metrics(self) -> None:
        key = self.metric_combo.currentData()
        measured = {r.name: r.metrics for r in self.runs if r.metrics is not None}
        rows = cmp.metric_table(measured, key) if measured else []
        names = list(measured)
        headers = ["layer", "head"] + names + ([f"Δ ({names[1]} − {names[0]})"] if len(names) == 2 else [])
        t = self.metric_table
        t.setSortingEnabled(False)
        t.clear()
        t.setColumnCount(len(headers))
        t.setHorizontalHeaderLabels(headers)
        t.setRowCount(len(rows))
        deltas = [abs(r["delta"]) for r in rows if r.get("delta") is not None]
        biggest = max(deltas) if deltas else 0.0
        for i, row in enumerate(rows):
            values = [row["layer"], row["head"]] + [row[n] for n in names]
            if len(names) == 2:
                values.append(row["delta"])
            for c, v in enumerate(values):
                it = QTableWidgetItem()
                if v is None:
                    it.setText("–")
                else:
                    it.setData(Qt.ItemDataRole.DisplayRole, int(v) if c < 2 else round(float(v), 4))
                it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if c == len(names) + 2 and v is not None and biggest > 0:  # Δ: tinted by sign and size
                    alpha = int(150 * abs(v) / biggest)
                    it.setBackground(QColor(178, 24, 43, alpha) if v > 0 else QColor(33, 102, 172, alpha))
                t.setItem(i, c, it)
        t.setSortingEnabled(True)
        t.sortItems(0, Qt.SortOrder.AscendingOrder)  # (layer, head) order; the sort is stable
        self.metric_note.setText(
            "Each head's metric on the prompt, in every run, aligned by (layer, head); "
            "“–” where a run has no "
            "such head. Click a column header to sort."
            if rows
            else "Run a prompt to measure every head."
        )

    def _draw_config_diff(self) -> None:
        configs = {r.name: r.config for r in self.runs}
        rows = cmp.config_table(configs) if len(configs) > 1 else []
        names = list(configs)
        t = self.config_table
        t.clear()
        t.setColumnCount(1 + len(names))
        t.setHorizontalHeaderLabels(["field"] + names)
        t.setRowCount(len(rows))
        cfgs = list(configs.values())
        for i, (field, _values) in enumerate(rows):
            t.setItem(i, 0, _cell(field))
            for c, cfg in enumerate(cfgs, start=1):
                t.setItem(i, c, _cell(_field_text(cfg, field), right=True))
        n = len(GPTConfig.field_names())
        if len(configs) < 2:
            self.config_label.setText("Add two or more runs to see which config fields differ.")
        elif not rows:
            self.config_label.setText(f"All {n} config fields are equal in every run.")
        else:
            self.config_label.setText(
                f"Only the fields that differ: {len(rows)} of {n}; "
                "every other field is the same in every run. "
                "(“auto” sizes are derived: n_kv_heads = n_heads, head_dim = d_model / n_heads, "
                "d_ff = 4·d_model; the value they take is in brackets.)"
            )

    def _update_buttons(self) -> None:
        training = self.worker is not None
        self.train_button.setEnabled(not training and any(r.kind == "variant" for r in self.runs))
        self.stop_button.setEnabled(training)
        self.add_current_button.setEnabled(self.session.model is not None)
        self.add_init_button.setEnabled(self.session.model is not None)
        self.open_button.setEnabled(not training)
        self.quick_button.setEnabled(not training)
        self.add_variant_button.setEnabled(not training)
        self.save_button.setEnabled(bool(self.runs) and not training)

    # ---- the comparison file -------------------------------------------------------------------
    def comparison(self) -> cmp.Comparison:
        self.summary_rows()
        return cmp.Comparison(
            runs=[r.record for r in self.runs],
            title=self.title or " vs ".join(self._names()),
            source=self.source_used or self.session.source_spec,
            settings=dict(self.settings_used),
            prompt=self.prompt(),
            base_config=self.base_config().to_dict(),
        )

    def save_comparison(self, path: str | Path, *, with_models: bool = False) -> Path:
        """Write the comparison file; ``with_models`` also saves each in-memory model without a
        checkpoint of its own as ``<file>.runs/<run>/`` and records that path."""
        path = Path(path)
        if with_models:
            from model.checkpoint import save_checkpoint

            folder = path.with_name(path.name.removesuffix(".json") + ".runs")
            for r in self.runs:
                if r.model is None or (r.record.path and r.kind != "variant"):
                    continue
                target = folder / cmp.safe_dir_name(r.name)
                with self.session.compute_lock:
                    save_checkpoint(
                        target, r.model, r.tokenizer, meta={"source": self.source_used, "name": r.name}
                    )
                r.record.path = str(target.relative_to(path.parent))
        out = cmp.save_comparison(path, self.comparison())
        self.comparison_path = str(path)
        self.file_label.setText(f"Saved {path}")
        return out

    def open_comparison(self, path: str | Path) -> None:
        """Replace the runs by those of a comparison file (raises ComparisonError)."""
        comp = cmp.load_comparison(path)
        if self.worker is not None:
            raise cmp.ComparisonError("stop the training before opening a comparison")
        self.loss_plot.clear()
        self.runs = []
        for rec in comp.runs:
            run = Run(
                rec,
                status="from file" + (" (weights on disk)" if rec.path else ""),
                context=rec.summary.get("context") if isinstance(rec.summary.get("context"), int) else None,
            )
            if rec.attention is not None:
                run.metrics = cmp.snapshot_metrics(rec.attention, causal=run.config.causal)
            self.runs.append(run)
        self.comparison_path = str(path)
        self.title = comp.title
        self.settings_used = comp.settings
        self.source_used = comp.source
        self.set_prompt(comp.prompt)
        if comp.settings.get("steps"):
            self.steps_spin.setValue(int(comp.settings["steps"]))
        self.file_label.setText(f"Opened {path} ({comp.created})")
        self._refresh_all()

    def _save_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Save comparison", "comparison" + cmp.SUFFIX, f"Comparison (*{cmp.SUFFIX} *.json)"
        )
        if not path:
            return
        if not path.endswith(".json"):
            path += cmp.SUFFIX
        try:
            self.save_comparison(path, with_models=self.with_models_check.isChecked())
        except Exception as exc:
            self.file_label.setText(f"Could not save: {exc}")

    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open comparison", "", f"Comparison (*{cmp.SUFFIX} *.json)"
        )
        if not path:
            return
        try:
            self.open_comparison(path)
        except cmp.ComparisonError as exc:
            self.file_label.setText(f"Could not open: {exc}")

    # ---- hooks for the window ------------------------------------------------------------------
    def export_targets(self) -> dict[str, QWidget]:
        return {"loss": self.loss_plot.view, "difference": self.diff_grid.view}

    def screenshot_pages(self) -> list[tuple[str, Any]]:
        """The five pages. An empty tab first takes the session's model and its initialisation, so the
        pages show what training changed (each step's compute finishes before the screenshot)."""

        def page(i: int):
            def show():
                if not self.runs and self.session.model is not None and i == 0:
                    self.add_current_model()
                    self.add_initial_model()
                if i == 1 and any(r.model is not None for r in self.runs) and not self.grids:
                    self.run_prompt()
                self.pages.setCurrentIndex(i)

            return show

        names = ["loss", "attention", "difference", "metrics", "config"]
        return [(n, page(i)) for i, n in enumerate(names)]

    def on_activated(self) -> None:
        self._update_base_label()
        if not self.prompt_edit.text() and self.session.probe_prompt:
            self.set_prompt(self.session.probe_prompt)

    def shutdown(self) -> None:
        """Stop the variants' training and wait for it (the window's closeEvent)."""
        worker = self.worker
        if worker is not None:
            worker.stop()
            worker.join(30.0)
        self._timer.stop()

    def save_state(self, settings) -> None:
        settings.set_json("compare/state", {"steps": int(self.steps_spin.value())})

    def restore_state(self, settings) -> None:
        st = settings.get_json("compare/state") or {}
        if isinstance(st.get("steps"), int):
            self.steps_spin.setValue(st["steps"])


__all__ = ["CompareTab"]
