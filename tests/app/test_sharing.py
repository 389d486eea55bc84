"""Work that crawls while the Train tab's run holds the CPU says so where it happens, with its pace."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.core.pace import SHARING, eta_seconds, format_eta, progress_line, sharing_note

TIMEOUT = 60_000


@pytest.fixture
def tiny_window_tabs():
    return ["train", "labs"]


def test_the_pace_arithmetic():
    assert format_eta(None) == "–" and format_eta(float("inf")) == "–"
    assert format_eta(61.4) == "1:01" and format_eta(3725) == "1:02:05"
    assert eta_seconds(0, 10, 5.0) is None  # no pace yet
    assert eta_seconds(49, 300, 92.0) == pytest.approx(251 * 92.0 / 49)
    assert eta_seconds(10, 10, 3.0) == 0.0
    cpu = SimpleNamespace(device=SimpleNamespace(type="cpu"), state="running")
    assert sharing_note(cpu) == SHARING
    assert sharing_note(SimpleNamespace(device=SimpleNamespace(type="cpu"), state="paused")) == ""
    assert sharing_note(SimpleNamespace(device=SimpleNamespace(type="cuda"), state="running")) == ""
    assert sharing_note(SimpleNamespace(device=SimpleNamespace(type="cpu"), state="idle")) == ""
    line = progress_line("step 49 / 300", 49, 300, 92.0, cpu)
    assert line.startswith("step 49 / 300 · ETA 7:51 · sharing the CPU")
    assert "sharing" not in progress_line("step 1 / 2", 1, 2, 1.0, None)


def _train_long(qtbot, win, tiny_settings):
    s = win.session
    win.train_settings_panel.set_settings(tiny_settings.replace(steps=1_000_000))
    running = lambda st: st == "running"  # noqa: E731
    with qtbot.waitSignal(s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=running):
        win.tabs["train"].start_button.click()


def _stop(qtbot, win):
    with qtbot.waitSignal(win.session.trainingFinished, timeout=TIMEOUT):
        win.tabs["train"].stop_button.click()


def test_generation_beside_training_says_it_shares_the_cpu_with_its_pace(qtbot, tiny_window, tiny_settings):
    box = tiny_window.tabs["train"].generate_box
    _train_long(qtbot, tiny_window, tiny_settings)
    box.prompt.setText("ab")
    box.max_tokens.setValue(8)
    lines = []
    on_token = box._on_token

    def seen(piece):  # the status line as each token is drawn
        on_token(piece)
        lines.append(box.status.text())

    box._on_token = seen
    box.generate(seed=0)
    qtbot.waitUntil(lambda: box.worker is None, timeout=TIMEOUT)
    assert lines and any("tokens/s" in t and "ETA" in t and "sharing the CPU" in t for t in lines)
    assert "tokens/s" in box.status.text() and "done" in box.status.text()
    _stop(qtbot, tiny_window)
    box.generate(seed=0)  # alone: nothing to share
    qtbot.waitUntil(lambda: box.worker is None, timeout=TIMEOUT)
    assert "sharing" not in box.status.text() and "tokens/s" in box.status.text()


def test_a_lab_page_computing_beside_training_says_why_it_is_blank(qtbot, tiny_window, tiny_settings):
    labs = tiny_window.tab("labs")
    _train_long(qtbot, tiny_window, tiny_settings)
    page = labs.show_page("softmax-theory")
    page.ensure_built()
    page.results.clear()
    page.refresh()
    assert "sharing the CPU with the training run" in page.message.text()
    qtbot.waitUntil(lambda: page.idle and "curves" in page.results, timeout=TIMEOUT)
    _stop(qtbot, tiny_window)
