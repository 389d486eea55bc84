"""Every GPTConfig field as an editable control, vocabulary included, for budgets of any size.

Unlike the Model panel (which edits the config the session will train, with the vocabulary set by
the tokenizer) this editor is free: a 405B config with a 128k vocabulary is as editable as a toy.
It emits ``configEdited(GPTConfig)`` on every keystroke (spin boxes track the keyboard) and shows
the config's problems under the form.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QLabel,
    QLineEdit,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.panels.model import GROUPS, LABELS
from model.comparison import FIELD_KINDS
from model.config import CHOICES, FIELD_HELP, GPTConfig

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

_ERROR_STYLE = "border: 1px solid #d03030; border-radius: 2px;"


class BudgetConfigEditor(QWidget):
    """Edits any GPTConfig; ``config()`` reads the widgets, ``set_config`` fills them."""

    configEdited = Signal(object)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.widgets: dict[str, QWidget] = {}
        self._loading = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        fields = {f.name: f for f in dataclasses.fields(GPTConfig)}
        placed: set[str] = set()
        for title, names in GROUPS:
            names = (["vocab_size"] if title == "Size" else []) + [n for n in names if n in fields]
            placed.update(names)
            layout.addWidget(self._group(title, names))
        rest = [n for n in fields if n not in placed]
        if rest:
            layout.addWidget(self._group("Other", rest))
        self.error_label = QLabel()
        self.error_label.setObjectName("budgetConfigErrors")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #c02020;")
        layout.addWidget(self.error_label)

    def _group(self, title: str, names: list[str]) -> QGroupBox:
        box = QGroupBox(title)
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        for name in names:
            w = self._make(name)
            w.setObjectName(f"budget_{name}")
            w.setToolTip(FIELD_HELP.get(name, name))
            self.widgets[name] = w
            text = LABELS.get(name, name.replace("_", " ").capitalize())
            label = QLabel(f"{text} <span style='color:#888'>{name}</span>")
            label.setToolTip(FIELD_HELP.get(name, name))
            form.addRow(label, w)
        return box

    def _make(self, name: str) -> QWidget:
        kind = FIELD_KINDS[name]
        if kind == "choice":
            w = QComboBox()
            w.addItems(list(CHOICES[name]))
            w.currentIndexChanged.connect(self._changed)
        elif kind == "bool":
            w = QCheckBox()
            w.toggled.connect(self._changed)
        elif kind in ("int", "opt_int"):
            w = QSpinBox()
            w.setRange(0 if kind == "opt_int" else 1, INT_MAX.get(name, 1_000_000))
            w.setGroupSeparatorShown(True)
            if kind == "opt_int":
                w.setSpecialValueText("auto")
            w.setKeyboardTracking(True)
            w.valueChanged.connect(self._changed)
        elif name == "dropout":
            w = QDoubleSpinBox()
            w.setRange(0.0, 0.95)
            w.setSingleStep(0.05)
            w.setDecimals(2)
            w.valueChanged.connect(self._changed)
        else:
            w = QLineEdit()
            w.textChanged.connect(self._changed)
        return w

    # ---- values --------------------------------------------------------------------------------
    def set_config(self, cfg: GPTConfig) -> None:
        """Show ``cfg`` (one ``configEdited`` afterwards, not one per field)."""
        self._loading = True
        try:
            for name, w in self.widgets.items():
                value = getattr(cfg, name)
                kind = FIELD_KINDS[name]
                if kind == "choice":
                    w.setCurrentIndex(max(0, w.findText(str(value))))
                elif kind == "bool":
                    w.setChecked(bool(value))
                elif kind in ("int", "opt_int"):
                    w.setValue(0 if value is None else int(value))
                elif isinstance(w, QDoubleSpinBox):
                    w.setValue(float(value))
                else:
                    w.setText(f"{value:g}" if isinstance(value, float) else str(value))
        finally:
            self._loading = False
        self._changed()

    def set_value(self, name: str, value: Any) -> None:
        """Set one field as a user would (emits ``configEdited``)."""
        w = self.widgets[name]
        kind = FIELD_KINDS[name]
        if kind == "choice":
            w.setCurrentIndex(w.findText(str(value)))
        elif kind == "bool":
            w.setChecked(bool(value))
        elif kind in ("int", "opt_int"):
            w.setValue(0 if value is None else int(value))
        elif isinstance(w, QDoubleSpinBox):
            w.setValue(float(value))
        else:
            w.setText(str(value))

    def config(self) -> GPTConfig:
        values: dict[str, Any] = {}
        for name, w in self.widgets.items():
            kind = FIELD_KINDS[name]
            if kind == "choice":
                values[name] = w.currentText()
            elif kind == "bool":
                values[name] = w.isChecked()
            elif kind == "int":
                values[name] = int(w.value())
            elif kind == "opt_int":
                values[name] = None if w.value() == 0 else int(w.value())
            elif isinstance(w, QDoubleSpinBox):
                values[name] = float(w.value())
            else:
                try:
                    values[name] = float(w.text())
                except ValueError:
                    values[name] = w.text().strip()
        return GPTConfig(**values)

    def show_problems(self, problems: list[str]) -> None:
        """Outline the fields the problems name and list the problems under the form."""
        named: set[str] = set()
        for p in problems:
            named.update(m for m in re.findall(r"\b([a-z_]+)=", p) if m in self.widgets)
            if "must be even for rope" in p:
                named.add("head_dim")
            if p.startswith("vocab_size"):
                named.add("vocab_size")
        for name, w in self.widgets.items():
            w.setStyleSheet(_ERROR_STYLE if name in named else "")
        self.error_label.setText("• " + "\n• ".join(problems) if problems else "")

    def _changed(self, *_: Any) -> None:
        if not self._loading:
            self.configEdited.emit(self.config())
