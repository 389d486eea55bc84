"""Pause, resume and stop for a training loop, from any thread: they take effect between two steps.

One :class:`RunControl` serves every loop that trains step by step: :meth:`Trainer.run
<model.train.trainer.Trainer.run>`, :meth:`TrainerGroup.iter_steps
<model.train.multitrain.TrainerGroup.iter_steps>`
and the app's background workers. The loop calls :meth:`RunControl.gate` between steps (never inside
one); any thread calls :meth:`pause`, :meth:`resume`, :meth:`stop`, or :meth:`call_soon` to run a
function in the loop's thread at the next gap (a checkpoint save, a fresh probe), which also wakes a
paused loop. A paused loop blocks on a condition variable, not a busy loop; a loop that waits between
two steps of its own accord (a poll) waits in :meth:`sleep`, which a stop or a queued call cuts short.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["RunControl"]


class RunControl:
    """The pause / stop state of one training loop (see the module docstring).

    ``on_state``: called in the loop's thread with ``"paused"`` when a pause takes hold and
    ``"running"`` when the loop goes on again. Stop is sticky until :meth:`clear_stop`.
    """

    def __init__(self, on_state: Callable[[str], Any] | None = None):
        self._cond = threading.Condition()
        self._paused = False
        self._stopped = False
        self._waiting = False
        self._calls: list[Callable[[], Any]] = []
        self.on_state = on_state

    # ---- any thread --------------------------------------------------------------------------
    def pause(self) -> None:
        """Hold the loop before its next step."""
        with self._cond:
            self._paused = True
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def stop(self) -> None:
        """End the loop before its next step (also wakes a paused loop)."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    def clear_stop(self) -> None:
        """Allow the loop to train again after :meth:`stop`."""
        with self._cond:
            self._stopped = False

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Run ``fn()`` in the loop's thread at its next gap between steps (paused or not)."""
        with self._cond:
            self._calls.append(fn)
            self._cond.notify_all()

    @property
    def paused(self) -> bool:
        with self._cond:
            return self._paused

    @property
    def stopped(self) -> bool:
        with self._cond:
            return self._stopped

    @property
    def waiting(self) -> bool:
        """True while the loop is blocked by a pause (the step in flight, if any, has finished)."""
        with self._cond:
            return self._waiting

    def wait_until_paused(self, timeout: float | None = None) -> bool:
        """Block until a paused loop has finished its step and is waiting; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._waiting, timeout)

    # ---- the loop's thread -------------------------------------------------------------------
    def run_calls(self) -> None:
        """Run the functions :meth:`call_soon` queued, oldest first (their errors propagate)."""
        while True:
            with self._cond:
                if not self._calls:
                    return
                fn = self._calls.pop(0)
            fn()

    def sleep(self, seconds: float) -> None:
        """Wait up to ``seconds`` between two steps (a poll's pause); a stop or a queued call ends
        the wait at once, so neither waits it out."""
        with self._cond:
            self._cond.wait_for(lambda: self._stopped or bool(self._calls), seconds)

    def gate(self) -> bool:
        """Between two steps: run queued calls, block while paused; True to go on, False once stopped."""
        self.run_calls()
        with self._cond:
            if self._stopped:
                return False
            if not self._paused:
                return True
        self._announce("paused")
        while True:
            with self._cond:
                self._waiting = True
                self._cond.notify_all()
                try:
                    while self._paused and not self._stopped and not self._calls:
                        self._cond.wait()
                finally:
                    self._waiting = False
                stopped, paused = self._stopped, self._paused
            self.run_calls()
            if stopped:
                return False
            if not paused:
                self._announce("running")
                return True

    def _announce(self, state: str) -> None:
        if self.on_state is not None:
            self.on_state(state)
