"""How the Qt-free core holds a callback: the one rule of :class:`~app.core.state.Signal` and
:class:`~app.core.hub.Hub`, so that a subscription never keeps its subscriber alive.

A bound method (``view.redraw``) is held by a :class:`weakref.WeakMethod`: once its object is
collected the callback is gone, and the signal or hub forgets it. Anything else (a function, a
lambda, a builtin method such as ``list.append`` or a Qt signal's ``emit``) is held strongly, until
it is disconnected: a lambda that captures an object keeps that object alive.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from types import MethodType
from typing import Any

#: a held callback: call it for the callback, or None once its object is gone
Held = Callable[[], Callable[..., Any] | None]


def hold(callback: Callable[..., Any]) -> Held:
    """``callback`` held by the rule above; TypeError when it is not callable."""
    if not callable(callback):
        raise TypeError(f"{callback!r} is not callable")
    if isinstance(callback, MethodType):
        return weakref.WeakMethod(callback)
    return lambda: callback


__all__ = ["Held", "hold"]
