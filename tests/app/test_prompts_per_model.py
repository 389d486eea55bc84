"""A prompt that belongs to one model is not carried to another: the Generate box's prompt follows the
data of the model shown (unless the user typed it), and a training history is traced on its own run's
prompt or on text, never on the shown model's probe prompt."""

from __future__ import annotations

import pytest

from app.dialogs.checkpoint_dialog import CheckpointDialog

TIMEOUT = 60_000


@pytest.fixture
def tiny_window_tabs():
    return ["train", "history"]


@pytest.fixture
def gpt2_folder(tmp_path, gpt2_tokenizer_dir, write_hf_gpt2):
    folder = tmp_path / "gpt2-tiny"
    folder.mkdir()
    write_hf_gpt2(folder, gpt2_tokenizer_dir)
    return folder


def _open(qtbot, win, path, monkeypatch):
    monkeypatch.setattr(CheckpointDialog, "get_choice", lambda *a, **k: (str(path), None))
    with qtbot.waitSignal(win.session.historyReset, timeout=TIMEOUT):
        win.menu.open_action.trigger()


@pytest.mark.parametrize("typed", [False, True])
def test_a_model_opened_with_other_data_gets_that_datas_generate_prompt(
    qtbot, tiny_window, gpt2_folder, monkeypatch, typed
):
    win, s = tiny_window, tiny_window.session
    box = win.tabs["train"].generate_box
    task_prompt = s.source.default_prompt[:24]
    assert box.prompt.text() == task_prompt  # the copy task's letters, for the model trained on it
    if typed:
        box.prompt.setText("my own words")
    _open(qtbot, win, gpt2_folder, monkeypatch)
    assert s.source.default_prompt[:24] != task_prompt  # the GPT-2 reads a text of its own
    assert box.prompt.text() == ("my own words" if typed else s.source.default_prompt[:24])


def test_a_history_is_not_traced_on_the_shown_models_probe_prompt(
    qtbot, tiny_window, tmp_path, write_hf_family
):
    from app.views.history.tab import DEFAULT_PROMPT

    root = tmp_path / "ckpts"
    for step, seed in ((10, 1), (30, 2)):
        write_hf_family(root / f"step{step}", "gpt_neox", seed=seed, num_key_value_heads=None)
    tab = tiny_window.tab("history")
    with qtbot.waitSignal(tab.stepShown, timeout=TIMEOUT):
        assert tab.open_history(str(root))
    assert tab.state.history.prompt == DEFAULT_PROMPT != tiny_window.session.probe_prompt
    assert tab.prompt_edit.text() == DEFAULT_PROMPT
