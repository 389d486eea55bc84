"""The Train tab's generation box: a prompt, sampling settings, and the continuation streamed token by
token from a :class:`~app.session.workers.GenerateWorker` (Generate turns into Stop while it runs).

Sampling: logits / temperature (0 = greedy), then top-k (the k most likely tokens) and top-p (the
smallest set whose probability reaches p); the model reads at most the window it was trained on.

A model whose files carry a chat template can chat instead (the Chat box, :mod:`app.views.train.chat`):
the prompt box then holds a message, the output box the conversation.
"""

from __future__ import annotations

import copy
import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QTextCursor
from PySide6.QtWidgets import (
    QDoubleSpinBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.core.pace import progress_line, sharing_note
from app.session.workers import GenerateWorker
from app.views.train.chat import ChatControls, Conversation
from app.views.train.prompt_edit import PromptEdit
from model.text.chat import ChatTemplateError

#: The generation's key on the session's job board (Generate turns into Stop, its Cancel).
GENERATE_JOB = "train.generate"


class GenerateBox(QGroupBox):
    """Generate from the session's model: ``prompt``, ``button``, ``output``; ``generate(seed)``.

    ``worker`` is the running :class:`~app.session.workers.GenerateWorker` (None when idle). In chat mode
    (``chat``, ``conversation``) ``attentionPromptRequested`` carries the text the model read for
    its latest reply, that reply included, to the Attention tab.
    """

    attentionPromptRequested = Signal(str)
    _count, _t0 = 0, 0.0
    #: while a chat reply streams: the user's message (the text the model reads is the worker's prompt)
    _pending: str | None = None

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__("Generate", parent)
        self.session = session
        self.worker: GenerateWorker | None = None
        layout = QVBoxLayout(self)
        row = QHBoxLayout()
        self.prompt = PromptEdit()
        self.prompt.setObjectName("genPrompt")
        self.prompt.setAccessibleName("Generate box's prompt")
        self.prompt.setPlaceholderText("Prompt (Ctrl+Enter generates)")
        self.prompt.setTabChangesFocus(True)
        self._prompt_height(3)
        self.prompt.on_submit("Generate from the prompt, or send the chat message", self.generate)
        row.addWidget(self.prompt, 1)
        self.button = QPushButton("Generate")
        self.button.setObjectName("generateButton")
        self.button.clicked.connect(self._clicked)
        beside = QVBoxLayout()  # Generate, and under it the Chat switch (the options row stays short)
        beside.addWidget(self.button)
        self.chat = ChatControls()
        self.conversation = Conversation()
        beside.addWidget(self.chat.toggle)
        beside.addStretch(1)
        row.addLayout(beside)
        layout.addLayout(row)
        #: why the last message could not be sent (a chat template's failure names its file), right
        #: under the message and Send; hidden once the next one is sent
        self.send_error = QLabel()
        self.send_error.setObjectName("sendError")
        self.send_error.setWordWrap(True)
        self.send_error.setStyleSheet("color: #b00020;")
        self.send_error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.send_error.hide()
        layout.addWidget(self.send_error)
        opts = QHBoxLayout()
        opts.addWidget(QLabel("Temperature"))
        self.temperature = QDoubleSpinBox()
        self.temperature.setRange(0.0, 5.0)
        self.temperature.setSingleStep(0.1)
        self.temperature.setValue(0.8)
        self.temperature.setToolTip(
            "Divide the logits by this before sampling (0 = always the most likely token)"
        )
        opts.addWidget(self.temperature)
        opts.addWidget(QLabel("Top-k"))
        self.top_k = QSpinBox()
        self.top_k.setRange(0, 1_000_000)
        self.top_k.setSpecialValueText("off")
        self.top_k.setToolTip("Sample only among the k most likely tokens (off = all)")
        opts.addWidget(self.top_k)
        opts.addWidget(QLabel("Top-p"))
        self.top_p = QDoubleSpinBox()
        self.top_p.setRange(0.01, 1.0)
        self.top_p.setSingleStep(0.05)
        self.top_p.setValue(1.0)
        self.top_p.setToolTip("Sample among the smallest set of tokens whose probability reaches p (1 = off)")
        opts.addWidget(self.top_p)
        opts.addWidget(QLabel("Tokens"))
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 100_000)
        self.max_tokens.setValue(200)
        self.max_tokens.setToolTip("How many new tokens to generate")
        opts.addWidget(self.max_tokens)
        opts.addStretch(1)
        layout.addLayout(opts)
        layout.addWidget(self.chat)
        self.output = QPlainTextEdit()
        self.output.setObjectName("genOutput")
        self.output.setReadOnly(True)
        self.output.setMinimumHeight(50)
        self.output.setPlaceholderText(
            "Type a prompt and press Generate: tokens appear as they are produced."
        )
        layout.addWidget(self.output, 1)
        #: tokens so far, their pace, the time left, and why it is slow while the run trains
        self.status = QLabel(" ")
        self.status.setObjectName("genStatus")
        self.status.setWordWrap(True)
        self.status.setStyleSheet("color: #555;")
        layout.addWidget(self.status)
        self.chat.modeChanged.connect(self._on_mode)
        self.chat.clearRequested.connect(self.clear_conversation)
        self.chat.attentionRequested.connect(self._to_attention)
        session.modelChanged.connect(lambda *_: self._sync_template())
        self._sync_template()

    # ---- chat mode -----------------------------------------------------------------------------
    def _sync_template(self) -> None:
        """Chat follows the model: another template (or none) starts a new conversation."""
        chat = getattr(self.session.tokenizer, "chat_template", None)
        if chat is not self.chat.chat:
            self.chat.set_template(chat)
            self.clear_conversation()

    _suggested = ""  # the prompt the box was last given (not typed): replaced by the next one

    def suggest(self, text: str) -> None:
        """A prompt that belongs to the shown model's data: it replaces the box's prompt unless the
        user typed that prompt (a model opened with other data gets that data's prompt, never the
        previous model's; a chat message is the user's)."""
        if not self.chat.active and self.prompt.text() in ("", self._suggested):
            self.prompt.setText(text)
        self._suggested = text

    def _prompt_height(self, lines: int) -> None:
        self.prompt.setFixedHeight(self.prompt.fontMetrics().lineSpacing() * lines + 12)

    def _on_mode(self, chatting: bool) -> None:
        self.show_send_error("")
        self.button.setText(self._idle_text())
        self._prompt_height(2 if chatting else 3)  # a message is short: the conversation gets the room
        self.prompt.setPlaceholderText(
            "Message (Ctrl+Enter sends)" if chatting else "Prompt (Ctrl+Enter generates)"
        )
        self.output.setPlaceholderText(
            "Type a message and press Send: the conversation appears here, the reply as it is written."
            if chatting
            else "Type a prompt and press Generate: tokens appear as they are produced."
        )
        self.output.setPlainText(self.conversation.transcript() if chatting else "")

    def _chat_enabled(self, on: bool) -> None:
        self.chat.toggle.setEnabled(on and self.chat.chat is not None)
        self.chat.setEnabled(on)

    def _idle_text(self) -> str:
        return "Send" if self.chat.active else "Generate"

    def show_send_error(self, reason: str) -> None:
        """Say under Send why the message was not sent ("" hides it); the conversation is unchanged."""
        self.send_error.setText(f"Cannot send: {reason}" if reason else "")
        self.send_error.setVisible(bool(reason))

    def clear_conversation(self) -> None:
        """Forget every turn (Clear conversation; another model)."""
        self.show_send_error("")
        self.conversation.clear()
        if self.chat.active:
            self.output.setPlainText("")

    def _to_attention(self) -> None:
        text = self.conversation.seen_text()
        if not text:
            self.status.setText("Nothing to show yet: send a message first")
            return
        self.attentionPromptRequested.emit(text)

    def shutdown(self) -> None:
        """Stop a running generation and wait for it (the tab's and the window's close)."""
        if self.worker is not None:
            self.worker.control.stop()
            self.worker.join(10.0)

    def _clicked(self) -> None:
        if self.worker is not None:
            self.session.jobs.cancel(GENERATE_JOB)  # Stop: the job's Cancel
        else:
            self.generate()

    def generate(self, seed: int | None = None) -> None:
        """Stream a continuation of the prompt box's text into the output box (``seed``: reproducible)."""
        s = self.session
        if self.worker is not None or s.model is None or s.tokenizer is None:
            return
        self._sync_template()
        message = self.prompt.text()
        template = self.chat.chat if self.chat.active else None
        chatting = template is not None
        render = None
        try:
            if not message:
                raise ValueError("type a message first" if chatting else "type a prompt first")
            prompt = message
            if (
                template is not None
            ):  # rendered in the worker: a model file's template never blocks the window
                render = self.conversation.renderer(template, self.chat.system.text(), message)
            else:
                s.tokenizer.encode(prompt)
        except (ValueError, ChatTemplateError) as exc:
            if chatting:
                self.show_send_error(str(exc))
            else:
                self.output.setPlainText(f"Cannot generate: {exc}")
            return
        source = generation_source(s)  # a training model is copied in the worker, not here
        top_k = self.top_k.value() or None
        top_p = self.top_p.value() if self.top_p.value() < 1.0 else None
        temperature = self.temperature.value()
        worker = GenerateWorker(
            None,
            s.tokenizer,
            prompt,
            model_source=source,
            prompt_source=render,
            max_new_tokens=self.max_tokens.value(),
            temperature=max(temperature, 1e-6),
            top_k=top_k,
            top_p=top_p,
            greedy=temperature == 0.0,
            seed=seed,
            window=trained_window(s),
        )
        worker.token.connect(self._on_token)
        worker.finished.connect(self._on_generated)
        title = "Replying to" if chatting else "Generating after"
        worker.announce(s.jobs, GENERATE_JOB, title, f"“{message[:30]}{'…' if len(message) > 30 else ''}”")
        self.worker = worker
        self.show_send_error("")
        self._pending = message if chatting else None
        self._chat_enabled(False)  # the mode and the conversation hold still while the model writes
        self.output.setPlainText(self.conversation.transcript(message) if chatting else prompt)
        self.button.setText("Stop")
        self._count, self._t0 = 0, time.monotonic()
        note = sharing_note(s)
        self.status.setText(f"Generating… ({note})" if note else "Generating…")
        worker.start()

    def _on_token(self, piece: str) -> None:
        if piece:
            self.output.moveCursor(QTextCursor.MoveOperation.End)
            self.output.insertPlainText(piece)
        self._count += 1
        self.status.setText(self._pace(self.max_tokens.value()))

    def _pace(self, total: int | None) -> str:
        """``N tokens · R tokens/s`` (with the time left while generating, and why it is slow)."""
        elapsed = max(time.monotonic() - self._t0, 1e-9)
        head = f"{self._count} tokens · {self._count / elapsed:.1f} tokens/s"
        if total is None:
            return head
        return progress_line(head, self._count, total, elapsed, self.session)

    def _on_generated(self, text: str, error: str) -> None:
        worker = self.worker
        if worker is not None:
            worker.join(5.0)
        self.worker = None
        pending, self._pending = self._pending, None
        stopped = worker is not None and (worker.result or ("",))[0] == "stopped"
        self._chat_enabled(True)
        self.button.setText(self._idle_text())
        self.status.setText(self._pace(None) + " · done" if self._count else " ")
        if error and pending is not None:  # the template or the reply failed: the conversation stays
            self.show_send_error(error)
            self.output.setPlainText(self.conversation.transcript())
        elif error:
            self.output.appendPlainText(f"\n[generation failed: {error}]")
        elif pending is not None and self.chat.active and worker is not None and (text or not stopped):
            self.conversation.add_exchange(
                worker.prompt, pending, text
            )  # a turn (none if stopped before a word)
            self.prompt.setText("")


def generation_source(session):
    """A function returning the model generation should read, to call in the worker thread: the
    model itself while no run trains it, else a snapshot taken between two steps (``compute_lock``),
    a wait that must not be the GUI thread's (a step can take a second on a busy machine)."""
    model, training, lock = session.model, session.is_training, session.compute_lock

    def source():
        if model is None or not training:
            return model
        with lock:
            snap = copy.deepcopy(model)
        snap.eval()
        return snap

    return source


def trained_window(session) -> int | None:
    """The sequence length the model was trained on: generation reads no more than that many tokens
    (a model trained on 128 of its 256 learned positions degrades past 128)."""
    if session.trainer is not None:
        return int(session.trainer.seq_len)
    value = (session.checkpoint_meta or {}).get("seq_len")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
