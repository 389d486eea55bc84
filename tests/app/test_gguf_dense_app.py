"""A Gemma 3 GGUF file in the window and from the command line: the window opens it (kept as stored) with
its local and global layers; `generate --chat` reads the message in the file's own chat template and ends
the reply at ``<end_of_turn>``, which is never printed (the file names ``<eos>`` as its EOS, as Gemma's
do: llama.cpp stops at ``<end_of_turn>`` by its text); `inspect` exports its heads."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

import model.nn.generate as gen
from app.cli import main
from model.nn.quantized import has_stored
from tests.gguf_dense_files import gemma_vocabulary, write_dense_gguf

#: Gemma's chat template, as its files carry it (less the system-prompt folding)
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<start_of_turn>"
    "{{ 'model' if m['role'] == 'assistant' else m['role'] }}\n{{ m['content'] }}<end_of_turn>\n"
    "{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


@pytest.fixture(scope="module")
def gemma3_file(tmp_path_factory):
    """A tiny random Gemma 3 (6 layers, window 4) with Gemma's special tokens and chat template."""
    tokens, types = gemma_vocabulary()
    torch.manual_seed(0)
    cfg = AutoConfig.for_model(
        "gemma3_text", vocab_size=len(tokens), hidden_size=32, intermediate_size=64, num_hidden_layers=6,
        num_attention_heads=2, num_key_value_heads=1, head_dim=16, sliding_window=4,
        max_position_embeddings=64,
    )  # fmt: skip
    model = AutoModelForCausalLM.from_config(cfg).eval()
    path = tmp_path_factory.mktemp("gemma3") / "gemma-3-tiny-it-Q8_0.gguf"
    meta = {"tokenizer.chat_template": TEMPLATE}
    return write_dense_gguf(path, model, None, "Q8_0", vocabulary=(tokens, types), metadata=meta)


def test_chat_ends_at_end_of_turn_which_is_never_printed(gemma3_file, monkeypatch, capsys):
    from model.io.pretrained import open_model

    tok = open_model(gemma3_file).tokenizer
    end = tok.token_id("<end_of_turn>")
    assert end is not None and end in tok.stop_ids and tok.token_id("<eos>") in tok.stop_ids
    words = tok.encode("hello world")[1:3]  # after <bos>
    calls = iter([*words, end, *words])
    monkeypatch.setattr(gen, "sample_next", lambda logits, **_: torch.tensor([[next(calls)]]))
    prompts: list[str] = []
    real = gen.stream

    def stream(model, tokenizer, prompt, *a, **kw):
        prompts.append(prompt)
        return real(model, tokenizer, prompt, *a, **kw)

    monkeypatch.setattr(gen, "stream", stream)
    argv = [
        "generate",
        "--checkpoint",
        str(gemma3_file),
        "--prompt",
        "Hi",
        "--chat",
        "--max-new-tokens",
        "20",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out == tok.decode(words) + "\n" and "<end_of_turn>" not in out
    # the template's <bos> is the one the tokenizer puts first: written once
    assert prompts == ["<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"]


def test_inspect_exports_every_head_of_the_local_and_global_layers(gemma3_file, tmp_path, capsys):
    out = tmp_path / "att.npz"
    prompt = "hello world the world is an island hello world"
    assert main(["inspect", "--checkpoint", str(gemma3_file), "--prompt", prompt, "--out", str(out)]) == 0
    with np.load(out) as f:
        weights = f["weights"]  # [L, H, T, T]
    L, H, T, _ = weights.shape
    assert (L, H) == (6, 2) and T > 8
    local, global_ = weights[0, 0], weights[5, 0]
    assert np.all(np.triu(local, 1) == 0) and np.all(np.tril(local, -4) == 0)  # the last 4 keys only
    assert np.count_nonzero(np.tril(global_, -4)) > 0  # the global layer sees the whole prompt


@pytest.fixture
def tiny_window_tabs():
    return ["train"]


def test_the_window_opens_it_kept_as_stored_with_its_local_and_global_layers(qtbot, tiny_window, gemma3_file):
    win = tiny_window
    with qtbot.waitSignal(win.session.modelChanged, timeout=20_000):
        assert win.files.open_checkpoint(str(gemma3_file), stored=True)
    assert has_stored(win.session.model)  # its matrices as the file stores them, decoded layer by layer
    cfg = win.session.model.config
    assert (
        cfg.core.n_layers,
        cfg.attention.window_pattern,
        cfg.attention.sliding_window,
        cfg.positional.rope_local_base,
    ) == (
        6,
        "LLLLLG",
        4,
        1e4,
    )
    label = win.origin_label.text()
    assert "gemma-3-tiny-it" in label and "quantized weights Q8_0" in label
