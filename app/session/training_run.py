"""The Train tab's training run: whether Start may run, what it trains, and the worker's results.

:class:`TrainingRun` is a part of the :class:`~app.session.session.Session` (``session.run``), with its own
state and signals. It reads the session and tells it what arrived only through :class:`RunHost`,
the declared list of what a run needs of a session. Training runs in a
:class:`~app.session.workers.TrainWorker`; its events, probe frames and samples arrive through the worker's
mailbox, drained ~30 times a second in the GUI thread and handed to the session's record, so a burst
of steps becomes one ``eventsAppended`` and only the newest probe frame is drawn. The probe prompt is
the session's ``probe_prompt``, the one copy: the worker's :class:`~model.train.probes.Prober`
reads it at each probe.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from app.core.state import Signal
from app.session.model_files import check_fits
from app.session.workers import TrainWorker, drain_timer
from model.budget.sizing import ModelTooLarge
from model.config import ConfigError
from model.train.settings import continued, lr_at

# model/'s trainer, loaders and data are imported where they are used: together they take ~0.15 s
# to import, which the window's first paint does not wait for (app/shell/gui.py)
if TYPE_CHECKING:
    from app.session.edits import Edits
    from app.session.model_slot import ModelSlot
    from model.config import GPTConfig
    from model.interp.frame import AttentionFrame
    from model.train.settings import TrainSettings
    from model.train.trainer import Trainer


class RunHost(Protocol):
    """What a :class:`TrainingRun` (and a followed run, :mod:`app.session.follow`) reads of the session and
    tells it; :class:`app.session.session.Session` is the one host. See its docstring for the fields."""

    config: GPTConfig
    source: Any
    tokenizer: Any
    model: Any
    trainer: Trainer | None
    checkpoint_path: str | None
    checkpoint_meta: dict
    source_spec: str
    history: list[dict]
    train_settings: TrainSettings | None
    device: Any
    initialising: str
    probe_prompt: str
    sample_every: int
    sample_prompt: str
    edits: Edits
    errorOccurred: Signal
    statusMessage: Signal

    @property
    def is_training(self) -> bool: ...
    @property
    def is_following(self) -> bool: ...
    @property
    def slot(self) -> ModelSlot: ...
    def install_trainer(self, trainer: Trainer, *, fresh: bool) -> None: ...
    def add_events(self, events: list[dict]) -> None: ...
    def add_sample(self, step: int, text: str) -> None: ...
    def show_frames(self, frames: list[AttentionFrame]) -> None: ...
    def mark_saved(self, path: str, step: int | None = None) -> None: ...


@dataclass(frozen=True)
class StartPlan:
    """What Start would do now (:meth:`TrainingRun.plan`): ``kind`` is ``continue`` (the shown run
    goes on), ``fine-tune`` (the shown model's trained weights are trained on), ``fresh`` (the shown
    untrained model, or a new one from random weights) or ``blocked`` (``problems``, first reason
    first); ``text`` says it in one line of the window's words."""

    kind: str
    text: str
    problems: tuple[str, ...] = ()


def continue_text(old: TrainSettings, new: TrainSettings, step: int) -> str:
    """Continue's line: the steps it trains and what the learning rate does at its first step."""
    head = f"Continue trains this run from step {step:,} to {new.steps:,}"
    before, after = lr_at(step, old), lr_at(step, new)
    if new.schedule_from == step and new.schedule_peak is None:
        return (
            f"{head}; the learning rate restarts: warm-up to {new.lr:.2g} over {new.warmup:,} steps, "
            f"then down to {new.floor_lr:.2g}"
        )
    if not math.isclose(before, after, rel_tol=1e-6, abs_tol=1e-12):
        return (
            f"{head}; the learning rate jumps from {before:.2g} to {after:.2g} (the cosine stretched "
            f"over {new.steps:,} steps; Training panel: Learning rate on Continue)"
        )
    if new.steps != old.steps and math.isclose(before, new.floor_lr, rel_tol=1e-6):
        return f"{head}; the learning rate stays at its final {before:.2g}"
    return f"{head}; the learning rate goes on from {before:.2g} down to {new.floor_lr:.2g}"


def _why_new(s: Any, config: GPTConfig) -> str:
    """Why a fresh run cannot train the shown model's weights (for :meth:`TrainingRun.plan`)."""
    if s.model is None:
        return ""
    if s.checkpoint_meta.get("starter"):
        return " (the starter model itself is never trained on)"
    if not s.slot.shows_config(config) and s.model.config.core.vocab_size == config.core.vocab_size:
        return " (the Model panel's settings differ from the shown model's)"
    if s.tokenizer != s.source.tokenizer or s.model.config.core.vocab_size != config.core.vocab_size:
        return (
            f" (the data is in another vocabulary than the shown model's: {config.core.vocab_size:,} tokens)"
        )
    return ""


def deliver(mailbox: Any, host: RunHost) -> None:
    """Hand what a run's worker posted since the last drain to the session's record: its training
    events, its samples, then its probe frames (the newest is drawn)."""
    events, frames, samples = mailbox.take("events", "frames", "samples")
    if events:
        host.add_events(events)
    for step, text in samples:
        host.add_sample(step, text)
    if frames:
        host.show_frames(frames)


class WorkerRun:
    """What a run in a background :class:`~app.session.workers.LoopWorker` shares, whether this process
    trains it (:class:`TrainingRun`) or another one writes it (:class:`~app.session.follow.FollowedRun`):
    its ``state`` and ``stateChanged``, the ``worker`` (None once it ended), the ~30 Hz drain of its
    mailbox (a subclass's ``_drain``) and how it ends (``finished``, :meth:`shutdown`).

    Everything it hears of its worker is in the GUI thread: the worker's signals are emitted there
    (:func:`app.session.bridge.to_gui` carries them) and its drain timer, the one Qt object it holds,
    runs there, so what it announces (``stateChanged``, ``finished``) and what it tells the session is
    always in the GUI thread. Made without a ``QApplication`` it works as well, but nothing of a worker
    arrives until an event loop runs."""

    #: the run's state: "idle" once it ended (the others are the subclass's)
    stateChanged = Signal()
    #: the run ended: a reason ("done", "stopped", "error") and a message
    finished = Signal()

    def __init__(self) -> None:
        self.state = "idle"
        self.worker: Any = None
        self._drain_timer = drain_timer(None, self._drain)

    def _drain(self) -> None:
        raise NotImplementedError

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Stop the worker and wait for it (the window's closeEvent); True if it ended."""
        worker = self.worker
        if worker is None:
            return True
        worker.control.stop()
        ok = worker.join(timeout)
        self._drain()
        if ok:
            self._finish_worker()
        return ok

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.stateChanged.emit(state)

    def _finish_worker(self) -> None:
        worker = self.worker
        if worker is None:
            return
        worker.join(5.0)
        self.worker = None
        self._drain_timer.stop()
        self._set_state("idle")


class TrainingRun(WorkerRun):
    """Training in a :class:`~app.session.workers.TrainWorker`: start, pause, resume, stop, the results.

    ``state``: idle / starting / running / paused / stopping; ``finished``: "done" | "stopped" |
    "error" and a message.
    """

    def __init__(self, host: RunHost):
        super().__init__()
        self.host = host
        #: the worker of the run in progress, or None
        self.worker: TrainWorker | None = None
        #: a fresh run's trainer is being built: nothing of it is taken (or shown) before it exists
        self._awaiting_trainer = False
        #: the trainer last handed to the host (trainerReady and a drain may both bring it)
        self._installed: Trainer | None = None

    @property
    def active(self) -> bool:
        return self.state != "idle"

    def can_continue(self) -> bool:
        """Whether Start continues the shown model's run (same config and data) instead of a fresh one."""
        s = self.host
        if s.trainer is None or s.source is None or not s.slot.shows_config(s.config):
            return False
        try:
            return s.trainer.source.identity() == s.source.identity()
        except Exception:
            return False

    def problems(self) -> list[str]:
        """Why Start may not run now, first reason first (empty: it may): Start's rule, the one place
        that decides. The Train tab disables Start and shows the first reason, :meth:`start` raises
        them. Milliseconds, nothing allocated: a run in progress; what the setup panels hold that is
        not valid yet (``edits``, each named with its panel); the config's own problems, the training
        settings against this model and data (``TrainSettings.problems_for``: a sequence longer than
        the context), and whether the run fits this machine's memory."""
        s = self.host
        if self.active:
            return ["training is running"]
        if s.is_following:
            return ["following a run folder (Stop following first)"]
        edits = s.edits.problems()
        if edits:
            return edits
        if s.source is None:
            if s.initialising:  # the window is still setting up: say what it is doing
                return [f"{s.initialising}…"]
            return ["choose a data source in the Data panel"]
        if s.train_settings is None:
            return ["the training settings are not set yet (Training panel)"]
        config = s.config.with_vocab(s.source.tokenizer.vocab_size)
        problems = config.problems()
        if problems:
            return problems
        if self.can_continue():  # the run keeps its own sequence length, seed and device
            return s.train_settings.problems()
        problems = s.train_settings.problems_for(config, s.source)
        if problems:
            return problems
        try:
            check_fits(config, device=s.device, settings=s.train_settings)
        except ModelTooLarge as exc:
            return [str(exc)]
        return []

    def _fine_tune_target(self, config: GPTConfig) -> Any:
        """The shown model when a fresh run would train its weights (it is untrained, or opened
        without training state, and fits ``config`` and the data's tokenizer), else None: a new
        model of ``config`` from random weights."""
        s = self.host
        if (
            s.model is not None
            and s.slot.shows_config(config)
            and s.tokenizer is not None
            and s.tokenizer == s.source.tokenizer
            and s.model.config.core.vocab_size == config.core.vocab_size
            and not s.checkpoint_meta.get("starter")  # the starter is shown, never trained on
        ):
            return s.model
        return None

    def _run_settings(self) -> TrainSettings:
        """The settings a run started now trains with: the session's, on the session's device (its
        own copy: the session's settings stay as they were set). Only once :meth:`problems` is empty."""
        settings = self.host.train_settings
        if settings is None:
            raise ConfigError(self.problems())
        return settings.replace(device=str(self.host.device or "cpu"))

    def _continued(self) -> Trainer | None:
        """The trainer Start continues (:meth:`can_continue`), else None."""
        return self.host.trainer if self.can_continue() else None

    def plan(self) -> StartPlan:
        """What Start would do now, in the window's words (the Train tab says it beside Start):
        :meth:`start` does exactly this."""
        s = self.host
        problems = self.problems()
        if problems:
            return StartPlan("blocked", f"Start is disabled: {problems[0]}", tuple(problems))
        settings = self._run_settings()
        trainer = self._continued()
        if trainer is not None:
            then = continued(trainer.settings, settings, trainer.step)
            return StartPlan("continue", continue_text(trainer.settings, then, trainer.step))
        config = s.config.with_vocab(s.source.tokenizer.vocab_size)
        on = f"for {settings.steps:,} steps on {s.source_spec or 'the chosen data'}"
        name = s.slot.name() or "the shown model"
        model = self._fine_tune_target(config)
        if model is not None and (s.checkpoint_meta or s.history):
            return StartPlan("fine-tune", f"Start fine-tunes the weights of {name} {on}")
        if model is not None:
            return StartPlan("fresh", f"Start trains the shown untrained model {on}")
        why = _why_new(s, config)
        core = config.core
        shape = f"{core.n_layers} layers × d_model {core.d_model}, vocabulary {core.vocab_size:,}"
        kept = "; its files stay as they are" if s.checkpoint_meta or s.checkpoint_path else ""
        replaced = f" It replaces {name} in the window{kept}." if s.model is not None else ""
        text = f"Start trains a new model from random weights ({shape}) {on}{why}.{replaced}"
        return StartPlan("fresh", text)

    def start(self) -> None:
        """Start (or continue) training in the worker thread; see :class:`~app.session.workers.TrainWorker`.

        Raises ``ConfigError`` with :meth:`problems` when Start may not run, before anything
        changes. What it does is :meth:`plan`'s. Continue (``can_continue()``): the run's trainer
        goes on with the Training panel's settings (:func:`model.train.settings.continued`: seed,
        sequence length, device and threads stay those of the run; the learning rate as
        ``on_continue`` says) up to ``steps``, or ``steps`` more when that budget is already
        reached. Otherwise a fresh Trainer is built in the worker thread: on the current model when
        it is untrained or loaded without training state and fits the config and data
        (fine-tuning), else on a new seeded model. The current model, its curves, frames and name
        stay until that trainer exists: a run that cannot be built ends with an error and leaves the
        session as it was.
        """
        from model.train.trainer import Trainer

        s = self.host
        if self.active:
            return
        if s.is_following:
            raise ValueError("stop following the run folder first")
        problems = self.problems()
        if problems:
            raise ConfigError(problems)
        config = s.config.with_vocab(s.source.tokenizer.vocab_size)
        settings = self._run_settings()  # valid: problems() said so
        self._awaiting_trainer = False
        trainer = self._continued()
        if trainer is not None:
            trainer.settings = continued(trainer.settings, settings, trainer.step)
            target = trainer.settings.steps
            make = None  # the worker clears a stop its last run left
        else:
            target = settings.steps
            source = s.source
            model = self._fine_tune_target(config)

            def make(control):
                cfg = model.config if model is not None else config
                return Trainer(cfg, source, settings, model=model, control=control)

            self._awaiting_trainer = True  # the fresh run replaces what is shown once it exists
        worker = TrainWorker(
            trainer=trainer,
            make_trainer=make,
            target_steps=int(target),
            sample_every=int(s.sample_every),
            probe_prompt=lambda: s.probe_prompt,
            sample_prompt=s.sample_prompt,
        )
        worker.trainerReady.connect(self._on_trainer_ready)
        worker.stateChanged.connect(self._set_state)
        worker.finished.connect(self._on_worker_finished)
        worker.saved.connect(self._on_saved)  # all emitted in the GUI thread
        self.worker = worker
        self._set_state("starting")
        self._drain_timer.start()
        worker.start()

    def pause(self) -> None:
        if self.worker is not None:
            self.worker.control.pause()

    def resume(self) -> None:
        if self.worker is not None:
            self.worker.control.resume()

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.control.stop()
            if self.state != "stopping":
                self._set_state("stopping")

    def request_save(self, path: str) -> None:
        """Write a checkpoint between two steps; the host's ``mark_saved`` follows."""
        if self.worker is not None:
            self.worker.request_save(path)

    def reprobe(self) -> None:
        """The probe prompt changed: probe again at the next gap between two steps."""
        if self.worker is not None:
            self.worker.reprobe()

    def _on_saved(self, path: str, step: int) -> None:
        self.host.mark_saved(path, step)

    def _on_trainer_ready(self, trainer: Trainer) -> None:
        if trainer is self._installed:  # already taken by a drain that came first
            return
        fresh, self._awaiting_trainer = self._awaiting_trainer, False
        self._installed = trainer
        self.host.install_trainer(trainer, fresh=fresh)

    def _drain(self) -> None:
        worker = self.worker
        if worker is None:
            self._drain_timer.stop()
            return
        if self._awaiting_trainer:  # nothing of a fresh run is taken before its trainer is installed
            built = worker.trainer
            if built is None:
                return
            # built, its trainerReady still queued (a close joins the worker and drains before the
            # event loop runs again): take it now, or the steps it already made would be dropped
            self._on_trainer_ready(built)
        deliver(worker.mailbox, self.host)

    def _on_worker_finished(self, reason: str, message: str) -> None:
        never_started = self._awaiting_trainer  # the trainer could not be built: nothing changed
        self._awaiting_trainer = False
        self._drain()
        self._finish_worker()
        if reason == "error" and never_started:
            message = f"could not start: {message}"  # said where Start is, not in a dialog
        elif reason == "error":
            self.host.errorOccurred.emit("Training stopped", message)
        self.finished.emit(reason, message)


__all__ = ["RunHost", "StartPlan", "TrainingRun", "WorkerRun", "continue_text", "deliver"]
