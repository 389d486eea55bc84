"""How the session shows its inputs and its parts' fields: :class:`Announced`, a field that emits its
own signal when it is set to a new value, and :class:`PartField`, a part's field read under the
session's name. Both are typed descriptors: ``session.model`` is a ``GPT | None`` to mypy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar, overload

T = TypeVar("T")


class Announced(Generic[T]):
    """A field that emits the owner's ``signal`` (a signal of one argument) with ``announce(value)``
    (the new value itself by default; ``str`` for a device announced by name) whenever it is set to
    a value that differs from the old one; setting an equal value again says nothing. Unset, it
    reads None."""

    def __init__(self, signal: str, *, announce: Callable[[Any], Any] | None = None) -> None:
        self.signal = signal
        self.slot = f"_{signal}_value"
        self.announce = announce

    @overload
    def __get__(self, obj: None, objtype: Any = None) -> Announced[T]: ...
    @overload
    def __get__(self, obj: object, objtype: Any = None) -> T: ...
    def __get__(self, obj: object | None, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return obj.__dict__.get(self.slot)

    def __set__(self, obj: object, value: T) -> None:
        old = obj.__dict__.get(self.slot)
        if value is old or (value is not None and value == old):
            return
        obj.__dict__[self.slot] = value
        getattr(obj, self.signal).emit(value if self.announce is None else self.announce(value))


class PartField(Generic[T]):
    """A field of one of the session's parts (``path``: ``"slot.model"``, ``"slot.record.history"``,
    ``"probe.prompt"``), read under the session's name; the session's methods change it, and only a
    ``settable`` one may be set through the session."""

    def __init__(self, path: str, *, settable: bool = False) -> None:
        *self.parts, self.name = path.split(".")
        self.path = path
        self.settable = settable
        self.__doc__ = f"``session.{path}``"

    def _owner(self, obj: object) -> object:
        for part in self.parts:
            obj = getattr(obj, part)
        return obj

    @overload
    def __get__(self, obj: None, objtype: Any = None) -> PartField[T]: ...
    @overload
    def __get__(self, obj: object, objtype: Any = None) -> T: ...
    def __get__(self, obj: object | None, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return getattr(self._owner(obj), self.name)

    def __set__(self, obj: object, value: T) -> None:
        if not self.settable:
            raise AttributeError(f"session.{self.path} is changed by the session's methods, not set")
        setattr(self._owner(obj), self.name, value)


__all__ = ["Announced", "PartField"]
