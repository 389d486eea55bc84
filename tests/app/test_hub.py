"""The message hub (``app.core.hub``): typed messages to their subscribers, never to one that is gone.
No QApplication here: the hub is Qt-free."""

from __future__ import annotations

import gc
from dataclasses import dataclass

from app.core.hub import Hub, Unheard


@dataclass(frozen=True)
class Ping:
    text: str


@dataclass(frozen=True)
class Pong:
    text: str


class Listener:
    def __init__(self, hub: Hub):
        self.heard: list[object] = []
        self.subscription = hub.subscribe(Ping, self.on_ping)

    def on_ping(self, message: Ping) -> None:
        self.heard.append(message)


def test_a_message_reaches_the_subscribers_of_its_own_type_in_order():
    hub, calls = Hub(), []
    hub.subscribe(Ping, lambda m: calls.append(("first", m.text)))
    hub.subscribe(Ping, lambda m: calls.append(("second", m.text)))
    hub.subscribe(Pong, lambda m: calls.append(("pong", m.text)))
    assert hub.publish(Ping("a")) == 2
    assert calls == [("first", "a"), ("second", "a")]
    assert hub.publish(Pong("b")) == 1 and calls[-1] == ("pong", "b")


def test_a_subscriber_that_is_gone_is_no_longer_called():
    hub = Hub()
    listener = Listener(hub)
    assert hub.publish(Ping("hello")) == 1 and listener.heard == [Ping("hello")]
    heard = listener.heard
    del listener
    gc.collect()
    # the hub held the bound method weakly: the object went, and so did its subscription
    assert hub.publish(Ping("again")) == 0
    assert heard == [Ping("hello")] and hub.receivers(Ping) == 0


def test_a_cancelled_subscription_is_no_longer_called_even_from_inside_a_delivery():
    hub, calls, subs = Hub(), [], {}
    subs["a"] = hub.subscribe(Ping, lambda m: (calls.append("a"), subs["b"].cancel()))
    subs["b"] = hub.subscribe(Ping, lambda m: calls.append("b"))
    assert hub.publish(Ping("x")) == 1 and calls == ["a"]  # "a" ended "b" before its turn
    subs["a"].cancel()
    subs["a"].cancel()  # harmless twice
    assert hub.publish(Ping("y")) == 0 and calls == ["a"] and not subs["a"].active


def test_a_message_nobody_heard_goes_round_as_unheard_and_reaches_a_receiver_made_then():
    hub, unheard, late = Hub(), [], []

    def wake(dead: Unheard) -> None:  # as a window builds the lazily built tab a request is for
        unheard.append(dead.message)
        if isinstance(dead.message, Ping):
            hub.subscribe(Ping, late.append)

    hub.subscribe(Unheard, wake)
    assert hub.publish(Ping("wake up")) == 1
    assert late == [Ping("wake up")] and unheard == [Ping("wake up")]
    assert hub.publish(Ping("now heard")) == 1 and unheard == [Ping("wake up")]
    assert hub.publish(Pong("nobody")) == 0  # still nobody: 0, once round, no loop
    assert unheard == [Ping("wake up"), Pong("nobody")]
