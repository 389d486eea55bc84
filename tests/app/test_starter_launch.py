"""First launch opens the shipped starter model with its data; Start then trains a fresh model."""

import pytest

from model.io.checkpoint import starter

TIMEOUT = 60_000

pytestmark = pytest.mark.usefixtures("shipped_starter")


@pytest.fixture
def tiny_window_tabs():
    return ["train"]


def test_first_launch_shows_the_starter_and_start_trains_a_fresh_model(qtbot, tiny_window):
    win, s = tiny_window, tiny_window.session
    with qtbot.waitSignal(s.statusMessage, timeout=TIMEOUT) as said:
        assert s.open_starter()
    assert s.checkpoint_meta["starter"] and s.source_spec == starter.STARTER_SOURCE
    assert s.probe_prompt == s.source.default_prompt  # the default prompt of its data
    message = said.args[0]
    assert "Starter model" in message and "previous-token L" in message and "induction L" in message
    assert "starter model" in win.origin_label.text()
    assert s.checkpoint_path is None  # Save never writes into the shipped folder
    shipped = s.model
    shipped_weight = shipped.tok_emb.weight.detach().clone()

    s.train_settings = s.train_settings.replace(steps=2, batch_size=2, seq_len=16, eval_every=2)
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT):
        s.start_training()
    assert s.model is not shipped and s.step == 2
    assert (shipped.tok_emb.weight == shipped_weight).all()  # the starter itself was not trained
    assert "starter" not in s.checkpoint_meta  # no longer the starter: a new run, named as one
    assert win.origin_label.text().startswith("Model: new run, trained here from random weights")
    assert win.windowTitle().startswith("*new run")


def test_a_missing_starter_falls_back(qtbot, tiny_window, tmp_path):
    s = tiny_window.session
    before = s.model
    assert not s.open_starter(tmp_path)
    assert s.model is before
