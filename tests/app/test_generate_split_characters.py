"""The app's Generate box streams through ``GenerateWorker``: with GPT-2's kind of tokenizer a
character split over several tokens arrives whole, never as U+FFFD."""

from __future__ import annotations

import torch

import model.nn.generate as generate
from model.text.bpe import load_hf_tokenizer

TEXT = "日本語 😀 ok"


def test_generate_worker_never_emits_half_a_character(qtbot, gpt2_tokenizer_dir, monkeypatch):
    from app.session.workers import GenerateWorker

    tok = load_hf_tokenizer(gpt2_tokenizer_dir)
    ids = tok.encode(TEXT)
    assert len(ids) > len(TEXT)  # the premise: characters span several tokens

    def steps(model, idx, max_new_tokens, **kwargs):  # what a model might sample
        for i in ids[:max_new_tokens]:
            yield torch.tensor([[i]])

    monkeypatch.setattr(generate, "_steps", steps)
    worker = GenerateWorker(None, tok, "a", max_new_tokens=len(ids))
    pieces: list[str] = []
    worker.token.connect(pieces.append)
    with qtbot.waitSignal(worker.finished, timeout=10_000) as blocker:
        worker.start()
    worker.join(5.0)
    text, error = blocker.args
    assert not error and text == TEXT == "".join(pieces)
    assert not any("\ufffd" in p for p in pieces)
