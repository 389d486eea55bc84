"""Spin boxes that keep what was typed: a number outside the range stays in the box, outlined, with
one line saying why, until it is made valid — never clamped or reverted behind the user's back.

A plain :class:`QSpinBox` with range 1…10,000 refuses the key ``-`` (so ``-5`` becomes ``5``), stops
accepting digits past the maximum (``100000000000`` becomes ``10000``) and on leaving the field puts
back the previous value (``0`` is ignored). :class:`TypedSpinBox` and :class:`TypedDoubleSpinBox` let
any number be typed; while it is outside the range :meth:`~TypedSpinBox.typed_problem` names it
(``n_layers=-5 must be a whole number from 1 to 10,000``) and :meth:`value` still holds the last valid
number, so whoever reads the box asks :meth:`typed_problem` first (:class:`~app.widgets.dataclass_form.
DataclassForm` and the Budget tab do). Letters and other text are still refused as keys.
"""

from __future__ import annotations

import math
import re

from PySide6.QtCore import Qt
from PySide6.QtGui import QValidator
from PySide6.QtWidgets import QAbstractSpinBox, QDoubleSpinBox, QLineEdit, QSpinBox

_WHOLE = re.compile(r"[-+−]?\d*")
_NUMBER = re.compile(r"[-+−]?(\d*\.?\d*)([eE][-+]?\d*)?")


def line_edit(box: QAbstractSpinBox) -> QLineEdit:
    """The line edit inside ``box``, e.g. to follow each keystroke (``textChanged``), in or out of
    range: a spin box always has one, though Qt's signature allows None."""
    edit = box.lineEdit()
    if edit is None:
        raise RuntimeError(f"{type(box).__name__} has no line edit")
    return edit


def _limit(x: float) -> str:
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,g}"


class _Typed:
    """What both boxes share: the text as typed, read without prefix, suffix or group separators."""

    whole = True
    #: what may be typed (less prefix, suffix and group separators): Qt's own check refuses the rest
    pattern = _WHOLE

    def validate(self, text: str, pos: int):
        state, text, pos = super().validate(text, pos)  # type: ignore[misc]
        if state == QValidator.State.Invalid and self._could_be(text):
            state = QValidator.State.Intermediate  # kept in the box, named by typed_problem
        return state, text, pos

    def _could_be(self, text: str) -> bool:
        for part in (self.prefix(), self.suffix()):  # type: ignore[attr-defined]
            text = text.replace(part, "") if part else text
        text = text.replace(self.locale().groupSeparator(), "").strip()  # type: ignore[attr-defined]
        return bool(self.pattern.fullmatch(text))

    def fixup(self, text: str) -> str:
        return text  # no correction: what was typed stays

    def focusOutEvent(self, event) -> None:
        if self.typed_problem("") is not None:  # keep the text (Qt would put the old value back)
            self.lineEdit().deselect()  # type: ignore[attr-defined]
            self.editingFinished.emit()  # type: ignore[attr-defined]
            return
        super().focusOutEvent(event)  # type: ignore[misc]

    def keyPressEvent(self, event) -> None:
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.typed_problem("") is not None:
            self.editingFinished.emit()  # type: ignore[attr-defined]
            return
        super().keyPressEvent(event)  # type: ignore[misc]

    def _bare(self) -> str:
        text = self.cleanText() if hasattr(self, "cleanText") else ""
        return text.replace(self.locale().groupSeparator(), "").replace("−", "-").strip()  # type: ignore[attr-defined]

    def _number(self, text: str) -> float | None:
        try:
            v = float(text)
        except ValueError:
            return None
        return v if math.isfinite(v) else None

    def typed_problem(self, name: str) -> str | None:
        """``name=TEXT must be … from MIN to MAX`` while the box holds a number outside its range (or
        an unfinished one: empty, a lone sign); None when what is shown is its value."""
        box = self  # a QSpinBox or QDoubleSpinBox
        special = box.specialValueText()  # type: ignore[attr-defined]
        if special and box.text() == special:  # type: ignore[attr-defined]
            return None
        text = self._bare()
        v = self._number(text)
        lo, hi = box.minimum(), box.maximum()  # type: ignore[attr-defined]
        if special:
            lo = lo + (1 if self.whole else 0)  # the minimum means the special value ("auto", "off")
        kind = "a whole number" if self.whole else "a number"
        rule = f"{kind} from {_limit(lo)} to {_limit(hi)}" + (
            " (or empty: " + special + ")" if special else ""
        )
        if v is None:
            return f"{name}={text or '(empty)'} must be {rule}"
        if self.whole and not v.is_integer():
            return f"{name}={text} must be {rule}"
        if not (lo <= v <= hi) and not (special and v == box.minimum()):  # type: ignore[attr-defined]
            return f"{name}={text} must be {rule}"
        return None


class TypedSpinBox(_Typed, QSpinBox):
    """A :class:`QSpinBox` that keeps an out-of-range whole number as typed (see the module doc)."""


class TypedDoubleSpinBox(_Typed, QDoubleSpinBox):
    """A :class:`QDoubleSpinBox` that keeps an out-of-range number as typed."""

    whole = False
    pattern = _NUMBER


__all__ = ["TypedDoubleSpinBox", "TypedSpinBox", "line_edit"]
