"""How far a long computation is, and a way to stop it: progress and cancellation without Qt.

A computation that can take long (a trace of thousands of tokens, hundreds of patched runs, every
pair of heads' composition) says how far it is with :func:`report` and offers a place to stop with
:func:`check`. Both act on the :class:`Progress` of the calling thread, set by whoever runs the work
(:func:`reporting`: the app's compute worker, a command line's progress line); with none set they do
nothing, so the same function runs unchanged in a test, a notebook or a script::

    progress = Progress()
    with reporting(progress):          # in the worker thread
        patching_of(model, ...)        # calls report(done, total, "runs") between its batches

    progress.cancel()                  # from any thread: the work raises Cancelled at its next check

Cancellation is cooperative: a torch call in progress finishes, and the work stops at its next
:func:`check` (every block of every forward pass checks, see :func:`model.nn.gpt.GPT`, so a stop takes
effect within one block's time). :func:`layer_hooks` reports a single forward pass by layers.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "Cancelled",
    "Progress",
    "Snapshot",
    "check",
    "current",
    "eta_seconds",
    "layer_hooks",
    "part",
    "report",
    "reporting",
]


class Cancelled(Exception):
    """The work was cancelled: raised by :func:`check` (and :func:`report`) once :meth:`Progress.cancel`
    was called. Not an error: whoever ran the work says it was cancelled and keeps what it had."""

    def __init__(self, message: str = "cancelled"):
        super().__init__(message)


@dataclass(frozen=True)
class Snapshot:
    """What a :class:`Progress` says at one moment: ``done`` of ``total`` ``unit`` (total 0: not countable),
    ``elapsed`` seconds since the work began (0 before it began), and whether a stop was asked for."""

    done: int
    total: int
    unit: str
    elapsed: float
    started: bool
    cancelled: bool
    text: str = ""  # the work's own line for how far it is ("12.3 MiB of 522.7 MiB · 4.1 MiB/s"), if any

    @property
    def fraction(self) -> float | None:
        """done / total in [0, 1], or None while the work is not countable."""
        if self.total <= 0:
            return None
        return min(1.0, max(0.0, self.done / self.total))

    def eta(self, after: float = 2.0) -> float | None:
        """Seconds left at the pace so far (:func:`eta_seconds`); None before ``after`` seconds of work (an
        early pace is noise) or while nothing is counted yet."""
        if self.total <= 0 or self.elapsed < after:
            return None
        return eta_seconds(self.done, self.total, self.elapsed)


def eta_seconds(done: float, total: float, elapsed: float) -> float | None:
    """Seconds left to reach ``total`` at the pace of ``done`` in ``elapsed`` seconds:
    ``elapsed · (total − done) / done`` (0 once done; None without a pace yet)."""
    if done <= 0 or elapsed <= 0 or total <= done:
        return None if done <= 0 or elapsed <= 0 else 0.0
    return (total - done) * elapsed / done


class Progress:
    """How far one piece of work is (written by the worker thread) and whether it should stop (asked by
    any thread). Counts are plain attribute writes under a lock: reading them never waits for the work."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._done = 0
        self._total = 0
        self._unit = ""
        self._text = ""
        self._t0: float | None = None

    # ---- the worker's side -----------------------------------------------------------------------
    def begin(self) -> None:
        """The work starts now (the clock of :meth:`Snapshot.eta`)."""
        with self._lock:
            self._t0 = time.monotonic()

    def update(self, done: int, total: int, unit: str = "") -> None:
        """``done`` of ``total`` ``unit`` so far; raises :class:`Cancelled` when a stop was asked for."""
        with self._lock:
            self._done, self._total, self._unit, self._text = int(done), int(total), str(unit), ""
            if self._t0 is None:
                self._t0 = time.monotonic()
        self.check()

    def describe(self, done: int, total: int, text: str) -> None:
        """``done`` of ``total`` (bytes, say) with the work's own ``text`` for it; never raises (for a
        callback of a library that stops by its own means, e.g. a download's ``should_stop``)."""
        with self._lock:
            self._done, self._total, self._unit, self._text = int(done), int(total), "", str(text)
            if self._t0 is None:
                self._t0 = time.monotonic()

    def check(self) -> None:
        """Raise :class:`Cancelled` when a stop was asked for."""
        if self._stop.is_set():
            raise Cancelled()

    # ---- anyone's side ---------------------------------------------------------------------------
    def cancel(self) -> None:
        """Ask the work to stop at its next check."""
        self._stop.set()

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def snapshot(self) -> Snapshot:
        with self._lock:
            t0 = self._t0
            elapsed = 0.0 if t0 is None else time.monotonic() - t0
            return Snapshot(
                self._done, self._total, self._unit, elapsed, t0 is not None, self._stop.is_set(), self._text
            )


_local = threading.local()


def current() -> Progress | None:
    """The :class:`Progress` of the calling thread's work, or None."""
    return getattr(_local, "progress", None)


@contextlib.contextmanager
def reporting(progress: Progress) -> Iterator[Progress]:
    """Make ``progress`` the calling thread's for the block (the one before it comes back after)."""
    before = current()
    _local.progress = progress
    progress.begin()
    try:
        yield progress
    finally:
        _local.progress = before


def report(done: int, total: int, unit: str = "") -> None:
    """The calling thread's work is ``done`` of ``total`` ``unit``; raises :class:`Cancelled` when it was
    cancelled. Nothing without a :class:`Progress` (:func:`reporting`). Inside :func:`part` the count is
    placed within the whole: ``start + done`` of the part's ``whole``."""
    progress = current()
    if progress is not None:
        span = getattr(_local, "span", None)
        if span is not None:
            start, whole = span
            done, total = start + done, whole
        progress.update(done, total, unit)


@contextlib.contextmanager
def part(start: int, whole: int) -> Iterator[None]:
    """Within the block, what :func:`report` counts is one part of a larger whole: ``done`` becomes
    ``start + done`` and the total ``whole`` (e.g. patching's L·H head runs, then its L·T stream runs)."""
    before = getattr(_local, "span", None)
    _local.span = (int(start), int(whole))
    try:
        yield
    finally:
        _local.span = before


def check() -> None:
    """Raise :class:`Cancelled` when the calling thread's work was cancelled (nothing otherwise)."""
    progress = current()
    if progress is not None:
        progress.check()


def layer_hooks(layers: list[int] | int) -> list[tuple[str, object]]:
    """Hooks that report one forward pass by layers: after block ``l``'s output (``blocks.l.resid_post``),
    ``i + 1`` of ``len(layers)`` "layers" are done (``layers``: the blocks that count, or their number),
    and a stop is also checked between each block's attention and its MLP (``blocks.l.resid_mid``), so a
    long prompt's block is cut in two. For :func:`model.nn.hooks.attached`; they read only, and do
    nothing without a :class:`Progress`."""
    order = list(range(layers)) if isinstance(layers, int) else sorted(layers)
    total = len(order)

    def reading(fn):
        fn.reads_only = True  # the marker model.nn.hooks.reader sets
        return fn

    def done(i: int):
        return reading(lambda x, hook: report(i + 1, total, "layers"))

    hooks: list[tuple[str, object]] = []
    for i, layer in enumerate(order):
        hooks += [
            (f"blocks.{layer}.resid_mid", reading(lambda x, hook: check())),
            (f"blocks.{layer}.resid_post", done(i)),
        ]
    return hooks
