"""The background-work layer (app/session/workers.py, app/session/compute.py): mailbox, ComputeWorker's
newest-request-per-key, the shared group-training worker, a training worker's one control."""

from __future__ import annotations

import threading

import pytest

from app.session.compute import ComputeWorker
from app.session.workers import GroupSpec, GroupWorker, LoopWorker, Mailbox, TrainWorker, ended, sample_text
from model.config import GPTConfig
from model.text.sources import resolve_source
from model.train.settings import TrainSettings
from model.train.trainer import Trainer

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


def test_a_background_job_waits_for_the_others(qtbot, compute):
    ran = []
    release = _blocker(compute)
    compute.submit("probe", lambda: ran.append("probe"), background=True)
    compute.submit("page", lambda: ran.append("page"))
    compute.submit("page.more", lambda: ran.append("page.more"))
    release.set()
    qtbot.waitUntil(lambda: compute.idle, timeout=TIMEOUT)
    assert ran == ["page", "page.more", "probe"]  # queued first, run last
    # with the worker idle, a job a page asks for just after still goes first (the grace)
    ran.clear()
    compute.submit("probe", lambda: ran.append("probe"), background=True)
    compute.submit("page", lambda: ran.append("page"))
    qtbot.waitUntil(lambda: compute.idle, timeout=TIMEOUT)
    assert ran == ["page", "probe"]


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
    box = Mailbox(bounds={"frames": 3})
    for i in range(5):
        box.put("events", {"step": i})
        box.put("frames", i)
    box.put("samples", (4, "text"))
    events, frames, samples = box.take("events", "frames", "samples")
    assert [e["step"] for e in events] == [0, 1, 2, 3, 4]
    assert frames == [2, 3, 4]  # oldest dropped first; the GUI draws only frames[-1]
    assert samples == [(4, "text")] and box.posted("frames") == 5
    assert box.take("events", "frames", "samples") == ([], [], [])


class _Counter:
    """A LoopWorker whose every step counts one (built lazily: Qt must exist first)."""

    @staticmethod
    def make():
        class Counter(LoopWorker):
            def __init__(self):
                super().__init__()
                self.count = 0
                self.threads: set[str] = set()

            def work(self):
                while True:
                    self.count += 1
                    self.mailbox.put("events", self.count)
                    yield

            def end(self, reason):
                return reason, f"counted {self.count}"

        return Counter()


def test_loop_worker_pauses_runs_queued_calls_and_stops_at_a_yield(qtbot):
    worker = _Counter.make()
    states = []
    worker.stateChanged.connect(states.append)
    worker.start()
    qtbot.waitUntil(lambda: worker.count > 3, timeout=TIMEOUT)
    with qtbot.waitSignal(worker.stateChanged, timeout=TIMEOUT, check_params_cb=lambda s: s == "paused"):
        worker.control.pause()
    assert worker.control.wait_until_paused(30)
    held = worker.count
    ran = threading.Event()
    worker.control.call_soon(lambda: (worker.threads.add(threading.current_thread().name), ran.set()))
    assert ran.wait(30) and worker.threads == {worker.thread_name}  # in the worker's thread
    assert worker.count == held  # a queued call while paused takes no step
    with qtbot.waitSignal(worker.finished, timeout=TIMEOUT) as done:
        worker.control.stop()  # wakes the paused loop
    assert done.args == ["stopped", f"counted {held}"] and worker.result == ("stopped", f"counted {held}")
    assert worker.join(10) and not worker.alive
    assert states[-1] == "idle" and "paused" in states
    (events,) = worker.mailbox.take("events")
    assert events == list(range(1, held + 1))


def test_group_worker_drops_a_diverging_variant_and_finishes_the_others(qtbot):
    base = GPTConfig(context_length=32, n_layers=1, d_model=16, n_heads=2)
    settings = TrainSettings(
        steps=4, batch_size=4, seq_len=16, eval_every=2, eval_batches=1, warmup=1, threads=1, device="cpu"
    )

    def probe(name, trainer):  # at step 0: poison one variant's loss from its 2nd step on
        if name == "bad":
            forward = trainer.model.forward

            def poisoned(x, y=None, **kw):
                logits, loss = forward(x, y, **kw)
                return logits, loss * float("nan") if trainer.step >= 1 else loss

            trainer.model.forward = poisoned
        return trainer.step

    spec = GroupSpec({"a": base, "bad": base}, resolve_source("task:prev_token"), settings, probe=probe)
    worker = GroupWorker(spec)
    with qtbot.waitSignal(worker.finished, timeout=TIMEOUT) as done:
        worker.start()
    assert done.args == ["done", "reached step 4"]
    events, probes, notes = worker.mailbox.take("events", "probes", "notes")
    assert [n for n, _ in events] == ["a", "bad"] + ["a"] * 3
    assert [e["step"] for n, e in events if n == "a"] == [1, 2, 3, 4]
    assert probes == [("a", 0, 0), ("bad", 0, 0), ("a", 4, 4)]  # the end: live variants only
    assert len(notes) == 1 and notes[0].startswith("bad: training diverged at step 2")
    assert worker.group.active == ["a"] and worker.join(10)


def test_ended_and_sample_text_say_what_happened():
    assert ended("done", 12) == ("done", "reached step 12")
    assert ended("stopped", 3) == ("stopped", "stopped at step 3")

    class FakeTrainer:
        def sample(self, prompt, **sampling):
            if not prompt:
                raise ValueError("empty prompt")
            return prompt.upper() + str(sampling["seed"])

    assert sample_text(FakeTrainer(), "ab", seed=7) == "AB7"
    assert sample_text(FakeTrainer(), "", seed=0) == "(sampling failed: empty prompt)"


def test_a_train_worker_shares_one_control_with_its_trainer_and_lends_it_a_prober(qtbot):
    source = resolve_source("task:prev_token")
    settings = TrainSettings(
        steps=4, batch_size=4, seq_len=16, eval_every=2, eval_batches=1, warmup=1, threads=1, device="cpu"
    )
    config = GPTConfig(context_length=32, n_layers=1, d_model=16, n_heads=2)
    made = []

    def make(control):
        made.append(Trainer(config, source, settings.replace(probe_every=2), control=control))
        return made[-1]

    worker = TrainWorker(make_trainer=make, target_steps=2)
    with qtbot.waitSignal(worker.finished, timeout=TIMEOUT) as done:
        worker.start()
    assert done.args == ["done", "reached step 2"]
    (trainer,) = made
    assert trainer.control is worker.control  # a stop of the worker also cuts a validation short
    (frames,) = worker.mailbox.take("frames")
    assert [f.step for f in frames] == [0, 2]  # at the start, then every probe_every steps
    trainer.run(steps=2)  # the prober left with its worker: nothing more reaches that mailbox
    assert trainer.step == 4 and worker.mailbox.take("frames") == ([],)

    trainer.control.stop()  # as a stop during the last run leaves it
    again = TrainWorker(trainer=trainer, target_steps=6)  # Continue: the same trainer, its control
    assert again.control is trainer.control and not again.control.stopped
    with qtbot.waitSignal(again.finished, timeout=TIMEOUT) as done:
        again.start()
    assert done.args == ["done", "reached step 6"]
    assert [f.step for f in again.mailbox.take("frames")[0]] == [4, 6]


@pytest.mark.parametrize("fails", [False, True], ids=["returns", "raises"])
def test_the_compute_thread_keeps_nothing_of_a_job_it_ran(qtbot, compute, fails):
    """What a job read (a model) is freed once its result is delivered, not when the next job comes: the
    thread waiting for work holds neither the job, nor its result, nor an exception whose frames hold it."""
    import weakref

    class Model:
        pass

    model = Model()
    held = weakref.ref(model)

    def job(m=model):
        if fails:
            raise ValueError("a job that failed while it held the model")
        return [m]

    compute.submit("k", job, lambda r, e: None)
    del model, job
    qtbot.waitUntil(lambda: compute.idle, timeout=TIMEOUT)
    assert held() is None
