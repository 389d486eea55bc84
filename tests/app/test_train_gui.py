"""Training through the window: buttons, live attention, checkpoints via the menu, closing mid-run."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QMessageBox

from app.dialogs.checkpoint_dialog import CheckpointDialog
from model.interp.frame import AttentionFrame
from model.interp.probes import FrameHistory

TIMEOUT = 60_000  # ms; generous because the CI machine's two cores are shared


@pytest.fixture
def tiny_window_tabs():
    """Windows here build the Train tab only: the tests drive it, the docks and the menus."""
    return ["train"]


def _train_tab(win):
    return win.tabs["train"]


def _finish(qtbot, win):
    """Wait for the running worker to end (trainingFinished), return (reason, message)."""
    with qtbot.waitSignal(win.session.trainingFinished, timeout=TIMEOUT) as blocker:
        pass
    return blocker.args


def test_start_trains_to_target_with_curves_and_live_heads(qtbot, tiny_window):
    win, s = tiny_window, tiny_window.session
    tab = _train_tab(win)
    assert tab.start_button.isEnabled() and tab.start_button.text() == "Start"
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        qtbot.mouseClick(tab.start_button, Qt.MouseButton.LeftButton)
    assert done.args[0] == "done"
    assert s.state == "idle" and s.step == 6
    assert [e["step"] for e in s.history] == [1, 2, 3, 4, 5, 6]
    assert tab.plots.n_points == 6
    # validation measured at eval_every=3 and the last step
    assert [e["step"] for e in s.history if e["val_loss"] is not None] == [3, 6]
    # live attention: frames at the start and every probe_every=2 steps, drawn in the grid
    assert s.latest_frame is not None and s.latest_frame.step == 6
    L, H = s.model.config.core.n_layers, s.model.config.attention.n_heads
    assert tab.live.head_grid.shape == (L, H)
    w = tab.live.head_grid.weights
    T = len(s.latest_frame.labels)
    assert w.shape == (L, H, T, T)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-2)  # softmax rows
    assert np.all(np.triu(w[0, 0], 1) == 0)  # causal: nothing above the diagonal
    assert len(s.frames) >= 2 and s.frames.steps() == sorted(s.frames.steps())
    assert tab.start_button.text() == "Continue"
    assert s.dirty  # trained steps not saved yet

    # the scrubber drags back through the kept frames, and Live returns to the newest
    tab.show_frame(0)
    first = s.frames[0]
    assert first.step == 0 and not tab.live.live_button.isChecked()
    np.testing.assert_array_equal(tab.live.head_grid.weights, first.weights.astype(np.float32))
    assert tab.plots.marker.isVisible() and tab.plots.marker.value() == 0
    tab.live.live_button.setChecked(True)
    np.testing.assert_array_equal(tab.live.head_grid.weights, s.latest_frame.weights.astype(np.float32))
    assert not tab.plots.marker.isVisible()


def test_pause_resume_stop_through_the_buttons(qtbot, tiny_window, tiny_settings):
    win, s = tiny_window, tiny_window.session
    tab = _train_tab(win)
    win.train_settings_panel.set_settings(tiny_settings.replace(steps=1_000_000))
    with qtbot.waitSignal(
        s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=lambda st: st == "running"
    ):
        tab.start_button.click()
    assert not tab.start_button.isEnabled() and tab.pause_button.isEnabled() and tab.stop_button.isEnabled()
    assert not win.config_panel.isEnabled()  # no editing the config under a running model

    with qtbot.waitSignal(s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=lambda st: st == "paused"):
        tab.pause_button.click()
    assert tab.pause_button.text() == "Resume"
    paused_at = s.trainer.step
    # a new probe prompt wakes the paused worker: it traces the prompt but takes no step
    with qtbot.waitSignal(s.traceUpdated, timeout=TIMEOUT, check_params_cb=lambda f: f.prompt == "abab"):
        s.probe.set("abab")
    assert s.trainer.step == paused_at and s.state == "paused"

    with qtbot.waitSignal(
        s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=lambda st: st == "running"
    ):
        tab.pause_button.click()
    qtbot.waitUntil(lambda: s.trainer.step > paused_at + 2, timeout=TIMEOUT)

    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        tab.stop_button.click()
    assert done.args[0] == "stopped"
    assert s.state == "idle" and s.run.worker is None
    assert tab.start_button.isEnabled() and not tab.pause_button.isEnabled()
    assert s.step == s.history[-1]["step"] > paused_at


def test_save_then_open_checkpoint_via_menu_restores_model_and_curves(
    qtbot, tiny_window, tmp_path, monkeypatch
):
    import torch

    win, s = tiny_window, tiny_window.session
    tab = _train_tab(win)
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        tab.start_button.click()
    target = tmp_path / "run1"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(target), ""))
    with qtbot.waitSignal(s.checkpointSaved, timeout=TIMEOUT):
        win.menu.save_as_action.trigger()
    assert (target / "config.json").is_file() and (target / "model.safetensors").is_file()
    assert not s.dirty and s.checkpoint_path == str(target)
    saved_weight = s.model.tok_emb.weight.detach().clone()
    saved_history = list(s.history)

    win.menu.new_action.trigger()  # forget it: an untrained model, empty curves
    assert s.step == 0 and tab.plots.n_points == 0
    assert not torch.equal(s.model.tok_emb.weight, saved_weight)

    monkeypatch.setattr(CheckpointDialog, "get_choice", lambda *a, **k: (str(target), None))
    errors = []
    monkeypatch.setattr(QMessageBox, "critical", lambda *a, **k: errors.append(a))
    with qtbot.waitSignal(s.historyReset, timeout=TIMEOUT):
        win.menu.open_action.trigger()
    assert not errors
    assert s.step == 6 and s.history == saved_history and tab.plots.n_points == 6
    assert torch.equal(s.model.tok_emb.weight.detach(), saved_weight)
    assert win.config_panel.config().to_dict() == s.model.config.to_dict()

    # continuing works: the loaded run trains on from step 6
    assert tab.start_button.text() == "Continue"
    win.train_settings_panel.set_settings(s.train_settings.replace(steps=8))
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        tab.start_button.click()
    assert done.args[0] == "done"
    assert [e["step"] for e in s.history] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_closing_mid_training_stops_the_worker_and_keeps_the_checkpoint(
    qtbot, tiny_window, tmp_path, tiny_settings
):
    from model.io.checkpoint.saved import load_checkpoint

    win, s = tiny_window, tiny_window.session
    win.train_settings_panel.set_settings(tiny_settings.replace(steps=1_000_000))
    with qtbot.waitSignal(
        s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=lambda st: st == "running"
    ):
        _train_tab(win).start_button.click()
    qtbot.waitUntil(lambda: s.step >= 3, timeout=TIMEOUT)
    path = tmp_path / "mid"
    with qtbot.waitSignal(s.checkpointSaved, timeout=TIMEOUT):  # "Save now" while training
        s.save_checkpoint(path)
    worker = s.run.worker
    assert worker.alive
    win.close()  # closeEvent stops the worker and waits for it
    assert not worker.alive
    assert s.state == "idle"
    ckpt = load_checkpoint(path)
    assert ckpt.train_state is not None and ckpt.train_state["step"] >= 3


def test_corrupt_checkpoint_shows_an_error_and_the_app_keeps_working(
    qtbot, tiny_window, tmp_path, monkeypatch
):
    win, s = tiny_window, tiny_window.session
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text("{ not json")
    (bad / "model.safetensors").write_bytes(b"\x00" * 10)
    (bad / "tokenizer.json").write_text("{}")
    shown = []
    monkeypatch.setattr(QMessageBox, "critical", lambda parent, title, text, *a: shown.append((title, text)))
    monkeypatch.setattr(CheckpointDialog, "get_choice", lambda *a, **k: (str(bad), None))
    model_before = s.model
    win.menu.open_action.trigger()
    assert len(shown) == 1 and "checkpoint" in shown[0][0].lower() and str(bad) in shown[0][1]
    assert s.model is model_before  # nothing changed
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        _train_tab(win).start_button.click()
    assert done.args[0] == "done" and s.step == 6


def test_generation_box_streams_tokens(qtbot, tiny_window):
    tab = _train_tab(tiny_window)
    prompt = "abc="
    tab.generate_box.prompt.setText(prompt)
    tab.generate_box.max_tokens.setValue(12)
    tokens = []
    tab.generate_box.worker = None
    tab.generate_box.generate()
    tab.generate_box.worker.token.connect(tokens.append)
    qtbot.waitUntil(lambda: tab.generate_box.worker is None, timeout=TIMEOUT)
    out = tab.generate_box.output.toPlainText()
    assert out.startswith(prompt) and len(out) > len(prompt)
    assert tab.generate_box.button.text() == "Generate"


def test_generation_rejects_unknown_characters_without_crashing(qtbot, tiny_window):
    tab = _train_tab(tiny_window)
    tab.generate_box.prompt.setText("€€€")  # not in the copy task's alphabet
    tab.generate_box.generate()
    assert tab.generate_box.worker is None
    assert "Cannot generate" in tab.generate_box.output.toPlainText()


def test_bad_probe_prompt_is_reported_and_training_still_probes(qtbot, tiny_window):
    tab = _train_tab(tiny_window)
    tab.live.probe_edit.setPlainText("€ not in the vocabulary")
    tab.live._apply_probe_prompt()
    assert tab.live.probe_error.isVisibleTo(tab) and "€" in tab.live.probe_error.text()
    assert tiny_window.session.probe_prompt != "€ not in the vocabulary"


def _frame(step: int, nbytes: int) -> AttentionFrame:
    return AttentionFrame(step=step, prompt="", labels=[], weights=np.zeros(nbytes // 2, dtype=np.float16))


@pytest.mark.parametrize("n", [10, 1000])
def test_frame_history_stays_bounded_and_spans_the_run(n):
    hist = FrameHistory(max_bytes=20 * 1000)
    for step in range(n):
        hist.offer(_frame(step, 1000))
    assert hist.nbytes <= 20 * 1000 and len(hist) <= 20
    steps = hist.steps()
    assert steps[0] == 0 and steps == sorted(steps)
    assert n - 1 - steps[-1] < hist.stride  # the newest kept frame is recent
    if n > 20:
        gaps = np.diff(steps)
        assert gaps.max() <= 2 * gaps.min() + hist.stride  # roughly even spacing


def test_a_diverging_run_reports_the_error_and_the_app_keeps_working(qtbot, tiny_window, monkeypatch):
    from model.train.trainer import Trainer, TrainingDiverged

    win, s = tiny_window, tiny_window.session
    real_step = Trainer.train_step

    def step_then_diverge(self):
        if self.step == 3:
            raise TrainingDiverged(
                "training diverged at step 4: the loss became nan", step=4, value=float("nan")
            )
        return real_step(self)

    monkeypatch.setattr(Trainer, "train_step", step_then_diverge)
    shown = []
    monkeypatch.setattr(QMessageBox, "critical", lambda parent, title, text, *a: shown.append(text))
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        _train_tab(win).start_button.click()
    assert done.args[0] == "error" and "diverged" in done.args[1]
    assert shown and "diverged" in shown[0]
    assert s.state == "idle" and s.step == 3 and len(s.history) == 3
    assert "diverged" in _train_tab(win).status_label.text()
    monkeypatch.setattr(Trainer, "train_step", real_step)
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:  # Continue goes on from step 3
        _train_tab(win).start_button.click()
    assert done.args[0] == "done" and s.step == 6


def test_device_is_switchable_only_while_idle(qtbot, tiny_window, tiny_settings):
    import torch

    win, s = tiny_window, tiny_window.session
    combo = win.train_settings_panel.device_combo
    assert combo.isEnabled()
    if not torch.cuda.is_available():
        combo.setCurrentIndex(combo.findData("cuda"))  # listed but not available here
        assert "CUDA is not available" in win.train_settings_panel.error_label.text()
        assert combo.currentData() == "cpu" and str(s.device) == "cpu"
    win.train_settings_panel.set_settings(tiny_settings.replace(steps=1_000_000))
    with qtbot.waitSignal(
        s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=lambda st: st == "running"
    ):
        _train_tab(win).start_button.click()
    assert not combo.isEnabled()
    with pytest.raises(ValueError, match="while no training runs"):
        s.set_device("cpu")
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        s.stop_training()
    assert combo.isEnabled()


def test_the_history_keeps_causal_frames_packed_and_gives_them_back_exactly():
    rng = np.random.default_rng(0)
    T = 9
    causal = np.tril(rng.random((2, 3, T, T))).astype(np.float16)
    open_mask = rng.random((2, 3, T, T)).astype(np.float16)  # a mask that is not causal stays whole
    hist = FrameHistory()
    for step, w in enumerate((causal, open_mask)):
        hist.offer(AttentionFrame(step=step, prompt="p", labels=list("abcdefghi"), weights=w))
    assert hist.nbytes == causal.nbytes * (T + 1) // (2 * T) + open_mask.nbytes
    for i, w in enumerate((causal, open_mask)):
        got = hist[i]
        assert got.step == i and got.labels == list("abcdefghi") and got.weights.dtype == np.float16
        np.testing.assert_array_equal(got.weights, w)


def test_continuing_a_finished_run_names_one_target_in_the_status_bar_and_the_progress_bar(
    qtbot, tiny_window, tiny_settings
):
    """A finished run of 6 steps continued with the panel's 6 steps trains to step 12
    (model.train.settings.continued): the status bar and the progress bar both say "/ 12"."""
    win, s = tiny_window, tiny_window.session
    tab = _train_tab(win)
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        tab.start_button.click()
    assert s.step == tiny_settings.steps and tab.start_button.text() == "Continue"
    with qtbot.waitSignal(
        s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=lambda st: st == "running"
    ):
        tab.start_button.click()
    with qtbot.waitSignal(s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=lambda st: st == "paused"):
        tab.pause_button.click()
    target = 2 * tiny_settings.steps
    assert s.target_steps == s.run.worker.target == target
    assert f"/ {target}" in win.step_label.text() and f"/ {target}" in tab.progress.format()
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        tab.pause_button.click()
    assert s.step == target


def test_an_idle_probe_traced_before_a_run_is_not_shown_after_it(qtbot, tiny_window, monkeypatch):
    """The idle model's probe traced at one step and delivered once a run on the same model had
    trained it further must not replace the run's newest frame (a race CI met once: a step-0 frame
    shown after the run's step-6 one)."""
    import app.session.probe as probe_module

    win, s = tiny_window, tiny_window.session
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        _train_tab(win).start_button.click()
    assert s.latest_frame.step == 6
    real = probe_module.probe_frame

    def traced_then_trained_past(model, tokenizer, prompt, step):
        frame = real(model, tokenizer, prompt, step)
        s.trainer.step = step + 1  # a run went on meanwhile
        return frame

    monkeypatch.setattr(probe_module, "probe_frame", traced_then_trained_past)
    s.probe.refresh()
    probe = s.jobs.get("session.probe")
    qtbot.waitUntil(lambda: not probe.active, timeout=TIMEOUT)
    assert s.latest_frame.step == 6 and s.frames.steps() == [0, 2, 4, 6]
