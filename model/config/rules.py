"""The wording every config check shares: how a range's ends are written, whether a value is a whole
number, a choice, a flag or a real number in its declared bounds, and the line
each check adds when it is not. The parts of a config (:mod:`model.config.parts`) check their own fields
with these, so that one kind of mistake reads the same whichever field it is in.

Each check takes the part holding the field (whose fields are named as the config's, each declared with
its choices or bounds: :meth:`~model.config.parts.base.Part.declared`) and the field's name, and appends
its problem to ``out``; those that return a ``bool`` say whether the value is valid (so that a check of
how it agrees with other fields may run).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, TypeGuard

from model.config.fields import MAX_ROPE_BASE


class Part(Protocol):
    """What a check needs of the part holding the field: each field's declaration
    (:meth:`model.config.parts.base.Part.declared`)."""

    def declared(self, name: str) -> Mapping[str, Any]: ...


def fmt(x: float) -> str:
    """A range's end as a person writes it: 0.001, 1e-12, 10,000."""
    return f"{x:,.0f}" if 1 <= x < 1e15 and x == int(x) else f"{x:g}"


def rope_base_ok(v: object) -> bool:
    """Whether ``v`` is a RoPE base θ: a number greater than 1, at most :data:`MAX_ROPE_BASE`."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 1.0 < v <= MAX_ROPE_BASE


def is_number(v: object) -> TypeGuard[float]:
    """A real number (``True`` is not one)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_positive_int(v: object) -> TypeGuard[int]:
    """A whole number of at least 1 (``True`` is not one)."""
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def bounds(holder: Part, name: str) -> tuple[float, float]:
    """The (lo, hi) that real-number field ``name`` is declared to lie in, both ends included."""
    return holder.declared(name)["bounds"]


def out_of_range(holder: Part, name: str) -> bool:
    """Whether number field ``name`` is not a number in its :func:`bounds` (NaN is not)."""
    v = getattr(holder, name)
    lo, hi = bounds(holder, name)
    return isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi


def kind_problems(
    holder: Part,
    *,
    sizes: Iterable[str] = (),
    optional_sizes: Iterable[str] = (),
    choices: Iterable[str] = (),
    flags: Iterable[str] = (),
) -> list[str]:
    """The fields' kinds, in this order: sizes (whole numbers ≥ 1; ``optional_sizes`` may also be
    ``None``), choices (one of those the field declares), flags (``True`` or ``False``)."""
    out: list[str] = []
    optional = tuple(optional_sizes)
    for name in (*sizes, *optional):
        value = getattr(holder, name)
        if value is None and name in optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            out.append(f"{name}={value!r} must be a whole number")
        elif value <= 0:
            out.append(f"{name}={value} must be a positive number (at least 1)")
    for name in choices:
        value, options = getattr(holder, name), holder.declared(name)["choices"]
        if value not in options:
            out.append(f"{name}={value!r} is not one of {', '.join(options)}")
    out += [
        f"{name}={getattr(holder, name)!r} must be true or false"
        for name in flags
        if not isinstance(getattr(holder, name), bool)
    ]
    return out


def whole(out: list[str], holder: Part, name: str, *, least: int = 1, optional: bool = False) -> bool:
    """Whether ``name`` is a whole number of at least ``least`` (1 or 0); else its problem is listed.
    ``optional``: ``None`` is allowed, and is not valid (there is nothing to agree with)."""
    v = getattr(holder, name)
    if v is None and optional:
        return False
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        kind = "a positive whole number" if least else "a whole number, 0 or more"
        out.append(f"{name}={v!r} must be {kind}")
        return False
    return True


def positive(out: list[str], holder: Part, name: str, *, optional: bool = False) -> bool:
    """Whether ``name`` is set and in its :func:`bounds`; else its problem is listed (``optional``:
    ``None`` is allowed, and is not valid)."""
    v = getattr(holder, name)
    if v is None and optional:
        return False
    if out_of_range(holder, name):
        lo, hi = bounds(holder, name)
        empty = " (or empty)" if optional else ""
        out.append(f"{name}={v!r} must be a positive number from {fmt(lo)} to {fmt(hi)}{empty}")
        return False
    return True


def softcap(out: list[str], holder: Part, name: str) -> None:
    """A soft cap ``c`` (scores or logits ← c·tanh(x/c)): empty (off), or in its :func:`bounds`."""
    v = getattr(holder, name)
    if v is not None and out_of_range(holder, name):
        lo, hi = bounds(holder, name)
        out.append(
            f"{name}={v!r} must be a positive number from {fmt(lo)} to {fmt(hi)}, such as 30 (or empty: off)"
        )


def needs(out: list[str], holder: Part, defaults: Iterable[tuple[str, object]], what: str) -> None:
    """``name needs what`` for each field of ``defaults`` that is not at its default."""
    out += [f"{name} needs {what}" for name, default in defaults if getattr(holder, name) != default]


__all__ = [
    "bounds",
    "fmt",
    "is_number",
    "is_positive_int",
    "kind_problems",
    "needs",
    "out_of_range",
    "positive",
    "rope_base_ok",
    "softcap",
    "whole",
]
