"""The Train tab says what Start will do before it is pressed, and every label about the model's steps
agrees with its numbers: a trained starter or a pretrained model is not "not trained yet", a fresh run
keeps a name, the Quit question counts only the steps since the last save, Save now's suggested name is
the step it saves, and Continue says (and lets the user choose) what the learning rate does."""

from __future__ import annotations

import itertools
import json

import pytest
from PySide6.QtWidgets import QFileDialog, QMessageBox

from model.train.settings import lr_at

TIMEOUT = 60_000


@pytest.fixture
def tiny_window_tabs():
    return ["train"]


def _train(qtbot, s, **changes):
    s.set_train_settings(s.train_settings.replace(**changes))
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        s.start_training()
    assert done.args[0] == "done", done.args
    return done


# ---- a model trained elsewhere is not "not trained yet" -------------------------------------------
@pytest.mark.usefixtures("shipped_starter")
def test_the_starter_says_how_far_it_was_trained_and_what_start_will_do(qtbot, tiny_window):
    win, s = tiny_window, tiny_window.session
    tab = win.tabs["train"]
    assert s.open_starter()
    from model.io.checkpoint.starter import STARTER_DIR

    trained = int(json.loads((STARTER_DIR / "meta.json").read_text())["step"])
    assert tab.progress.format() == f"step {trained:,}"
    assert win.step_label.text() == f"Step: {trained:,}"
    assert win.step_label.toolTip() == f"trained {trained:,} steps before it was opened"
    assert "not trained yet" not in tab.progress.format() and win.step_label.text() != "Step: 0"
    plan = tab.plan_label.text()
    assert plan.startswith("Start trains a new model from random weights")
    assert "the starter model itself is never trained on" in plan and "It replaces starter model" in plan
    assert f"on {s.source_spec}" in plan and tab.start_button.isEnabled()
    assert tab.start_button.toolTip().startswith(plan)

    _train(qtbot, s, steps=2, batch_size=2, seq_len=16, eval_every=2)
    # the window still names what it shows: a new run, in the shape of the starter model
    assert win.windowTitle().startswith("*new run")
    assert "new run" in win.origin_label.text() and "starter model" in win.origin_label.text()
    assert win.step_label.text() == "Step: 2" and tab.progress.format() == "step 2"


@pytest.mark.usefixtures("shipped_starter")
def test_every_label_of_an_opened_models_step_names_its_true_step_and_live_only_while_it_trains(
    qtbot, tiny_window
):
    """The starter opened by File → Open: the message, the status bar, the progress bar and the
    probe grid all say the step its files were saved at (meta.json's), and the grid says "live" only
    once a run trains it."""
    from model.io.checkpoint.starter import STARTER_DIR

    win, s = tiny_window, tiny_window.session
    tab = win.tabs["train"]
    trained = int(json.loads((STARTER_DIR / "meta.json").read_text())["step"])
    with qtbot.waitSignal(s.traceUpdated, timeout=TIMEOUT):
        assert win.files.open_checkpoint(str(STARTER_DIR))
    # (then the note of what the window's data became: the tiny window's task cannot be read by it)
    message = win.statusBar().currentMessage()
    assert message.split(" · ")[0] == f"Opened {STARTER_DIR} at step {trained:,}"
    assert win.step_label.text() == f"Step: {trained:,}" and tab.progress.format() == f"step {trained:,}"
    qtbot.waitUntil(lambda: s.latest_frame is not None and s.latest_frame.step == trained, timeout=TIMEOUT)
    title = tab.live.head_grid.title
    assert title.startswith(f"step {trained}:") and "live" not in title
    assert tab.live.scrub_label.text().startswith(f"step {trained} ")

    s.set_train_settings(s.train_settings.replace(steps=10**6, batch_size=2, seq_len=16))
    with qtbot.waitSignal(s.traceUpdated, timeout=TIMEOUT):  # the fresh run's first frame
        s.start_training()
    assert "(live)" in tab.live.head_grid.title and tab.live.scrub_label.text().startswith("live: ")
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        s.stop_training()
    assert "live" not in tab.live.head_grid.title and "live" not in tab.live.scrub_label.text()


def test_an_untrained_model_says_start_trains_it(qtbot, tiny_window):
    tab = tiny_window.tabs["train"]
    assert tab.progress.format() == "not trained yet"  # true here: nothing trained it
    assert tab.plan_label.text().startswith("Start trains the shown untrained model for 6 steps on task:copy")


@pytest.mark.slow
def test_a_pretrained_model_says_it_was_trained_elsewhere_and_names_the_field_to_change(
    qtbot, tiny_window, smollm2_path
):
    """SmolLM2 opened over a synthetic task: the data becomes a text its tokenizer reads, the size
    refusal names the sequence length ("auto", its 8,192-token context) in the window's words, its
    parameter count is the status bar's, and the refusal is a short line that leaves the plots room."""
    win, s = tiny_window, tiny_window.session
    tab = win.tabs["train"]
    win.resize(1280, 760)
    qtbot.waitUntil(lambda: tab.plots.height() > 0, timeout=TIMEOUT)
    plots_before = tab.plots.height()
    win.train_settings_panel.set_settings(s.train_settings.replace(seq_len=None, batch_size=32))
    s.load_checkpoint(smollm2_path)
    assert s.model.config.core.context_length == 8192
    assert s.source_spec == "builtin:primer" and s.source.tokenizer == s.tokenizer  # Start fine-tunes it
    assert tab.progress.format() == "pretrained elsewhere: its files keep no training history"
    assert win.step_label.text() == "Step: – (pretrained)"
    # the probe grid names its frame as the status bar does, not "step 0"
    qtbot.waitUntil(lambda: s.latest_frame is not None and bool(tab.live.head_grid.title), timeout=TIMEOUT)
    assert tab.live.head_grid.title.startswith("pretrained:") and "step 0" not in tab.live.scrub_label.text()
    plan = tab.plan_label.text()
    assert plan.startswith("Start is disabled: Training ") and not tab.start_button.isEnabled()
    assert "Sequence length (auto = the model's context, 8,192) to" in plan and "Training panel" in plan
    assert "--" not in plan and "ATTENTION_LAB" not in plan  # the window's words, not the command line's
    n = s.model.num_params()
    assert f"Training {n:,} parameters" in plan and win.params_label.text() == f"Parameters: {n:,}"
    # one short line under the controls, not a block that squashes the loss plot
    lines = tab.plan_label.height() / tab.plan_label.fontMetrics().lineSpacing()
    assert lines <= 3.2 and tab.status_label.text() == ""
    qtbot.waitUntil(
        lambda: tab.plots.height() >= plots_before - 3 * tab.plan_label.fontMetrics().lineSpacing()
    )
    # the number it names works: at that sequence length Start may run, and it fine-tunes the weights
    to = int(plan.split("8,192) to ")[1].split(" ")[0].replace(",", ""))
    win.train_settings_panel.widgets["seq_len"].setValue(to)
    qtbot.waitUntil(lambda: tab.start_button.isEnabled(), timeout=5000)
    assert tab.plan_label.text().startswith("Start fine-tunes the weights of SmolLM2-135M-Instruct")


# ---- unsaved steps and Save now ----------------------------------------------------------------------
@pytest.mark.slow
def test_quit_counts_the_steps_since_the_last_save(qtbot, tiny_window, tmp_path, monkeypatch):
    win, s = tiny_window, tiny_window.session
    s.set_train_settings(s.train_settings.replace(steps=400, eval_every=100))
    saved: list[int] = []
    state = tmp_path / "c" / "train_state.json"
    s.checkpointSaved.connect(lambda _path: saved.append(json.loads(state.read_text())["step"]))
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        s.start_training()
        qtbot.waitUntil(lambda: s.step >= 5, timeout=TIMEOUT)
        s.save_checkpoint(tmp_path / "c")  # between two steps, while the run goes on
        qtbot.waitUntil(lambda: bool(saved), timeout=TIMEOUT)
    at = saved[0]
    assert 5 <= at < 400 and s.step == 400 and s.saved_step == at and s.dirty
    asked: list[str] = []
    cancel = QMessageBox.StandardButton.Cancel
    monkeypatch.setattr(QMessageBox, "question", lambda _w, _t, text, *a, **k: asked.append(text) or cancel)
    win.confirm_close = True
    assert not win.files.maybe_save("Quit")
    said = f"The model has trained {400 - at:,} steps since it was saved at step {at:,}. Save it first?"
    assert asked == [said]
    win.confirm_close = False


@pytest.mark.slow
def test_save_now_names_the_step_it_saves(qtbot, tiny_window, tmp_path, monkeypatch):
    win, s = tiny_window, tiny_window.session
    tab = win.tabs["train"]
    s.set_train_settings(s.train_settings.replace(steps=300, eval_every=100))
    suggested: list[str] = []

    def ask(_parent, _title, start, *_a, **_k):
        suggested.append(start)
        return str(tmp_path / "saved"), ""

    monkeypatch.setattr(QFileDialog, "getSaveFileName", ask)
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        s.start_training()
        qtbot.waitUntil(lambda: s.state == "running" and s.step >= 3, timeout=TIMEOUT)
        with qtbot.waitSignal(s.checkpointSaved, timeout=TIMEOUT):
            tab.save_button.click()  # no path yet: the window asks where, the run held meanwhile
    step_named = int(suggested[0].rsplit("run-step", 1)[1])
    state = json.loads((tmp_path / "saved" / "train_state.json").read_text())
    assert state["step"] == step_named  # the name says the step the checkpoint holds
    assert s.step == 300  # and the run went on after it
    # the status bar names the saved folder and what it is, never an empty "()"
    assert win.origin_label.text().startswith("Model: saved (Attention Lab")
    assert "()" not in win.origin_label.text()


# ---- Continue and the learning rate ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("choice", ["continue", "stretch", "restart"])
def test_continue_says_what_the_learning_rate_does_and_does_it(qtbot, tiny_window, choice):
    win, s = tiny_window, tiny_window.session
    tab, panel = win.tabs["train"], win.train_settings_panel
    panel.set_settings(s.train_settings.replace(steps=20, warmup=4, eval_every=10))
    _train(qtbot, s)
    panel.set_settings(panel.settings().replace(steps=8, on_continue=choice))
    assert panel.widgets["on_continue"].currentText() == choice
    # 20 trained of a budget of 8: Continue trains 8 more, to 28 (the schedule made for 20)
    plan = tab.plan_label.text()
    assert plan.startswith("Continue trains this run from step 20 to 28")
    before = s.history[-1]["lr"]
    _train(qtbot, s)
    first = s.history[20]["lr"]
    floor = s.train_settings.floor_lr
    if choice == "continue":  # the schedule ended at its floor: the rate stays there
        assert "stays at its final" in plan and first == pytest.approx(floor)
        assert all(e["lr"] == pytest.approx(floor) for e in s.history[20:])
    elif choice == "stretch":  # the one cosine over 28 steps: the rate jumps up, and says so
        expected = lr_at(20, s.trainer.settings.replace(schedule_from=0, schedule_peak=None))
        assert first == pytest.approx(expected) and first > 1.5 * before
        assert f"jumps from {floor:.2g} to {expected:.2g}" in plan
    else:  # a warm-up to the peak again, then down to the floor at 28
        assert "restarts: warm-up to" in plan
        peak = s.train_settings.lr
        assert first == pytest.approx(peak / 4)
        assert max(e["lr"] for e in s.history[20:]) == pytest.approx(peak)


def test_continue_mid_run_with_a_longer_budget_goes_on_from_the_rate_it_has(qtbot, tiny_window):
    """Stopped at step 10 of 20, continued with 40: the default goes on from the rate at step 10
    (no jump), down to the floor at 40; before, the rate jumped to the 40-step cosine's value."""
    win, s = tiny_window, tiny_window.session
    panel, tab = win.train_settings_panel, win.tabs["train"]
    panel.set_settings(s.train_settings.replace(steps=20, warmup=2, eval_every=10))
    _train(qtbot, s, steps=10)  # the run's own schedule is made for 10 steps here
    s.trainer.settings = s.trainer.settings.replace(steps=20)  # as if stopped at 10 of a 20-step run
    old = s.trainer.settings
    panel.set_settings(panel.settings().replace(steps=40))
    plan = tab.plan_label.text()
    assert plan.startswith("Continue trains this run from step 10 to 40; the learning rate goes on from")
    _train(qtbot, s)
    lrs = [e["lr"] for e in s.history[10:]]
    assert lrs[0] == pytest.approx(lr_at(10, old))  # where the 20-step schedule was: no jump
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(lrs))  # then only down
    assert lr_at(40, s.trainer.settings) == pytest.approx(s.trainer.settings.floor_lr)
