"""The Compare tab's left panel: the runs being compared, and the controls that add, train, save and
open them.

The panel draws from the :class:`~app.views.compare.state.CompareState` (the runs, the base config,
the messages, the progress) and asks the tab for every action through its signals; it never reads
the tab nor the pages.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QIcon, QPixmap
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QFileDialog,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.jobs import JobBoard
from app.session.settings import window_settings
from app.views.compare import words
from app.views.compare.base import ComparePage, note
from app.views.compare.state import TRAIN_JOB, CompareState
from app.widgets.job_bar import JobBar
from app.widgets.layouts import compact_combo, scrolled
from model.compare import comparison as cmp
from model.compare.variants import describe_changes
from model.config import GPTConfig

TRAIN_NOTE = (
    "Every variant trains on the Data panel's source with the Training panel's settings and seed: "
    "the same batches in the same order, one step each in turn."
)


def _group(title: str) -> tuple[QGroupBox, QVBoxLayout]:
    box = QGroupBox(title)
    return box, QVBoxLayout(box)


def _row(*widgets) -> QHBoxLayout:
    """Widgets side by side (an int is a stretch factor for the widget before it)."""
    row = QHBoxLayout()
    for w in widgets:
        if isinstance(w, int):
            row.setStretch(row.count() - 1, w)
        else:
            row.addWidget(w)
    return row


def _button(text: str, slot, tip: str = "") -> QPushButton:
    b = QPushButton(text)
    b.clicked.connect(lambda: slot())
    if tip:
        b.setToolTip(tip)
    return b


class SetupPanel(ComparePage):
    """The left panel (see the module docstring); its signals are requests to the tab."""

    title = "Runs"
    key = "runs"
    redraw_on = ("runs_changed", "training_changed", "base_changed")

    addCurrentRequested = Signal()
    addInitialRequested = Signal()
    #: (checkpoint directory)
    addCheckpointRequested = Signal(str)
    #: (run names)
    removeRequested = Signal(list)
    #: (changes text, name or "")
    addVariantRequested = Signal(str, str)
    #: ([(name, changes), ...])
    addVariantsRequested = Signal(list)
    #: (steps)
    trainRequested = Signal(int)
    #: (path, with the models)
    saveRequested = Signal(str, bool)
    #: (path)
    openRequested = Signal(str)

    def __init__(self, state: CompareState, parent: QWidget | None = None):
        super().__init__(state, parent)
        self._quick_items: list = []
        self.follow(state.message, self._on_message)
        self.ensure_built()

    def build(self) -> None:
        lay = scrolled(self)  # never narrower than its widest row, never scrolled sideways
        lay.addWidget(self._build_runs(), 2)
        lay.addWidget(self._build_variants())
        lay.addWidget(self._build_training())
        lay.addWidget(self._build_file())
        lay.addStretch(1)

    def _build_runs(self) -> QGroupBox:
        box, bl = _group("Runs being compared")
        self.run_list = QListWidget()
        self.run_list.setObjectName("compareRuns")
        self.run_list.setMinimumHeight(120)
        self.run_list.setWordWrap(True)
        self.run_list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.run_list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        bl.addWidget(self.run_list)
        self.add_current_button = _button(
            "Add current model",
            self.addCurrentRequested.emit,
            "A frozen copy of the Train tab's model, with its loss history",
        )
        self.add_init_button = _button(
            "Add its initialisation",
            self.addInitialRequested.emit,
            "The same config freshly initialised with the Training panel's seed: the weights a run with "
            "that seed starts from. Against the trained model: what training changed in every head",
        )
        self.add_ckpt_button = _button(
            "Add checkpoint…",
            self._add_checkpoint_dialog,
            "An Attention Lab checkpoint, a Hugging Face GPT-2 folder or a nanoGPT ckpt.pt",
        )
        self.remove_button = _button("Remove", self._remove_selected)
        bl.addLayout(_row(self.add_current_button, self.add_init_button))
        bl.addLayout(_row(self.add_ckpt_button, self.remove_button))
        return box

    def _build_variants(self) -> QGroupBox:
        vbox, vl = _group("Variants of the current config")
        self.base_label = note(color="#444")
        vl.addWidget(self.base_label)
        self.quick_combo = compact_combo(QComboBox(), 12)
        self.quick_combo.setObjectName("compareQuick")
        self.quick_combo.setToolTip("Add a ready-made set of variants of the base config")
        self.quick_button = _button("Add these", self._add_quick)
        vl.addLayout(_row(self.quick_combo, 1, self.quick_button))
        vl.addWidget(QLabel("Or: the same as the base, but …"))
        self.field_combo = compact_combo(QComboBox(), 10)
        self.field_combo.addItem("field…", "")
        for name in GPTConfig.field_names():
            if name != "vocab_size":
                self.field_combo.addItem(name, name)
        self.field_combo.setToolTip("Insert a field name into the changes")
        self.field_combo.activated.connect(self._insert_field)
        self.changes_edit = QLineEdit()
        self.changes_edit.setObjectName("compareChanges")
        self.changes_edit.setPlaceholderText("n_kv_heads=1, norm_position=post")
        self.changes_edit.setToolTip("field=value pairs, separated by commas; empty = the base config itself")
        self.changes_edit.returnPressed.connect(self._add_variant)
        vl.addLayout(_row(self.field_combo, self.changes_edit, 1))
        self.variant_name_edit = QLineEdit()
        self.variant_name_edit.setPlaceholderText("name (optional)")
        self.add_variant_button = _button("Add variant", self._add_variant)
        vl.addLayout(_row(self.variant_name_edit, 1, self.add_variant_button))
        self.variant_error = note(color="#c02020")
        vl.addWidget(self.variant_error)
        return vbox

    def _build_training(self) -> QGroupBox:
        tbox, tl = _group("Train the variants together")
        self.steps_spin = QSpinBox()
        self.steps_spin.setObjectName("compareSteps")
        self.steps_spin.setRange(1, 10_000_000)
        self.steps_spin.setValue(300)
        self.steps_spin.setToolTip("Training steps of every variant")
        self.train_button = _button("Train variants", self._train)
        self.train_button.setObjectName("compareTrain")
        tl.addLayout(_row(QLabel("Steps"), self.steps_spin, 1))
        tl.addLayout(_row(self.train_button))
        self.training_box = tl  # the tab puts the training's busy line here (use_jobs)
        self.train_status = note(TRAIN_NOTE)
        tl.addWidget(self.train_status)
        return tbox

    def _build_file(self) -> QGroupBox:
        fbox, fl = _group("Comparison file")
        self.save_button = _button("Save comparison…", self._save_dialog)
        self.open_button = _button("Open comparison…", self._open_dialog)
        fl.addLayout(_row(self.save_button, self.open_button))
        self.with_models_check = QCheckBox("also save the trained models")
        self.with_models_check.setToolTip(
            "A checkpoint per run, beside the comparison. Without them a reopened comparison shows its "
            "curves, tables and attention, but cannot run a new prompt through variants trained here"
        )
        fl.addWidget(self.with_models_check)
        self.file_label = note()
        fl.addWidget(self.file_label)
        return fbox

    # ---- drawing from the state ----------------------------------------------------------------
    def draw(self) -> None:
        self._draw_list()
        self._draw_base()
        self._update_buttons()

    def _draw_list(self) -> None:
        self.run_list.clear()
        for r in self.state.runs:
            pix = QPixmap(14, 14)
            pix.fill(QColor(*self.color(r)))
            detail = describe_changes(r.record.changes) if r.kind == "variant" else r.kind
            it = QListWidgetItem(QIcon(pix), f"{r.name}  —  {detail} · {r.status}")
            it.setData(Qt.ItemDataRole.UserRole, r.name)
            it.setToolTip(
                f"{r.kind}: {words.describe_config(r.config)}"
                + (f"\nweights: {r.record.path}" if r.record.path else "")
            )
            self.run_list.addItem(it)

    def _draw_base(self) -> None:
        st = self.state
        self.base_label.setText(words.describe_base(st.base, st.source))
        items = words.quick_variants(st.base)
        if items == self._quick_items:
            return
        current = self.quick_combo.currentIndex()
        self.quick_combo.clear()
        self._quick_items = items
        for label, _ in items:
            self.quick_combo.addItem(label)
        self.quick_combo.setCurrentIndex(max(0, current))

    def _update_buttons(self) -> None:
        st = self.state
        training = st.training
        self.train_button.setEnabled(not training and any(r.kind == "variant" for r in st.runs))
        self.add_current_button.setEnabled(st.has_model)
        self.add_init_button.setEnabled(st.has_model)
        self.open_button.setEnabled(not training)
        self.quick_button.setEnabled(not training)
        self.add_variant_button.setEnabled(not training)
        self.save_button.setEnabled(bool(st.runs) and not training)

    def _on_message(self, where: str, text: str) -> None:
        label = {"variants": self.variant_error, "training": self.train_status, "file": self.file_label}
        if where in label:
            label[where].setText(text)

    def use_jobs(self, board: JobBoard, cancel: Callable[[str], bool]) -> None:
        """Show the training's job (how far, the time left, Cancel) under the Train button."""
        self.job_bar = JobBar(board, (TRAIN_JOB,), cancel=cancel)
        self.training_box.insertWidget(self.training_box.count() - 1, self.job_bar)

    # ---- requests ------------------------------------------------------------------------------
    def _train(self) -> None:
        self.trainRequested.emit(self.steps_spin.value())

    def _add_variant(self) -> None:
        self.addVariantRequested.emit(self.changes_edit.text(), self.variant_name_edit.text().strip())

    def variant_added(self) -> None:
        """The typed variant was added: empty the boxes for the next one."""
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
        if 0 <= i < len(self._quick_items):
            self.addVariantsRequested.emit(list(self._quick_items[i][1]))

    def _remove_selected(self) -> None:
        names = [it.data(Qt.ItemDataRole.UserRole) for it in self.run_list.selectedItems()]
        if names:
            self.removeRequested.emit(names)

    def _add_checkpoint_dialog(self) -> None:
        settings = window_settings(self)
        start = settings.last_dir("checkpoint") if settings is not None else ""
        path = QFileDialog.getExistingDirectory(self, "Add a checkpoint directory", start)
        if path:
            if settings is not None:
                settings.set_last_dir("checkpoint", Path(path).parent)
            self.addCheckpointRequested.emit(path)

    def _save_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(
            self, "Save comparison", "comparison" + cmp.SUFFIX, f"Comparison (*{cmp.SUFFIX} *.json)"
        )
        if path:
            if not path.endswith(".json"):
                path += cmp.SUFFIX
            self.saveRequested.emit(path, self.with_models_check.isChecked())

    def _open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self, "Open comparison", "", f"Comparison (*{cmp.SUFFIX} *.json)"
        )
        if path:
            self.openRequested.emit(path)


__all__ = ["SetupPanel"]
