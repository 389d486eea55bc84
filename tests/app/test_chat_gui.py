"""Chat mode of the Train tab's generation box: off (and saying why) for a model without a chat
template, such as the starter; for a model with one, each turn is appended to the conversation, the
reply streams in and ends at the end-of-turn token, whose text is never shown; Clear conversation
forgets the turns; "Show in Attention" runs the exact templated text in the Attention tab."""

from __future__ import annotations

import copy

import pytest
import torch
from PySide6.QtCore import Qt

import model.nn.generate as gen
from app.views.train.chat import NO_TEMPLATE, WITH_TEMPLATE
from model.text.chat import ChatTemplate

TIMEOUT = 60_000
#: the copy task's alphabet is a-j, "=" and newline: the template writes each turn on its own line
TEMPLATE = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}j{% endif %}"


@pytest.fixture
def tiny_window_tabs():
    return ["train", "attention"]


def _box(win):
    return win.tabs["train"].generate_box


def _with_template(session):
    """The session's model again, its tokenizer (a copy) carrying TEMPLATE and ending turns at "="."""
    tok = copy.copy(session.tokenizer)
    tok.chat_template = ChatTemplate(TEMPLATE)
    tok.stop_ids = frozenset(tok.encode("="))
    session.show_model(session.model, tok, path=session.checkpoint_path, meta=session.checkpoint_meta or {})
    return tok


def _script(monkeypatch, tok, text: str) -> None:
    """Every sampled token is the next character of ``text`` (whatever the random model's logits)."""
    ids = iter(tok.encode(text))
    monkeypatch.setattr(gen, "sample_next", lambda logits, **_: torch.tensor([[next(ids)]]))


def _send(qtbot, box, message: str) -> str:
    box.prompt.setText(message)
    qtbot.mouseClick(box.button, Qt.MouseButton.LeftButton)
    assert box.worker is not None
    assert not box.chat.toggle.isEnabled() and not box.chat.isEnabled()  # held while it writes
    worker = box.worker
    qtbot.waitUntil(lambda: box.worker is None, timeout=TIMEOUT)
    return worker.prompt  # the template is rendered in the worker thread


def test_chat_is_off_and_says_why_for_a_model_without_a_template(qtbot, tiny_window):
    box = _box(tiny_window)
    assert tiny_window.session.tokenizer.chat_template is None
    assert not box.chat.toggle.isEnabled() and not box.chat.toggle.isChecked()
    assert box.chat.toggle.toolTip() == NO_TEMPLATE and "no chat template" in NO_TEMPLATE
    assert box.chat.isHidden()  # no system prompt or conversation buttons either


@pytest.mark.usefixtures("shipped_starter")
def test_the_starter_model_cannot_chat(qtbot, tiny_window):
    assert tiny_window.session.open_starter()
    box = _box(tiny_window)
    assert not box.chat.toggle.isEnabled() and box.chat.toggle.toolTip() == NO_TEMPLATE


def test_a_conversation_of_two_turns_without_end_tokens(qtbot, tiny_window, monkeypatch):
    win, s = tiny_window, tiny_window.session
    box = _box(win)
    tok = _with_template(s)
    assert box.chat.toggle.isEnabled() and box.chat.toggle.toolTip() == WITH_TEMPLATE
    box.chat.toggle.setChecked(True)
    assert not box.chat.isHidden() and box.button.text() == "Send"
    box.chat.system.setText("hhh")
    _script(monkeypatch, tok, "ab=cd=")

    read = _send(qtbot, box, "abc")
    assert read == "hhh\nabc\nj"  # the system prompt and the message, in the template
    assert box.output.toPlainText() == "You: abc\nModel: ab"  # the end token "=" is not shown
    assert box.conversation.turns == [("user", "abc"), ("assistant", "ab")]
    assert box.prompt.text() == "" and box.button.text() == "Send"
    assert box.chat.toggle.isEnabled() and box.chat.isEnabled()

    read = _send(qtbot, box, "ee")
    assert read == "hhh\nabc\nab\nee\nj"  # the earlier turns come first
    assert box.output.toPlainText() == "You: abc\nModel: ab\n\nYou: ee\nModel: cd"
    assert "=" not in box.output.toPlainText()

    attention = win.tabs["attention"]
    qtbot.mouseClick(box.chat.attention_button, Qt.MouseButton.LeftButton)
    assert attention.prompt() == "hhh\nabc\nab\nee\njcd"  # what the model read, its reply included
    assert win.current_tab() is attention

    qtbot.mouseClick(box.chat.clear_button, Qt.MouseButton.LeftButton)
    assert box.conversation.turns == [] and box.output.toPlainText() == ""

    # a model without a template: chat goes off
    plain = copy.copy(tok)
    plain.chat_template = None
    s.show_model(s.model, plain, path=s.checkpoint_path, meta=s.checkpoint_meta or {})
    assert not box.chat.toggle.isEnabled() and not box.chat.toggle.isChecked()
    assert box.button.text() == "Generate" and box.chat.isHidden()


#: a template that loops without writing when the message is "ee" (as a model file's template may)
LOOPS_ON_EE = (
    "{% if messages[-1]['content'] == 'ee' %}{% for i in range(100000) %}{% for j in range(100000) %}"
    "{% endfor %}{% endfor %}{% endif %}" + TEMPLATE
)


def test_a_template_that_runs_on_is_stopped_and_named_beside_send_keeping_the_conversation(
    qtbot, tiny_window, monkeypatch
):
    from PySide6.QtCore import QTimer

    from model.text import template_process

    monkeypatch.setattr(template_process, "TIME_LIMIT_S", 0.5)  # the default is a few seconds
    s = tiny_window.session
    box = _box(tiny_window)
    tok = copy.copy(s.tokenizer)
    tok.chat_template = ChatTemplate(LOOPS_ON_EE, source="chat template in loops.gguf")
    tok.stop_ids = frozenset(tok.encode("="))
    s.show_model(s.model, tok, path=s.checkpoint_path, meta=s.checkpoint_meta or {})
    box.chat.toggle.setChecked(True)
    _script(monkeypatch, tok, "ab=cd=")
    assert _send(qtbot, box, "abc") == "abc\nj"
    before = box.output.toPlainText()

    box.prompt.setText("ee")
    qtbot.mouseClick(box.button, Qt.MouseButton.LeftButton)  # returns at once: it renders in the worker
    assert box.worker is not None and box.button.text() == "Stop"
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(20)
    qtbot.waitUntil(lambda: box.worker is None, timeout=TIMEOUT)
    timer.stop()
    assert len(ticks) >= 5  # the window went on handling events while the template ran
    error = box.send_error.text()
    assert box.send_error.isVisible() and "\n" not in error
    assert error.startswith("Cannot send: chat template in loops.gguf: ") and "time limit of 0.5 s" in error
    assert box.conversation.turns == [("user", "abc"), ("assistant", "ab")]  # kept, as it was
    assert box.output.toPlainText() == before and box.prompt.text() == "ee"
    assert box.button.text() == "Send" and box.chat.toggle.isEnabled()
    # the next message is answered, after the earlier turns, and the error goes
    assert _send(qtbot, box, "dd") == "abc\nab\ndd\nj"
    assert box.conversation.turns[2:] == [("user", "dd"), ("assistant", "cd")]
    assert not box.send_error.isVisible()
