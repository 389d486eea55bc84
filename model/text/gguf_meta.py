"""The checked reading of a GGUF file's tokenizer keys (:mod:`model.text.gguf_tokens`): each key's value
of the kind its meaning needs (a list of strings, one number per token, a token id in range, a
boolean), else one :class:`~model.text.tokens.TokenizerError` line naming the key and what it holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from model.text.tokens import TokenizerError

__all__ = ["as_list", "flag", "numbers", "shown", "strings", "token_id"]


def shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:40] + '...' if len(text) > 40 else text}"


def as_list(meta: Mapping[str, Any], key: str) -> list[Any] | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TokenizerError(f"{key} must be a list, not {shown(value)}")
    return list(value)


def strings(meta: Mapping[str, Any], key: str) -> list[str] | None:
    values = as_list(meta, key)
    if values is not None:
        for i, v in enumerate(values):
            if not isinstance(v, str):
                raise TokenizerError(f"{key} must be a list of strings: entry {i} is {shown(v)}")
    return values


def numbers(meta: Mapping[str, Any], key: str, n: int, *, integer: bool) -> list[Any] | None:
    """An optional list of one number per token; its length must be the vocabulary's."""
    values = as_list(meta, key)
    if values is None:
        return None
    if len(values) != n:
        raise TokenizerError(
            f"{key} has {len(values)} entries but the vocabulary (tokenizer.ggml.tokens) has {n} tokens"
        )
    allowed: tuple[type, ...] = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, allowed):
            what = "whole numbers" if integer else "numbers"
            raise TokenizerError(f"{key} must be a list of {what}: entry {i} is {shown(v)}")
    return values


def token_id(meta: Mapping[str, Any], suffix: str, label: str, n: int) -> int | None:
    key = f"tokenizer.ggml.{suffix}"
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TokenizerError(f"{key} (the {label} token) must be a token id, not {shown(value)}")
    if not 0 <= value < n:
        raise TokenizerError(
            f"{key} (the {label} token) is {int(value)}, out of range: the vocabulary has {n} tokens "
            f"(ids 0..{n - 1})"
        )
    return int(value)


def flag(meta: Mapping[str, Any], key: str, *, default: bool) -> bool:
    value = meta.get(key)
    if value is None:
        return default
    if not isinstance(value, (bool, np.bool_)):
        raise TokenizerError(f"{key} must be true or false, not {shown(value)}")
    return bool(value)
