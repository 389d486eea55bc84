"""A message hub without Qt: typed requests between parts that do not know one another.

One part publishes a message, a small frozen dataclass that says what it wants ("compare these
runs"); whoever subscribed to that message's type handles it. The publisher names no receiver and
imports none: the tabs of the window talk this way (:mod:`app.session.messages`), as glue's
``Hub`` carries its messages between the data viewers.

    hub = Hub()
    sub = hub.subscribe(CompareRuns, compare_tab.take_runs)   # the receiver, in its own package
    hub.publish(CompareRuns(runs=(a, b), prompt="..."))       # the sender: 1 handler heard it

Rules:

- a message goes to the handlers subscribed to exactly its type, in the order they subscribed, at
  once, in the publishing thread; :meth:`Hub.publish` returns how many heard it (0: nobody);
- a subscription never outlives its subscriber: a bound method is held by a weak reference (the
  object going away ends it), and :meth:`Subscription.cancel` ends any subscription now;
- a message nobody heard is published once more wrapped in :class:`Unheard` (a "dead letter"); a
  handler of ``Unheard`` may make a receiver (a window builds the lazily built tab it was for), and
  the message is then delivered again to the receivers it has now.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from app.core.refs import Held, hold

M = TypeVar("M")


@dataclass(frozen=True)
class Unheard:
    """A message that no handler heard when it was published (``message``)."""

    message: object


class Subscription:
    """One handler of one message type on a :class:`Hub`; :meth:`cancel` ends it.

    The handler is held as :func:`app.core.refs.hold` holds it: a bound method weakly (the
    subscription ends when its object is collected), any other callable strongly until :meth:`cancel`.
    """

    def __init__(self, hub: Hub, message_type: type, handler: Callable[[Any], object]):
        self.message_type = message_type
        self._hub: weakref.ref[Hub] = weakref.ref(hub)
        self._handler: Held = hold(handler)

    @property
    def handler(self) -> Callable[[Any], object] | None:
        """The handler, or None once cancelled or once its object is gone."""
        return self._handler()

    @property
    def active(self) -> bool:
        return self.handler is not None

    def cancel(self) -> None:
        """End the subscription now (harmless when it has ended already)."""
        self._handler = lambda: None
        hub = self._hub()
        if hub is not None:
            hub._forget(self)

    def __repr__(self) -> str:
        state = "active" if self.active else "ended"
        return f"<Subscription to {self.message_type.__name__}: {state}>"


class Hub:
    """Publish typed messages to the handlers subscribed to their type (see the module docstring)."""

    def __init__(self) -> None:
        self._subscriptions: dict[type, list[Subscription]] = {}

    def subscribe(self, message_type: type[M], handler: Callable[[M], object]) -> Subscription:
        """Call ``handler(message)`` for every ``message_type`` published from now on, until the
        returned subscription is cancelled or the handler's object is gone."""
        sub = Subscription(self, message_type, handler)
        self._subscriptions.setdefault(message_type, []).append(sub)
        return sub

    def publish(self, message: object) -> int:
        """Hand ``message`` to every live handler of its type, now; how many heard it. Nobody: it goes
        round once as :class:`Unheard`, then to whoever subscribed meanwhile."""
        heard = self._deliver(message)
        if heard == 0 and not isinstance(message, Unheard):
            self._deliver(Unheard(message))
            heard = self._deliver(message)
        return heard

    def receivers(self, message_type: type) -> int:
        """How many live handlers ``message_type`` has."""
        return sum(sub.active for sub in self._subscriptions.get(message_type, []))

    def _deliver(self, message: object) -> int:
        heard = 0
        for sub in list(self._subscriptions.get(type(message), [])):
            handler = sub.handler
            if handler is None:  # its object is gone
                self._forget(sub)
                continue
            handler(message)
            heard += 1
        return heard

    def _forget(self, sub: Subscription) -> None:
        subs = self._subscriptions.get(sub.message_type, [])
        if sub in subs:
            subs.remove(sub)


__all__ = ["Hub", "Subscription", "Unheard"]
