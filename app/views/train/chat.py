"""Chat mode of the generation box, for a model whose files carry a chat template: the prompt box holds
the user's message, the model reads the whole conversation in its own template
(:meth:`~model.text.chat.ChatTemplate.prompt`), its reply streams in and ends at its end-of-turn token,
which is never shown. The conversation is kept here until "Clear conversation" or another model.

:class:`Conversation` is the Qt-free part (the turns and the text the model reads);
:class:`ChatControls` is the row of the box that switches it on (a check box, enabled only for a
model with a template), the system prompt, Clear conversation and "Show in Attention", which hands the
exact templated text to the Attention tab.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLineEdit, QPushButton, QWidget

from model.text.chat import ChatTemplate

#: What the Chat box's tooltip says when the model cannot chat
NO_TEMPLATE = (
    "This model has no chat template: its files carry none (a chat model's GGUF file has "
    "tokenizer.chat_template, a Hugging Face folder chat_template in tokenizer_config.json), so it "
    "can only continue text"
)
WITH_TEMPLATE = (
    "Chat with the model in its own chat template: type a message, the reply ends at the model's "
    "end-of-turn token (not shown); each turn stays in the conversation"
)
#: How the conversation view names the turns
SPEAKERS = {"user": "You", "assistant": "Model"}


class Conversation:
    """The turns so far, ``(role, text)`` with role ``"user"`` or ``"assistant"``, and the text the
    model read for its latest reply (``last_prompt``)."""

    def __init__(self) -> None:
        self.turns: list[tuple[str, str]] = []
        self.last_prompt = ""

    def clear(self) -> None:
        self.turns.clear()
        self.last_prompt = ""

    def renderer(self, chat: ChatTemplate, system: str, message: str) -> Callable[[Callable[[], bool]], str]:
        """The text the model reads to answer ``message`` after the turns as they are now, as a function
        to call in the generation's thread with ``cancelled`` (it waits for the template's process, up
        to its time limit, or until ``cancelled()``; ChatTemplateError)."""
        turns = list(self.turns)
        return lambda cancelled: chat.prompt(system, turns, message, cancelled=cancelled)

    def add_exchange(self, prompt: str, message: str, reply: str) -> None:
        """The model answered ``message`` with ``reply``, having read ``prompt``."""
        self.turns += [("user", message), ("assistant", reply)]
        self.last_prompt = prompt

    def transcript(self, pending: str | None = None) -> str:
        """The conversation view's text: each turn on a line of its own after its speaker, a blank
        line before each of the user's, then ``pending`` (a message being answered) with the model's
        turn opened."""
        turns = [*self.turns, ("user", pending), ("assistant", "")] if pending is not None else self.turns
        out = ""
        for role, text in turns:
            if out:
                out += "\n\n" if role == "user" else "\n"
            out += f"{SPEAKERS[role]}: {text}"
        return out

    def seen_text(self) -> str:
        """The exact text of the latest exchange as the model read it, its reply included ("" before
        any): what the Attention tab shows."""
        if not self.turns:
            return ""
        return self.last_prompt + self.turns[-1][1]


class ChatControls(QWidget):
    """The row of ``system`` (the system prompt), ``clear_button`` and ``attention_button``, shown in
    chat mode; ``toggle`` (Chat) is placed by the box, among its options. ``chat`` is the model's
    template (None: the toggle is off and disabled, its tooltip says why)."""

    #: the mode changed (True: chat)
    modeChanged = Signal(bool)
    clearRequested = Signal()
    attentionRequested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.chat: ChatTemplate | None = None
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        self.toggle = QCheckBox("Chat")
        self.toggle.setObjectName("chatMode")
        self.toggle.toggled.connect(self._on_toggled)
        self.system = QLineEdit()
        self.system.setObjectName("chatSystem")
        self.system.setPlaceholderText("System prompt (optional)")
        self.system.setToolTip(
            "The system message the conversation starts with (empty: none, or the template's own default)"
        )
        row.addWidget(self.system, 1)
        self.clear_button = QPushButton("Clear conversation")
        self.clear_button.setObjectName("chatClear")
        self.clear_button.setToolTip("Forget every turn: the next message starts a new conversation")
        self.clear_button.clicked.connect(self.clearRequested)
        row.addWidget(self.clear_button)
        self.attention_button = QPushButton("Show in Attention")
        self.attention_button.setObjectName("chatToAttention")
        self.attention_button.setToolTip(
            "Open the exact text the model reads (the conversation in its chat template) in the Attention tab"
        )
        self.attention_button.clicked.connect(self.attentionRequested)
        row.addWidget(self.attention_button)
        self.set_template(None)

    @property
    def active(self) -> bool:
        return self.chat is not None and self.toggle.isChecked()

    def set_template(self, chat: ChatTemplate | None) -> None:
        """The model's template (None: no chat for this model)."""
        self.chat = chat
        if chat is None:
            self.toggle.setChecked(False)
        self.toggle.setEnabled(chat is not None)
        self.toggle.setToolTip(WITH_TEMPLATE if chat is not None else NO_TEMPLATE)
        self._show_parts()

    def _on_toggled(self, _on: bool) -> None:
        self._show_parts()
        self.modeChanged.emit(self.active)

    def _show_parts(self) -> None:
        self.setVisible(self.active)


__all__ = ["NO_TEMPLATE", "SPEAKERS", "WITH_TEMPLATE", "ChatControls", "Conversation"]
