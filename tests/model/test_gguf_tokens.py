"""The tokenizer of a GGUF file's metadata: the same ids as transformers' GGUF tokenizer, on the real
SmolLM2 file (byte-level BPE) and on small files written here (SentencePiece BPE, Gemma, byte-level
with each split regex), and a one-line refusal for each kind of bad metadata."""

from __future__ import annotations

import json
import pathlib
import time

import numpy as np
import pytest
from transformers import AutoTokenizer
from transformers.tokenization_utils_base import generate_merges as reference_generate_merges

from model.io.gguf.file import read_header
from model.text import gguf_tokens
from model.text.bpe import HFTokenizer, bytes_to_unicode
from model.text.gguf_tokens import generate_merges, tokenizer_from_gguf
from model.text.registry import tokenizer_from_dict
from model.text.tokens import TokenizerError
from tests.texts import GGUF_TRICKY as TRICKY

# ---------------------------------------------------------------------------------------------
# the real file: SmolLM2-135M-Instruct, byte-level BPE (tokenizer.ggml.model "gpt2"), 49,152 tokens
# ---------------------------------------------------------------------------------------------
assert len(TRICKY[-1]) > 1000


def _read_meta(path: pathlib.Path) -> dict:
    gguf = pytest.importorskip("gguf", reason="the gguf package (GGUF reader and writer) is not installed")
    return {key: field.contents() for key, field in gguf.GGUFReader(path).fields.items()}


@pytest.fixture(scope="module")
def smol_meta(smollm2_path):
    """The real file's metadata, read by our header parser (0.15 s; gguf.GGUFReader takes 3 s): the
    tests below hold it against transformers, which reads the file with its own reader."""
    return read_header(smollm2_path).metadata


@pytest.fixture(scope="module")
def smol_reference(smollm2_reference):
    """transformers' tokenizer of the real file, as the session's reference process read it
    (tests/smollm2_reference.py): ids of every text here, its backend and special tokens."""
    return smollm2_reference


@pytest.fixture(scope="module")
def smol(smol_meta):
    return tokenizer_from_gguf(smol_meta, name="SmolLM2-135M")


def _backend(tok) -> dict:
    """The tokenizers JSON (a tokenizer, or its JSON text), less the post-processor (ours adds BOS/EOS
    through prefix_ids/suffix_ids)."""
    data = json.loads(tok if isinstance(tok, str) else tok.to_str())
    data.pop("post_processor")
    return data


@pytest.mark.slow
@pytest.mark.parametrize("text", TRICKY, ids=range(len(TRICKY)))
def test_real_file_ids_equal_transformers(smol, smol_reference, text):
    ids = smol.encode(text)
    assert ids == smol_reference.encode(text)  # transformers' ids
    assert smol.decode(ids) == text
    assert smol.encode_array(text).tolist() == ids


def test_real_file_same_tokenizer_as_transformers(smol, smol_meta, smol_reference):
    info = smol_reference.info
    assert smol.vocab_size == info["vocab_len"] == len(smol_meta["tokenizer.ggml.tokens"]) == 49152
    assert _backend(smol._tok) == _backend(info["backend_json"])
    assert smol.special_ids == set(info["special_ids"]) == set(range(17))  # the 17 control tokens
    # the file says add_bos_token = false, and transformers adds nothing either
    assert smol.prefix_ids == smol.suffix_ids == []
    assert smol_reference.encode("hi") == smol.encode("hi")
    assert smol.byte_level and smol.name == "SmolLM2-135M"
    assert smol.description == "byte-level BPE (SmolLM2-135M), 49152 tokens, from a GGUF file"


def test_real_file_token_strings(smol):
    assert smol.token_strings(smol.encode("Hello world")) == ["Hello", " world"]
    assert smol.token_strings(smol.encode("<|im_start|>user")) == ["<|im_start|>", "user"]
    for text in TRICKY[:3]:  # whole characters in every token: the strings add up to the text
        assert "".join(smol.token_strings(smol.encode(text))) == text
    assert smol.token_strings(smol.encode("😀"))[0].startswith("\\x")  # part of a character: its bytes
    assert smol.token_strings([smol.vocab_size]) == ["\ufffd"]


def test_real_file_flags_and_save(smol_meta, smol):
    with_bos = tokenizer_from_gguf({**smol_meta, "tokenizer.ggml.add_bos_token": True})
    assert with_bos.prefix_ids == [1] and with_bos.encode("hi")[0] == 1  # bos_token_id = 1 (<|im_start|>)
    with_eos = tokenizer_from_gguf({**smol_meta, "tokenizer.ggml.add_eos_token": True})
    assert with_eos.suffix_ids == [2] and with_eos.encode("hi")[-1] == 2
    split = tokenizer_from_gguf({**smol_meta, "tokenizer.ggml.pre": "llama-bpe"})
    assert type(split._tok.pre_tokenizer).__name__ == "Sequence"
    assert split.decode(split.encode(TRICKY[2])) == TRICKY[2]
    again = tokenizer_from_dict(smol.to_dict())
    assert isinstance(again, HFTokenizer) and again == smol
    assert again.encode(TRICKY[1]) == smol.encode(TRICKY[1])


def test_real_file_builds_fast(smol_meta):
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        tokenizer_from_gguf(smol_meta)
        best = min(best, time.perf_counter() - t0)
    assert best < 1.0, f"{best:.2f} s to build 49,152 tokens and 48,900 merges"


def test_generate_merges_equals_transformers(smol_meta):
    tokens = smol_meta["tokenizer.ggml.tokens"][:6000]
    vocab = {t: i for i, t in enumerate(tokens)}
    scores = dict(zip(tokens, np.random.default_rng(0).integers(-50, 0, len(tokens)).astype(float).tolist()))
    assert generate_merges(vocab, scores) == reference_generate_merges(vocab, scores)  # with many ties


# ---------------------------------------------------------------------------------------------
# small files written here, compared with transformers' tokenizer for the same file
# ---------------------------------------------------------------------------------------------
BYTES = [f"<0x{b:02X}>" for b in range(256)]
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6
SP_PIECES = (
    "▁ e t h l o w r d a n i s x . ▁t he ▁the ll llo ▁he ▁hello ▁w or ▁wor ld ▁world in ▁a an ▁an is ▁is"
)
SP_TEXTS = [
    "hello world",
    " hello",
    "  hello   world ",
    "the world is an island.",
    "é and 😀 byte fallback",
    "line\nbreak\n\n",
    "\ttab",
    "<s>hi</s>",
    "say <think> twice <think>",
    "<|im_start|>user",
    "",
    " ",
    "x" * 300,
]


def _write(path: pathlib.Path, arch: str, model: str, tokens, types, **keys) -> pathlib.Path:
    """A GGUF file with tokenizer metadata only (transformers needs no tensor to load its tokenizer)."""
    gguf = pytest.importorskip("gguf", reason="the gguf package (GGUF reader and writer) is not installed")
    writer = gguf.GGUFWriter(str(path), arch=arch)
    writer.add_tokenizer_model(model)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    for key, value in keys.items():
        if value is not None:
            getattr(writer, key)(value)  # the writer method, e.g. add_bos_token_id
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def _scores(n_special: int, n_pieces: int) -> list[float]:
    """0 for specials and bytes, then shuffled (rank != position), with ties in pairs."""
    ranks = np.random.default_rng(1).permutation(n_pieces) // 2
    return [0.0] * (n_special + 256) + (-ranks.astype(float) - 1).tolist()


def _llama_vocab():
    special = ["<unk>", "<s>", "</s>"]
    pieces = [*SP_PIECES.split(), "\n", "▁▁", "▁▁▁", "<think>", "<|im_start|>"]
    types = (
        [UNKNOWN, CONTROL, CONTROL] + [BYTE] * 256 + [NORMAL] * (len(pieces) - 2) + [USER_DEFINED, CONTROL]
    )
    return special + BYTES + pieces, types, _scores(len(special), len(pieces))


def _gemma_vocab():
    special = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>"]
    # a Gemma file spells its whitespace-only tokens with real spaces
    pieces = [*SP_PIECES.split(), "\n", "\n\n", "  ", "   ", "    ", "\t", "<think>"]
    types = [CONTROL, CONTROL, CONTROL, UNKNOWN, USER_DEFINED, CONTROL] + [BYTE] * 256
    types += [NORMAL] * (len(pieces) - 1) + [USER_DEFINED]
    return special + BYTES + pieces, types, _scores(len(special), len(pieces))


def _compare(path: pathlib.Path, texts) -> HFTokenizer:
    """Ours from the file's metadata against transformers from the file: same tokenizer, same ids."""
    ours = tokenizer_from_gguf(_read_meta(path), name=path.stem)
    reference = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    assert ours.vocab_size == len(reference)
    assert _backend(ours._tok) == _backend(reference.backend_tokenizer)
    assert ours.special_ids == {i for i, t in reference.added_tokens_decoder.items() if t.special}
    for text in texts:
        assert ours.encode(text) == reference.encode(text), text
    return ours


LLAMA_CASES = {
    # (architecture, keys): llama.cpp's defaults, the flags set, merges in the file, Phi-3's prefix
    "default": ("llama", {}),
    "flags": ("llama", dict(add_add_bos_token=False, add_add_eos_token=True, add_pad_token_id=2)),
    "no_bos_id": ("llama", dict(add_bos_token_id=None)),
    "merges_in_file": ("llama", dict(add_token_merges="from the vocabulary, reversed")),
    "no_space_prefix": ("llama", dict(add_add_space_prefix=False)),
    "phi3": ("phi3", dict(add_pad_token_id=0)),
}


@pytest.mark.parametrize("case", list(LLAMA_CASES))
def test_sentencepiece_file_equals_transformers(tmp_path, case):
    arch, extra = LLAMA_CASES[case]
    tokens, types, scores = _llama_vocab()
    keys = dict(add_token_scores=scores, add_bos_token_id=1, add_eos_token_id=2, add_unk_token_id=0)
    keys.update(extra)
    if "add_token_merges" in keys:  # merges the file lists: used as given, in the file's order
        vocab = {t: i for i, t in enumerate(tokens)}
        merges = generate_merges(vocab, dict(zip(tokens, scores)))[::-1]
        keys["add_token_merges"] = [f"{a} {b}" for a, b in merges]
    ours = _compare(_write(tmp_path / f"{case}.gguf", arch, "llama", tokens, types, **keys), SP_TEXTS)
    assert ours.description == f"BPE with byte fallback ({case}), {len(tokens)} tokens, from a GGUF file"
    expected_prefix = {"flags": [], "no_bos_id": []}.get(case, [1])  # BOS by default for "llama"
    assert ours.prefix_ids == expected_prefix
    assert ours.suffix_ids == ([2] if case == "flags" else [])
    assert ours.special_ids >= {0, 1, 2, len(tokens) - 1}  # <unk>, <s>, </s>, <|im_start|>
    think = tokens.index("<think>")
    assert ours._tok.encode("<think>", add_special_tokens=False).ids == [think]
    assert think not in ours.special_ids
    bytes_e = ours._tok.encode("é", add_special_tokens=False).ids
    assert ours.token_strings(bytes_e) == [" ", "\\xc3", "\\xa9"]  # byte fallback
    plain = ours._tok.encode("hello  world", add_special_tokens=False).ids
    assert ours.decode(plain) == "hello  world"


@pytest.mark.parametrize("arch", ["gemma2", "gemma3"])
def test_gemma_file_equals_transformers(tmp_path, arch):
    tokens, types, scores = _gemma_vocab()
    keys = dict(add_token_scores=scores, add_bos_token_id=2, add_eos_token_id=1, add_unk_token_id=3)
    keys.update(add_pad_token_id=0, add_add_space_prefix=False)
    texts = [*SP_TEXTS, "a  b   c    d", "\n\n  \t", "<start_of_turn>user\n<mask>"]
    ours = _compare(_write(tmp_path / f"{arch}.gguf", arch, "llama", tokens, types, **keys), texts)
    assert ours.prefix_ids == [2] and ours.suffix_ids == []  # <bos>
    assert ours.encode("a  s")[1:] == [tokens.index(p) for p in ("a", "  ", "s")]  # "  " read as ▁▁
    # the named ones and <start_of_turn>; <mask>, user-defined in this file, ends up not special in
    # transformers too (added as a Gemma default, then again as user-defined)
    assert ours.special_ids == {0, 1, 2, 3, 5}


def test_gemma4_file_equals_transformers(tmp_path):
    """Tokenizer type "gemma4": Gemma's rules, merges ranked by score, no re-spelling, never BOS."""
    tokens, types, scores = _gemma_vocab()
    tokens = [t.replace(" ", "\u2581") for t in tokens]  # this type's files spell spaces as ▁ throughout
    keys = dict(add_token_scores=scores, add_bos_token_id=2, add_eos_token_id=1, add_add_bos_token=True)
    ours = _compare(_write(tmp_path / "g4.gguf", "gemma4", "gemma4", tokens, types, **keys), SP_TEXTS)
    assert ours.prefix_ids == [] and ours.suffix_ids == []
    assert ours.encode("a  s") == [tokens.index(p) for p in ("a", "\u2581\u2581", "s")]


def test_gemma_architecture_builds_as_gemma2(tmp_path):
    """transformers opens no "gemma" file (no config for it), but builds its tokenizer by the same rules."""
    tokens, types, scores = _gemma_vocab()
    meta = {
        "general.architecture": "gemma2",
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.scores": scores,
        "tokenizer.ggml.bos_token_id": 2,
    }
    gemma = tokenizer_from_gguf({**meta, "general.architecture": "gemma"})
    assert gemma._tok.to_str() == tokenizer_from_gguf(meta)._tok.to_str()
    llama = tokenizer_from_gguf({**meta, "general.architecture": "llama"})
    assert gemma.encode("a  b") != llama.encode("a  b")


def _byte_level_vocab():
    u = bytes_to_unicode()
    tokens = [u[b] for b in range(256)]
    words = ["Ġt", "he", "Ġthe", "Ġa", "ĠĠ", "ĠĠĠĠ", "12", "123", "in", "Ġ1", "er", "Ġw", "or", "Ġwor", "ld"]
    words += ["Ġworld", "ĊĊ", "'s", "ĠW", "ĠWor"]
    merges = []
    for w in words:  # each word from two tokens already there, longest left part first
        cut = next(k for k in range(len(w) - 1, 0, -1) if w[:k] in tokens and w[k:] in tokens)
        merges.append(f"{w[:cut]} {w[cut:]}")
        tokens.append(w)
    types = [NORMAL] * len(tokens)
    extra = [
        ("<|endoftext|>", CONTROL),
        ("<|im_start|>", CONTROL),
        ("<|im_end|>", CONTROL),
        ("<think>", USER_DEFINED),
        ("<｜begin▁of▁sentence｜>", CONTROL),  # outside the byte alphabet: neither transformers nor we add it
        ("<ｔhink>", USER_DEFINED),  # likewise
        ("<unk>", UNKNOWN),
    ]
    tokens += [t for t, _ in extra]
    types += [k for _, k in extra]
    return tokens, types, merges


BYTE_TEXTS = [
    "the world",
    "12345 3.14159",
    "in  the   end    now",
    "\n\n\nx",
    "it's THE World's",
    "日本語 😀 e\u0301",
    "<|im_start|>user\nhi<|im_end|>",
    "<think>x</think>",
    "<｜begin▁of▁sentence｜>",
    " lead",
    "trail ",
    "",
]


@pytest.mark.parametrize("pre", [None, "smollm", "llama-bpe", "qwen2", "qwen35", "gpt-4o", "tekken"])
def test_byte_level_file_equals_transformers(tmp_path, pre):
    tokens, types, merges = _byte_level_vocab()
    bos, eos = tokens.index("<|endoftext|>"), tokens.index("<|im_end|>")
    keys = dict(add_token_merges=merges, add_tokenizer_pre=pre, add_bos_token_id=bos, add_eos_token_id=eos)
    ours = _compare(_write(tmp_path / "bpe.gguf", "llama", "gpt2", tokens, types, **keys), BYTE_TEXTS)
    assert ours.prefix_ids == ours.suffix_ids == []  # no BOS by default for "gpt2"
    assert ours.special_ids == {tokens.index(t) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")}
    assert ours.encode("<think>") == [tokens.index("<think>")]
    assert ours.token_strings(ours.encode("<think> the")) == ["<think>", " the"]
    for text in BYTE_TEXTS:
        assert ours.decode(ours.encode(text)) == text


def test_byte_level_bos_spelled_outside_the_alphabet_keeps_the_files_id(tmp_path):
    """The one place we differ: transformers appends such a BOS as a new id past the vocabulary
    (one the model's embedding does not have); we keep the file's id and its vocabulary size."""
    tokens, types, merges = _byte_level_vocab()
    bos = tokens.index("<｜begin▁of▁sentence｜>")
    keys = dict(add_token_merges=merges, add_bos_token_id=bos, add_add_bos_token=True)
    path = _write(tmp_path / "bos.gguf", "llama", "gpt2", tokens, types, **keys)
    ours = tokenizer_from_gguf(_read_meta(path))
    reference = AutoTokenizer.from_pretrained(str(tmp_path), gguf_file=path.name)
    assert ours.vocab_size == len(tokens) and ours.prefix_ids == [bos]
    assert ours.encode("the world")[1:] == reference.encode("the world")[1:]  # the text's ids agree


# ---------------------------------------------------------------------------------------------
# refusals: one line naming the problem, before anything large is built
# ---------------------------------------------------------------------------------------------
def _meta(**changes):
    tokens, types, merges = _byte_level_vocab()
    meta = {
        "general.architecture": "llama",
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.merges": merges,
        "tokenizer.ggml.bos_token_id": 1,
    }
    for key, value in changes.items():
        key = key if key.startswith("general") else f"tokenizer.ggml.{key}"
        if value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    return meta


N = len(_byte_level_vocab()[0])
EURO_BYTES = "".join(bytes_to_unicode()[b] for b in "€".encode())  # how a byte-level vocabulary spells €
REFUSALS = {
    "unknown type": (dict(model="bert"), ["'bert'", "tokenizer.ggml.model", "not supported"]),
    "unigram": (dict(model="t5"), ["'t5'", "not supported"]),
    "no type": (dict(model=None), ["tokenizer.ggml.model", "missing"]),
    "no tokens": (dict(tokens=None), ["tokenizer.ggml.tokens", "missing"]),
    "empty tokens": (dict(tokens=[], token_type=[], merges=[]), ["tokenizer.ggml.tokens", "empty"]),
    "token not text": (dict(tokens=[*_byte_level_vocab()[0][:-1], 7]), ["tokenizer.ggml.tokens", "strings"]),
    "types too short": (dict(token_type=[1] * (N - 1)), ["token_type", f"{N - 1} entries", f"{N} tokens"]),
    "scores too long": (dict(scores=[0.0] * (N + 1)), ["tokenizer.ggml.scores", f"{N + 1} entries"]),
    "type not a number": (dict(token_type=["1"] * N), ["token_type", "whole numbers"]),
    "merge of unknown piece": (
        dict(merges=["Ġt he", "zz q"]),
        ["merges entry 1", "'zz'", "not in the vocabulary"],
    ),
    "merge not a pair": (dict(merges=["Ġthe"]), ["merges entry 0", "two pieces"]),
    "no merges": (dict(merges=None), ["tokenizer.ggml.merges", "missing"]),
    "bos out of range": (dict(bos_token_id=N), ["bos_token_id", f"is {N}", "out of range"]),
    "eos negative": (dict(eos_token_id=-1), ["eos_token_id", "out of range"]),
    "pad not an id": (dict(padding_token_id="2"), ["padding_token_id", "token id"]),
    "flag not a boolean": (dict(add_bos_token=1), ["add_bos_token", "true or false"]),
    "duplicate token": (
        dict(tokens=["a", "b", "a"], token_type=None, merges=[]),
        ["'a' twice", "ids 0 and 2"],
    ),
    "respelled duplicate": (
        dict(tokens=[EURO_BYTES, "€"], token_type=None, merges=[], bos_token_id=None),
        [f"{EURO_BYTES!r} (id 0)", "'€' (id 1)", "byte alphabet"],
    ),
    "sentencepiece without ranks": (dict(model="llama", merges=None), ["merges", "scores"]),
    "pre not a name": (dict(pre=3), ["tokenizer.ggml.pre", "name"]),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_bad_metadata_is_refused_in_one_line(monkeypatch, case):
    changes, words = REFUSALS[case]

    def no_build(*args, **kwargs):
        raise AssertionError("a refused tokenizer must not get as far as building")

    monkeypatch.setattr(gguf_tokens, "_assemble", no_build)
    with pytest.raises(TokenizerError) as caught:
        tokenizer_from_gguf(_meta(**changes))
    message = str(caught.value)
    assert "\n" not in message
    for word in words:
        assert word in message, (word, message)
