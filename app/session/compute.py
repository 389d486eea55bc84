"""The shared compute worker: one background thread for the tabs' own torch work.

An inspection, a lab's analysis, a history snapshot: each tab submits its job under a key, and only
the newest request per key is run and delivered (a stale result never reaches a view). Each request is
a :class:`~app.core.jobs.Job` on the session's :class:`~app.core.jobs.JobBoard`: it says that it runs,
how far it is (the work reports through :mod:`model.progress`), and stops when cancelled or superseded
(at the work's next check, within one block of a forward pass). Jobs run one at a time under
``model.runtime.compute_lock``, so they never run at full thread count beside a training step. A job's
start and its result reach the GUI thread through :func:`app.session.bridge.to_gui`, as everything a worker
thread hands over does. The loops (training, generation) are :mod:`app.session.workers`'.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from app.core.jobs import Job, JobBoard
from app.session.bridge import gui_bridge, to_gui
from model.progress import Cancelled, reporting
from model.runtime import compute_lock

#: How long a background job waits for a job a page is about to submit (e.g. after a 40 ms debounce).
BACKGROUND_GRACE_S = 0.2


def job_threads(session) -> int:
    """Torch threads for a page's background job: every core, a share left to the GUI thread (-1:
    :func:`model.runtime.threads`), or one while training runs beside it."""
    return 1 if session.is_training else -1


class ComputeWorker:
    """One background thread for the tabs' own torch work: the newest request per key wins.

    ``submit(key, fn, callback)`` queues ``fn()``; ``callback(result, error)`` is then called in the
    GUI thread (``error`` is None or the exception). A request is superseded by the next one with
    the same ``key``: if it has not started it never runs, and if it is running it is asked to stop
    (:mod:`model.progress`) and its result is never delivered. :meth:`cancel` supersedes every request
    whose key starts with a prefix (a new inspection makes its follow-up jobs stale); :meth:`abort` is
    the user's Cancel of one. A cancelled job's callback is not called: the board says it was
    cancelled. Jobs run one at a time under ``compute_lock``. Made in the GUI thread.
    """

    def __init__(self, board: JobBoard | None = None):
        gui_bridge()  # the hand-over to this (the GUI) thread exists before the worker thread needs it
        #: the job model every request is announced on (the session's)
        self.board = board if board is not None else JobBoard()
        self._cond = threading.Condition()
        self._jobs: dict[str, tuple[int, Callable[[], Any], Callable[[Any, Any], None] | None, Job]] = {}
        self._background: dict[str, float] = {}  # queued jobs that wait for the others: key -> when queued
        self._latest: dict[str, int] = {}  # key -> ticket of the newest request not yet delivered
        self._tickets = 0
        self._stop = False
        self._busy = False
        self._thread: threading.Thread | None = None

    def submit(
        self,
        key: str,
        fn: Callable[[], Any],
        callback: Callable[[Any, Any], None] | None = None,
        *,
        background: bool = False,
        title: str = "",
        subject: str = "",
    ) -> int:
        """Queue ``fn`` under ``key`` (superseding the older request with that key); its ticket.

        ``title`` and ``subject`` name the job on the board ("Tracing the prompt", "“The cat sat”").
        A ``background`` job (the idle probe of a shown model) runs only when no other job waits, and
        not before :data:`BACKGROUND_GRACE_S` after it was queued, so what a page is about to ask for
        (a new model's first grid, submitted after its debounce) goes first."""
        with self._cond:
            if self._stop:
                return 0
        job = self.board.add(key, title or key, subject)  # supersedes (and stops) the older one
        with self._cond:
            self._tickets += 1
            ticket = self._tickets
            self._jobs.pop(key, None)
            self._jobs[key] = (ticket, fn, callback, job)
            if background:
                self._background[key] = time.monotonic()
            else:
                self._background.pop(key, None)
            self._latest[key] = ticket
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="attention-lab-compute", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return ticket

    def cancel(self, prefix: str) -> None:
        """Supersede every request whose key starts with ``prefix``: nothing of theirs is delivered, and
        the one running stops at its next check."""
        with self._cond:
            for table in (self._jobs, self._latest):
                for key in [k for k in table if k.startswith(prefix)]:
                    del table[key]
        self.board.supersede(prefix)

    def abort(self, key: str) -> bool:
        """The user's Cancel of the request under ``key``: a queued one never runs, a running one stops
        at its next check; either ends as "cancelled" on the board (its callback is not called). False
        when nothing under ``key`` is queued or running."""
        job = self.board.get(key)
        if job is None or not job.active:
            return False
        with self._cond:
            queued = self._jobs.get(key)
            if queued is not None and queued[3] is job:
                del self._jobs[key]
                self._latest.pop(key, None)
            else:
                queued = None
        self.board.cancel(key)
        if queued is not None:  # it never started: it ends now
            self.board.finish(job, "cancelled")
        return True

    def outstanding(self, prefix: str = "") -> bool:
        """Whether a request whose key starts with ``prefix`` still has a result to deliver."""
        with self._cond:
            return any(k.startswith(prefix) for k in self._latest)

    @property
    def idle(self) -> bool:
        """Nothing queued, running, or computed but not yet delivered."""
        with self._cond:
            return not self._jobs and not self._busy and not self._latest

    def shutdown(self, timeout: float = 10.0) -> bool:
        with self._cond:
            self._stop = True
            self._jobs.clear()
            self._latest.clear()
            self._cond.notify_all()
        for job in self.board.active():
            job.progress.cancel()  # the one running stops at its next check
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._jobs and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                key = next((k for k in self._jobs if k not in self._background), None)
                if key is None:  # only background jobs: the oldest, once its grace is over
                    key = next(iter(self._jobs))
                    wait = self._background[key] + BACKGROUND_GRACE_S - time.monotonic()
                    if wait > 0:
                        self._cond.wait(wait)
                        continue
                self._background.pop(key, None)
                ticket, fn, callback, job = self._jobs.pop(key)
                self._busy = True
            result, error = None, None
            to_gui(self.board.started, job)  # the board marks it running, in the GUI thread
            try:
                with compute_lock, reporting(job.progress):
                    job.progress.check()  # cancelled while it waited for the lock
                    result = fn()
            except Exception as exc:  # Cancelled included: _deliver ends the job as cancelled
                error = exc
            with self._cond:
                self._busy = False
            to_gui(self._deliver, key, ticket, callback, job, result, error)
            # the thread keeps nothing of the job while it waits for the next one: its work, its result
            # or an exception whose frames hold the model (a replaced model is freed when the GUI
            # thread lets go of it, not when the next job comes)
            del fn, callback, job, result, error

    def _deliver(self, key, ticket, callback, job, result, error) -> None:
        """In the GUI thread: end the job on the board, hand the newest request's result to its callback."""
        with self._cond:
            current = self._latest.get(key) == ticket
            if current:
                del self._latest[key]
        if isinstance(error, Cancelled) or job.progress.cancelled:
            self.board.finish(job, "cancelled" if job.state != "superseded" else "superseded")
            return
        if not current:
            self.board.finish(job, "superseded")
            return  # superseded while it ran: a stale result is never delivered
        self.board.finish(job, "failed" if error is not None else "done", "" if error is None else str(error))
        try:
            if callback is not None:
                callback(result, error)
        except Exception:
            traceback.print_exc()
