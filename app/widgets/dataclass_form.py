"""DataclassForm: a form built from a dataclass's fields, with their tooltips, validation and rules.

One widget per field, chosen from its type: a combo box for a field with choices (the ``choices``
mapping, else the field's ``metadata["choices"]``), a check box for
``bool``, a spin box for ``int`` (``int | None``: the minimum, 0, reads as None and shows a special
text such as "auto"), a line edit for ``float`` (or a spin box when the field's :class:`FieldSpec`
asks for one) and for text. Fields are grouped in boxes; fields no group names go into a last group,
so a field added to the dataclass later appears without changing the form.

Each row is labelled (the literature's name in grey after a human label, when ``show_names``) and
carries its tooltip: the ``tips`` mapping, else the field's ``metadata["help"]``. After every edit
the form reads :meth:`value` (an instance, possibly invalid: text that is not a number stays text),
asks ``check(value)`` (by default ``value.problems()``) and shows each problem under the form, outlines
the fields a problem names (``name=...``) and adds the problem to that field's tooltip (with
``errors_below=False`` the owner places :attr:`error_label` itself). ``valid``
says whether there is none; ``validityChanged`` fires when that flips, ``valueChanged`` after every
edit. ``enable_rules`` switch a field off while it has no effect (``norm_bias`` under RMSNorm).
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
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
    QVBoxLayout,
    QWidget,
)

from app.widgets.layouts import compact_combo
from app.widgets.typed_spin import TypedDoubleSpinBox, TypedSpinBox, line_edit
from app.widgets.wheel_guard import guard_wheel
from app.widgets.wrapped_label import WrappedLabel

ERROR_STYLE = "border: 1px solid #d03030; border-radius: 2px;"
_INT_LIMIT = 2**31 - 1

#: the widget a field gets, by its kind: choice, bool, int/opt_int, float with ``decimals``, the rest
FieldWidget = QComboBox | QCheckBox | TypedSpinBox | TypedDoubleSpinBox | QLineEdit


@dataclass(frozen=True)
class FieldSpec:
    """How one field is shown. ``minimum``/``maximum`` bound spin boxes (defaults: 0 for an optional
    or ``special`` field, else 1; 1,000,000); ``special`` is the text shown at the minimum ("auto",
    "off"; for a float line edit, the placeholder of an empty field). ``decimals``/``step`` make a float
    field a spin box."""

    label: str | None = None
    tip: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    special: str | None = None
    decimals: int | None = None
    step: float | None = None


def _composed(cls: type) -> bool:
    """Whether ``cls`` declares its fields in parts (:class:`~model.config.GPTConfig`): it then lists
    them by their file names itself (``fields``, ``field_types``) and reads one with ``get``."""
    return hasattr(cls, "field_types")


def _fields(cls: type) -> tuple[dict[str, Any], tuple[dataclasses.Field[Any], ...]]:
    """The type and the declaration of each field of ``cls``, by the names its constructor takes."""
    if _composed(cls):
        return cls.field_types(), cls.fields()  # type: ignore[attr-defined]
    return typing.get_type_hints(cls), dataclasses.fields(cls)


def field_kind(name: str, hint: Any, choices: Mapping[str, Iterable[str]]) -> str:
    """ "choice", "bool", "int", "opt_int", "float", "opt_float" or "str" for a field's type hint."""
    if name in choices:
        return "choice"
    args = typing.get_args(hint)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), str) if args else hint
    if base is bool:
        return "bool"
    if base is int:
        return "opt_int" if optional else "int"
    if base is float:
        return "opt_float" if optional else "float"
    return "str"


def format_float(value: Any) -> str:
    """A float as short as it reads back exactly (``3e-4``, ``10000``); None as ""."""
    if value is None:
        return ""
    if isinstance(value, float):
        short = f"{value:g}"
        return short if float(short) == value else repr(value)
    return str(value)


def parse_float(text: str, optional: bool = False) -> Any:
    """The number in ``text``; empty → None when ``optional``; otherwise text that is not a number
    stays text, so the dataclass's validation names it."""
    s = text.strip()
    if not s and optional:
        return None
    try:
        return float(s)
    except ValueError:
        return s


class DataclassForm(QWidget):
    """Edits an instance of the dataclass ``cls``; see the module docstring for the options."""

    #: the edited value (perhaps invalid) after every change
    valueChanged = Signal(object)
    #: True when the edited value has no problems (only when it flips)
    validityChanged = Signal(bool)

    def __init__(
        self,
        cls: type,
        *,
        groups: list[tuple[str, list[str]]] | None = None,
        other_title: str = "Other",
        hidden: Iterable[str] = (),
        fixed: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None,
        labels: Mapping[str, str] | None = None,
        tips: Mapping[str, str] | None = None,
        specs: Mapping[str, FieldSpec] | None = None,
        choices: Mapping[str, Iterable[str]] | None = None,
        enable_rules: Mapping[str, Callable[[dict[str, Any]], bool]] | None = None,
        check: Callable[[Any], list[str]] | None = lambda v: v.problems(),
        problem_fields: Mapping[str, str] | None = None,
        error_prefix: str = "",
        show_names: bool = True,
        group_separators: bool = False,
        object_prefix: str = "field_",
        errors_below: bool = True,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self.cls = cls
        #: values not shown as widgets but passed to the constructor (``set_fixed`` changes them)
        self.fixed: dict[str, Any] = {} if callable(fixed) else dict(fixed or {})
        #: or, when ``fixed`` is a callable, what returns them each time a value is read
        self.fixed_from: Callable[[], Mapping[str, Any]] | None = fixed if callable(fixed) else None
        self.labels = dict(labels or {})
        self.specs = dict(specs or {})
        self.choices = {k: tuple(v) for k, v in (choices or {}).items()}
        self.enable_rules = dict(enable_rules or {})
        self.check = check
        self.problem_fields = dict(problem_fields or {})
        self.error_prefix = error_prefix
        self.show_names = show_names
        self.group_separators = group_separators
        self.object_prefix = object_prefix
        #: field name -> its widget, in form order
        self.widgets: dict[str, FieldWidget] = {}
        self.kinds: dict[str, str] = {}
        self.row_labels: dict[str, QLabel] = {}
        self.tips: dict[str, str] = {}
        #: group title -> its form layout (panels add their own rows, e.g. a read-only label)
        self.forms: dict[str, QFormLayout] = {}
        self.valid = True
        self.problems_shown: list[str] = []
        self._loading = False
        self._typed_bad: set[str] = set()  # fields whose box holds an out-of-range number

        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        hints, listed = _fields(cls)
        fields = {f.name: f for f in listed}
        skip = set(hidden) | set(self._fixed())
        for f in fields.values():
            self.tips[f.name] = (tips or {}).get(f.name) or f.metadata.get("help") or f.name
            if f.name not in self.choices and "choices" in f.metadata:
                self.choices[f.name] = tuple(f.metadata["choices"])
            spec = self.specs.get(f.name)
            if spec is not None and spec.tip:
                self.tips[f.name] = spec.tip
        placed: set[str] = set()
        for title, names in groups or []:
            names = [n for n in names if n in fields and n not in skip]
            placed.update(names)
            layout.addWidget(self._group(title, names, hints))
        rest = [n for n in fields if n not in placed and n not in skip]
        if rest:
            layout.addWidget(self._group(other_title, rest, hints))
        self.error_label = QLabel()
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #c02020;")
        if errors_below:
            layout.addWidget(self.error_label)
        self._apply_rules()

    # ---- building ------------------------------------------------------------------------------
    def _group(self, title: str, names: list[str], hints: dict[str, Any]) -> QGroupBox:
        box = QGroupBox(title)
        form = QFormLayout(box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.forms[title] = form
        for name in names:
            widget = self._make(name, hints.get(name, str))
            widget.setToolTip(self.tips[name])
            self.widgets[name] = widget
            self.row_labels[name] = self.label(name)
            form.addRow(self.row_labels[name], widget)
        return box

    def label(self, name: str) -> QLabel:
        """The row label of ``name``: its human label, then (``show_names``) the field name in grey."""
        spec = self.specs.get(name)
        text = (spec.label if spec and spec.label else None) or self.labels.get(name)
        text = text or name.replace("_", " ").capitalize()
        label = WrappedLabel(f"{text} <span style='color:#888'>{name}</span>" if self.show_names else text)
        label.setToolTip(self.tips.get(name, name))
        return label

    def _make(self, name: str, hint: Any) -> FieldWidget:
        kind = field_kind(name, hint, self.choices)
        spec = self.specs.get(name) or FieldSpec()
        self.kinds[name] = kind
        w: FieldWidget
        if kind == "choice":
            w = compact_combo(QComboBox())  # a narrow dock keeps the arrow in sight
            w.addItems(list(self.choices[name]))
            w.currentIndexChanged.connect(self._changed)
        elif kind == "bool":
            w = QCheckBox()
            w.toggled.connect(self._changed)
        elif kind in ("int", "opt_int"):
            w = self._int_box(name, kind, spec)
        elif kind in ("float", "opt_float") and spec.decimals is not None:
            w = self._float_box(name, spec, spec.decimals)
        else:
            w = QLineEdit()
            if spec.special:
                w.setPlaceholderText(spec.special)
            w.textChanged.connect(self._changed)
        w.setObjectName(f"{self.object_prefix}{name}")
        guard_wheel(w)  # the wheel scrolls the form; it changes a field only once clicked into
        return w

    def _int_box(self, name: str, kind: str, spec: FieldSpec) -> TypedSpinBox:
        w = TypedSpinBox()  # an out-of-range number stays as typed, named in the problems
        low = spec.minimum if spec.minimum is not None else 0 if kind == "opt_int" or spec.special else 1
        w.setRange(int(low), int(min(spec.maximum or 1_000_000, _INT_LIMIT)))
        special = spec.special or ("auto" if kind == "opt_int" else None)
        if special:
            w.setSpecialValueText(special)
        w.setGroupSeparatorShown(self.group_separators)
        w.setKeyboardTracking(True)
        w.valueChanged.connect(self._changed)
        line_edit(w).textChanged.connect(lambda *_, n=name: self._typed(n))
        return w

    def _float_box(self, name: str, spec: FieldSpec, decimals: int) -> TypedDoubleSpinBox:
        w = TypedDoubleSpinBox()
        w.setRange(spec.minimum or 0.0, spec.maximum if spec.maximum is not None else 1e9)
        w.setDecimals(decimals)
        w.setSingleStep(spec.step or 1.0)
        w.valueChanged.connect(self._changed)
        line_edit(w).textChanged.connect(lambda *_, n=name: self._typed(n))
        return w

    # ---- reading and writing -------------------------------------------------------------------
    def field(self, name: str) -> Any:
        """The value the widget of ``name`` shows (None for an optional field left at its minimum)."""
        w, kind = self.widgets[name], self.kinds[name]
        if isinstance(w, QComboBox):
            return w.currentText()
        if isinstance(w, QCheckBox):
            return w.isChecked()
        if isinstance(w, TypedSpinBox):
            return None if kind == "opt_int" and w.value() == w.minimum() else int(w.value())
        if isinstance(w, QDoubleSpinBox):
            return float(w.value())
        if kind in ("float", "opt_float"):
            return parse_float(w.text(), optional=kind == "opt_float")
        return w.text()

    def values(self) -> dict[str, Any]:
        """Every shown field's value (no fixed ones): what ``value()`` passes to the constructor."""
        return {name: self.field(name) for name in self.widgets}

    def _fixed(self) -> Mapping[str, Any]:
        return self.fixed_from() if self.fixed_from is not None else self.fixed

    def value(self) -> Any:
        """The instance the widgets describe (not validated)."""
        return self.cls(**{**self._fixed(), **self.values()})

    def set_field(self, name: str, value: Any) -> None:
        """Show ``value`` in the widget of ``name`` (as a user would: emits unless loading)."""
        w, kind = self.widgets[name], self.kinds[name]
        if isinstance(w, QComboBox):
            w.setCurrentIndex(max(0, w.findText(str(value))))
        elif isinstance(w, QCheckBox):
            w.setChecked(bool(value))
        elif isinstance(w, TypedSpinBox):
            w.setValue(w.minimum() if value is None else int(value))
        elif isinstance(w, QDoubleSpinBox):
            w.setValue(float(value))
        elif kind in ("float", "opt_float"):
            w.setText(format_float(value))
        else:
            w.setText("" if value is None else str(value))

    def set_value(self, value: Any) -> None:
        """Show ``value`` (an instance) in every widget; one ``valueChanged`` afterwards."""
        self._loading = True
        try:
            for name in self.widgets:
                self.set_field(name, value.get(name) if _composed(self.cls) else getattr(value, name))
        finally:
            self._loading = False
        self._changed()

    def set_fixed(self, name: str, value: Any) -> None:
        """Change a value that has no widget (one ``valueChanged`` afterwards)."""
        if self.fixed_from is not None:
            raise TypeError("this form's fixed values come from a callable")
        self.fixed[name] = value
        self._changed()

    # ---- validation ----------------------------------------------------------------------------
    def typed_problems(self) -> list[str]:
        """One line per enabled field whose box holds a number outside its range as typed
        (``n_layers=-5 must be a whole number from 1 to 10,000``): the box keeps it, the value does
        not take it."""
        out = []
        for name, w in self.widgets.items():
            if isinstance(w, TypedSpinBox | TypedDoubleSpinBox) and w.isEnabled():
                problem = w.typed_problem(name)
                if problem:
                    out.append(problem)
        return out

    def _typed(self, name: str) -> None:
        """A keystroke in a number box: validate again when it holds (or held) a typed problem
        (an in-range number already arrives through ``valueChanged``)."""
        w = self.widgets[name]
        now = isinstance(w, TypedSpinBox | TypedDoubleSpinBox) and w.typed_problem(name) is not None
        if now or name in self._typed_bad:
            self._typed_bad.discard(name)
            if now:
                self._typed_bad.add(name)
            self._changed()

    def problems(self) -> list[str]:
        """The typed problems, then what ``check`` says of the current value (a value that cannot be
        built is one problem)."""
        typed = self.typed_problems()
        if self.check is None:
            return typed
        try:
            return typed + list(self.check(self.value()))
        except Exception as exc:
            return [*typed, str(exc)]

    def fields_named(self, problem: str) -> set[str]:
        """The fields a problem names: ``name=...``, a leading field name, or ``problem_fields``."""
        named = {m for m in re.findall(r"\b([a-z_][a-z0-9_]*)=", problem) if m in self.widgets}
        lead = re.match(r"([a-z_][a-z0-9_]*)\b", problem)
        if lead and lead.group(1) in self.widgets:
            named.add(lead.group(1))
        named.update(f for text, f in self.problem_fields.items() if text in problem and f in self.widgets)
        return named

    def show_problems(self, problems: list[str]) -> None:
        """List ``problems`` under the form, outline the fields they name, add each to its tooltip."""
        self.problems_shown = list(problems)
        per_field: dict[str, list[str]] = {}
        for p in problems:
            for name in self.fields_named(p):
                per_field.setdefault(name, []).append(p)
        for name, w in self.widgets.items():
            mine = per_field.get(name)
            style = ERROR_STYLE if mine else ""
            if w.styleSheet() != style:  # (re-styling a box mid-edit loses its selection)
                w.setStyleSheet(style)
            w.setToolTip(self.tips[name] + ("".join(f"\n⚠ {p}" for p in mine) if mine else ""))
        text = self.error_prefix + "• " + "\n• ".join(problems) if problems else ""
        self.error_label.setText(text)
        if self.error_label.parentWidget() is not None:  # (a parentless label would open a window)
            self.error_label.setVisible(bool(text))

    def _apply_rules(self) -> None:
        if not self.enable_rules:
            return
        values = {**self._fixed(), **self.values()}
        for name, rule in self.enable_rules.items():
            if name in self.widgets:
                try:
                    on = bool(rule(values))
                except Exception:
                    on = True
                self.widgets[name].setEnabled(on)
                self.row_labels[name].setEnabled(on)

    def refresh(self) -> None:
        """Validate again (after a fixed value changed elsewhere): as after an edit."""
        self._changed()

    def _changed(self, *_: Any) -> None:
        if self._loading:
            return
        self._apply_rules()
        try:
            value = self.value()
        except Exception:  # a constructor that validates
            value = None
        problems = self.problems()
        if self.check is not None:
            self.show_problems(problems)
        # (without ``check`` the owner validates and shows them, typed_problems() first)
        valid = not problems
        flipped = valid != self.valid
        self.valid = valid
        self.valueChanged.emit(value)
        if flipped:
            self.validityChanged.emit(valid)


__all__ = ["ERROR_STYLE", "DataclassForm", "FieldSpec", "field_kind", "format_float", "parse_float"]
