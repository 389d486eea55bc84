"""Tokenizers: text <-> integer ids, and the display form of each token.

Two tokenizers ship with the core, both with the same small interface (:class:`Tokenizer`):

* :class:`CharTokenizer` -- one token per character, vocabulary = the sorted unique characters of a
  corpus (nanoGPT's ``shakespeare_char``). Ids are indices into ``chars``: ``encode("ab") = [chars.index("a"),
  chars.index("b")]``. Text with characters outside the vocabulary raises :class:`UnknownCharactersError`
  naming them, or, with ``encode(text, errors="replace")``, maps each of them to ``fallback``.
* :class:`ByteTokenizer` -- one token per UTF-8 byte, ``V = 256``: any text at all can be encoded.
  ``decode`` replaces incomplete or invalid UTF-8 sequences by U+FFFD instead of failing, so decoding
  a model's sampled bytes never crashes.

A tokenizer is saved as ``tokenizer.json`` through :meth:`Tokenizer.to_dict`::

    {"type": "char", "chars": "\\n !,.abc..."}      {"type": "byte"}

and rebuilt by :func:`model.text.registry.tokenizer_from_dict`, which lists every kind (these two
and the BPE of :mod:`model.text.bpe`) explicitly.

:func:`visible` turns a token's text into the label every view draws on its axes: space ``␣``,
newline ``⏎``, tab ``⇥``, other invisible characters as ``\\xNN``/``\\uNNNN`` escapes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from model.errors import AttentionLabError

if TYPE_CHECKING:
    from model.text.chat import ChatTemplate

__all__ = [
    "ByteTokenizer",
    "CharTokenizer",
    "Tokenizer",
    "TokenizerError",
    "UnknownCharactersError",
    "visible",
]

#: What ``decode`` and ``token_strings`` show for an id outside the vocabulary (a padded output head).
UNKNOWN_ID_TEXT = "\ufffd"


class TokenizerError(AttentionLabError, ValueError):
    """A tokenizer cannot be built, loaded or applied; the message says what is wrong."""


class UnknownCharactersError(TokenizerError):
    """Text holds characters a :class:`CharTokenizer` has no token for.

    ``chars`` lists them once each, in order of first appearance.
    """

    MAX_LISTED = 20

    def __init__(self, chars: Sequence[str], vocab_size: int):
        self.chars = list(chars)
        listed = ", ".join(repr(c) for c in self.chars[: self.MAX_LISTED])
        more = len(self.chars) - self.MAX_LISTED
        if more > 0:
            listed += f" and {more} more"
        n = len(self.chars)
        super().__init__(
            f"{n} character{'s' if n != 1 else ''} not in the tokenizer's vocabulary of {vocab_size}: "
            f"{listed} (a model with the byte-level tokenizer reads any text)"
        )


class Tokenizer(ABC):
    """The interface every tokenizer offers.

    ``encode(text) -> list[int]`` of ids in ``[0, vocab_size)``; ``decode(ids) -> str``;
    ``token_strings(ids)`` gives the text of each token separately (for axis labels, pass them
    through :func:`visible`); ``to_dict()`` is the ``tokenizer.json`` content.
    """

    #: The ``"type"`` written to tokenizer.json.
    kind: ClassVar[str] = ""
    #: Ids that end a generation (a model's end-of-sequence and end-of-turn tokens, e.g. SmolLM2's
    #: <|im_end|>): what the loaders know of the model, empty for a tokenizer of our own
    stop_ids: frozenset[int] = frozenset()
    #: The model's chat template (:class:`~model.text.chat.ChatTemplate`) when its files carry one
    chat_template: ChatTemplate | None = None

    @property
    @abstractmethod
    def vocab_size(self) -> int:
        """V, the number of distinct token ids."""

    @property
    def largest_id(self) -> int:
        """The largest id ``encode`` can give: a model needs an embedding row for each up to it
        (``V - 1`` here; a tokenizer read from a file says what its file holds)."""
        return self.vocab_size - 1

    @abstractmethod
    def encode(self, text: str, errors: str = "strict") -> list[int]:
        """Text -> ids. ``errors="replace"`` substitutes what the vocabulary lacks instead of raising."""

    @abstractmethod
    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> text. Never raises for ids of the right type; unknown ids decode to U+FFFD."""

    @abstractmethod
    def token_strings(self, ids: Iterable[int]) -> list[str]:
        """The text of each token on its own, one string per id."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable description; :func:`tokenizer_from_dict` rebuilds an equal tokenizer."""

    def encode_array(self, text: str, errors: str = "strict") -> np.ndarray:
        """Like :meth:`encode` but returns a 1-D ``np.int32`` array (fast path for whole corpora)."""
        return np.asarray(self.encode(text, errors=errors), dtype=np.int32)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Tokenizer) and self.to_dict() == other.to_dict()

    def __hash__(self) -> int:
        return hash(repr(sorted(self.to_dict().items())))


def _check_errors(errors: str) -> None:
    if errors not in ("strict", "replace"):
        raise ValueError(f"errors={errors!r}: use 'strict' or 'replace'")


class CharTokenizer(Tokenizer):
    """One token per character; id ``i`` is the character ``chars[i]``.

    ``fallback`` is the character that ``encode(text, errors="replace")`` puts in place of unknown
    ones: by default ``"?"`` if the vocabulary has it, else ``" "``, else ``chars[0]``.
    """

    kind = "char"

    def __init__(self, chars: str, fallback: str | None = None):
        if not isinstance(chars, str):
            raise TokenizerError(f"char tokenizer: 'chars' must be a string, got {type(chars).__name__}")
        if not chars:
            raise TokenizerError("char tokenizer: 'chars' is empty; it needs at least one character")
        if len(set(chars)) != len(chars):
            seen: set[str] = set()
            dup = [c for c in chars if c in seen or seen.add(c)]  # type: ignore[func-returns-value]
            raise TokenizerError(
                "char tokenizer: 'chars' repeats " + ", ".join(repr(c) for c in dict.fromkeys(dup))
            )
        self.chars = chars
        self._stoi = {c: i for i, c in enumerate(chars)}
        self._default_fallback = fallback is None
        if fallback is None:
            fallback = "?" if "?" in self._stoi else " " if " " in self._stoi else chars[0]
        if fallback not in self._stoi:
            raise TokenizerError(f"char tokenizer: fallback {fallback!r} is not one of its characters")
        self.fallback = fallback
        # For encode_array: code points in ascending order and the id of each.
        cps = np.fromiter((ord(c) for c in chars), dtype=np.int64, count=len(chars))
        self._order = np.argsort(cps, kind="stable")
        self._sorted_cps = cps[self._order]

    @classmethod
    def from_text(cls, text: str) -> CharTokenizer:
        """Vocabulary = the sorted unique characters of ``text`` (sorted by code point)."""
        if not text:
            raise TokenizerError("cannot build a character tokenizer from empty text")
        return cls("".join(sorted(set(text))))

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def unknown_chars(self, text: str) -> list[str]:
        """Characters of ``text`` outside the vocabulary, once each, in order of first appearance."""
        return [c for c in dict.fromkeys(text) if c not in self._stoi]

    def encode(self, text: str, errors: str = "strict") -> list[int]:
        _check_errors(errors)
        stoi = self._stoi
        try:
            return [stoi[c] for c in text]
        except KeyError:
            if errors == "strict":
                raise UnknownCharactersError(self.unknown_chars(text), self.vocab_size) from None
        fb = stoi[self.fallback]
        return [stoi.get(c, fb) for c in text]

    def encode_array(self, text: str, errors: str = "strict") -> np.ndarray:
        _check_errors(errors)
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int64)
        pos = np.searchsorted(self._sorted_cps, cps)
        pos_c = np.minimum(pos, len(self._sorted_cps) - 1)
        known = self._sorted_cps[pos_c] == cps
        ids = self._order[pos_c].astype(np.int32)
        if not known.all():
            if errors == "strict":
                raise UnknownCharactersError(self.unknown_chars(text), self.vocab_size)
            ids[~known] = self._stoi[self.fallback]
        return ids

    def decode(self, ids: Iterable[int]) -> str:
        return "".join(self.token_strings(ids))

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        chars, n = self.chars, len(self.chars)
        return [chars[i] if 0 <= i < n else UNKNOWN_ID_TEXT for i in (int(i) for i in ids)]

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"type": self.kind, "chars": self.chars}
        if not self._default_fallback:
            d["fallback"] = self.fallback
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CharTokenizer:
        if "chars" not in d:
            raise TokenizerError("char tokenizer: the 'chars' field is missing")
        fallback = d.get("fallback")
        if fallback is not None and not isinstance(fallback, str):
            raise TokenizerError(f"char tokenizer: 'fallback' must be a string, got {fallback!r}")
        return cls(d["chars"], fallback=fallback)

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


class ByteTokenizer(Tokenizer):
    """One token per UTF-8 byte: ``V = 256``, id = byte value.

    ``encode`` never fails (lone surrogates, which UTF-8 cannot hold, become ``?``). ``decode`` maps
    invalid or incomplete UTF-8 to U+FFFD. ``token_strings`` shows ASCII bytes as their character and
    every other byte, which is only part of a character, as its escape, e.g. ``"\\xe2"``.
    """

    kind = "byte"

    @property
    def vocab_size(self) -> int:
        return 256

    def encode(self, text: str, errors: str = "strict") -> list[int]:
        _check_errors(errors)
        return list(text.encode("utf-8", "replace"))

    def encode_array(self, text: str, errors: str = "strict") -> np.ndarray:
        _check_errors(errors)
        return np.frombuffer(text.encode("utf-8", "replace"), dtype=np.uint8).astype(np.int32)

    def decode(self, ids: Iterable[int]) -> str:
        out: list[str] = []
        run = bytearray()
        for i in (int(i) for i in ids):
            if 0 <= i < 256:
                run.append(i)
            else:
                out.append(run.decode("utf-8", "replace") + UNKNOWN_ID_TEXT)
                run = bytearray()
        out.append(run.decode("utf-8", "replace"))
        return "".join(out)

    def token_strings(self, ids: Iterable[int]) -> list[str]:
        return [
            chr(i) if 0 <= i < 128 else f"\\x{i:02x}" if 128 <= i < 256 else UNKNOWN_ID_TEXT
            for i in (int(i) for i in ids)
        ]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ByteTokenizer:
        return cls()

    def __repr__(self) -> str:
        return "ByteTokenizer()"


_NAMED = {" ": "␣", "\n": "⏎", "\t": "⇥"}


def _escape(c: str) -> str:
    o = ord(c)
    return f"\\x{o:02x}" if o < 256 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}"


def visible(token_str: str) -> str:
    """A token's text with whitespace and control characters made visible, for axis labels.

    Space -> ``␣``, newline -> ``⏎``, tab -> ``⇥``; every other character that ``str.isprintable``
    rejects (control, format, line/paragraph separators, spaces other than U+0020, surrogates, private
    use, unassigned) becomes an escape such as ``\\x0d``, ``\\xa0`` or ``\\u200b``. Everything else is
    returned unchanged.
    """
    out = []
    for c in token_str:
        named = _NAMED.get(c)
        if named is not None:
            out.append(named)
        elif c.isprintable():
            out.append(c)
        else:
            out.append(_escape(c))
    return "".join(out)
