"""Variants of a config: "the same but n_kv_heads = 1", written and read as text.

``parse_changes("n_kv_heads=1, norm_position=post")`` → ``{"n_kv_heads": 1, "norm_position": "post"}``,
typed by :class:`~model.config.GPTConfig`'s fields (:data:`FIELD_KINDS`; "auto", "none" or "off" is
``None`` for the derived sizes and the optional parts, such as ``n_experts=off``). Unknown names and
values that are not of the field's type raise :class:`~model.config.ConfigError` with one line per
problem. :func:`describe_changes` writes them back; :func:`unique_name` names a new run beside the
others.
"""

from __future__ import annotations

import difflib
import re
import typing
from typing import Any

from model.config import CHOICES, ConfigError, GPTConfig

__all__ = ["FIELD_KINDS", "describe_changes", "format_value", "parse_changes", "parse_value", "unique_name"]


def _field_kinds() -> dict[str, str]:
    hints = GPTConfig.field_types()
    out: dict[str, str] = {}
    for f in GPTConfig.fields():
        t = hints[f.name]
        args = typing.get_args(t)
        if f.name in CHOICES:
            out[f.name] = "choice"
        elif t is bool:
            out[f.name] = "bool"
        elif t is int:
            out[f.name] = "int"
        elif int in args and type(None) in args:
            out[f.name] = "opt_int"
        elif float in args and type(None) in args:
            out[f.name] = "opt_float"
        elif t is str:
            out[f.name] = "text"
        else:
            out[f.name] = "float"
    return out


FIELD_KINDS: dict[str, str] = _field_kinds()

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def parse_value(name: str, text: str) -> Any:
    """The value of field ``name`` written as ``text`` ("1", "post", "true", "auto", "1e-6").

    Raises :class:`ConfigError` for an unknown field or a value of the wrong type (choices are
    checked too, naming the options).
    """
    if name not in FIELD_KINDS:
        near = difflib.get_close_matches(name, list(FIELD_KINDS), n=1, cutoff=0.6)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError([f"unknown option {name!r}{hint}"])
    kind = FIELD_KINDS[name]
    s = str(text).strip()
    low = s.lower()
    if kind == "choice":
        if s not in CHOICES[name]:
            raise ConfigError([f"{name}={s!r} is not one of {', '.join(CHOICES[name])}"])
        return s
    if kind == "bool":
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ConfigError([f"{name}={s!r} must be true or false"])
    if kind == "text":  # window_pattern's letters
        return s
    if kind.startswith("opt_") and low in ("auto", "none", "null", "off", ""):
        return None
    if kind in ("int", "opt_int"):
        try:
            return int(s.replace("_", "").replace(",", ""))
        except ValueError:
            extra = " or auto" if kind == "opt_int" else ""
            raise ConfigError([f"{name}={s!r} must be a whole number{extra}"]) from None
    try:
        return float(s)
    except ValueError:
        extra = " or off" if kind == "opt_float" else ""
        raise ConfigError([f"{name}={s!r} must be a number{extra}"]) from None


def parse_changes(text: str) -> dict[str, Any]:
    """``"n_kv_heads=1, norm_position = post"`` → ``{"n_kv_heads": 1, "norm_position": "post"}``.

    Separators: commas, semicolons or new lines. An empty text is no change (the base config).
    Every problem is collected into one :class:`ConfigError`.
    """
    out: dict[str, Any] = {}
    problems: list[str] = []
    for item in filter(None, (p.strip() for p in re.split(r"[,;\n]", text or ""))):
        name, eq, value = item.partition("=")
        if not eq:
            problems.append(f"write each change as field=value, got {item!r}")
            continue
        try:
            out[name.strip()] = parse_value(name.strip(), value)
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError(problems)
    return out


#: Optional parts of the block (unset = not there), written "off" rather than "auto"
OFF_WHEN_UNSET = frozenset(
    {"sliding_window", "attn_softcap", "final_softcap", "n_experts", "kv_lora_rank", "q_lora_rank"}
)


def format_value(value: Any, name: str = "") -> str:
    """A field value as a user writes it: ``None`` → "auto" ("off" for an optional part of field
    ``name``: :data:`OFF_WHEN_UNSET`), booleans lower case, floats short."""
    if value is None:
        return "off" if name in OFF_WHEN_UNSET else "auto"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def describe_changes(changes: dict[str, Any]) -> str:
    """``{"n_kv_heads": 1}`` → ``"n_kv_heads=1"``; no change → ``"base"``."""
    if not changes:
        return "base"
    return ", ".join(f"{k}={format_value(v, k)}" for k, v in changes.items())


def unique_name(name: str, taken: typing.Iterable[str]) -> str:
    """``name``, or ``name (2)``, ``name (3)`` ... when it is taken."""
    taken = set(taken)
    if name not in taken:
        return name
    i = 2
    while f"{name} ({i})" in taken:
        i += 1
    return f"{name} ({i})"
