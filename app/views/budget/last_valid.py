"""The Budget tab's last valid budget: what its pages show, greyed, while a value is invalid.

The tab recomputes on every keystroke, so a number typed digit by digit passes through values nobody
meant (typing 999999999999 into V goes through 9, 99, … 9,999,999, all valid, before the eighth
digit leaves the range). A budget is *entered* only when no box is being typed in: a box is in an
edit from its first keystroke (``textEdited``, the user's own typing, never a value set by the tab)
to ``editingFinished`` (Enter, or leaving the box). :class:`LastValid` keeps the last budget
computed while no box was in an edit; while any value is invalid the tab draws that one, greyed
(:func:`grey_out`), with a line naming it (:func:`stale_line`), never the half-typed one.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractSpinBox, QGraphicsColorizeEffect, QLabel, QLineEdit, QWidget

from app.widgets.typed_spin import line_edit
from model.budget.table import BudgetSettings
from model.config import GPTConfig


@dataclass
class Entered:
    """One budget the user entered: its config, settings, header title and report."""

    config: GPTConfig
    settings: BudgetSettings
    title: str
    report: dict[str, Any]


class LastValid:
    """Follows which of ``boxes`` (spin boxes or line edits) are in an edit, and keeps the last
    :class:`Entered` budget: one offered while no box was in an edit, or the last one offered during
    an edit once that edit ends valid (Enter, or leaving the box). Nothing is redrawn when an edit
    ends: the pages already show the valid budget, and a box may end its edit as the window closes."""

    def __init__(self, boxes: Iterable[QWidget]):
        self.entered: Entered | None = None
        self._pending: Entered | None = None
        self._editing: set[QWidget] = set()
        for box in boxes:
            if isinstance(box, QAbstractSpinBox):
                edit = line_edit(box)
            elif isinstance(box, QLineEdit):
                edit = box
            else:
                continue
            edit.textEdited.connect(lambda *_, b=box: self._editing.add(b))
            box.editingFinished.connect(lambda b=box: self._end(b))

    @property
    def editing(self) -> bool:
        """Some box holds a value the user is still typing."""
        return bool(self._editing)

    def _end(self, box: QWidget) -> None:
        self._editing.discard(box)
        if not self._editing and self._pending is not None:
            self.entered = self._pending

    def offer(self, entered: Entered) -> None:
        """A valid budget was computed: the entered one unless a box is mid-edit (then it becomes
        the entered one if the edit ends with no invalid value typed after it)."""
        self._pending = entered
        if not self._editing:
            self.entered = entered

    def withdraw(self) -> None:
        """An invalid value was typed: the budget offered before it was a half-typed one."""
        self._pending = None


def stale_line(entered: Entered) -> str:
    """The line above greyed figures: whose they are, by the report's symbols."""
    symbols = ", ".join(f"{k} = {v:,}" for k, v in entered.report["symbols"].items())
    return (
        f"Showing the last valid config: {entered.title} ({symbols}). Every figure below is greyed and "
        "belongs to it until the values are valid again."
    )


def stale_label() -> QLabel:
    """The (hidden) label :func:`stale_line` goes in."""
    label = QLabel()
    label.setObjectName("budgetStale")
    label.setWordWrap(True)
    label.setStyleSheet("color: #555; font-style: italic;")
    label.hide()
    return label


def grey_out(widget: QWidget, on: bool) -> None:
    """Draw ``widget`` and its children in shades of grey while ``on`` (tables' coloured rows and
    plots' curves too, which a disabled widget keeps in colour); in its own colours when not."""
    if on:
        effect = QGraphicsColorizeEffect(widget)
        effect.setColor(QColor(128, 128, 128))
        effect.setStrength(1.0)
        widget.setGraphicsEffect(effect)
    elif widget.graphicsEffect() is not None:
        widget.setGraphicsEffect(None)  # type: ignore[arg-type]


__all__ = ["Entered", "LastValid", "grey_out", "stale_label", "stale_line"]
