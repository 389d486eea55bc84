"""The window as a new user meets it: a first Start that works, one place that decides whether Start may
run, state that changes only once a new run exists, a question before unsaved work is replaced, and
the focus, the wheel and the window size a person meets in their first minute."""

from __future__ import annotations

import math

import pytest
from PySide6.QtCore import QPoint, QPointF, QRect, QSize, Qt
from PySide6.QtGui import QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMessageBox, QScrollArea

TIMEOUT = 60_000

needs_starter = pytest.mark.usefixtures("shipped_starter")


@pytest.fixture
def tiny_window_tabs():
    return ["train"]


def _fresh_window(qtbot, app_settings, **kw):
    """A window as a first launch builds it: fresh settings restored (none), every dock, the Train tab."""
    from app.shell.gui import make_app
    from app.shell.window import TABS, MainWindow

    make_app()
    win = MainWindow(settings=app_settings, restore=True, tabs=[t for t in TABS if t.id == "train"], **kw)
    qtbot.addWidget(win)
    win.session.sample_every = 0
    win.train_settings_panel.sample_every.setValue(0)
    return win


def _finish(qtbot, s):
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        pass
    return done.args


# ---- a first Start that works ------------------------------------------------------------------
@pytest.mark.slow
@needs_starter
def test_a_fresh_settings_first_start_trains_a_fresh_model_with_no_dialog(qtbot, app_settings):
    win = _fresh_window(qtbot, app_settings, confirm_close=True)
    s, tab, panel = win.session, win.tabs["train"], win.train_settings_panel
    s.set_device("cpu")
    assert s.open_starter()
    shipped = s.model
    # the defaults fit the model shown: the sequence length follows its context
    assert panel.widgets["seq_len"].text() == "auto" and panel.valid
    assert tab.start_button.isEnabled() and tab.start_blocker() == ""
    for name, value in (("steps", 3), ("batch_size", 4), ("eval_every", 3), ("eval_batches", 1)):
        panel.widgets[name].setValue(value)
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        tab.start_button.click()  # a modal dialog would fail this test (tests/conftest.py)
    assert done.args[0] == "done", done.args
    assert s.model is not shipped and s.step == 3
    # a fresh model: its first loss is near the uniform guess ln V, not the starter's ~0.9
    assert abs(s.history[0]["train_loss"] - math.log(s.model.config.core.vocab_size)) < 0.5
    win.confirm_close = False  # (Quit would ask about the 3 unsaved steps)
    win.close()


def test_a_sequence_longer_than_the_context_is_said_inline_and_start_waits(qtbot, tiny_window):
    win, tab = tiny_window, tiny_window.tabs["train"]
    model_panel, train_panel = win.config_panel, win.train_settings_panel
    train_panel.widgets["seq_len"].setValue(16)
    assert tab.start_button.isEnabled()
    model_panel.widgets["context_length"].setValue(9)  # a valid config, too short for the settings
    why = "seq_len=16 is longer than the model's context_length=9"
    assert not train_panel.valid and why in train_panel.error_label.text()
    assert train_panel.error_label.isVisible()  # in the panel, above its form: not only a tooltip
    assert train_panel.widgets["seq_len"].styleSheet()  # the field to change is outlined
    assert why in model_panel.related_label.text() and model_panel.related_label.isVisible()
    assert not tab.start_button.isEnabled()
    assert why in tab.plan_label.text() and "Training panel" in tab.plan_label.text()
    # "auto" follows the context: Start may run again, and nothing is said any more
    train_panel.widgets["seq_len"].setValue(0)
    assert train_panel.valid and tab.start_button.isEnabled()
    assert not model_panel.related_label.isVisible() and "Start is disabled" not in tab.plan_label.text()
    # the one gate: the session says the same as the panels, and a direct start_training refuses
    train_panel.widgets["seq_len"].setValue(16)
    s = win.session
    s.set_train_settings(train_panel.form.value())
    assert any(why in p for p in s.run.problems())
    with pytest.raises(ValueError, match="longer than the model's context_length"):
        s.start_training()
    assert s.state == "idle"


def test_a_corpus_shorter_than_the_sequence_is_said_inline(qtbot, tiny_window, tmp_path):
    from model.train.settings import data_seq_limit

    win = tiny_window
    train_panel = win.train_settings_panel
    text = tmp_path / "short.txt"
    text.write_text("the head looks back at the token before it. " * 10, encoding="utf-8")
    assert win.data_panel.choose(str(text))
    limit = data_seq_limit(win.session.source)  # the validation split's length, less one
    assert limit is not None and limit < 100
    win.config_panel.widgets["context_length"].setValue(128)
    train_panel.widgets["seq_len"].setValue(limit + 1)
    assert not train_panel.valid and "longer than the data allows" in train_panel.error_label.text()
    assert not win.tabs["train"].start_button.isEnabled()
    train_panel.widgets["seq_len"].setValue(limit)
    assert train_panel.valid and win.tabs["train"].start_button.isEnabled()


# ---- nothing changes before the new run exists -------------------------------------------------
class _Unbuildable:
    """Stands in for ``model.train.trainer.Trainer``: building the run fails in the worker, as a run too big
    for the memory left or a data source that broke would."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("no room for this run")


def test_a_start_that_cannot_begin_changes_nothing_and_the_next_one_is_fresh(
    qtbot, tiny_window, monkeypatch, tiny_config
):
    import model.train.trainer

    win, s, tab = tiny_window, tiny_window.session, tiny_window.tabs["train"]
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        tab.start_button.click()
    qtbot.waitUntil(lambda: s.compute.idle, timeout=TIMEOUT)  # the trained model's last probe is in
    trained, history, frames = s.model, list(s.history), len(s.frames)
    title = win.windowTitle()
    win.config_panel.set_config(tiny_config.replace(n_layers=1))  # Start now means a fresh model
    assert tab.start_button.text() == "Start"

    real = model.train.trainer.Trainer
    monkeypatch.setattr(model.train.trainer, "Trainer", _Unbuildable)
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        tab.start_button.click()  # no dialog: the reason is said beside Start
    assert done.args[0] == "error" and "could not start" in done.args[1]
    assert "no room for this run" in tab.status_label.text()
    qtbot.waitUntil(lambda: s.compute.idle, timeout=TIMEOUT)
    assert s.model is trained and s.history == history and len(s.frames) == frames
    assert tab.plots.n_points == len(history) and win.windowTitle() == title and s.dirty

    monkeypatch.setattr(model.train.trainer, "Trainer", real)
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        tab.start_button.click()
    assert done.args[0] == "done"
    assert s.model is not trained and s.model.config.core.n_layers == 1
    assert [e["step"] for e in s.history] == list(range(1, 7))


@needs_starter
def test_after_a_failed_start_the_starter_is_still_shown_and_never_fine_tuned(
    qtbot, tiny_window, monkeypatch
):
    import model.train.trainer

    win, s, tab = tiny_window, tiny_window.session, tiny_window.tabs["train"]
    assert s.open_starter()
    shipped = s.model
    origin = win.origin_label.text()
    assert "starter model" in origin and "starter model" in win.windowTitle()
    real = model.train.trainer.Trainer
    monkeypatch.setattr(model.train.trainer, "Trainer", _Unbuildable)
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        tab.start_button.click()
    assert s.model is shipped and s.checkpoint_meta.get("starter")
    assert win.origin_label.text() == origin and "starter model" in win.windowTitle()

    monkeypatch.setattr(model.train.trainer, "Trainer", real)
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        tab.start_button.click()
    assert s.model is not shipped  # a fresh model of the starter's shape, not the starter fine-tuned
    assert abs(s.history[0]["train_loss"] - math.log(s.model.config.core.vocab_size)) < 0.5


# ---- unsaved work is never thrown away without a question --------------------------------------
def test_a_fresh_start_over_unsaved_training_asks_first(qtbot, tiny_window, monkeypatch, tiny_config):
    win, s, tab = tiny_window, tiny_window.session, tiny_window.tabs["train"]
    win.confirm_close = True  # as in the app (the fixture turns the questions off)
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        tab.start_button.click()
    assert s.dirty and "*" in win.windowTitle()
    trained = s.model
    asked = []

    def answer(button):
        def question(parent, title, text, *args, **kwargs):
            asked.append((title, text))
            return button

        return question

    # Continue goes on with the same model: nothing is replaced, nothing asked
    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.Cancel))
    win.train_settings_panel.widgets["steps"].setValue(7)
    assert tab.start_button.text() == "Continue"
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        tab.start_button.click()
    assert not asked and s.model is trained and s.step == 7

    win.config_panel.set_config(tiny_config.replace(n_layers=1))  # now Start builds a fresh model
    tab.start_button.click()
    assert len(asked) == 1 and "7 steps" in asked[0][1]
    assert s.state == "idle" and s.model is trained and s.step == 7  # Cancel: nothing happened

    monkeypatch.setattr(QMessageBox, "question", answer(QMessageBox.StandardButton.Discard))
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        tab.start_button.click()
    assert len(asked) == 2 and s.model is not trained and s.model.config.core.n_layers == 1


# ---- the keyboard stays where the eye is ------------------------------------------------------
def _dock_of(win, w):
    for key, dock in win.docks.items():
        if dock.isAncestorOf(w):
            return key
    return None


def test_tab_walks_only_the_visible_panels(qtbot, tiny_window):
    win = tiny_window
    win.docks["data"].raise_()  # Model and Training are tabbed behind Data, as on a first launch
    qtbot.waitUntil(lambda: win.docks["model"].visibleRegion().isEmpty(), timeout=5000)
    win.activateWindow()
    start = win.tabs["train"].generate_box.prompt
    start.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is start, timeout=5000)
    seen = []
    for _ in range(120):  # Tab as a person presses it, from wherever the focus is
        QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_Tab)
        seen.append(QApplication.focusWidget())
    docks = {_dock_of(win, w) for w in seen}
    assert "data" in docks  # the visible panel is reached
    assert "model" not in docks and "training" not in docks  # the hidden ones never
    assert start in seen  # and the walk comes round again
    # Shift+Tab walks back the same way
    back = []
    for _ in range(40):
        win.focusNextPrevChild(False)
        back.append(QApplication.focusWidget())
    assert not {_dock_of(win, w) for w in back} & {"model", "training"}
    context = win.config_panel.widgets["context_length"]
    assert context.value() == 32  # nothing typed reached the hidden config


def test_focus_stays_on_the_run_controls_after_start_and_stop(qtbot, tiny_window, tiny_settings):
    win, s, tab = tiny_window, tiny_window.session, tiny_window.tabs["train"]
    win.train_settings_panel.set_settings(tiny_settings.replace(steps=1_000_000))
    win.activateWindow()
    tab.start_button.setFocus()
    qtbot.waitUntil(lambda: tab.start_button.hasFocus(), timeout=5000)
    with qtbot.waitSignal(
        s.trainingStateChanged, timeout=TIMEOUT, check_params_cb=lambda st: st == "running"
    ):
        tab.start_button.click()
    assert QApplication.focusWidget() in (tab.pause_button, tab.stop_button)
    tab.stop_button.setFocus()
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        tab.stop_button.click()
    assert QApplication.focusWidget() is tab.start_button  # not the Smoothing or Learning rate field


def test_the_wheel_scrolls_the_model_form_and_changes_a_field_only_once_clicked(qtbot, tiny_window):
    win = tiny_window
    win.resize(1280, 600)  # the Model form is taller than its panel: it scrolls
    win.docks["model"].raise_()
    layers = win.config_panel.widgets["n_layers"]
    qtbot.waitUntil(lambda: layers.isVisible() and not layers.visibleRegion().isEmpty(), timeout=5000)
    bar = win.config_panel.findChild(QScrollArea).verticalScrollBar()
    assert bar.maximum() > 0
    before_value, before_scroll = layers.value(), bar.value()

    def wheel(widget, notches=-1):
        centre = QPointF(widget.width() / 2, widget.height() / 2)
        event = QWheelEvent(
            centre,
            widget.mapToGlobal(centre),
            QPoint(0, 0),
            QPoint(0, 120 * notches),
            Qt.MouseButton.NoButton,
            Qt.KeyboardModifier.NoModifier,
            Qt.ScrollPhase.NoScrollPhase,
            False,
        )
        QApplication.sendEvent(widget, event)

    wheel(layers)  # scrolling down past "Layers"
    assert layers.value() == before_value
    assert bar.value() > before_scroll  # the form scrolled instead
    layers.setFocus()
    qtbot.waitUntil(layers.hasFocus, timeout=5000)
    wheel(layers, notches=1)  # clicked into: the wheel steps it, as a person then expects
    assert layers.value() == before_value + 1


# ---- a window that fits a laptop ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("screen", "most"),
    [((1280, 800), (1280 - 16, 800 - 48)), ((1920, 1080), (1500, 940)), ((1366, 768), (1350, 720))],
)
def test_the_first_window_fits_the_screen(qtbot, app_settings, monkeypatch, screen, most):
    import app.shell.window

    monkeypatch.setattr(app.shell.window, "screen_area", lambda widget=None: QRect(0, 0, *screen))
    win = _fresh_window(qtbot, app_settings, confirm_close=False)
    win.show()
    qtbot.waitExposed(win)
    assert win.size() == QSize(*most)  # the default where it fits, else the screen less its frame
    # nothing inside forces it wider or taller: every tab scrolls below its own minimum
    hint = win.minimumSizeHint()
    assert hint.width() <= most[0] and hint.height() <= most[1]
    win.close()
