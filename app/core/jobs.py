"""The job model: every piece of background work a page waits for, in one place, without Qt.

A :class:`Job` is one request: what it does (``title``: "Tracing the prompt"), what it is for
(``subject``: the prompt, the corrupted prompt, the runs compared), its state (queued → running →
done | failed | cancelled | superseded) and its :class:`~model.progress.Progress` (how far, and the
stop the work checks). The :class:`JobBoard` keeps the newest job of each key (``"attention.inspect"``,
``"compare.train"``, ...): adding a job under a key supersedes the older one, whose work is asked to
stop at once, so a result that belongs to an older input is never delivered. Pages follow the board
(``changed(key)``) and poll a running job's progress for their bar (:mod:`app.widgets.job_bar`).

The board is touched from the GUI thread only; a worker thread writes only its job's progress and
``state`` (plain attribute writes), which the GUI reads when it polls.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from app.core.pace import format_eta
from app.core.state import Signal
from model.progress import Progress, Snapshot

#: The states a job ends in.
ENDED = frozenset({"done", "failed", "cancelled", "superseded"})


@dataclass(eq=False)
class Job:
    """One request for background work (see the module doc). ``on_cancel`` (optional) is called with
    the stop, for work that stops by its own means (a training loop's control) rather than by
    checking the progress."""

    key: str
    title: str
    subject: str = ""
    progress: Progress = field(default_factory=Progress)
    state: str = "queued"
    error: str = ""
    on_cancel: Callable[[], None] | None = None
    submitted: float = field(default_factory=time.monotonic)

    @property
    def active(self) -> bool:
        """Queued or running: its result is still to come."""
        return self.state not in ENDED

    def snapshot(self) -> Snapshot:
        return self.progress.snapshot()

    def headline(self) -> str:
        """What runs, for what: "Tracing “…” (3,000 tokens)"."""
        return self.title + (f" {self.subject}" if self.subject else "")

    def how_far(self) -> str:
        """How far it is and the time left: "12 of 30 layers · ETA 0:40" ('' before there is any)."""
        snap = self.snapshot()
        # the work's own start may come before the worker's "started" reaches the GUI thread
        if self.state == "queued" and not snap.started:
            return "waiting for the computation before it"
        parts = []
        if snap.text:
            parts.append(snap.text)
        elif snap.total > 0:
            parts.append(f"{snap.done:,} of {snap.total:,} {snap.unit}".rstrip())
        eta = snap.eta()
        if eta is not None:
            parts.append(f"ETA {format_eta(eta)}")  # as every progress readout of the app says it
        elif snap.elapsed >= 1.0:
            parts.append(f"{format_eta(snap.elapsed)} so far")
        return " · ".join(parts)

    def describe(self) -> str:
        """One line for the page: "Tracing “…” (3,000 tokens) · 12 of 30 layers · ETA 0:40"."""
        return " · ".join(part for part in (self.headline(), self.how_far()) if part)


class JobBoard:
    """The newest :class:`Job` of each key; ``changed(key)`` when one is added or ends (GUI thread)."""

    changed = Signal()

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}

    def add(
        self, key: str, title: str, subject: str = "", *, on_cancel: Callable[[], None] | None = None
    ) -> Job:
        """A new job under ``key``; the older one under it (if still active) is superseded: its work is
        asked to stop, and its result will not be delivered."""
        old = self._jobs.get(key)
        if old is not None and old.active:
            self._stop(old, "superseded")
        job = Job(key, title, subject, on_cancel=on_cancel)
        self._jobs[key] = job
        self.changed.emit(key)
        return job

    def get(self, key: str) -> Job | None:
        """The newest job under ``key`` (ended or not), or None."""
        return self._jobs.get(key)

    def active(self, prefix: str = "") -> list[Job]:
        """The queued or running jobs whose key starts with ``prefix``, oldest first."""
        return [job for key, job in self._jobs.items() if key.startswith(prefix) and job.active]

    def started(self, job: Job) -> None:
        """``job``'s work began (the worker says so, through the GUI thread)."""
        if job.state == "queued":
            job.state = "running"
        if self._jobs.get(job.key) is job:
            self.changed.emit(job.key)

    def finish(self, job: Job, state: str, error: str = "") -> None:
        """``job`` ended in ``state`` (one of :data:`ENDED`)."""
        if state not in ENDED:
            raise ValueError(f"{state!r} is not how a job ends ({', '.join(sorted(ENDED))})")
        if job.active:
            job.state, job.error = state, error
        if self._jobs.get(job.key) is job:
            self.changed.emit(job.key)

    def cancel(self, key: str) -> bool:
        """The user's Cancel: stop the job under ``key`` (its work stops at its next check); False when
        there is none running or queued. The worker that ran it finishes it as cancelled."""
        job = self._jobs.get(key)
        if job is None or not job.active:
            return False
        self._stop(job, None)
        self.changed.emit(key)
        return True

    def supersede(self, prefix: str) -> None:
        """Stop every active job whose key starts with ``prefix``: what they compute is stale."""
        for job in self.active(prefix):
            self._stop(job, "superseded")
            self.changed.emit(job.key)

    @staticmethod
    def _stop(job: Job, state: str | None) -> None:
        job.progress.cancel()
        if job.on_cancel is not None:
            job.on_cancel()
        if state is not None:
            job.state = state


__all__ = ["ENDED", "Job", "JobBoard"]
