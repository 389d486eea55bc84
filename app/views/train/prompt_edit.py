"""A few lines of prompt that Ctrl+Enter submits: the Generate box's prompt (or chat message) and the
probe prompt of the live attention grid.

Each box's Ctrl+Enter is a shortcut of that box alone (``Qt.WidgetShortcut``): two window-wide
shortcuts on one key are ambiguous to Qt, which then fires neither. Help → Keyboard shortcuts lists
each once, with what it does (its ``whatsThis``) and the box it works in.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QPlainTextEdit

#: Ctrl+Enter on the main keyboard (Return) and on the keypad (Enter)
SUBMIT_KEYS = (QKeySequence("Ctrl+Return"), QKeySequence("Ctrl+Enter"))


class PromptEdit(QPlainTextEdit):
    """A few lines of prompt (prompts often hold newlines); ``text``/``setText`` like a line edit;
    :meth:`on_submit` says what Ctrl+Enter does in it."""

    submit_shortcut: QShortcut | None = None

    def text(self) -> str:
        return self.toPlainText()

    def setText(self, text: str) -> None:
        self.setPlainText(text)

    def on_submit(self, what: str, slot: Callable[[], object]) -> QShortcut:
        """Ctrl+Enter in this box (while it has the focus) calls ``slot``; ``what`` is what Help says
        it does ("Generate from the prompt")."""
        shortcut = QShortcut(self)
        shortcut.setKeys(list(SUBMIT_KEYS))
        shortcut.setContext(Qt.ShortcutContext.WidgetShortcut)
        shortcut.setWhatsThis(what)
        shortcut.activated.connect(slot)
        self.submit_shortcut = shortcut
        return shortcut


__all__ = ["SUBMIT_KEYS", "PromptEdit"]
