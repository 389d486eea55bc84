"""GPT-2's byte-level BPE (and any Hugging Face ``tokenizers`` tokenizer) behind our Tokenizer interface.

The algorithm itself is the ``tokenizers`` library's; this module only loads it from the files a model
directory holds and adapts it to :class:`model.text.tokens.Tokenizer`:

* ``vocab.json`` + ``merges.txt`` (GPT-2's original files): a BPE model with GPT-2's byte-level
  pre-tokenizer (its regex split, ``add_prefix_space=False``) and byte-level decoder, exactly as
  ``transformers``' GPT-2 tokenizer builds it; ``<|endoftext|>`` (or the special tokens that
  ``special_tokens_map.json`` / ``tokenizer_config.json`` name) is a special token when the vocabulary
  has it, so that text containing it encodes to its single id.
* ``tokenizer.json``: the ``tokenizers`` library's own serialisation, loaded as is: byte-level BPE
  (GPT-2, Qwen, Pythia) or SentencePiece-style BPE with byte fallback (Llama, Mistral, Gemma: ``▁`` marks a
  space, ``<0x0A>`` is the byte 0x0A for characters without a token of their own).
  ``tokenizer_config.json`` decides the special tokens around a text, as ``transformers`` does:
  ``add_bos_token`` / ``add_eos_token`` when given, the file's post-processor otherwise. ``encode`` adds
  them (``prefix_ids`` + the text's ids + ``suffix_ids``), so a Llama prompt starts with ``<s>``.

Byte-level BPE maps every byte ``b`` to a printable character ``chr(u(b))`` before merging (GPT-2's
``bytes_to_unicode``: a space is ``Ġ``, a newline ``Ċ``), so a token's vocabulary entry is not its text.
:meth:`HFTokenizer.token_strings` undoes the mapping: ``"Ġthe"`` -> ``" the"``; a token holding only
part of a UTF-8 character shows the bytes that do not form one as ``\\xNN`` escapes, as
:class:`model.text.tokens.ByteTokenizer` does.

Saved form (``tokenizer.json`` of our checkpoints, registered as type ``"hf_bpe"``)::

    {"type": "hf_bpe", "name": "gpt2", "tokenizer": "<the tokenizers library's JSON, as one string>"}
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer as _HFTokenizer
from tokenizers import decoders, models, pre_tokenizers

from model.errors import first_line
from model.files import read_json
from model.text.hf_backend import Backend
from model.text.tokens import UNKNOWN_ID_TEXT, Tokenizer, TokenizerError

__all__ = ["HFTokenizer", "byte_level_bpe", "bytes_to_unicode", "load_hf_tokenizer", "special_token_text"]

#: GPT-2's end-of-text token, a special token of the vocab.json + merges.txt form by default.
ENDOFTEXT = "<|endoftext|>"

#: The most entries a ``vocab.json`` (and lines a ``merges.txt``) may hold, and the largest either
#: file may be: GPT-2's vocab.json has 50,257 entries (about 1 MB), Llama 3's vocabulary 128,256 and
#: Gemma 3's 262,144. A file beyond is refused from its size and a count of its entries, before it is
#: parsed (ten million entries take minutes and gigabytes to become Python objects and a BPE model).
MAX_VOCAB_ENTRIES = 1_000_000
MAX_VOCAB_FILE_BYTES = 64 * 1024**2


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table.

    Printable Latin-1 bytes (``!``..``~``, ``¡``..``¬``, ``®``..``ÿ``) map to themselves; the other 68
    bytes map to ``chr(256 + n)`` in order (so ``0x20`` space -> ``Ġ`` U+0120, ``0x0a`` -> ``Ċ``).
    """
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    keep += list(range(ord("®"), ord("ÿ") + 1))
    table: dict[int, str] = {}
    n = 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + n)
            n += 1
    return table


_BYTE_OF_CHAR = {c: b for b, c in bytes_to_unicode().items()}


def byte_level_bpe(vocab: dict[str, int], merges: list[tuple[str, str]]) -> models.BPE:
    """GPT-2's BPE model over a byte-level vocabulary (no unknown token, no word affixes): the one
    construction of GPT-2's files and of a GGUF file's ``gpt2`` tokenizer."""
    return models.BPE(
        vocab=vocab,
        merges=merges,
        dropout=None,
        continuing_subword_prefix="",
        end_of_word_suffix="",
        fuse_unk=False,
    )


class HFTokenizer(Tokenizer):
    """A ``tokenizers.Tokenizer`` (GPT-2's byte-level BPE, typically) as one of our tokenizers.

    ``encode`` never adds special tokens around the text (GPT-2 adds none anyway) but does recognise
    special tokens written inside it; ``decode`` keeps special tokens; ids at or past ``vocab_size``
    (a padded output head, e.g. nanoGPT's 50304) decode to U+FFFD. The library's tokenizer is kept on
    a :class:`~model.text.hf_backend.Backend`, so no call into it fails with more than one line.
    """

    kind = "hf_bpe"

    def __init__(
        self,
        tokenizer: _HFTokenizer | Backend,
        name: str | None = None,
        prefix_ids: Iterable[int] = (),
        suffix_ids: Iterable[int] = (),
    ):
        if not isinstance(tokenizer, Backend):
            tokenizer = Backend(tokenizer, f"the tokenizer{f' {name}' if name else ''}")
        self._tok = tokenizer
        self.name = name
        self._byte_level = isinstance(tokenizer.decoder, decoders.ByteLevel)
        self._added = {i: t.content for i, t in tokenizer.get_added_tokens_decoder().items()}
        self._strings: dict[int, str] = {}
        #: special tokens ``encode`` puts before / after every text (Llama's ``<s>``): from
        #: ``tokenizer_config.json`` and the post-processor, see :func:`load_hf_tokenizer`
        self.prefix_ids = [int(i) for i in prefix_ids]
        self.suffix_ids = [int(i) for i in suffix_ids]
        self.special_ids = {i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}

    # ---- construction ---------------------------------------------------------------------------
    @classmethod
    def gpt2_from_vocab_merges(
        cls,
        vocab: dict[str, int],
        merges: list[tuple[str, str]],
        *,
        special_tokens: Iterable[str] = (ENDOFTEXT,),
        name: str | None = None,
    ) -> HFTokenizer:
        """GPT-2's tokenizer from its vocabulary and merge list (the content of vocab.json, merges.txt).

        Of ``special_tokens``, those in the vocabulary become special tokens (matched whole in text).
        """
        tok = _HFTokenizer(byte_level_bpe(vocab, merges))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        specials = [t for t in dict.fromkeys(special_tokens) if t in vocab]
        if specials:
            tok.add_special_tokens(specials)
        return cls(tok, name=name)

    @classmethod
    def from_json_str(cls, text: str, name: str | None = None, what: str = "tokenizer.json") -> HFTokenizer:
        """From the ``tokenizers`` library's JSON (a Hugging Face ``tokenizer.json``; ``what`` names it
        in a refusal)."""
        return cls(Backend.from_str(text, what), name=name)

    # ---- the Tokenizer interface ----------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._tok.get_vocab_size(with_added_tokens=True)

    @property
    def byte_level(self) -> bool:
        """True for byte-level BPE (GPT-2): every text encodes, every byte sequence decodes."""
        return self._byte_level

    @property
    def description(self) -> str:
        """One line for the window: what kind of tokenizer, how many tokens."""
        fallback = bool(getattr(self._tok.model, "byte_fallback", False))
        what = (
            "byte-level BPE"
            if self._byte_level
            else "BPE with byte fallback"
            if fallback
            else "Hugging Face tokenizer"
        )
        label = f" ({self.name})" if self.name else ""
        return f"{what}{label}, {self.vocab_size} tokens"

    @property
    def largest_id(self) -> int:
        """The largest id of the vocabulary, an added token or the BOS / EOS put around a text."""
        return max([self._tok.largest_id(), *self.prefix_ids, *self.suffix_ids])

    def encode(self, text: str, errors: str = "strict") -> list[int]:
        if errors not in ("strict", "replace"):
            raise ValueError(f"errors={errors!r}: use 'strict' or 'replace'")
        return self.prefix_ids + self._tok.encode(text, add_special_tokens=False).ids + self.suffix_ids

    def encode_array(self, text: str, errors: str = "strict") -> np.ndarray:
        return np.asarray(self.encode(text, errors=errors), dtype=np.int32)

    def decode(self, ids: Iterable[int]) -> str:
        V = self.vocab_size
        out: list[str] = []
        run: list[int] = []
        for i in (int(i) for i in ids):
            if 0 <= i < V:
                run.append(i)
            else:
                out.append(self._decode_run(run) + UNKNOWN_ID_TEXT)
                run = []
        out.append(self._decode_run(run))
        return "".join(out)

    def _decode_run(self, run: list[int]) -> str:
        return self._tok.decode(run, skip_special_tokens=False) if run else ""

    def token_id(self, token: str) -> int | None:
        """The id of the vocabulary entry ``token`` (a special token such as ``<|im_end|>``), or None."""
        found = self._tok.token_to_id(token)
        return None if found is None else int(found)

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        # memoised per id, not the whole vocabulary at once: a 49k-token vocabulary took ~0.1 s on
        # the first prompt (often the GUI thread's); each id's text never changes
        strings, V = self._strings, self.vocab_size
        out = []
        for i in (int(i) for i in ids):
            text = strings.get(i)
            if text is None:
                text = strings[i] = self._token_text(i) if 0 <= i < V else UNKNOWN_ID_TEXT
            out.append(text)
        return out

    def _token_text(self, i: int) -> str:
        if i in self._added:
            return self._added[i]
        piece = self._tok.id_to_token(i)
        if piece is None:
            return UNKNOWN_ID_TEXT
        if not self._byte_level:
            return _piece_text(piece)
        try:
            raw = bytes(_BYTE_OF_CHAR[c] for c in piece)
        except KeyError:  # not a byte-level piece (an added, non-special token): show it as written
            return piece
        return raw.decode("utf-8", errors="backslashreplace")

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.kind, "tokenizer": self._tok.to_str()}
        if self.name:
            d["name"] = self.name
        if self.prefix_ids or self.suffix_ids:
            d.update(prefix_ids=self.prefix_ids, suffix_ids=self.suffix_ids)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HFTokenizer:
        text = d.get("tokenizer")
        if not isinstance(text, str):
            raise TokenizerError("hf_bpe tokenizer: the 'tokenizer' field (the tokenizers JSON) is missing")
        name = d.get("name")
        tok = cls.from_json_str(
            text, name=name if isinstance(name, str) else None, what="the hf_bpe tokenizer"
        )
        for key in ("prefix_ids", "suffix_ids"):
            ids = d.get(key, [])
            if not isinstance(ids, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < tok.vocab_size for i in ids
            ):
                raise TokenizerError(f"hf_bpe tokenizer: {key} must be a list of token ids")
            setattr(tok, key, list(ids))
        return tok

    def __repr__(self) -> str:
        return f"HFTokenizer({self.description})"


# ---------------------------------------------------------------------------------------------
# reading a model directory
# ---------------------------------------------------------------------------------------------
_BYTE_PIECE = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def _piece_text(piece: str) -> str:
    """A SentencePiece-style piece as text: ``▁`` is a space, ``<0xNN>`` the byte NN (``\\xNN`` unless
    it is a whole ASCII character)."""
    found = _BYTE_PIECE.match(piece)
    if found:
        return bytes([int(found.group(1), 16)]).decode("utf-8", errors="backslashreplace")
    return piece.replace("\u2581", " ")


def _special_ids(tok: Backend, directory: Path) -> tuple[list[int], list[int]]:
    """The ids ``transformers`` puts around a text: what the post-processor adds, then
    ``tokenizer_config.json``'s ``add_bos_token`` / ``add_eos_token`` (when given) decide for BOS / EOS."""
    probe = "a b"
    plain = tok.encode(probe, add_special_tokens=False).ids
    full = tok.encode(probe, add_special_tokens=True).ids
    prefix, suffix = [], []
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            prefix, suffix = full[:start], full[start + len(plain) :]
            break
    path = directory / "tokenizer_config.json"
    cfg = read_json(path, error=TokenizerError) if path.is_file() else {}
    cfg = cfg if isinstance(cfg, dict) else {}
    for key, flag, ids, at_start in (
        ("bos_token", "add_bos_token", prefix, True),
        ("eos_token", "add_eos_token", suffix, False),
    ):
        content = cfg.get(key)
        content = content.get("content") if isinstance(content, dict) else content
        tid = tok.token_to_id(content) if isinstance(content, str) else None
        if flag not in cfg or tid is None:
            continue
        if cfg[flag] and tid not in ids:
            ids.insert(0 if at_start else len(ids), tid)
        elif not cfg[flag] and tid in ids:
            ids.remove(tid)
    return prefix, suffix


def _read_bounded(path: Path, separator: bytes, what: str) -> bytes:
    """The bytes of a vocab.json or merges.txt, or :class:`TokenizerError` when the file is larger
    than :data:`MAX_VOCAB_FILE_BYTES` or holds more than :data:`MAX_VOCAB_ENTRIES` ``what``, counted
    as ``separator`` bytes (an upper bound: vocab.json's ``:``, merges.txt's newlines)."""
    try:
        size = path.stat().st_size
        if size <= MAX_VOCAB_FILE_BYTES:
            with path.open("rb") as fh:
                data = fh.read(MAX_VOCAB_FILE_BYTES + 1)  # bounded even if the file grows meanwhile
                size = len(data)
    except OSError as exc:
        raise TokenizerError(f"{path.name} cannot be read: {exc.strerror or first_line(exc)}") from None
    if size > MAX_VOCAB_FILE_BYTES:
        raise TokenizerError(
            f"{path.name} is {size:,} bytes: larger than any tokenizer's (at most {MAX_VOCAB_FILE_BYTES:,}; "
            "GPT-2's vocab.json is about 1 MB)"
        )
    n = data.count(separator)
    if n > MAX_VOCAB_ENTRIES:
        raise TokenizerError(
            f"{path.name} holds about {n:,} {what}: more than any tokenizer's (at most "
            f"{MAX_VOCAB_ENTRIES:,}; GPT-2 has 50,257)"
        )
    return data


def read_merges(path: Path) -> list[tuple[str, str]]:
    """merges.txt: an optional ``#version`` line, then one ``left right`` pair per line, by priority
    (refused before it is split when it is too large: :data:`MAX_VOCAB_ENTRIES`)."""
    data = _read_bounded(path, b"\n", "lines")
    try:
        lines = data.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise TokenizerError(f"{path.name} cannot be read: {first_line(exc)}") from None
    merges: list[tuple[str, str]] = []
    for n, line in enumerate(lines, 1):
        if not line or (n == 1 and line.startswith("#version")):
            continue
        parts = line.split(" ")
        if len(parts) != 2:
            raise TokenizerError(f"{path.name} line {n} is not two tokens split by a space: {line[:40]!r}")
        merges.append((parts[0], parts[1]))
    return merges


def _special_tokens(directory: Path) -> list[str]:
    """Special tokens named by special_tokens_map.json / tokenizer_config.json (GPT-2's default otherwise)."""
    found: list[str] = []
    for fname in ("special_tokens_map.json", "tokenizer_config.json"):
        path = directory / fname
        if not path.is_file():
            continue
        data = read_json(path, error=TokenizerError)
        if not isinstance(data, dict):
            continue
        for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
            tok = special_token_text(data.get(key))
            if tok is not None:
                found.append(tok)
        found += [
            entry["content"]
            for entry in (data.get("added_tokens_decoder") or {}).values()
            if isinstance(entry, dict) and entry.get("special") and isinstance(entry.get("content"), str)
        ]
    return found or [ENDOFTEXT]


def is_hf_tokenizer_json(data: Any) -> bool:
    """Whether a parsed tokenizer.json is the ``tokenizers`` library's format (not ours, which has "type")."""
    return isinstance(data, dict) and "type" not in data and isinstance(data.get("model"), dict)


def special_token_text(value: object) -> str | None:
    """A special token as tokenizer_config.json / special_tokens_map.json name it: a string or
    ``{"content": ...}`` (None for anything else)."""
    value = value.get("content") if isinstance(value, dict) else value
    return value if isinstance(value, str) else None


def load_hf_tokenizer(
    directory: str | Path, name: str | None = None, *, vocab_size: int | None = None
) -> HFTokenizer:
    """The tokenizer of a Hugging Face model directory: tokenizer.json (read by
    :func:`model.files.read_json`, so a repeated key is refused), else vocab.json + merges.txt.

    ``vocab_size``: the model's (config.json's). The tokenizer may have fewer tokens (some models pad
    their embedding), never more, and no id at or past it (one the embedding has no row for), counting
    the BOS / EOS put around a text. Raises :class:`TokenizerError` naming the missing or malformed file.
    """
    directory = Path(directory)
    tj = directory / "tokenizer.json"
    if tj.is_file():
        data = read_json(tj, error=TokenizerError)
        if not isinstance(data, dict):
            raise TokenizerError("tokenizer.json is not a Hugging Face tokenizer: not a JSON object")
        out = HFTokenizer.from_json_str(json.dumps(data), name=name)
        out.prefix_ids, out.suffix_ids = _special_ids(out._tok, directory)
        return _fits(out, "tokenizer.json", vocab_size)
    vocab_path, merges_path = directory / "vocab.json", directory / "merges.txt"
    missing = [p.name for p in (vocab_path, merges_path) if not p.is_file()]
    if missing:
        raise TokenizerError(
            f"no tokenizer in {str(directory)!r}: it needs tokenizer.json, or vocab.json and merges.txt "
            f"({' and '.join(missing)} missing)"
        )
    _read_bounded(vocab_path, b":", "entries")  # from its size and entry count, before it is parsed
    vocab = read_json(vocab_path, error=TokenizerError)
    if not isinstance(vocab, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) for k, v in vocab.items()
    ):
        raise TokenizerError("vocab.json must map each token (a string) to its id (a whole number)")
    merges = read_merges(merges_path)
    try:
        out = HFTokenizer.gpt2_from_vocab_merges(
            vocab, merges, special_tokens=_special_tokens(directory), name=name
        )
    except TokenizerError:
        raise
    except Exception as exc:  # tokenizers rejects e.g. a merge whose pieces are not in the vocabulary
        raise TokenizerError(f"vocab.json and merges.txt do not fit together: {first_line(exc)}") from None
    return _fits(out, "the tokenizer (vocab.json, merges.txt)", vocab_size)


def _fits(tok: HFTokenizer, what: str, vocab_size: int | None) -> HFTokenizer:
    """``tok``, unless it has more tokens than ``vocab_size`` or an id at or past it."""
    if vocab_size is None:
        return tok
    if tok.vocab_size > vocab_size:
        raise TokenizerError(
            f"the tokenizer has {tok.vocab_size} tokens but config.json says vocab_size={vocab_size}"
        )
    largest = tok.largest_id
    if largest >= vocab_size:
        raise TokenizerError(
            f"{what} has token id {largest} but config.json says vocab_size={vocab_size} "
            f"(ids 0 to {vocab_size - 1}): the model has no embedding for it"
        )
    return tok
