"""Background work in loops: the training workers and the generation worker (the tabs' own torch
jobs go through :class:`app.session.compute.ComputeWorker`).

Plain ``threading.Thread`` objects, not ``QThread``: each worker's body is one blocking Python loop
(train steps, sampled tokens) that needs no Qt event loop nor Qt object ownership.

The training workers (:class:`TrainWorker`: the Train tab; :class:`GroupWorker`: the labs'
comparisons and the Compare tab) and :class:`GenerateWorker` are :class:`LoopWorker` s, generators
as superqt's ``thread_worker``: each ``yield`` is a gap between two steps, where pause, stop and
queued calls (a checkpoint save, a fresh probe) take effect through one
:class:`~model.train.control.RunControl`, ``worker.control``: a training worker shares it with what
it trains, so a stop also cuts a validation in progress short. Results reach the GUI thread in two
ways:

* high-rate data (training events, probe frames, samples) go into a :class:`Mailbox` that the GUI
  drains with a ~30 Hz :func:`drain_timer`: a slow screen never queues work nor slows training,
  and only the newest probe frame of a drain is drawn (the others go to the scrubber's history);
* the few state changes (running, paused, idle, finished, saved) are Qt-free
  :class:`~app.core.state.Signal` s that the loop emits in the GUI thread: it hands each emit over
  with :func:`app.session.bridge.to_gui`, the one crossing every worker thread uses.

Every torch computation runs under ``model.runtime.compute_lock``, so an inspection or a generation
never runs at full thread count beside a training step on the shared CPU cores.
"""

from __future__ import annotations

import threading
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from functools import partial
from typing import Any

from PySide6.QtCore import QObject, QTimer

from app.core.jobs import Job, JobBoard
from app.core.state import Signal
from app.session.bridge import gui_bridge, to_gui
from model.nn.generate import stream
from model.runtime import WORKER_NICE, compute_lock, lower_thread_priority
from model.train.control import RunControl
from model.train.probes import Prober

#: GUI redraw period for worker results (ms): ~30 Hz.
DRAIN_MS = 33


def drain_timer(parent: QObject | None, drain: Callable[[], Any], interval_ms: int = DRAIN_MS) -> QTimer:
    """The GUI-thread timer that calls ``drain()`` ~30 times a second while a worker runs (not started);
    without a ``parent`` its owner keeps it."""
    timer = QTimer(parent)
    timer.setInterval(interval_ms)
    timer.timeout.connect(drain)
    return timer


class Mailbox:
    """Thread-safe hand-over from a worker to the GUI, by kind (``"events"``, ``"frames"``, ...).

    ``put(kind, item)`` from the worker; ``take(*kinds)`` from the GUI returns what was posted of
    each kind since the last take, oldest first. A kind with a bound in ``bounds`` (by default
    ``"frames"``: 64) keeps only its newest items, so a GUI that stalls never makes the worker hold
    unbounded memory; the GUI draws only the newest frame of each drain ("latest wins").
    """

    def __init__(self, bounds: dict[str, int] | None = None):
        self._lock = threading.Lock()
        self._bounds = {"frames": 64} if bounds is None else dict(bounds)
        self._items: dict[str, list | deque] = {}
        self._posted: dict[str, int] = {}

    def put(self, kind: str, item: Any) -> None:
        with self._lock:
            box = self._items.get(kind)
            if box is None:
                bound = self._bounds.get(kind)
                box = self._items[kind] = [] if bound is None else deque(maxlen=bound)
            box.append(item)
            self._posted[kind] = self._posted.get(kind, 0) + 1

    def take(self, *kinds: str) -> tuple[list, ...]:
        """For each of ``kinds``, everything posted since the last take (oldest first)."""
        with self._lock:
            return tuple(list(self._items.pop(kind, ())) for kind in kinds)

    def posted(self, kind: str) -> int:
        """How many items of ``kind`` were ever posted (taken or dropped included)."""
        with self._lock:
            return self._posted.get(kind, 0)


class LoopWorker:
    """A generator run in a daemon thread, with pause, resume and stop at each ``yield``.

    A subclass writes :meth:`work` (a generator: one ``yield`` per step) and may override
    :meth:`end` (runs in the worker thread after the loop, stopped or not: final probes, the
    message). ``stateChanged`` says running / paused / idle; ``finished(reason, message)`` ends it
    with reason done | stopped | error: Qt-free signals, emitted in the GUI thread (the loop hands
    them over with :meth:`announce_in_gui`). ``control`` (a :class:`~model.train.control.RunControl`,
    a fresh one unless given) pauses, resumes and stops it; its ``call_soon`` runs a function in the
    worker thread at the next gap (also while paused). ``mailbox`` carries the results. Made in the
    GUI thread.
    """

    #: "running", "paused" or "idle" (GUI thread)
    stateChanged = Signal()
    #: the loop ended: reason, message (GUI thread)
    finished = Signal()
    thread_name = "attention-lab-worker"
    nice = WORKER_NICE  # added to the thread's niceness: the GUI thread wins a core first

    def __init__(self, control: RunControl | None = None) -> None:
        gui_bridge()  # the hand-over to this (the GUI) thread exists before the loop needs it
        self.mailbox = Mailbox()
        self.control = control if control is not None else RunControl()
        # the loop that gates on it announces a pause (and the run again), in the GUI thread
        self.control.on_state = partial(to_gui, self.stateChanged.emit)
        self.error: str | None = None
        self.result: tuple[str, str] | None = None  # (reason, message), set just before finished
        self._thread: threading.Thread | None = None
        #: the loop's job on a board (:meth:`announce`): how far it is, and a Cancel that stops it
        self.job: Job | None = None
        self._board: JobBoard | None = None

    def announce(self, board: JobBoard, key: str, title: str, subject: str = "") -> Job:
        """Put the loop on ``board`` under ``key`` (a page's busy line follows it): the job's Cancel stops the
        loop at its next gap, and the job ends with the loop (done, cancelled or failed)."""
        self._board = board
        self.job = board.add(key, title, subject, on_cancel=self.control.stop)
        return self.job

    def announce_in_gui(self, signal: Signal, *args: Any) -> None:
        """Emit ``signal(*args)`` in the GUI thread, from the loop's (:func:`~app.session.bridge.to_gui`)."""
        to_gui(signal.emit, *args)

    def _start_job(self) -> None:
        if self.job is not None and self._board is not None:
            self._board.started(self.job)

    def _end_job(self, reason: str, message: str) -> None:
        if self.job is not None and self._board is not None:
            state = {"done": "done", "stopped": "cancelled"}.get(reason, "failed")
            self._board.finish(self.job, state, message if state == "failed" else "")

    # ---- any thread --------------------------------------------------------------------------------
    def start(self) -> None:
        # daemon: a hung torch call can never keep the process alive after the window closed;
        # closeEvent still stops and joins it, so a checkpoint write is never cut short.
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        t = self._thread
        if t is None:
            return True
        t.join(timeout)
        return not t.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ---- to write ------------------------------------------------------------------------------
    def work(self) -> Generator[Any, None, None]:
        """The loop: yield after each step (raise to end with an error)."""
        raise NotImplementedError

    def end(self, reason: str) -> tuple[str, str]:
        """(reason, message) once the loop is over (reason: done or stopped)."""
        return reason, ""

    # ---- the thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        reason, message = "done", ""
        if self.job is not None:
            self.job.progress.begin()
            to_gui(self._start_job)
        lower_thread_priority(self.nice)
        try:
            steps = self.work()
            try:
                for _ in steps:
                    if not self.control.gate():
                        reason = "stopped"
                        break
            finally:
                steps.close()
            self.control.run_calls()  # a save asked for with the stop is still written
            reason, message = self.end(reason)
        except Exception as exc:  # a diverged loss, out of memory, a bad source: tell the user
            reason = "error"
            message = str(exc) or type(exc).__name__
            self.error = traceback.format_exc()
        self.result = (reason, message)
        self.announce_in_gui(self.stateChanged, "idle")
        to_gui(self._end_job, reason, message)
        self._announce_end(reason, message)

    def _announce_end(self, reason: str, message: str) -> None:
        self.announce_in_gui(self.finished, reason, message)


class TrainWorker(LoopWorker):
    """Trains one :class:`~model.train.trainer.Trainer` step by step until the step target, stop or error.

    ``trainer``: continue this one, on its ``control`` (a stop or pause its last run left is
    cleared); or ``make_trainer(control)``: build it on the worker's ``control`` inside the worker
    thread (a fresh model can take a while on a big config). Probe frames come from the worker's
    :class:`~model.train.probes.Prober`, the trainer's first callback while the worker runs it
    (every ``probe_every`` steps, at the start and right after :meth:`reprobe`); ``probe_prompt()``
    returns the prompt, owned by the caller. Every ``sample_every`` steps a generated sample.
    ``request_save(path)`` writes a checkpoint between two steps (``saved``: path and step).
    Mailbox kinds: ``events`` (dicts), ``frames``, ``samples`` ((step, text)).
    """

    #: the trainer exists (built in the loop, or the one continued)
    trainerReady = Signal()
    #: a checkpoint was written between two steps: its path and the step it holds
    saved = Signal()
    thread_name = "attention-lab-train"

    def __init__(
        self,
        *,
        trainer: Any = None,
        make_trainer: Callable[[RunControl], Any] | None = None,
        target_steps: int,
        sample_every: int = 0,
        probe_prompt: Callable[[], str] | None = None,
        sample_prompt: str = "",
    ):
        if trainer is None and make_trainer is None:
            raise ValueError("TrainWorker needs a trainer or a way to make one")
        super().__init__(control=trainer.control if trainer is not None else None)
        if trainer is not None:  # a trainer stopped (or paused, then stopped) before trains again
            self.control.clear_stop()
            self.control.resume()
        self.trainer = trainer
        self._make_trainer = make_trainer
        self.target = int(target_steps)
        self.sample_every = int(sample_every)
        self.prober = Prober(prompt=probe_prompt, post=lambda frame: self.mailbox.put("frames", frame))
        self.sample_prompt = sample_prompt
        self.start_step = int(getattr(trainer, "step", 0) or 0)

    def request_save(self, path: str) -> None:
        self.control.call_soon(lambda: self._save(str(path)))

    def reprobe(self) -> None:
        """Probe again at the next gap (the prompt changed); wakes a paused worker for it."""
        self.control.call_soon(lambda: self.prober.refresh(self.trainer))

    def work(self) -> Generator[None, None, None]:
        if self.trainer is None:
            if self._make_trainer is None:
                raise RuntimeError("a TrainWorker needs a trainer or a way to make one")
            self.trainer = self._make_trainer(self.control)  # a stop meanwhile is the trainer's too
        trainer = self.trainer
        self.start_step = int(trainer.step)
        self.announce_in_gui(self.trainerReady, trainer)
        self.announce_in_gui(self.stateChanged, "running")
        trainer.add_callback("on_step_end", self.prober)
        try:
            self.prober.refresh(trainer)
            yield
            while trainer.step < self.target:
                trainer.train_step()  # takes compute_lock itself; the prober probes when due
                # the trainer's own record of the step: one dict per step in memory, not two (the
                # GUI only reads it)
                self.mailbox.put("events", trainer.history[-1])
                step = int(trainer.step)
                if self.sample_every and step % self.sample_every == 0:
                    self._sample(trainer, step)
                yield
        finally:
            trainer.remove_callback("on_step_end", self.prober)

    def end(self, reason: str) -> tuple[str, str]:
        return ended(reason, self.trainer.step)

    def _save(self, path: str) -> None:
        self.trainer.save(path)
        self.announce_in_gui(self.saved, path, int(self.trainer.step))

    def _sample(self, trainer: Any, step: int) -> None:
        if self.sample_prompt:
            text = sample_text(trainer, self.sample_prompt, max_new_tokens=120, temperature=0.8, seed=step)
            self.mailbox.put("samples", (step, text))


def ended(reason: str, step: int) -> tuple[str, str]:
    """A training loop's (reason, message) at its end: "reached step N" or "stopped at step N"."""
    return reason, f"{'reached' if reason == 'done' else 'stopped at'} step {step}"


def sample_text(trainer: Any, prompt: str, **sampling: Any) -> str:
    """``trainer.sample(prompt, **sampling)`` under the compute lock; a failure becomes the text."""
    try:
        with compute_lock:
            return trainer.sample(prompt, **sampling)
    except Exception as exc:
        return f"(sampling failed: {exc})"


@dataclass
class GroupSpec:
    """What a :class:`GroupWorker` trains: ``variants`` {name: GPTConfig} on one ``source`` with one
    ``settings`` (one seed: every variant sees the same batches). ``probe(name, trainer)`` runs under
    the compute lock every ``probe_every`` steps (and at step 0 and the end); every ``sample_every``
    steps (and at the end) a sample of ``sample_tokens`` tokens after ``sample_prompt``, when set."""

    variants: dict[str, Any]
    source: Any
    settings: Any
    probe: Callable[[str, Any], Any] | None = None
    probe_every: int = 0
    sample_prompt: str = ""
    sample_every: int = 0
    sample_tokens: int = 80
    sample_temperature: float = 0.8


class GroupWorker(LoopWorker):
    """Trains a :class:`GroupSpec` with one :class:`~model.train.multitrain.TrainerGroup`, one step of each
    variant in turn (the Labs' comparisons and the Compare tab).

    A variant whose loss diverges is dropped with a note (``TrainerGroup`` does it); the run is an
    error only when every variant diverged. Mailbox kinds: ``events`` ((name, event dict)),
    ``probes`` ((name, step, value)), ``samples`` ((name, step, text)), ``notes`` (str). ``group``
    holds the trainers once built (models, histories, summary); ``step`` the steps every live
    variant has completed. The group and its trainers run on the worker's ``control``: a stop also
    ends a variant's validation in progress between two batches.
    """

    thread_name = "attention-lab-group"

    def __init__(self, spec: GroupSpec):
        super().__init__()
        self.spec = spec
        self.variants = dict(spec.variants)
        self.group: Any = None
        self.params: dict[str, int] = {}
        self.step = 0

    def work(self) -> Generator[None, None, None]:
        from model.train.multitrain import TrainerGroup  # the trainer's modules: not before a comparison

        spec = self.spec
        group = TrainerGroup(self.variants, spec.source, spec.settings, control=self.control)
        self.group = group
        self.params = {n: int(t.model.num_params()) for n, t in group.trainers.items()}
        target = int(spec.settings.steps)
        self._probe_all(0)
        yield
        for ev in group.iter_steps(target):
            if ev.diverged is not None:
                self.mailbox.put("notes", f"{ev.name}: {ev.diverged}")
            elif ev.event is not None:  # (a step that did not diverge has its event)
                self.mailbox.put("events", (ev.name, ev.event.to_dict()))
            if group.step > self.step:
                self.step = step = group.step
                if step < target and spec.probe_every and step % spec.probe_every == 0:
                    self._probe_all(step)
                if step < target and spec.sample_every and step % spec.sample_every == 0:
                    self._sample_all(step)
            yield

    def end(self, reason: str) -> tuple[str, str]:
        group = self.group
        if not group.active:
            return "error", "every variant diverged"
        final = max(group.trainers[n].step for n in group.active)
        self._probe_all(final)
        self._sample_all(final)  # when there is a sample prompt
        return ended(reason, final)

    def _probe_all(self, step: int) -> None:
        probe = self.spec.probe
        if probe is None:
            return
        for name in self.group.active:
            try:
                with compute_lock:
                    value = probe(name, self.group.trainers[name])
            except Exception as exc:
                self.mailbox.put("notes", f"{name}: probe failed at step {step}: {exc}")
                continue
            self.mailbox.put("probes", (name, step, value))

    def _sample_all(self, step: int) -> None:
        spec = self.spec
        for name in self.group.active if spec.sample_prompt else ():
            trainer = self.group.trainers[name]
            kw = {"max_new_tokens": spec.sample_tokens, "temperature": spec.sample_temperature, "seed": 0}
            self.mailbox.put("samples", (name, step, sample_text(trainer, spec.sample_prompt, **kw)))


class GenerateWorker(LoopWorker):
    """Streams a generation token by token (``model.nn.generate.stream``); a stop ends it at a token.

    Each new token's text is emitted with ``token``; ``finished(text, error)`` ends it. Each token
    is computed under ``compute_lock`` so generation interleaves with training instead of racing it.
    """

    #: each new token's text
    token = Signal()
    #: the text so far, the error ("" when none)
    finished = Signal()
    thread_name = "attention-lab-generate"
    nice = 0  # the user waits for these tokens: no lower priority

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        prompt: str,
        *,
        model_source=None,
        prompt_source=None,
        **sampling: Any,
    ):
        super().__init__()
        self.model = model
        #: called in the worker thread for the model when given (e.g. a snapshot of a training model)
        self.model_source = model_source
        #: called in the worker thread for the prompt when given (a chat template rendered off the GUI
        #: thread), with a function saying whether the job was cancelled meanwhile; ``prompt`` then
        #: holds the rendered text once the loop began
        self.prompt_source = prompt_source
        self.tokenizer = tokenizer
        self.prompt = prompt
        self.sampling = sampling
        self.parts: list[str] = []

    def work(self) -> Generator[None, None, None]:
        if self.prompt_source is not None:
            if self.job is not None:
                self.job.progress.describe(0, 0, "rendering the chat template")
            try:
                self.prompt = self.prompt_source(lambda: self.control.stopped)
            except Exception:
                if not self.control.stopped:
                    raise  # the template's error, one line
            yield  # a Cancel while it rendered stops here (and stopped the rendering)
        if self.model_source is not None:
            self.model = self.model_source()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tokens = stream(self.model, self.tokenizer, self.prompt, **self.sampling)
            try:
                while True:
                    with compute_lock:
                        piece = next(tokens, None)
                    if piece is None:
                        return
                    self.parts.append(piece)
                    self.announce_in_gui(self.token, piece)
                    if self.job is not None:
                        n, most = len(self.parts), int(self.sampling.get("max_new_tokens") or 0)
                        self.job.progress.describe(
                            n, most, f"{n} of {most} tokens" if most else f"{n} tokens"
                        )
                    yield
            finally:
                tokens.close()

    def _announce_end(self, reason: str, message: str) -> None:
        self.announce_in_gui(self.finished, "".join(self.parts), message if reason == "error" else "")
