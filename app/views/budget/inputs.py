"""The settings a budget is computed at, as widgets: context T, batch, KV bytes and the causal
halving (the "Figures computed at" box on the left, since they move several pages), precision and
recomputation (placed on the Memory page), tokens, device peak, MFU, device count and cost basis
(placed on the Cost page). :meth:`BudgetInputs.settings` reads them as a
:class:`~model.budget.table.BudgetSettings`; ``changed`` fires after every edit.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QWidget,
)

from app.widgets.dataclass_form import ERROR_STYLE
from app.widgets.layouts import compact_combo
from app.widgets.typed_spin import TypedDoubleSpinBox, TypedSpinBox, line_edit
from model.budget import arithmetic as budget
from model.budget import presets
from model.budget.table import BudgetSettings, parse_quantity

#: Devices offered for the cost estimate: (label, dense 16-bit peak TFLOP/s).
DEVICES: list[tuple[str, float]] = [
    ("NVIDIA A100 (312 TFLOP/s bf16)", 312.0),
    ("NVIDIA H100 SXM (989 TFLOP/s bf16)", 989.0),
    ("NVIDIA H200 (989 TFLOP/s bf16)", 989.0),
    ("NVIDIA V100 (125 TFLOP/s fp16)", 125.0),
    ("NVIDIA RTX 4090 (165 TFLOP/s bf16)", 165.2),
    ("Google TPU v4 (275 TFLOP/s bf16)", 275.0),
    ("custom", 0.0),
]

KV_BYTES: list[tuple[str, float]] = [
    ("2 bytes (fp16 / bf16)", 2.0),
    ("4 bytes (fp32)", 4.0),
    ("1 byte (int8 / fp8)", 1.0),
    ("0.5 byte (int4)", 0.5),
]


class BudgetInputs(QObject):
    """The settings widgets (not laid out together: see the module docstring)."""

    changed = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self.box = box = QGroupBox("Figures computed at")
        form = QFormLayout(box)
        self.seq_spin = TypedSpinBox()
        self.seq_spin.setObjectName("budgetSeqLen")
        self.seq_spin.setRange(0, 10_000_000)
        self.seq_spin.setSpecialValueText("the context length")
        self.seq_spin.setGroupSeparatorShown(True)
        self.seq_spin.setToolTip("T for attention FLOPs, KV cache and activations (0 = the config's context)")
        form.addRow("Context T", self.seq_spin)
        self.batch_spin = TypedSpinBox()
        self.batch_spin.setObjectName("budgetBatch")
        self.batch_spin.setRange(1, 1_000_000)
        self.batch_spin.setToolTip("Sequences per batch B, for the KV cache and activations")
        form.addRow("Batch B", self.batch_spin)
        self.kv_combo = QComboBox()
        for label, v in KV_BYTES:
            self.kv_combo.addItem(label, v)
        self.kv_combo.setToolTip("Bytes per cached key/value number")
        form.addRow("KV cache values", self.kv_combo)
        self.causal_check = QCheckBox("halve attention FLOPs (causal)")
        self.causal_check.setToolTip(
            "A causal token attends to half the context on average; fused kernels skip the masked half"
        )
        form.addRow("", self.causal_check)
        self.settings_error = QLabel()
        self.settings_error.setObjectName("budgetSettingsErrors")
        self.settings_error.setWordWrap(True)
        self.settings_error.setStyleSheet("color: #c02020;")
        form.addRow(self.settings_error)

        self.precision_combo = QComboBox()
        self.precision_combo.setObjectName("budgetPrecision")
        for name, pr in budget.PRECISIONS.items():
            self.precision_combo.addItem(name, name)
            self.precision_combo.setItemData(
                self.precision_combo.count() - 1, pr.description, Qt.ItemDataRole.ToolTipRole
            )
        self.precision_combo.setCurrentText("bf16-mixed")
        self.precision_combo.setToolTip("Bytes per parameter for weights, gradients, master weights, AdamW")
        self.recompute_check = QCheckBox("recompute activations (checkpointing)")
        self.tokens_edit = QLineEdit("2T")
        self.tokens_edit.setObjectName("budgetTokens")
        self.tokens_edit.setToolTip("Training tokens D: 2T, 300B, 1.5e12 …; empty = no cost estimate")
        # as narrow as 20 characters on a small screen (the open list and the tooltip show it whole)
        self.device_combo = compact_combo(QComboBox(), 20)
        for label, v in DEVICES:
            self.device_combo.addItem(label, v)
        self.device_combo.currentTextChanged.connect(self.device_combo.setToolTip)
        self.device_combo.setToolTip(self.device_combo.currentText())
        self.peak_spin = TypedDoubleSpinBox()
        self.peak_spin.setObjectName("budgetPeak")
        self.peak_spin.setRange(0.001, 100_000)
        self.peak_spin.setDecimals(1)
        self.peak_spin.setSuffix(" TFLOP/s")
        self.peak_spin.setValue(312.0)
        self.peak_spin.setToolTip("Dense peak FLOP/s of one device in the training precision")
        self.mfu_spin = TypedDoubleSpinBox()
        self.mfu_spin.setObjectName("budgetMFU")
        self.mfu_spin.setRange(0.1, 100.0)
        self.mfu_spin.setDecimals(1)
        self.mfu_spin.setSuffix(" %")
        self.mfu_spin.setValue(40.0)
        self.mfu_spin.setToolTip("Model FLOPs utilisation: the share of the peak the training really uses")
        self.gpus_spin = TypedSpinBox()
        self.gpus_spin.setObjectName("budgetGPUs")
        self.gpus_spin.setRange(1, 1_000_000)
        self.gpus_spin.setGroupSeparatorShown(True)
        self.gpus_spin.setToolTip("Devices training together (wall-clock = GPU-hours / devices)")
        self.basis_combo = QComboBox()
        for k, desc in budget.COST_BASES.items():
            self.basis_combo.addItem(k, k)
            self.basis_combo.setItemData(self.basis_combo.count() - 1, desc, Qt.ItemDataRole.ToolTipRole)
        self.basis_combo.setToolTip("6N: the textbook 6·N·D; matmul: the matrix products a step really does")

        for sig in (
            self.seq_spin.valueChanged,
            self.batch_spin.valueChanged,
            self.kv_combo.currentIndexChanged,
            self.causal_check.toggled,
            self.precision_combo.currentIndexChanged,
            self.recompute_check.toggled,
            self.tokens_edit.textChanged,
            self.peak_spin.valueChanged,
            self.mfu_spin.valueChanged,
            self.gpus_spin.valueChanged,
            self.basis_combo.currentIndexChanged,
        ):
            sig.connect(self.changed)
        for spin in self.typed_boxes():  # a number out of range, as typed: the tab says so at once
            line_edit(spin).textChanged.connect(lambda *_, b=spin: self._typed(b))
        self._typed_bad: set[int] = set()
        self.device_combo.currentIndexChanged.connect(self._device_chosen)
        self.peak_spin.valueChanged.connect(self._peak_edited)

    def memory_bar(self) -> QHBoxLayout:
        """Precision and recomputation, for the top of the Memory page."""
        mem = QHBoxLayout()
        mem.addWidget(QLabel("Training precision:"))
        mem.addWidget(self.precision_combo)
        mem.addSpacing(12)
        mem.addWidget(self.recompute_check)
        mem.addStretch(1)
        return mem

    def cost_grid(self) -> QGridLayout:
        """The cost inputs in two columns, for the top of the Cost page."""
        cost = QGridLayout()
        for i, (label, widget) in enumerate(
            (
                ("Training tokens D", self.tokens_edit),
                ("Cost counts", self.basis_combo),
                ("Device", self.device_combo),
                ("Peak per device", self.peak_spin),
                ("Utilisation (MFU)", self.mfu_spin),
                ("Devices", self.gpus_spin),
            )
        ):
            row, col = divmod(i, 2)
            cost.addWidget(QLabel(label), row, 2 * col)
            cost.addWidget(widget, row, 2 * col + 1)
        cost.setColumnStretch(4, 1)
        return cost

    def apply_preset(self, p: presets.Preset) -> None:
        """A preset's training metadata: its tokens, device peak and precision; T = its context."""
        if p.training_tokens:
            self.tokens_edit.setText(f"{p.training_tokens:.4g}")
        if p.peak_tflops:
            self.set_peak(p.peak_tflops)
        if p.precision:
            self.precision_combo.setCurrentText(p.precision)
        self.seq_spin.setValue(0)

    def set_peak(self, tflops: float) -> None:
        idx = next((i for i, (_, v) in enumerate(DEVICES) if v and abs(v - tflops) < 1e-6), len(DEVICES) - 1)
        self.device_combo.blockSignals(True)
        self.device_combo.setCurrentIndex(idx)
        self.device_combo.blockSignals(False)
        self.peak_spin.setValue(tflops)

    def _device_chosen(self, index: int) -> None:
        v = self.device_combo.itemData(index)
        if v:
            self.peak_spin.setValue(float(v))

    def _peak_edited(self, value: float) -> None:
        current = self.device_combo.currentData()
        if current and abs(current - value) > 1e-6:
            self.device_combo.blockSignals(True)
            self.device_combo.setCurrentIndex(len(DEVICES) - 1)
            self.device_combo.blockSignals(False)

    def widgets(self) -> list[QWidget]:
        """Every settings widget (the pages that hold some of them keep them editable)."""
        return [w for w in vars(self).values() if isinstance(w, QWidget) and w is not self.box]

    def typed_boxes(self) -> dict[TypedSpinBox | TypedDoubleSpinBox, str]:
        """Each number box, by the name its line uses (its label on the page)."""
        return {
            self.seq_spin: "Context T",
            self.batch_spin: "Batch B",
            self.peak_spin: "Peak per device",
            self.mfu_spin: "Utilisation (MFU, %)",
            self.gpus_spin: "Devices",
        }

    def typed_problems(self) -> list[str]:
        """One line per box holding a number outside its range as typed (``Batch B=0 must be a whole
        number from 1 to 1,000,000``), each such box outlined; [] when every box shows its value."""
        out = []
        for box, name in self.typed_boxes().items():
            problem = box.typed_problem(name)
            style = ERROR_STYLE if problem else ""
            if box.styleSheet() != style:  # (re-styling a box mid-edit loses its selection)
                box.setStyleSheet(style)
            if problem:
                out.append(problem)
        return out

    def _typed(self, box) -> None:
        bad = box.typed_problem("") is not None
        if bad or id(box) in self._typed_bad:
            self._typed_bad.discard(id(box))
            if bad:
                self._typed_bad.add(id(box))
            self.changed.emit()

    def settings(self) -> BudgetSettings:
        """The settings the widgets describe (raises ValueError for unreadable tokens)."""
        text = self.tokens_edit.text().strip()
        tokens = parse_quantity(text) if text else None
        return BudgetSettings(
            seq_len=None if self.seq_spin.value() == 0 else int(self.seq_spin.value()),
            batch=int(self.batch_spin.value()),
            kv_bytes=float(self.kv_combo.currentData()),
            precision=str(self.precision_combo.currentData()),
            recompute=self.recompute_check.isChecked(),
            causal_halving=self.causal_check.isChecked(),
            tokens=tokens,
            peak_tflops=float(self.peak_spin.value()),
            mfu=float(self.mfu_spin.value()) / 100.0,
            gpus=int(self.gpus_spin.value()),
            cost_basis=str(self.basis_combo.currentData()),
        )


__all__ = ["DEVICES", "KV_BYTES", "BudgetInputs"]
