"""Every call into the ``tokenizers`` library on a user's tokenizer, behind one guard: :class:`Backend`.

The library is Rust. What it cannot do it reports as a plain ``Exception`` (an unknown token named as
``unk_token``), a ``TypeError`` (text that is not valid Unicode: the lone surrogates Python makes of
bytes that are not UTF-8, ``"\\udcff"``) or, worst, a Rust panic, raised as ``pyo3_runtime.PanicException``,
which derives from ``BaseException`` and slips past every ``except Exception`` (a truncation ``stride``
at least its ``max_length``). :class:`Backend` wraps a ``tokenizers.Tokenizer`` so that each such failure,
at load and at every encode and decode, is one :class:`~model.text.tokens.TokenizerError` line naming
the file.

Some failures are prevented rather than caught, since Rust prints a panic to the terminal before Python
sees it: a tokenizer runs without the truncation and padding its file may carry (``transformers`` too
drops them unless asked: they would cut or pad every prompt), its ``unk_token`` must be in its
vocabulary, and lone surrogates become ``?`` before the text reaches the library, as
:class:`~model.text.tokens.ByteTokenizer` encodes them (UTF-8 cannot hold them).

Every :class:`~model.text.bpe.HFTokenizer` runs on a :class:`Backend` (its constructor wraps the
library's tokenizer it is given): a Hugging Face folder's, our checkpoints' ``hf_bpe`` form, a nanoGPT
run's GPT-2 files and a GGUF file's vocabulary alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from tokenizers import Encoding
from tokenizers import Tokenizer as _Raw

from model.errors import first_line
from model.text.tokens import TokenizerError

__all__ = ["Backend", "clean_text"]

T = TypeVar("T")


def _is_panic(exc: BaseException) -> bool:
    """A Rust panic in the library (``pyo3_runtime.PanicException``, not importable by name)."""
    return type(exc).__name__ == "PanicException"


def _guarded(what: str, call: Callable[[], T]) -> T:
    """``call()``, with the library's failures (exceptions and panics) as one TokenizerError line."""
    try:
        return call()
    except TokenizerError:
        raise
    except Exception as exc:
        raise TokenizerError(f"{what}: the tokenizers library refused it: {first_line(exc)}") from None
    except BaseException as exc:
        if not _is_panic(exc):
            raise  # KeyboardInterrupt, SystemExit
        raise TokenizerError(f"{what}: the tokenizers library failed on it: {first_line(exc)}") from None


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate (what Python makes of bytes that are not UTF-8, in a command
    line or a paste) replaced by ``?``, as :class:`~model.text.tokens.ByteTokenizer` encodes it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


class Backend:
    """A ``tokenizers.Tokenizer`` whose every call is guarded (module docstring); ``what`` names the
    file it came from in each message. Offers what :class:`~model.text.bpe.HFTokenizer` calls."""

    def __init__(self, raw: _Raw, what: str):
        self._raw = raw
        self.what = what
        _guarded(what, raw.no_truncation)
        _guarded(what, raw.no_padding)
        unk = getattr(raw.model, "unk_token", None)
        if isinstance(unk, str) and unk and raw.token_to_id(unk) is None:
            raise TokenizerError(f"{what}: its unk_token {unk[:40]!r} is not in its vocabulary")

    @classmethod
    def from_str(cls, text: str, what: str) -> Backend:
        """From the library's JSON (a Hugging Face ``tokenizer.json``)."""
        raw = _guarded(f"{what} is not a valid Hugging Face tokenizer", lambda: _Raw.from_str(text))
        return cls(raw, what)

    # ---- what HFTokenizer reads ------------------------------------------------------------------
    @property
    def decoder(self) -> Any:
        return self._raw.decoder

    @property
    def model(self) -> Any:
        return self._raw.model

    @property
    def normalizer(self) -> Any:
        return self._raw.normalizer

    @property
    def pre_tokenizer(self) -> Any:
        return self._raw.pre_tokenizer

    @property
    def post_processor(self) -> Any:
        return self._raw.post_processor

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoding:
        if not isinstance(text, str):
            raise TokenizerError(f"{self.what}: only text can be encoded, not {type(text).__name__}")
        clean = clean_text(text)
        return _guarded(self.what, lambda: self._raw.encode(clean, add_special_tokens=add_special_tokens))

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return _guarded(self.what, lambda: self._raw.decode(ids, skip_special_tokens=skip_special_tokens))

    def token_to_id(self, token: str) -> int | None:
        return _guarded(self.what, lambda: self._raw.token_to_id(token))

    def id_to_token(self, i: int) -> str | None:
        return _guarded(self.what, lambda: self._raw.id_to_token(i))

    def get_vocab_size(self, with_added_tokens: bool = True) -> int:
        return _guarded(self.what, lambda: self._raw.get_vocab_size(with_added_tokens=with_added_tokens))

    def get_added_tokens_decoder(self) -> dict[int, Any]:
        return _guarded(self.what, self._raw.get_added_tokens_decoder)

    def to_str(self) -> str:
        return _guarded(self.what, self._raw.to_str)

    def largest_id(self) -> int:
        """The largest id the vocabulary or an added token has (-1 when there is none)."""
        vocab = _guarded(self.what, lambda: self._raw.get_vocab(with_added_tokens=True))
        return max(vocab.values(), default=-1)
