"""model.generate.stream never prints half a character: with a byte-level BPE (GPT-2's kind) an emoji or
a CJK character spans several tokens, and the streamed pieces hold it back until it is whole."""

from __future__ import annotations

import pytest
import torch

import model.nn.generate as generate
from model.text.bpe import load_hf_tokenizer
from model.text.tokens import ByteTokenizer

TEXT = "a😀 世界 ok 🎉!"


def fake_steps(ids):
    """``_steps`` replaced by one that yields ``ids`` (what a model might sample), one per step."""

    def steps(model, idx, max_new_tokens, **kwargs):
        for i in ids[:max_new_tokens]:
            yield torch.tensor([[i]])

    return steps


def pieces_of(tokenizer, ids, monkeypatch) -> list[str]:
    monkeypatch.setattr(generate, "_steps", fake_steps(ids))
    return list(generate.stream(None, tokenizer, "a", max_new_tokens=len(ids)))


@pytest.fixture
def bpe(gpt2_tokenizer_dir):
    return load_hf_tokenizer(gpt2_tokenizer_dir)


def test_byte_level_bpe_splits_these_characters(bpe):
    ids = bpe.encode(TEXT)
    singles = [bpe.decode([i]) for i in ids]
    assert any("\ufffd" in s for s in singles)  # the premise: some token is a part of a character


@pytest.mark.parametrize("kind", ["bpe", "byte"])
def test_streamed_pieces_join_to_the_decoded_text_without_replacement_characters(bpe, kind, monkeypatch):
    tokenizer = bpe if kind == "bpe" else ByteTokenizer()
    ids = tokenizer.encode(TEXT)
    pieces = pieces_of(tokenizer, ids, monkeypatch)
    assert len(pieces) == len(ids)  # one piece per token, "" while a character is incomplete
    assert "".join(pieces) == tokenizer.decode(ids) == TEXT
    assert not any("\ufffd" in p for p in pieces)


def test_a_stream_that_ends_inside_a_character_shows_what_decode_shows(bpe, monkeypatch):
    ids = bpe.encode("ab😀")
    cut = ids[:-1]  # the emoji's last byte never comes
    pieces = pieces_of(bpe, cut, monkeypatch)
    assert "".join(pieces) == bpe.decode(cut)


def test_characters_chained_across_tokens_all_arrive(bpe, monkeypatch):
    """A token may hold the end of one character and the start of the next: 日本語 takes four tokens
    whose decodes all end in U+FFFD; the pieces must still join to the whole text."""
    text = "日本語 😀"
    ids = bpe.encode(text)
    assert sum(bpe.decode(ids[:k]).endswith("\ufffd") for k in range(1, len(ids))) >= 4
    assert "".join(pieces_of(bpe, ids, monkeypatch)) == text


def test_a_permanently_broken_sequence_is_shown_once_text_follows(monkeypatch):
    tok = ByteTokenizer()
    ids = [0xF0, 0x9F, *tok.encode("abcdef")]  # two bytes of a 4-byte character, then plain text
    pieces = pieces_of(tok, ids, monkeypatch)
    assert "".join(pieces) == tok.decode(ids)
    assert pieces[:2] == ["", ""] and pieces[2] != ""  # "a" arrives: no longer at the end: shown
