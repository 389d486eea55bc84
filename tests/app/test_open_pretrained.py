"""File → Open accepts a Hugging Face GPT-2 folder and a nanoGPT checkpoint; a loaded GPT-2 fine-tunes."""

import pytest
import torch

from app.dialogs.checkpoint_dialog import CheckpointDialog

TIMEOUT = 60_000


@pytest.fixture
def tiny_window_tabs():
    """Windows here build the Train tab only: File → Open and the origin label are the window's."""
    return ["train"]


def _open(qtbot, win, path, monkeypatch):
    monkeypatch.setattr(CheckpointDialog, "get_choice", lambda *a, **k: (str(path), None))
    with qtbot.waitSignal(win.session.historyReset, timeout=TIMEOUT):
        win.menu.open_action.trigger()


def test_open_a_gpt2_folder_shows_its_origin_and_fine_tunes(
    qtbot, tiny_window, tmp_path, monkeypatch, gpt2_tokenizer_dir, write_hf_gpt2
):
    win, s = tiny_window, tiny_window.session
    model_dir = tmp_path / "gpt2-tiny"
    model_dir.mkdir()
    reference = write_hf_gpt2(model_dir, gpt2_tokenizer_dir)
    _open(qtbot, win, model_dir, monkeypatch)
    assert s.checkpoint_meta["kind"] == "hf-gpt2"
    origin = win.origin_label.text()
    assert "gpt2-tiny" in origin and "Hugging Face GPT-2" in origin
    assert "tokenizer" in origin
    # one parameter count in the status bar, of the model as built
    assert win.params_label.text() == f"Parameters: {s.model.num_params():,}"
    assert "parameters" not in origin
    ids = torch.tensor([s.tokenizer.encode("the cat sat")])
    with torch.no_grad():
        assert (s.model(ids)[0] - reference(ids).logits).abs().max() < 1e-4

    # fine-tune it on a corpus: the corpus is encoded with the model's own tokenizer
    s.set_source("builtin:primer")
    assert s.source.tokenizer == s.tokenizer
    before = s.model.blocks[0].attn.q_proj.weight.detach().clone()
    s.set_train_settings(s.train_settings.replace(steps=2, batch_size=2, seq_len=16, eval_every=1))
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        s.start_training()
    assert done.args[0] == "done" and s.step == 2
    assert s.model.config.core.d_model == 32  # the same GPT-2, not a fresh default model
    assert not torch.equal(s.model.blocks[0].attn.q_proj.weight.detach(), before)


def test_open_a_nanogpt_checkpoint(qtbot, tiny_window, tmp_path, monkeypatch, write_nanogpt, nanogpt_chars):
    win, s = tiny_window, tiny_window.session
    write_nanogpt(tmp_path / "ckpt.pt")
    (tmp_path / "input.txt").write_text(nanogpt_chars, encoding="utf-8")
    _open(qtbot, win, tmp_path, monkeypatch)
    assert s.checkpoint_meta["kind"] == "nanogpt" and "nanoGPT" in win.origin_label.text()
    assert s.model.config.core.n_layers == 2 and s.tokenizer.vocab_size == len(nanogpt_chars)


def test_open_a_llama_folder_and_fine_tune_it(qtbot, tiny_window, tmp_path, monkeypatch, write_hf_family):
    """A Llama-family folder (GQA, RoPE, SwiGLU, byte-fallback tokenizer with BOS) opens from File → Open,
    names its origin and tokenizer, and fine-tunes on a corpus encoded with its own tokenizer."""
    win, s = tiny_window, tiny_window.session
    model_dir = tmp_path / "tiny-llama"
    model_dir.mkdir()
    reference = write_hf_family(model_dir, "llama")
    _open(qtbot, win, model_dir, monkeypatch)
    assert s.checkpoint_meta["kind"] == "hf-llama"
    origin = win.origin_label.text()
    assert "tiny-llama" in origin and "Hugging Face Llama" in origin and "byte fallback" in origin
    ids = s.tokenizer.encode("the cat sat")
    assert ids[0] == 1 and s.tokenizer.token_strings(ids)[0] == "<s>"  # BOS, named on the axes
    with torch.no_grad():
        t = torch.tensor([ids])
        assert (s.model(t)[0] - reference(t).logits).abs().max() < 1e-4
    s.set_source("builtin:primer")
    s.set_train_settings(s.train_settings.replace(steps=2, batch_size=2, seq_len=16, eval_every=1))
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        s.start_training()
    assert done.args[0] == "done" and s.step == 2 and s.model.config.n_rep == 2
