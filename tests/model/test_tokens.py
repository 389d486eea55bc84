"""Tokenizers: round trips, unknown characters, the tokenizer.json form, and visible labels."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.text import registry as tokenizer_registry
from model.text.registry import register_tokenizer, tokenizer_from_dict
from model.text.tokens import (
    ByteTokenizer,
    CharTokenizer,
    Tokenizer,
    TokenizerError,
    UnknownCharactersError,
    visible,
)

FAST = settings(max_examples=60, deadline=None)


@FAST
@given(st.text())
def test_byte_round_trip_any_text(text):
    tok = ByteTokenizer()
    ids = tok.encode(text)
    assert ids == list(text.encode("utf-8"))
    assert tok.decode(ids) == text
    assert tok.encode_array(text).tolist() == ids


@FAST
@given(st.lists(st.integers(0, 255), max_size=40))
def test_byte_decode_never_fails_on_partial_utf8(ids):
    assert ByteTokenizer().decode(ids) == bytes(ids).decode("utf-8", "replace")


def test_byte_token_strings_show_partial_characters_as_escapes():
    tok = ByteTokenizer()
    assert tok.token_strings(tok.encode("aé\n")) == ["a", "\\xc3", "\\xa9", "\n"]
    assert tok.decode(tok.encode("€")[:2]) == "\ufffd"  # a cut-off character decodes, never raises


@FAST
@given(st.text(min_size=1), st.data())
def test_char_round_trip_over_text_in_vocabulary(vocab_text, data):
    tok = CharTokenizer.from_text(vocab_text)
    text = data.draw(st.text(alphabet=sorted(set(vocab_text))))
    ids = tok.encode(text)
    assert all(0 <= i < tok.vocab_size for i in ids)
    assert tok.decode(ids) == text
    assert tok.encode_array(text).tolist() == ids
    assert "".join(tok.token_strings(ids)) == text


def test_char_vocabulary_is_sorted_unique_characters():
    tok = CharTokenizer.from_text("hello")
    assert tok.chars == "ehlo"
    assert tok.vocab_size == 4
    assert tok.encode("hello") == [1, 0, 2, 2, 3]


def test_unknown_characters_are_named_once_each():
    tok = CharTokenizer.from_text("abc ")
    with pytest.raises(UnknownCharactersError) as e:
        tok.encode("ab\nxaxé")
    assert e.value.chars == ["\n", "x", "é"]
    msg = str(e.value)
    assert "'\\n'" in msg and "'x'" in msg and "'é'" in msg
    assert msg.count("'x'") == 1
    with pytest.raises(UnknownCharactersError):
        tok.encode_array("ab\nxaxé")


def test_replace_fallback_is_documented_choice():
    with_q = CharTokenizer.from_text("ab?")
    assert with_q.encode("axb", errors="replace") == with_q.encode("a?b")
    assert with_q.encode_array("axb", errors="replace").tolist() == with_q.encode("a?b")
    with_space = CharTokenizer.from_text("ab ")
    assert with_space.decode(with_space.encode("a\tb", errors="replace")) == "a b"
    plain = CharTokenizer.from_text("zyx")
    assert plain.decode(plain.encode("q", errors="replace")) == "x"  # first character of the vocabulary
    chosen = CharTokenizer("abc", fallback="c")
    assert chosen.decode(chosen.encode("a!", errors="replace")) == "ac"
    with pytest.raises(ValueError, match="errors="):
        plain.encode("x", errors="ignore")


def test_ids_outside_vocabulary_decode_without_crashing():
    tok = CharTokenizer.from_text("ab")
    assert tok.decode([0, 5, -1, 1]) == "a\ufffd\ufffdb"
    assert ByteTokenizer().decode([104, 300, 105]) == "h\ufffdi"


@pytest.mark.parametrize(
    "tok",
    [
        CharTokenizer.from_text('line one\n"quoted" tab\t é€ 😀'),
        CharTokenizer("cab", fallback="b"),
        ByteTokenizer(),
    ],
)
def test_dict_round_trip_through_json(tok):
    d = json.loads(json.dumps(tok.to_dict()))
    back = tokenizer_from_dict(d)
    assert isinstance(back, Tokenizer) and type(back) is type(tok)
    assert back == tok
    sample = "cab" if isinstance(tok, CharTokenizer) and tok.vocab_size == 3 else "line é"
    assert back.encode(sample, errors="replace") == tok.encode(sample, errors="replace")


def test_dict_forms_are_the_documented_ones():
    assert ByteTokenizer().to_dict() == {"type": "byte"}
    assert CharTokenizer.from_text("ba").to_dict() == {"type": "char", "chars": "ab"}


@pytest.mark.parametrize(
    "d, words",
    [
        ({"type": "wordpiece"}, ["'wordpiece'", "byte", "char"]),
        ({"type": 3}, ["3", "byte", "char"]),
        ({"chars": "abc"}, ["'type'"]),
        (["char"], ["object"]),
        ({"type": "char"}, ["'chars'", "missing"]),
        ({"type": "char", "chars": 5}, ["'chars'", "string"]),
        ({"type": "char", "chars": ""}, ["'chars'", "empty"]),
        ({"type": "char", "chars": "abca"}, ["repeats", "'a'"]),
        ({"type": "char", "chars": "ab", "fallback": "z"}, ["fallback", "'z'"]),
    ],
)
def test_bad_tokenizer_dicts_are_named(d, words):
    with pytest.raises(TokenizerError) as e:
        tokenizer_from_dict(d)
    for w in words:
        assert w in str(e.value)


def test_registry_accepts_new_kinds(monkeypatch):
    monkeypatch.setattr(tokenizer_registry, "_REGISTRY", dict(tokenizer_registry._REGISTRY))

    class Upper(CharTokenizer):
        kind = "upper"

        @classmethod
        def from_dict(cls, d):
            return cls(d["chars"].upper())

    register_tokenizer("upper", Upper.from_dict)
    tok = tokenizer_from_dict({"type": "upper", "chars": "ab"})
    assert isinstance(tok, Upper) and tok.chars == "AB"
    assert "upper" in tokenizer_registry.known_tokenizer_types()


def test_visible_labels():
    assert visible(" \n\t") == "␣⏎⇥"
    assert visible("\r") == "\\x0d"
    assert visible("\x00\x7f") == "\\x00\\x7f"
    assert visible("\xa0") == "\\xa0"
    assert visible("\u200b") == "\\u200b"
    assert visible(" the") == "␣the"
    assert visible("é€\\xe2") == "é€\\xe2"


@FAST
@given(st.text())
def test_visible_leaves_nothing_invisible(text):
    shown = visible(text)
    assert all(c.isprintable() and not c.isspace() for c in shown)
    if text.isprintable() and " " not in text:
        assert shown == text


def test_encode_array_matches_encode_on_a_large_text():
    text = "".join(chr(c) for c in np.random.default_rng(0).integers(32, 400, 20_000))
    tok = CharTokenizer.from_text(text)
    assert tok.encode_array(text).tolist() == tok.encode(text)
