"""Signals without Qt, for the state objects of the tabs (``app/views/<tab>/state.py``).

A tab keeps what its pages draw (the current result, the selection, ...) in a plain Python object;
the object announces each change with a :class:`Signal`, and the pages (and the tab) connect to it.
No Qt here, so such a state object is tested without a ``QApplication`` and never depends on an
event loop: ``emit`` calls every connected callback at once, in order, in the emitting thread.

    class Selection:
        changed = Signal()            # one Signal per instance, as with Qt's signals

        def select(self, i):
            self.i = i
            self.changed.emit(i)

    s = Selection()
    s.changed.connect(print)
    s.select(3)                       # prints 3
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.core.refs import Held, hold


class Signal:
    """A list of callbacks: :meth:`connect`, :meth:`disconnect`, :meth:`emit`.

    Used as a class attribute it works like Qt's ``Signal``: each instance gets its own. ``emit``
    runs the callbacks synchronously in the calling thread, in the order they were connected, on a
    copy of the list (a callback may connect or disconnect others); an exception in a callback
    propagates to the emitter. A connection never keeps its subscriber alive: a bound method is held
    weakly and is forgotten once its object is collected; a function or a lambda is held strongly
    until :meth:`disconnect` (:func:`app.core.refs.hold`, the hub's rule too).
    """

    def __init__(self) -> None:
        self._slots: list[Held] = []
        self._name = ""

    def __set_name__(self, owner, name: str) -> None:
        self._name = name

    def __get__(self, obj, objtype=None) -> Signal:
        if obj is None:
            return self
        # first access on an instance: give it its own signal (found in its __dict__ from then on)
        bound = Signal()
        bound._name = self._name
        obj.__dict__[self._name] = bound
        return bound

    def connect(self, slot: Callable[..., Any]) -> Callable[..., Any]:
        """Call ``slot(*args)`` on every :meth:`emit`; returns ``slot`` (so it also works as a decorator)."""
        self._slots.append(hold(slot))
        return slot

    def disconnect(self, slot: Callable[..., Any] | None = None) -> None:
        """Forget ``slot`` (its first connection), or every slot when None; ValueError if not connected."""
        if slot is None:
            self._slots.clear()
            return
        for i, held in enumerate(self._slots):
            if held() == slot:  # == so that a bound method matches a new bound method of the same object
                del self._slots[i]
                return
        raise ValueError(f"{slot!r} is not connected to {self._name or 'this signal'}")

    def emit(self, *args: Any) -> None:
        """Call every connected slot with ``args``, now, in this thread."""
        for held in list(self._slots):
            slot = held()
            if slot is None:  # its object is gone
                if held in self._slots:
                    self._slots.remove(held)
                continue
            slot(*args)

    def receivers(self) -> int:
        """How many slots are connected (and alive)."""
        return sum(held() is not None for held in self._slots)

    def __repr__(self) -> str:
        return f"<Signal {self._name or '(unnamed)'}: {self.receivers()} slot(s)>"


__all__ = ["Signal"]
