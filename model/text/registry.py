"""The tokenizer registry: every kind a ``tokenizer.json`` may name, listed explicitly.

``tokenizer_from_dict(d)`` rebuilds a tokenizer from its :meth:`~model.text.tokens.Tokenizer.to_dict` form:

=========  =======================================  ==========================================
type       class                                    module
=========  =======================================  ==========================================
``char``   :class:`~model.text.tokens.CharTokenizer`     :mod:`model.text.tokens`
``byte``   :class:`~model.text.tokens.ByteTokenizer`     :mod:`model.text.tokens`
``hf_bpe`` :class:`~model.text.bpe.HFTokenizer`          :mod:`model.text.bpe` (the ``tokenizers`` library)
=========  =======================================  ==========================================

The imports point one way only: this module knows every tokenizer module, and none of them knows it.
The BPE module (and with it the ``tokenizers`` library) is imported only when a file names that kind,
so opening a character-level checkpoint stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from model.text.tokens import ByteTokenizer, CharTokenizer, Tokenizer, TokenizerError

__all__ = ["known_tokenizer_types", "register_tokenizer", "tokenizer_from_dict"]


def _hf_bpe(d: dict[str, Any]) -> Tokenizer:
    from model.text.bpe import HFTokenizer  # loads `tokenizers` only for a checkpoint that needs it

    return HFTokenizer.from_dict(d)


_REGISTRY: dict[str, Callable[[dict[str, Any]], Tokenizer]] = {
    CharTokenizer.kind: CharTokenizer.from_dict,
    ByteTokenizer.kind: ByteTokenizer.from_dict,
    "hf_bpe": _hf_bpe,
}


def register_tokenizer(kind: str, from_dict: Callable[[dict[str, Any]], Tokenizer]) -> None:
    """Make ``tokenizer_from_dict({"type": kind, ...})`` call ``from_dict(d)`` (a kind added at run time).

    ``from_dict`` should raise :class:`~model.text.tokens.TokenizerError` naming what is malformed.
    """
    _REGISTRY[kind] = from_dict


def known_tokenizer_types() -> list[str]:
    return sorted(_REGISTRY)


def tokenizer_from_dict(d: Any) -> Tokenizer:
    """Rebuild a tokenizer from its :meth:`Tokenizer.to_dict` form (the content of tokenizer.json).

    Raises :class:`TokenizerError` for anything but a dict with a known ``"type"`` and well-formed fields.
    """
    known = ", ".join(known_tokenizer_types())
    if not isinstance(d, dict):
        raise TokenizerError(f"a tokenizer must be a JSON object with a 'type', got {type(d).__name__}")
    if "type" not in d:
        raise TokenizerError(f"the tokenizer has no 'type' field; known types: {known}")
    kind = d["type"]
    if not isinstance(kind, str) or kind not in _REGISTRY:
        raise TokenizerError(f"unknown tokenizer type {kind!r}; known types: {known}")
    try:
        return _REGISTRY[kind](d)
    except TokenizerError:
        raise
    except (TypeError, ValueError, KeyError) as e:
        raise TokenizerError(f"malformed {kind!r} tokenizer: {e}") from e
