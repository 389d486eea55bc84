"""The background-work layer (app/workers.py): mailbox, ComputeWorker's newest-request-per-key,
the shared group-training worker."""

from __future__ import annotations

import threading

import pytest

from app.workers import ComputeWorker, Mailbox

TIMEOUT = 30_000


@pytest.fixture
def compute(qtbot):
    worker = ComputeWorker()
    yield worker
    assert worker.shutdown(10)


def _blocker(worker: ComputeWorker) -> threading.Event:
    """Occupy the worker's thread until the returned event is set."""
    release, started = threading.Event(), threading.Event()

    def job():
        started.set()
        assert release.wait(30)

    worker.submit("block", job)
    assert started.wait(30)
    return release


def test_a_newer_request_drops_the_pending_one_with_the_same_key(qtbot, compute):
    ran, got = [], []
    release = _blocker(compute)
    compute.submit("k", lambda: ran.append(1) or 1, lambda r, e: got.append(r))
    compute.submit("other", lambda: ran.append("o") or "o", lambda r, e: got.append(r))
    compute.submit("k", lambda: ran.append(2) or 2, lambda r, e: got.append(r))
    assert compute.outstanding("k") and not compute.idle
    release.set()
    qtbot.waitUntil(lambda: compute.idle, timeout=TIMEOUT)
    assert 1 not in ran and sorted(map(str, ran)) == ["2", "o"]  # the superseded job never ran
    assert sorted(map(str, got)) == ["2", "o"] and not compute.outstanding()


def test_a_result_superseded_while_it_ran_is_never_delivered(qtbot, compute):
    got, errors = [], []
    release, started = threading.Event(), threading.Event()

    def slow():
        started.set()
        assert release.wait(30)
        return "old"

    compute.submit("k", slow, lambda r, e: got.append(r))
    assert started.wait(30)
    compute.submit("k", lambda: 1 / 0, lambda r, e: errors.append(e))  # the newest may fail: said so
    release.set()
    qtbot.waitUntil(lambda: compute.idle, timeout=TIMEOUT)
    assert got == [] and len(errors) == 1 and isinstance(errors[0], ZeroDivisionError)


def test_cancel_supersedes_every_request_under_a_prefix(qtbot, compute):
    got = []
    release = _blocker(compute)
    for key in ("run.a", "run.b", "keep"):
        compute.submit(key, lambda key=key: key, lambda r, e: got.append(r))
    compute.cancel("run.")
    assert not compute.outstanding("run.") and compute.outstanding("keep")
    release.set()
    qtbot.waitUntil(lambda: compute.idle, timeout=TIMEOUT)
    assert got == ["keep"]


def test_shutdown_refuses_new_work(qtbot):
    worker = ComputeWorker()
    assert worker.submit("k", lambda: 1) > 0
    assert worker.shutdown(10)
    assert worker.submit("k", lambda: 2) == 0 and worker.idle


def test_mailbox_hands_over_everything_once_and_bounds_undrained_frames():
    box = Mailbox(max_frames=3)
    for i in range(5):
        box.put_event({"step": i})
        box.put_frame(i)
    box.put_sample(4, "text")
    events, frames, samples = box.take()
    assert [e["step"] for e in events] == [0, 1, 2, 3, 4]
    assert frames == [2, 3, 4]  # oldest dropped first; the GUI draws only frames[-1]
    assert samples == [(4, "text")] and box.frames_posted == 5
    assert box.take() == ([], [], [])
