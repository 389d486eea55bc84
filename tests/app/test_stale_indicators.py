"""Indicators that say what is shown now, never what was shown before: the uniform guess of the model
drawn, the scrubber's step, a prompt that could not run, a history that failed to load, the data the
model reads, one parameter count, the head's scores while following training, no ETA while paused."""

from __future__ import annotations

import itertools
import math

import pytest

TIMEOUT = 60_000


@pytest.fixture
def tiny_window_tabs():
    return ["train", "history", "attention"]


def _train(qtbot, win):
    with qtbot.waitSignal(win.session.trainingFinished, timeout=TIMEOUT) as done:
        win.tabs["train"].start_button.click()
    assert done.args[0] == "done", done.args


def _uniform_line(tab) -> float:
    line, value = tab.plots._hlines["uniform"]
    assert line.isVisible()
    return value


def test_the_uniform_guess_is_that_of_the_model_drawn(qtbot, tiny_window):
    win, s, tab = tiny_window, tiny_window.session, tiny_window.tabs["train"]
    _train(qtbot, win)
    before = s.model.config.core.vocab_size
    assert _uniform_line(tab) == pytest.approx(math.log(before))
    assert win.data_panel.choose("builtin:primer")  # another vocabulary: Start trains a fresh model
    _train(qtbot, win)
    after = s.model.config.core.vocab_size
    assert after != before
    assert _uniform_line(tab) == pytest.approx(math.log(after))


def test_the_data_panel_says_when_the_model_shown_cannot_read_the_data(qtbot, tiny_window):
    win = tiny_window
    _train(qtbot, win)
    assert "reads another vocabulary" not in win.data_panel.current_label.text()
    assert win.data_panel.choose("builtin:primer")  # the trained model stays until Start
    assert "reads another vocabulary" in win.data_panel.current_label.text()
    _train(qtbot, win)
    assert "reads another vocabulary" not in win.data_panel.current_label.text()


def test_the_scrubber_names_the_step_the_grid_shows(qtbot, tiny_window, tiny_settings):
    win, s, tab = tiny_window, tiny_window.session, tiny_window.tabs["train"]
    _train(qtbot, win)
    tab.show_frame(0)  # back to step 0
    assert tab.live.scrub_label.text().startswith("step 0")
    win.train_settings_panel.set_settings(tiny_settings.replace(steps=12))
    _train(qtbot, win)  # Continue: newer frames arrive while the grid still shows step 0
    assert tab.live._shown_step == 0
    label = tab.live.scrub_label.text()
    assert label.startswith("step 0") and "newest: 12" in label and "live" not in label
    # the end of the scrubber is the newest frame even when the thinned history did not keep it
    s.frames.stride = 4
    s.frames.offer(s.latest_frame)
    tab.live.live_button.setChecked(True)
    tab.show_frame(-1)
    assert tab.live.scrub_label.text().startswith(
        f"step {s.latest_frame.step} "
    )  # "live" only while training
    assert tab.live._shown_step == s.latest_frame.step


def test_a_probe_prompt_that_cannot_be_encoded_says_the_grid_keeps_the_old_one(qtbot, tiny_window):
    tab, s = tiny_window.tabs["train"], tiny_window.session
    kept = s.probe_prompt
    tab.live.probe_edit.setPlainText("€€€")
    tab.live._apply_probe_prompt()
    error = tab.live.probe_error
    assert error.isVisibleTo(tab)
    assert "still traces the previous prompt" in error.text() and kept[:10] in error.text()


def test_an_attention_prompt_that_cannot_run_greys_the_old_one_and_says_so(qtbot, attention_tab):
    tab = attention_tab
    assert not tab.stale
    with qtbot.waitSignal(tab.failed, timeout=TIMEOUT):
        tab.set_prompt("€€ cannot be read")
    assert tab.stale and "Showing the previous prompt" in tab.job_bar.stale_note
    assert "The head looks back." in tab.job_bar.stale_note
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.set_prompt("The head looks on.")
    assert not tab.stale and not tab.job_bar.isVisibleTo(tab)


def test_a_history_step_that_fails_is_not_left_loading_and_its_error_goes_with_it(
    qtbot, tiny_window, tmp_path, write_hf_family
):
    tab = tiny_window.tab("history")
    root = tmp_path / "ckpts"
    write_hf_family(root / "step10", "gpt_neox", seed=1, num_key_value_heads=None)
    write_hf_family(root / "step30", "gpt_neox", seed=2, num_key_value_heads=None)
    (root / "step10" / "model.safetensors").write_bytes(b"not safetensors at all")
    with qtbot.waitSignal(tab.failed, timeout=TIMEOUT):
        assert tab.open_history(str(root))
    placeholder = tab.mosaic.placeholder.textItem.toPlainText()
    assert "loading" not in placeholder and "could not be opened" in placeholder
    assert "step10" in tab.status_label.text() or "10" in tab.status_label.text()

    good = tmp_path / "good"
    write_hf_family(good / "step5", "gpt_neox", seed=3, num_key_value_heads=None)
    with qtbot.waitSignal(tab.stepShown, timeout=TIMEOUT):
        assert tab.open_history(str(good))
    assert "color:#c02020" not in tab.status_label.text()  # the old error went with its history


def test_the_status_bar_shows_one_parameter_count(qtbot, tiny_window, tmp_path):
    win, s = tiny_window, tiny_window.session
    path = tmp_path / "saved"
    s.save_checkpoint(path)
    s.load_checkpoint(path)
    assert win.origin_label.text()  # the model has a name and a kind now
    assert "parameters" not in win.origin_label.text().lower()
    assert win.params_label.text() == f"Parameters: {s.model.num_params():,}"
    assert "saved" in win.windowTitle()


def test_no_eta_while_paused(qtbot, tiny_window, tiny_settings):
    win, s, tab = tiny_window, tiny_window.session, tiny_window.tabs["train"]
    win.train_settings_panel.set_settings(tiny_settings.replace(steps=1_000_000))
    running = lambda st: st == "running"  # noqa: E731
    with qtbot.waitSignal(s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=running):
        tab.start_button.click()
    qtbot.waitUntil(lambda: len(s.history) >= 3 and "ETA" in tab.progress.format(), timeout=TIMEOUT)
    paused = lambda st: st == "paused"  # noqa: E731
    with qtbot.waitSignal(s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=paused):
        tab.pause_button.click()
    assert "paused" in tab.progress.format() and "ETA" not in tab.progress.format()
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        tab.stop_button.click()


def test_the_head_scores_arrive_while_following_training(qtbot, tiny_window, tiny_settings):
    """Following training re-runs the prompt only once the last run's follow-ups are in, so the Head
    page's raw and scaled scores are never superseded before they arrive."""
    win, s = tiny_window, tiny_window.session
    attention = win.tab("attention")
    win.show_tab("attention")
    attention.show_page("head")
    win.train_settings_panel.set_settings(tiny_settings.replace(steps=1_000_000, probe_every=1))
    attention.FOLLOW_INTERVAL_S = 0.0  # follow every frame: each run used to cancel the last one's scores
    seen: list[str] = []
    attention.inspected.connect(lambda *_: seen.append("run"))
    attention.headDetailReady.connect(lambda *_: seen.append("scores"))
    running = lambda st: st == "running"  # noqa: E731
    with qtbot.waitSignal(s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=running):
        win.tabs["train"].start_button.click()
    qtbot.waitUntil(lambda: seen.count("run") >= 8, timeout=TIMEOUT)
    assert s.is_training
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        win.tabs["train"].stop_button.click()
    runs = seen[: len(seen) - seen[::-1].index("run")]  # up to the last run
    # every run but the last is followed by its scores before the next run
    assert all(b == "scores" for a, b in itertools.pairwise(runs) if a == "run"), seen
