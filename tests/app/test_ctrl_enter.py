"""Ctrl+Enter submits the box it is typed in: Generate in the Generate box, Send in chat, Apply in the
probe prompt, each in a shown window with the key sent to the focused box; Help → Keyboard shortcuts
names each once, with the box it works in."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.shell.help import shortcut_rows
from tests.app.test_chat_gui import _script, _with_template

TIMEOUT = 30_000


@pytest.fixture
def tiny_window_tabs():
    return ["train"]


def _ctrl_enter(qtbot, win, box) -> None:
    """Focus ``box`` in the shown, active window and press Ctrl+Return there."""
    win.activateWindow()
    box.setFocus()
    qtbot.waitUntil(box.hasFocus, timeout=TIMEOUT)
    QTest.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)


def test_ctrl_enter_generates_from_the_prompt(qtbot, tiny_window):
    box = tiny_window.tabs["train"].generate_box
    box.prompt.setText("abc")
    _ctrl_enter(qtbot, tiny_window, box.prompt)
    qtbot.waitUntil(lambda: box.worker is None and bool(box.output.toPlainText()), timeout=TIMEOUT)
    assert box.prompt.text() == "abc"  # a submit, not a newline typed into the prompt


def test_ctrl_enter_sends_the_chat_message(qtbot, tiny_window, monkeypatch):
    s = tiny_window.session
    box = tiny_window.tabs["train"].generate_box
    tok = _with_template(s)
    box.chat.toggle.setChecked(True)
    _script(monkeypatch, tok, "ab=")
    box.prompt.setText("abc")
    _ctrl_enter(qtbot, tiny_window, box.prompt)
    qtbot.waitUntil(lambda: box.worker is None and len(box.conversation.turns) == 2, timeout=TIMEOUT)
    assert box.conversation.turns == [("user", "abc"), ("assistant", "ab")]


def test_ctrl_enter_applies_the_probe_prompt(qtbot, tiny_window):
    s = tiny_window.session
    live = tiny_window.tabs["train"].live
    assert s.probe_prompt != "abab"
    live.probe_edit.setPlainText("abab")
    with qtbot.waitSignal(s.probePromptChanged, timeout=TIMEOUT, check_params_cb=lambda t: t == "abab"):
        _ctrl_enter(qtbot, tiny_window, live.probe_edit)
    assert live.probe_edit.toPlainText() == "abab"


def test_help_names_each_ctrl_enter_once_with_its_own_box(qtbot, tiny_window):
    rows = [(what, where) for keys, what, where in shortcut_rows(tiny_window) if "Ctrl+Return" in keys]
    assert len(rows) == len(set(rows)) == len({where for _, where in rows}) == 2
    (gen_what, gen_where), (probe_what, probe_where) = sorted(rows, key=lambda r: "probe" in r[1])
    assert gen_what.startswith("Generate") and gen_where == "Train tab, in the Generate box's prompt"
    assert probe_what == "Apply the edited probe prompt" and probe_where == "Train tab, in the probe prompt"
