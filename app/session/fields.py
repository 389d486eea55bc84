"""How the session shows its inputs and its parts' fields: :func:`announced`, a field that emits its
own signal when it is set to a new value, and :func:`part_field`, a part's field read under the
session's name."""

from __future__ import annotations

from typing import Any


def announced(signal: str, doc: str = "") -> property:
    """A field that emits the owner's ``signal`` (a Qt signal of one object argument) with the new
    value whenever it is set to a value that differs from the old one; setting the same value again
    says nothing. The value lives in the owner's ``_<signal>_value``."""
    slot = f"_{signal}_value"

    def get(self) -> Any:
        return getattr(self, slot, None)

    def set(self, value: Any) -> None:
        if value is get(self) or (value is not None and value == get(self)):
            return
        setattr(self, slot, value)
        getattr(self, signal).emit(value)

    return property(get, set, doc=doc or f"a field that announces its change with ``{signal}``")


def part_field(path: str, *, settable: bool = False) -> property:
    """A field of one of the session's parts (``path``: ``"slot.model"``, ``"slot.record.history"``,
    ``"probe.prompt"``), read under the session's name; the session's methods change it."""
    *parts, name = path.split(".")

    def owner(self):
        for part in parts:
            self = getattr(self, part)
        return self

    setter = (lambda self, value: setattr(owner(self), name, value)) if settable else None
    return property(lambda self: getattr(owner(self), name), setter, doc=f"``session.{path}``")


__all__ = ["announced", "part_field"]
