"""The model configuration panel: every GPTConfig field as a widget, grouped, validated as you type.

Each field's tooltip is its line from ``model.config.FIELD_HELP``. After every edit the panel builds
a :class:`GPTConfig` and asks it for ``problems()``: each problem is listed under the form, the
fields it names are outlined in red, and :attr:`ConfigPanel.valid` turns False (the Train tab
disables Start on ``validityChanged``). A valid config is handed to the session with
``Session.set_config``. Fields added to GPTConfig later appear automatically in "Other".
"""

from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from model.config import CHOICES, FIELD_HELP, GPTConfig, default_config

#: Field groups, in order; fields not listed go into "Other".
GROUPS: list[tuple[str, list[str]]] = [
    ("Size", ["context_length", "n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff"]),
    (
        "Architecture",
        [
            "positions",
            "attn_scale",
            "causal",
            "norm",
            "norm_position",
            "norm_bias",
            "mlp",
            "bias",
            "tie_embeddings",
        ],
    ),
    ("Numerical details", ["dropout", "norm_eps", "gelu_approx", "rope_base"]),
]

#: Human labels (the config name follows in grey, so users learn the literature's names).
LABELS: dict[str, str] = {
    "vocab_size": "Vocabulary",
    "context_length": "Context length",
    "n_layers": "Layers",
    "d_model": "Model width",
    "n_heads": "Query heads",
    "n_kv_heads": "Key/value heads",
    "head_dim": "Head size",
    "d_ff": "MLP hidden width",
    "mlp": "MLP",
    "norm": "Normalisation",
    "norm_position": "Norm position",
    "norm_bias": "Norm bias",
    "positions": "Positions",
    "attn_scale": "Score scaling",
    "causal": "Causal mask",
    "bias": "Biases",
    "tie_embeddings": "Tie embeddings",
    "dropout": "Dropout",
    "norm_eps": "Norm ε",
    "gelu_approx": "GELU form",
    "rope_base": "RoPE base",
}

#: Upper bounds for the integer spin boxes (generous: the Budget tab is for 7B-scale configs).
INT_MAX: dict[str, int] = {
    "context_length": 131072,
    "n_layers": 256,
    "d_model": 65536,
    "n_heads": 1024,
    "n_kv_heads": 1024,
    "head_dim": 4096,
    "d_ff": 262144,
}

_ERROR_STYLE = "border: 1px solid #d03030; border-radius: 2px;"


def _field_kind(f: dataclasses.Field) -> str:
    hints = typing.get_type_hints(GPTConfig)
    t = hints.get(f.name, f.type)
    if f.name in CHOICES:
        return "choice"
    if t is bool:
        return "bool"
    args = typing.get_args(t)
    if t is int:
        return "int"
    if int in args and type(None) in args:
        return "opt_int"
    if t is float or float in args:
        return "float"
    return "text"


class ConfigPanel(QWidget):
    """Edits a GPTConfig. ``config()`` returns what the widgets say; ``valid`` whether it validates."""

    #: the edited config (GPTConfig, perhaps invalid) after every change
    configEdited = Signal(object)
    #: True when the edited config has no problems
    validityChanged = Signal(bool)

    def __init__(self, session=None, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self._widgets: dict[str, QWidget] = {}
        self._kinds: dict[str, str] = {}
        self._loading = False
        self.valid = True
        self._vocab_size: int | None = None

        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        outer.addWidget(scroll)
        body = QWidget()
        scroll.setWidget(body)
        layout = QVBoxLayout(body)

        self.vocab_label = QLabel("set by the tokenizer")
        self.vocab_label.setToolTip(FIELD_HELP["vocab_size"])

        fields = {f.name: f for f in dataclasses.fields(GPTConfig)}
        placed = {"vocab_size"}
        for title, names in GROUPS:
            names = [n for n in names if n in fields]
            placed.update(names)
            layout.addWidget(self._group(title, [fields[n] for n in names], vocab=(title == "Size")))
        rest = [f for name, f in fields.items() if name not in placed]
        if rest:
            layout.addWidget(self._group("Other", rest))

        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setToolTip("Sizes derived from the fields above")
        layout.addWidget(self.summary)
        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #c02020;")
        self.error_label.setObjectName("configErrors")
        layout.addWidget(self.error_label)
        buttons = QHBoxLayout()
        self.reset_button = QPushButton("Reset to default")
        self.reset_button.setToolTip("The built-in default: a small GPT-2-style model that trains on the CPU")
        self.reset_button.clicked.connect(lambda: self.set_config(default_config(self._vocab_size)))
        buttons.addWidget(self.reset_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        layout.addStretch(1)

        if session is not None:
            self.set_config(session.config)
            session.dataChanged.connect(lambda src: self.set_vocab_size(src.tokenizer.vocab_size))
            session.configChanged.connect(self._on_session_config)
            session.trainingStateChanged.connect(lambda st: self.setEnabled(st == "idle"))
            if session.tokenizer is not None:
                self.set_vocab_size(session.tokenizer.vocab_size)
        else:
            self.set_config(default_config())

    # ---- building ------------------------------------------------------------------------------
    def _group(self, title: str, fields: list[dataclasses.Field], vocab: bool = False) -> QGroupBox:
        box = QGroupBox(title)
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        if vocab:
            form.addRow(self._label("vocab_size"), self.vocab_label)
        for f in fields:
            widget = self._make_widget(f)
            widget.setToolTip(FIELD_HELP.get(f.name, f.name))
            widget.setObjectName(f"field_{f.name}")
            self._widgets[f.name] = widget
            form.addRow(self._label(f.name), widget)
        return box

    def _label(self, name: str) -> QLabel:
        text = LABELS.get(name, name.replace("_", " ").capitalize())
        label = QLabel(f"{text} <span style='color:#888'>{name}</span>")
        label.setToolTip(FIELD_HELP.get(name, name))
        return label

    def _make_widget(self, f: dataclasses.Field) -> QWidget:
        kind = _field_kind(f)
        self._kinds[f.name] = kind
        if kind == "choice":
            w = QComboBox()
            w.addItems(list(CHOICES[f.name]))
            w.currentIndexChanged.connect(self._changed)
        elif kind == "bool":
            w = QCheckBox()
            w.toggled.connect(self._changed)
        elif kind in ("int", "opt_int"):
            w = QSpinBox()
            w.setRange(0 if kind == "opt_int" else 1, INT_MAX.get(f.name, 1_000_000))
            if kind == "opt_int":
                w.setSpecialValueText("auto")
            w.setKeyboardTracking(True)
            w.valueChanged.connect(self._changed)
        elif f.name == "dropout":
            w = QDoubleSpinBox()
            w.setRange(0.0, 0.95)
            w.setSingleStep(0.05)
            w.setDecimals(2)
            w.valueChanged.connect(self._changed)
        else:
            w = QLineEdit()
            w.textChanged.connect(self._changed)
        return w

    # ---- reading and writing -------------------------------------------------------------------
    def set_vocab_size(self, vocab: int | None) -> None:
        self._vocab_size = vocab
        self.vocab_label.setText(f"{vocab} (set by the tokenizer)" if vocab else "set by the tokenizer")
        self._changed()

    def set_config(self, config: GPTConfig) -> None:
        """Show ``config`` in the widgets (without emitting a change per field)."""
        self._loading = True
        try:
            for name, w in self._widgets.items():
                value = getattr(config, name)
                kind = self._kinds[name]
                if kind == "choice":
                    idx = w.findText(str(value))
                    w.setCurrentIndex(max(idx, 0))
                elif kind == "bool":
                    w.setChecked(bool(value))
                elif kind in ("int", "opt_int"):
                    w.setValue(0 if value is None else int(value))
                elif isinstance(w, QDoubleSpinBox):
                    w.setValue(float(value))
                else:
                    w.setText(_format_float(value))
            if config.vocab_size:
                self._vocab_size = config.vocab_size
                self.vocab_label.setText(f"{config.vocab_size} (set by the tokenizer)")
        finally:
            self._loading = False
        self._changed()

    def config(self) -> GPTConfig:
        """The config the widgets describe (not validated; text that is not a number stays text)."""
        values: dict[str, Any] = {"vocab_size": self._vocab_size}
        for name, w in self._widgets.items():
            kind = self._kinds[name]
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
                values[name] = _parse_float(w.text())
        return GPTConfig(**values)

    def problems(self) -> list[str]:
        try:
            return self.config().problems()
        except Exception as exc:  # a field that cannot even be built
            return [str(exc)]

    # ---- reacting ------------------------------------------------------------------------------
    def _on_session_config(self, config: GPTConfig) -> None:
        if config.to_dict() != self.config().to_dict():
            self.set_config(config)

    def _changed(self, *_: Any) -> None:
        if self._loading:
            return
        cfg = self.config()
        problems = self.problems()
        named = set()
        for p in problems:
            named.update(m for m in re.findall(r"\b([a-z_]+)=", p) if m in self._widgets)
            if "must be even for rope" in p:
                named.add("head_dim")
        for name, w in self._widgets.items():
            w.setStyleSheet(_ERROR_STYLE if name in named else "")
        if problems:
            self.error_label.setText("Fix before training:\n• " + "\n• ".join(problems))
        else:
            self.error_label.setText("")
        self.summary.setText(self._summary(cfg) if not problems else "")
        valid = not problems
        changed = valid != self.valid
        self.valid = valid
        self.configEdited.emit(cfg)
        if changed:
            self.validityChanged.emit(valid)
        if valid and self.session is not None and not self.session.is_training:
            try:
                self.session.set_config(cfg)
            except Exception as exc:  # e.g. the tokenizer's vocabulary changed meanwhile
                self.error_label.setText(str(exc))

    def _summary(self, cfg: GPTConfig) -> str:
        parts = [f"d_k = {cfg.d_head}", f"MLP hidden = {cfg.hidden}"]
        if cfg.kv_heads == 1 and cfg.n_heads > 1:
            parts.append("multi-query attention (MQA)")
        elif cfg.kv_heads < cfg.n_heads:
            parts.append(f"grouped-query attention: {cfg.n_rep} query heads per K/V head")
        if cfg.vocab_size:
            try:
                from model.budget import parameters

                parts.append(f"{parameters(cfg).total:,} parameters")
            except Exception:
                pass
        return " · ".join(parts)


def _format_float(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _parse_float(text: str) -> Any:
    try:
        return float(text)
    except ValueError:
        return text.strip()
