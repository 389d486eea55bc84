"""Background work: the training worker, the generation worker and the shared compute worker.

Why plain ``threading.Thread`` objects and not ``QThread``: each worker's body is one blocking
Python loop (train steps, sampled tokens, queued jobs) that never needs a Qt event loop of its own;
pause/stop are flags checked between steps, exactly where ``Trainer`` honours them. A QThread would
add an event loop we never run and tie the worker's lifetime to Qt object ownership. Results reach
the GUI thread in two ways:

* high-rate data (every training event, probe frames, samples) go into a lock-protected
  :class:`Mailbox` that the GUI drains with a ~30 Hz timer: a slow screen never queues work, only
  the newest probe frame of a drain is drawn ("latest wins"; the others go to the scrubber's
  history), and training never waits for the GUI;
* the few state changes (started, paused, finished, saved) are Qt signals, which Qt delivers as
  queued calls into the receiver's (GUI) thread because they are emitted from another thread.

Every torch computation runs under ``model.runtime.compute_lock``, so an inspection or a generation
never runs at full thread count beside a training step on the shared CPU cores. The Qt global
thread pool (2 threads here) is never used for long work.
"""

from __future__ import annotations

import os
import threading
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

#: Niceness added to the training thread (Linux): the GUI thread then wins a core the moment it
#: wakes instead of waiting behind torch's busy threads; measured on 2 loaded cores, the p99
#: event-loop delay halved with no loss of training throughput (the GUI sleeps almost always).
WORKER_NICE = 5


def lower_thread_priority(nice: int = WORKER_NICE) -> bool:
    """Raise the calling thread's niceness by ``nice`` (threads torch starts from it inherit it)."""
    if not nice or not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return False
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
        return True
    except (OSError, AttributeError):
        return False


class Mailbox:
    """Thread-safe hand-over from a worker to the GUI: every event, sample and probe frame.

    The GUI draws only the newest frame of each drain ("latest wins"); the older ones still go to
    the scrubber's bounded history. At most ``max_frames`` undrained frames are held (the oldest
    are dropped first), so a GUI that stalls never makes the worker hold unbounded memory.
    """

    def __init__(self, max_frames: int = 64):
        self._lock = threading.Lock()
        self._events: list[dict] = []
        self._frames: deque = deque(maxlen=max_frames)
        self._samples: list[tuple[int, str]] = []
        self.frames_posted = 0

    def put_event(self, event: dict) -> None:
        with self._lock:
            self._events.append(event)

    def put_frame(self, frame: Any) -> None:
        with self._lock:
            self._frames.append(frame)
            self.frames_posted += 1

    def put_sample(self, step: int, text: str) -> None:
        with self._lock:
            self._samples.append((step, text))

    def take(self) -> tuple[list[dict], list[Any], list[tuple[int, str]]]:
        """Everything posted since the last call: (events, frames oldest first, samples)."""
        with self._lock:
            events, frames, samples = self._events, list(self._frames), self._samples
            self._events, self._samples = [], []
            self._frames.clear()
        return events, frames, samples


class GroupThread:
    """Start / stop / join for a worker whose ``_run`` trains a :class:`~model.multitrain.TrainerGroup`
    in a daemon thread (the labs' comparisons and the Compare tab share it).

    The subclass sets ``thread_name``, and in its ``__init__`` ``self._stop = threading.Event()``,
    ``self._thread = None`` and ``self.group = None`` (the group, once ``_run`` has built it).
    """

    thread_name = "attention-lab-group"

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the current step (from any thread)."""
        self._stop.set()
        group = self.group
        if group is not None:
            group.stop()

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class TrainWorker(QObject):
    """Runs ``Trainer.train_step`` in a loop in its own thread until the step target, stop or error.

    ``trainer``: continue this one; or ``make_trainer()``: build it inside the worker thread (a
    fresh model can take a while on a big config). Every ``TrainSettings.probe_every`` steps the
    trainer traces the probe prompt and the worker posts it as a :class:`~model.probes.ProbeFrame`
    (also at the start and right after the user edits the prompt); every ``sample_every`` steps a
    generated sample. ``request_save(path)`` writes a checkpoint between two steps.
    """

    trainerReady = Signal(object)
    stateChanged = Signal(str)
    finished = Signal(str, str)  # reason: done | stopped | error; message
    saved = Signal(str)

    def __init__(
        self,
        *,
        trainer: Any = None,
        make_trainer: Callable[[], Any] | None = None,
        target_steps: int,
        sample_every: int = 0,
        probe_prompt: str = "",
        sample_prompt: str = "",
    ):
        super().__init__()
        if trainer is None and make_trainer is None:
            raise ValueError("TrainWorker needs a trainer or a way to make one")
        self.trainer = trainer
        self._make_trainer = make_trainer
        self._target = int(target_steps)
        self.sample_every = int(sample_every)
        self._probe_prompt = probe_prompt
        self.sample_prompt = sample_prompt
        self.mailbox = Mailbox()
        self._cond = threading.Condition()
        self._paused = False
        self._stop = False
        self._save_requests: list[str] = []
        self._probe_dirty = False
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self.start_step = int(getattr(trainer, "step", 0) or 0)

    # ---- control (any thread) ------------------------------------------------------------------
    def start(self) -> None:
        # daemon: a hung torch call can never keep the process alive after the window closed;
        # closeEvent still stops and joins it, so a checkpoint write is never cut short.
        self._thread = threading.Thread(target=self._run, name="attention-lab-train", daemon=True)
        self._thread.start()

    def pause(self) -> None:
        with self._cond:
            self._paused = True
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()

    def request_save(self, path: str) -> None:
        with self._cond:
            self._save_requests.append(str(path))
            self._cond.notify_all()

    def set_probe_prompt(self, text: str) -> None:
        with self._cond:
            self._probe_prompt = text
            self._probe_dirty = True
            self._cond.notify_all()

    def set_target(self, steps: int) -> None:
        with self._cond:
            self._target = int(steps)

    def join(self, timeout: float | None = None) -> bool:
        t = self._thread
        if t is None:
            return True
        t.join(timeout)
        return not t.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ---- the loop (worker thread) --------------------------------------------------------------
    @property
    def target(self) -> int:
        with self._cond:
            return self._target

    def _run(self) -> None:
        reason, message = "done", ""
        lower_thread_priority()
        try:
            if self.trainer is None:
                self.trainer = self._make_trainer()
            trainer = self.trainer
            self.start_step = int(trainer.step)
            self.trainerReady.emit(trainer)
            self.stateChanged.emit("running")
            self._probe(trainer)
            while True:
                self._handle_saves(trainer)
                if not self._wait_while_paused(trainer):
                    reason = "stopped"
                    break
                with self._cond:
                    target = self._target
                    prompt_changed = self._probe_dirty
                if trainer.step >= target:
                    break
                if prompt_changed:
                    self._probe(trainer)
                event = trainer.train_step()  # takes compute_lock itself; probes when due
                self.mailbox.put_event(event.to_dict())
                step = int(trainer.step)
                if event.trace is not None:
                    self._post_frame(trainer, event.trace)
                if self.sample_every and step % self.sample_every == 0:
                    self._sample(trainer, step)
            self._handle_saves(trainer)
            message = f"{'reached' if reason == 'done' else 'stopped at'} step {trainer.step}"
        except Exception as exc:  # a diverged loss, out of memory, a bad source: tell the user
            reason = "error"
            message = str(exc) or type(exc).__name__
            self.error = traceback.format_exc()
        self.stateChanged.emit("idle")
        self.finished.emit(reason, message)

    def _wait_while_paused(self, trainer: Any) -> bool:
        """Block while paused (saves still happen); False when a stop was requested."""
        with self._cond:
            if self._stop:
                return False
            if not self._paused:
                return True
        self.stateChanged.emit("paused")
        while True:
            with self._cond:
                while self._paused and not self._stop and not self._save_requests and not self._probe_dirty:
                    self._cond.wait()
                stop, paused = self._stop, self._paused
            self._handle_saves(trainer)
            if self._probe_dirty:
                self._probe(trainer)
            if stop:
                return False
            if not paused:
                self.stateChanged.emit("running")
                return True

    def _handle_saves(self, trainer: Any) -> None:
        while True:
            with self._cond:
                if not self._save_requests:
                    return
                path = self._save_requests.pop(0)
            trainer.save(path)
            self.saved.emit(path)

    def _probe(self, trainer: Any) -> None:
        """Trace the probe prompt now (at the start, and when the user edits the prompt)."""
        with self._cond:
            prompt = self._probe_prompt
            self._probe_dirty = False
        if prompt and prompt != trainer.settings.probe_prompt:
            trainer.settings = trainer.settings.replace(probe_prompt=prompt)
        if not trainer.settings.probe_every:
            return
        try:
            trace = trainer.probe()
        except Exception:  # a prompt the tokenizer rejects must never end training
            return
        self._post_frame(trainer, trace)

    def _post_frame(self, trainer: Any, trace: Any) -> None:
        from model.probes import make_probe_frame

        prompt = trainer.probe_prompt
        self.mailbox.put_frame(make_probe_frame(trace, trainer.tokenizer, trainer.step, prompt))

    def _sample(self, trainer: Any, step: int) -> None:
        if not self.sample_prompt:
            return
        try:
            text = trainer.sample(self.sample_prompt, max_new_tokens=120, temperature=0.8, seed=step)
        except Exception as exc:
            text = f"(sampling failed: {exc})"
        self.mailbox.put_sample(step, text)


class GenerateWorker(QObject):
    """Streams a generation token by token (``model.generate.stream``) in its own thread.

    Each new token's text is emitted with ``token``; ``finished(text, error)`` ends it. Each token
    is computed under ``compute_lock`` so generation interleaves with training instead of racing it.
    """

    token = Signal(str)
    finished = Signal(str, str)

    def __init__(self, model: Any, tokenizer: Any, prompt: str, **sampling: Any):
        super().__init__()
        self.model = model
        self.tokenizer = tokenizer
        self.prompt = prompt
        self.sampling = sampling
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="attention-lab-generate", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        import warnings

        from model.generate import stream
        from model.runtime import compute_lock

        parts: list[str] = []
        error = ""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                gen = stream(self.model, self.tokenizer, self.prompt, **self.sampling)
                while not self._stop.is_set():
                    with compute_lock:
                        try:
                            piece = next(gen)
                        except StopIteration:
                            break
                    parts.append(piece)
                    self.token.emit(piece)
                gen.close()
        except Exception as exc:
            error = str(exc) or type(exc).__name__
        self.finished.emit("".join(parts), error)


class ComputeWorker(QObject):
    """One background thread for the tabs' own torch work: the newest request per key wins.

    ``submit(key, fn, callback)`` queues ``fn()``; ``callback(result, error)`` is then called in the
    GUI thread (``error`` is None or the exception). A request is superseded by the next one with
    the same ``key``: if it has not started it never runs, and if it is running its result is never
    delivered. :meth:`cancel` supersedes every request whose key starts with a prefix (a new
    inspection makes its follow-up jobs stale). Jobs run one at a time under ``compute_lock``.
    """

    _done = Signal(object, object, object, object, object)  # key, ticket, callback, result, error

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._cond = threading.Condition()
        self._jobs: dict[str, tuple[int, Callable[[], Any], Callable[[Any, Any], None] | None]] = {}
        self._latest: dict[str, int] = {}  # key -> ticket of the newest request not yet delivered
        self._tickets = 0
        self._stop = False
        self._busy = False
        self._thread: threading.Thread | None = None
        self._done.connect(self._deliver)

    def submit(
        self, key: str, fn: Callable[[], Any], callback: Callable[[Any, Any], None] | None = None
    ) -> int:
        """Queue ``fn`` under ``key`` (superseding the older request with that key); its ticket."""
        with self._cond:
            if self._stop:
                return 0
            self._tickets += 1
            ticket = self._tickets
            self._jobs.pop(key, None)
            self._jobs[key] = (ticket, fn, callback)
            self._latest[key] = ticket
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="attention-lab-compute", daemon=True)
                self._thread.start()
            self._cond.notify_all()
        return ticket

    def cancel(self, prefix: str) -> None:
        """Supersede every request whose key starts with ``prefix``: nothing of theirs is delivered."""
        with self._cond:
            for key in [k for k in self._jobs if k.startswith(prefix)]:
                del self._jobs[key]
            for key in [k for k in self._latest if k.startswith(prefix)]:
                del self._latest[key]

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
        if self._thread is None:
            return True
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        from model.runtime import compute_lock

        while True:
            with self._cond:
                while not self._jobs and not self._stop:
                    self._cond.wait()
                if self._stop:
                    return
                key = next(iter(self._jobs))
                ticket, fn, callback = self._jobs.pop(key)
                self._busy = True
            result, error = None, None
            try:
                with compute_lock:
                    result = fn()
            except Exception as exc:
                error = exc
            with self._cond:
                self._busy = False
            self._done.emit(key, ticket, callback, result, error)

    def _deliver(self, key, ticket, callback, result, error) -> None:
        with self._cond:
            if self._latest.get(key) != ticket:
                return  # superseded (or cancelled) while it ran: a stale result is never delivered
            del self._latest[key]
        if callback is None:
            return
        try:
            callback(result, error)
        except Exception:
            traceback.print_exc()
