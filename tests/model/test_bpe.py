"""GPT-2's byte-level BPE behind our Tokenizer interface: identical to transformers' GPT-2 tokenizer."""

from __future__ import annotations

import json
import re

import pytest
from tokenizers import pre_tokenizers
from transformers import GPT2TokenizerFast

from model.text.bpe import HFTokenizer, bytes_to_unicode, load_hf_tokenizer
from model.text.registry import tokenizer_from_dict
from model.text.tokens import TokenizerError, visible

TRICKY = [
    "Hello world",
    " leading space and trailing space ",
    "two  spaces   three    four",
    "tabs\tand\nnewlines\n\n\r\nend\n",
    "emoji 😀👍🏽 family 👨‍👩‍👧 flag 🇫🇷",
    "日本語のテキスト、東京。",
    "Ελληνικά, русский текст, مرحبا",
    "it's we'll they're I'd 12345 3.14",
    "<|endoftext|>between<|endoftext|> after",
    "zero\u200bwidth and\u00a0nbsp",
    "",
    "   ",
]


@pytest.fixture(scope="module")
def tok_dirs(tmp_path_factory, gpt2_tokenizer_dir):
    """(vocab.json + merges.txt dir, tokenizer.json dir written by transformers from the first)."""
    files = gpt2_tokenizer_dir
    reference = GPT2TokenizerFast.from_pretrained(str(files))
    as_json = tmp_path_factory.mktemp("tokenizer_json")
    reference.save_pretrained(str(as_json))
    assert (as_json / "tokenizer.json").is_file() and not (as_json / "merges.txt").exists()
    return files, as_json, reference


@pytest.mark.parametrize("form", ["vocab_merges", "tokenizer_json"])
def test_encode_decode_identical_to_transformers(tok_dirs, form):
    files, as_json, reference = tok_dirs
    ours = load_hf_tokenizer(files if form == "vocab_merges" else as_json)
    assert ours.vocab_size == len(reference)
    for text in TRICKY:
        ids = ours.encode(text)
        assert ids == reference(text)["input_ids"], text
        assert ours.decode(ids) == reference.decode(ids, clean_up_tokenization_spaces=False) == text
        assert ours.encode_array(text).tolist() == ids


def test_special_token_is_one_id_and_kept_on_decode(tok_dirs):
    ours = load_hf_tokenizer(tok_dirs[0])
    eot = ours.encode("<|endoftext|>")
    assert len(eot) == 1
    assert ours.token_strings(eot) == ["<|endoftext|>"]
    assert ours.decode(ours.encode("a<|endoftext|>b")) == "a<|endoftext|>b"


def test_token_strings_show_the_bytes_as_text(tok_dirs):
    ours = load_hf_tokenizer(tok_dirs[0])
    ids = ours.encode("the lazy dog\n")
    pieces = ours.token_strings(ids)
    assert "".join(pieces) == "the lazy dog\n"
    assert " lazy" in pieces or " " in pieces  # the space is a real space, not GPT-2's "Ġ"
    assert not any(c in "".join(pieces) for c in "ĠĊ")
    assert visible(pieces[-1]).endswith("⏎")
    # Every token of any text shows its bytes: pieces that are whole characters as the characters,
    # bytes that are only part of one as \xNN escapes; joined, the pieces' bytes are the text's.
    for text in TRICKY:
        raw = b"".join(_unescape(p) for p in ours.token_strings(ours.encode(text)))
        assert raw.replace(b"<|endoftext|>", b"") == text.replace("<|endoftext|>", "").encode()


def _unescape(piece: str) -> bytes:
    """Undo token_strings' ``\\xNN`` escapes: the token's bytes."""
    out, pos = b"", 0
    for m in re.finditer(r"\\x([0-9a-f]{2})", piece):
        out += piece[pos : m.start()].encode() + bytes([int(m.group(1), 16)])
        pos = m.end()
    return out + piece[pos:].encode()


def test_partial_utf8_pieces_are_escaped(tok_dirs):
    ours = load_hf_tokenizer(tok_dirs[0])
    # A character absent from the corpus is split into its UTF-8 bytes, one token each.
    pieces = ours.token_strings(ours.encode("\u0f00"))  # TIBETAN SYLLABLE OM: e0 bc 80
    assert pieces == ["\\xe0", "\\xbc", "\\x80"]


def test_ids_past_the_vocabulary_show_replacement(tok_dirs):
    ours = load_hf_tokenizer(tok_dirs[0])
    V = ours.vocab_size
    ids = [*ours.encode("the cat"), V, V + 10, *ours.encode(" sat")]
    assert ours.decode(ids) == "the cat\ufffd\ufffd sat"
    assert ours.token_strings([V])[0] == "\ufffd"


def test_round_trip_through_tokenizer_json(tok_dirs):
    ours = load_hf_tokenizer(tok_dirs[0], name="tiny")
    saved = json.loads(json.dumps(ours.to_dict()))
    assert saved["type"] == "hf_bpe"
    back = tokenizer_from_dict(saved)
    assert isinstance(back, HFTokenizer) and back == ours and back.name == "tiny"
    for text in TRICKY:
        assert back.encode(text) == ours.encode(text)
    assert back.token_strings(range(back.vocab_size)) == ours.token_strings(range(ours.vocab_size))


def test_bytes_to_unicode_is_the_libraries_byte_alphabet():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert set(table.values()) == set(pre_tokenizers.ByteLevel.alphabet())
    assert table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ" and table[ord("a")] == "a"


def test_missing_files_are_named(tmp_path):
    with pytest.raises(TokenizerError, match=r"merges\.txt missing"):
        (tmp_path / "vocab.json").write_text("{}")
        load_hf_tokenizer(tmp_path)


def test_malformed_files_are_reported(tmp_path, tok_dirs):
    (tmp_path / "vocab.json").write_text('["not", "a", "mapping"]')
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\n")
    with pytest.raises(TokenizerError, match=r"vocab\.json must map"):
        load_hf_tokenizer(tmp_path)
    (tmp_path / "vocab.json").write_text('{"a": 0}')
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b c\n")
    with pytest.raises(TokenizerError, match=r"merges\.txt line 2"):
        load_hf_tokenizer(tmp_path)
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\n")
    with pytest.raises(TokenizerError, match="do not fit together"):
        load_hf_tokenizer(tmp_path)
    bad = tmp_path / "j"
    bad.mkdir()
    (bad / "tokenizer.json").write_text('{"model": {"type": "nonsense"}}')
    with pytest.raises(TokenizerError, match=r"tokenizer\.json"):
        load_hf_tokenizer(bad)
    with pytest.raises(TokenizerError, match="'tokenizer' field"):
        tokenizer_from_dict({"type": "hf_bpe"})
