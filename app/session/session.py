"""Session: the one object every tab shares — the current model, its data, and the training run.

A tab receives the session in its constructor, reads numbers from ``model/`` through it, and
listens to its signals; it never reaches into another tab: what it asks of one is a typed message on
``hub`` (a :class:`~app.core.hub.Hub`; the requests are in :mod:`app.session.messages`). All torch
work that a tab does itself goes through :attr:`Session.compute` (a
:class:`~app.session.compute.ComputeWorker`: off the GUI thread, under the process-wide
``compute_lock``, latest request wins).

Its parts: ``slot`` (:class:`~app.session.model_slot.ModelSlot`: the shown model and its ``record``),
``probe`` (:class:`~app.session.probe.Probe`), ``run``
(:class:`~app.session.training_run.TrainingRun`: training here) and ``follow``
(:class:`~app.session.follow.FollowedRun`: a run another process writes). Each reaches
the session only through its declared host protocol; the session re-emits their signals and reads
their fields under the names below (read freely from the GUI thread; change only through methods).
The inputs ``config``, ``source``, ``device`` and ``train_settings`` are
:class:`~app.session.fields.Announced`: each is set in one place (``_use_config``, ``_use_source``,
``set_device``, ``set_train_settings``) and emits its signal (``configChanged``, ``dataChanged``,
``deviceChanged`` with its name, ``trainSettingsChanged``) whenever it changes:

=====================  ===========================================================================
the data and the next model
``config``             the :class:`~model.config.GPTConfig` of the current model (vocab set), or the
                       validated config the user is editing when no model is built yet
``source``             the :class:`~model.text.datasource.DataSource` (corpus or synthetic task) or ``None``
``source_spec``        how the source was named (``"builtin:stdlib"``, ``"task:induction"``, a path)
``train_settings``     the :class:`~model.train.settings.TrainSettings` the next Start will use
``device``             ``torch.device`` used for the next model (``device_choice``: auto/cpu/cuda)
``edits``              what the setup panels hold that Start waits for (``set_edit``, ``editsChanged``)
``probe_prompt``       the live-attention prompt (``probe.prompt``: a running trainer's prober reads it)
the model slot (``slot``): the model every tab shows, and what came with it
``model``              the :class:`~model.nn.gpt.GPT` or ``None``
``tokenizer``          the model's tokenizer (from the source, or from a loaded checkpoint)
``trainer``            the :class:`~model.train.trainer.Trainer` of the run, or ``None`` (untrained model)
``checkpoint_path``    where the current model was last saved or loaded from (``None`` if never)
``checkpoint_meta``    what its files say about it (name, kind, source; ``starter``)
the record of the shown model (``slot.record``)
``history``            list of training-event dicts (``TrainEvent.to_dict()``) of the current model
``samples``            the (step, text) samples generated while it trained
``latest_frame``       the newest probe frame (an :class:`AttentionFrame`) or ``None``
``frames``             :class:`FrameHistory`, a bounded history of probe frames for the scrubber
``dirty``              trained steps not yet saved (``unsaved_steps``: how many)
``state``              ``"idle" | "starting" | "running" | "paused" | "stopping"`` (``run.state``), or
                       ``"following"`` (``follow.state``)
=====================  ===========================================================================

The session is Qt-free: its signals are :class:`app.core.state.Signal` objects (a bound method connected
to one is held weakly: a subscription never keeps its view alive), so it is made, driven and tested
without a ``QApplication``. They are emitted in the GUI thread only: what a worker thread produces
crosses into it through the one bridge, :func:`app.session.bridge.to_gui` (the loops' signals, the
:class:`~app.session.compute.ComputeWorker`'s results), or waits in a mailbox that the runs'
:class:`~app.session.training_run.WorkerRun` drains there (a burst of training steps becomes one
``eventsAppended``; only the newest probe frame is ever drawn).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.hub import Hub
from app.core.jobs import JobBoard
from app.core.state import Signal
from app.session.compute import ComputeWorker
from app.session.edits import Edits
from app.session.fields import Announced, PartField
from app.session.follow import FollowedRun
from app.session.garbage import settle_garbage
from app.session.model_files import check_fits, open_model_file, save_model_file, starter_note
from app.session.model_slot import ModelSlot
from app.session.probe import Probe
from app.session.training_run import TrainingRun
from model.config import GPTConfig, default_config
from model.runtime import compute_lock, pick_device

# model/'s trainer and its settings, the loaders, the data and the model's build are imported where
# they are used: together they take ~0.15 s to import, which the window's first paint does not wait
# for (app/shell/gui.py)
if TYPE_CHECKING:
    import torch

    from model.interp.frame import AttentionFrame
    from model.interp.probes import FrameHistory
    from model.nn.gpt import GPT
    from model.train.settings import TrainSettings
    from model.train.trainer import Trainer

DEFAULT_SOURCE = "builtin:stdlib"


class Session:
    """Shared state of the app; see the module docstring for the fields and the parts."""

    #: the validated config changed (GPTConfig): a new model's, or the next one's (not rebuilt yet)
    configChanged = Signal()
    #: the data source changed (DataSource)
    dataChanged = Signal()
    #: the training settings the next Start uses changed (TrainSettings)
    trainSettingsChanged = Signal()
    #: a setup panel's edit changed what Start must wait for (the panel's name; ``edits``)
    editsChanged = Signal()
    #: a new model is current (GPT or None): built, loaded from a checkpoint, or replaced
    modelChanged = Signal()
    #: a new probe frame is the latest (an AttentionFrame); at most ~30 per second
    traceUpdated = Signal()
    #: new training events (list of dicts), in step order
    eventsAppended = Signal()
    #: the loss history was replaced (new run, checkpoint loaded): redraw from ``history``
    historyReset = Signal()
    #: one generated sample during training: (step, text)
    sampleAdded = Signal()
    #: idle / starting / running / paused / stopping, or following (a run folder; app/session/follow.py)
    trainingStateChanged = Signal()
    #: a run ended: reason "done" | "stopped" | "error", and a message
    trainingFinished = Signal()
    #: the device for new work changed (its str)
    deviceChanged = Signal()
    #: a checkpoint was written (its path)
    checkpointSaved = Signal()
    #: the probe prompt changed (str)
    probePromptChanged = Signal()
    #: something went wrong that the user should see: (title, message)
    errorOccurred = Signal()
    #: a passing remark for the status bar
    statusMessage = Signal()
    #: a followed run folder's status, world size or newest checkpoint changed (app/session/follow.py)
    followUpdated = Signal()

    def __init__(self, *, history_bytes: int = 64 * 2**20):
        # the data and the next model (``config``, ``source`` and ``device``: announced fields, below)
        self._use_config(default_config())
        self.source_spec: str = ""
        self.edits = Edits()  # what the setup panels hold that Start must wait for (``set_edit``)
        self.device_choice: str = "auto"
        self.initialising = ""  # while the window sets up, what it does ("opening X"; Start says it)
        # the parts (see the module docstring)
        self.slot = ModelSlot(history_bytes)
        self._compute: ComputeWorker | None = None
        self.jobs = JobBoard()  # the job model: every background job a page waits for
        self.hub = Hub()  # the tabs' requests of one another (app.session.messages)
        self.probe = Probe(self)
        self.run = TrainingRun(self)
        self.follow = FollowedRun(self)
        self.probe.promptChanged.connect(lambda _text: self.run.reprobe())
        self.probe.promptChanged.connect(self.probePromptChanged.emit)
        for part in (self.run, self.follow):
            part.stateChanged.connect(self.trainingStateChanged.emit)
            part.finished.connect(self.trainingFinished.emit)
        self.follow.updated.connect(self.followUpdated.emit)

    # the inputs (the table in the module docstring): each announces its change when set to a new value
    config: Announced[GPTConfig] = Announced("configChanged")
    source: Announced[Any] = Announced("dataChanged")
    device: Announced[torch.device | None] = Announced("deviceChanged", announce=str)
    #: the TrainSettings the next Start uses (a running worker keeps its own)
    train_settings: Announced[TrainSettings | None] = Announced("trainSettingsChanged")

    # the parts' fields, under the session's names (the table in the module docstring)
    probe_prompt: PartField[str] = PartField("probe.prompt")
    sample_prompt: PartField[str] = PartField("probe.sample_prompt")
    sample_every: PartField[int] = PartField("probe.sample_every", settable=True)
    model: PartField[GPT | None] = PartField("slot.model")
    tokenizer: PartField[Any] = PartField("slot.tokenizer", settable=True)
    trainer: PartField[Trainer | None] = PartField("slot.trainer")
    checkpoint_path: PartField[str | None] = PartField("slot.path")
    checkpoint_meta: PartField[dict] = PartField("slot.meta")
    history: PartField[list[dict]] = PartField("slot.record.history")
    samples: PartField[list[tuple[int, str]]] = PartField("slot.record.samples")
    latest_frame: PartField[AttentionFrame | None] = PartField("slot.record.latest_frame")
    frames: PartField[FrameHistory] = PartField("slot.record.frames")
    dirty: PartField[bool] = PartField("slot.record.dirty", settable=True)
    saved_step: PartField[int] = PartField("slot.record.saved_step")
    tokens_per_s: PartField[float] = PartField("slot.record.tokens_per_s")

    # ---- derived -------------------------------------------------------------------------------
    compute_lock = property(
        lambda self: compute_lock, doc="model.runtime.compute_lock: every torch computation's"
    )

    @property
    def compute(self) -> ComputeWorker:
        """The shared :class:`~app.session.compute.ComputeWorker` for a tab's own torch work (made lazily)."""
        if self._compute is None:
            self._compute = ComputeWorker(board=self.jobs)
        return self._compute

    @property
    def state(self) -> str:
        return self.follow.state if self.follow.active else self.run.state

    @property
    def is_training(self) -> bool:
        return self.run.active

    @property
    def is_following(self) -> bool:
        return self.follow.active

    @property
    def step(self) -> int:
        return self.slot.step

    @property
    def unsaved_steps(self) -> int:
        """Steps trained since the model was last saved or opened (0 when none are unsaved)."""
        return max(0, self.step - self.saved_step) if self.dirty else 0

    @property
    def num_params(self) -> int | None:
        return None if self.model is None else int(self.model.num_params())

    @property
    def target_steps(self) -> int:
        """Every "step N / target" label's: the running (or followed) run's own, else the panel's."""
        worker = self.run.worker if self.run.active else self.follow.worker if self.follow.active else None
        return int(getattr(worker, "target", 0) or getattr(self.train_settings, "steps", 0) or 0)

    # ---- the runs (the parts: session.run, session.follow) ------------------------------------
    def start_training(self) -> None:
        """Start or continue training (:meth:`TrainingRun.start`)."""
        self.run.start()

    def stop_training(self) -> None:
        """The Stop button: end the training run, or the following of a run folder."""
        if self.follow.active:
            self.follow.stop()
        else:
            self.run.stop()

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Stop every worker and wait for them (the window's closeEvent); True if all ended."""
        ok = self.run.shutdown(timeout)
        ok = self.follow.shutdown(timeout) and ok
        if self._compute is not None:
            ok = self._compute.shutdown(timeout) and ok
        return ok

    # ---- setting things up ---------------------------------------------------------------------
    @contextmanager
    def _initialising(self) -> Iterator[None]:
        """While the first model is set up: training settings (normally the Training panel's) and
        the device chosen, Start says it is loading (or what the window said it opens)."""
        from model.train.settings import TrainSettings

        before = self.initialising
        self.initialising = before or "loading the default corpus and model"
        try:
            if self.train_settings is None:
                self.train_settings = TrainSettings(probe_every=10)
            self.set_device("auto")
            yield
        finally:
            self.initialising = before

    def init_default(self) -> None:
        """The built-in default: default corpus, default config, an untrained model, auto device."""
        with self._initialising():
            if self.source is None:
                self.set_source(DEFAULT_SOURCE)
            if self.model is None:
                self.build_model()

    def open_starter(self, path: str | Path | None = None) -> bool:
        """First launch: the starter model shipped in ``assets/starter`` with its data and prompt.

        False (nothing changed) when it is missing or unreadable; the caller then builds the default
        untrained model. Start trains a fresh model of the same shape, never the starter itself.
        """
        from model.io.checkpoint.starter import STARTER_DIR, STARTER_SOURCE

        path = Path(path or STARTER_DIR)
        if not (path / "model.safetensors").is_file():
            return False
        try:
            with self._initialising():
                self.set_source(STARTER_SOURCE)
                self.load_checkpoint(  # Save asks where: the starter's own folder stays as shipped
                    path,
                    meta={"starter": True, "name": "starter model", "source": STARTER_SOURCE},
                    remember_path=False,
                )
        except Exception as exc:  # a damaged install must not keep the app from starting
            self.statusMessage.emit(f"the starter model could not be opened ({exc}): a fresh model instead")
            return False
        if self.model is not None:  # (it is: load_checkpoint raises otherwise)
            self.statusMessage.emit(starter_note(self.model, self.tokenizer, self.probe_prompt))
        return True

    def set_device(self, choice: str) -> None:
        """Choose ``auto``, ``cpu`` or ``cuda``; moves an idle model. Raises ValueError when training."""
        if self.is_training:
            raise ValueError("the device can only be changed while no training runs")
        device = pick_device(choice)
        self.device_choice = choice
        if str(device) != str(self.device):
            self.slot.move_to(device)
        self.device = device  # the one place it changes: ``deviceChanged`` when it is another

    def set_source(self, spec: str) -> None:
        """Resolve and use a data source; raises the data layer's clear error when it cannot.

        The next fresh model takes the source's vocabulary. An untrained model is rebuilt for it
        at once (so every view shows a model that can read this data); a trained or loaded model
        stays until Start, which continues it only if the tokenizers agree.
        """
        from model.text.sources import resolve_source

        source = None
        if self.model is not None and self.checkpoint_meta and self.tokenizer is not None:
            try:  # a loaded model: encode the new data with its tokenizer, so Start fine-tunes it
                source = resolve_source(spec, tokenizer=self.tokenizer)
            except Exception:
                source = None  # e.g. a synthetic task, or characters it cannot encode: a fresh model
        if source is None:
            source = resolve_source(spec)
        untrained = self.trainer is None and self.checkpoint_path is None and not self.history
        if self.model is None:
            self.tokenizer = source.tokenizer
        self.probe.follow_source(source)
        self._use_config(self.config.with_vocab(source.tokenizer.vocab_size))
        self._use_source(source, spec)  # last: what listens to dataChanged sees all the rest new
        if (
            self.model is not None
            and untrained
            and self.tokenizer != source.tokenizer
            and not self.is_training
        ):
            self.build_model()

    def set_config(self, config: GPTConfig) -> None:
        """Use a (valid) config for the next fresh model; vocab_size follows the tokenizer."""
        if self.tokenizer is not None:
            config = config.with_vocab(self.tokenizer.vocab_size)
        config.validate()
        self._use_config(config)

    def _use_config(self, config: GPTConfig) -> None:
        self.config = config  # ``configChanged`` when it differs from the one before

    def _use_source(self, source: Any, spec: str) -> None:
        self.source_spec, self.source = spec, source  # ``dataChanged`` when it is another object

    def set_train_settings(self, settings: TrainSettings) -> None:
        """The TrainSettings the next Start uses (a running worker keeps its own); raises
        ``ConfigError`` with their problems, before anything changes, when they are not valid."""
        self.train_settings = settings.validate()

    def set_edit(self, panel: str, problems: list[str], valid: bool) -> None:
        """A setup panel's edited value: its problems and whether it is valid (``edits``; Start
        waits while any panel has one)."""
        if self.edits.set(panel, problems, valid):
            self.editsChanged.emit(panel)

    def build_model(self, seed: int | None = None) -> None:
        """Replace the model by a freshly initialised one of ``config`` (untrained; no trainer)."""
        from model.nn.gpt import init_model

        if self.is_training:
            raise ValueError("stop training before building a new model")
        if self.source is None:
            raise ValueError("choose a data source first")
        self.tokenizer = self.source.tokenizer
        config = self.config.with_vocab(self.tokenizer.vocab_size).validate()
        seed = seed if seed is not None else int(getattr(self.train_settings, "seed", 0) or 0)
        check_fits(config, device=self.device, settings=None)  # one line naming what to lower
        with self.compute_lock:
            model = init_model(config, seed=seed, device=self.device or "cpu")
            model.eval()
        self._install_model(model, config, trainer=None, history=[], path=None)
        self.probe.refresh()

    def new_run(self) -> None:
        """File → New run: forget the trained model, rebuild it untrained from the current config."""
        self.build_model()

    # ---- the model slot and its record (the runs tell the session through these) ----------------
    def _install_model(self, model, config, *, trainer, history, path, meta=None) -> None:
        self.slot.show(model, trainer=trainer, path=path, meta=meta or {})
        self.slot.record.restart(history)
        self._use_config(config)
        self.modelChanged.emit(model)
        self.historyReset.emit()

    def install_trainer(self, trainer: Trainer, *, fresh: bool) -> None:
        """The run's trainer exists (``fresh``: a new run, whose record replaces the shown one's:
        the old curves and frames go now, not when Start was pressed)."""
        other = self.slot.take_trainer(trainer, fresh=fresh)
        if fresh:
            self.historyReset.emit()
        if other:
            self._use_config(trainer.model.config)
            self.modelChanged.emit(self.model)

    def begin_record(self) -> None:
        """A followed run's record begins: no trainer to continue, the shown curves and frames go."""
        if self._compute is not None:
            self._compute.cancel("session.probe")  # the idle model's frame must not join the run's
        self.slot.trainer = None
        self.slot.record.restart()
        self.slot.path = None
        self.historyReset.emit()

    def restart_history(self) -> None:
        """The followed run's log started over: its curves and frames so far go."""
        self.slot.record.history = []
        self.slot.record.clear_frames()
        self.historyReset.emit()

    def show_model(self, model: GPT, tokenizer: Any, *, path: str, meta: dict) -> None:
        """Show ``model`` (a followed run's checkpoint at ``path``) and keep the record as it is."""
        self.slot.show(model, trainer=self.trainer, path=path, meta=meta)
        self.slot.tokenizer = tokenizer
        self._use_config(model.config)
        self.modelChanged.emit(model)

    def add_events(self, events: list[dict]) -> None:
        self.slot.record.add_events(events)
        self.eventsAppended.emit(events)

    def add_sample(self, step: int, text: str) -> None:
        self.slot.record.samples.append((step, text))
        self.sampleAdded.emit(step, text)

    def show_frames(self, frames: list[AttentionFrame]) -> None:
        """Keep every frame for the scrubber; draw only the newest (the last)."""
        self.traceUpdated.emit(self.slot.record.add_frames(frames))

    def mark_saved(self, path: str, step: int | None = None) -> None:
        """The model was written to ``path`` holding ``step`` (default: the step shown now; a save
        between two steps holds the step it was written at, and the steps trained since stay unsaved)."""
        self.slot.saved_to(path)
        self.slot.record.mark_saved(self.step if step is None else int(step), self.step)
        self.checkpointSaved.emit(path)

    # ---- checkpoints ---------------------------------------------------------------------------
    def save_checkpoint(self, path: str | Path) -> None:
        """Write the current model (and training state) to ``path``.

        While training, the worker writes it between two steps and ``checkpointSaved`` follows;
        when idle it is written now (raises the checkpoint layer's error on failure).
        """
        from model.io.checkpoint.saved import check_save_target

        path = str(path)
        if self.model is None:
            raise ValueError("there is no model to save")
        check_save_target(path)  # a read-only or wrong target fails now, not in the worker
        if self.run.worker is not None and self.is_training:
            self.run.request_save(path)
            return
        save_model_file(path, self.slot, source_spec=self.source_spec)
        self.mark_saved(path)

    def load_checkpoint(
        self, path: str | Path, *, meta: dict | None = None, remember_path: bool = True, **options: Any
    ) -> str:
        """Make the model at ``path`` current: config, weights, tokenizer and loss history; the note
        it also emits on ``statusMessage`` ("" when none: why training starts afresh, a choice that
        did not apply), for a caller that says more.

        Any kind :func:`app.session.model_files.open_model_file` reads (``options``: its ``stored``).
        With training state, Start continues the run exactly. Raises ``CheckpointError`` (or another
        clear error) and leaves the session unchanged when the model cannot be read. ``meta`` adds to
        what the files say (its name, ...); ``remember_path=False``: Save does not write to ``path``.
        """
        if self.is_training:
            raise ValueError("stop training before opening a checkpoint")
        path, before, spec = str(path), self.source, self.source_spec
        opened = open_model_file(path, device=self.device, source=before, source_spec=spec, **options)
        if opened.trainer is not None:
            self.train_settings = opened.trainer.settings
        self.tokenizer = opened.tokenizer
        if opened.source is not None and opened.source is not self.source:
            self._use_source(opened.source, opened.spec)
        self._install_model(
            opened.model,
            opened.model.config,
            trainer=opened.trainer,
            history=opened.history,
            path=path if remember_path else None,
            meta={**opened.meta, **(meta or {})},
        )
        self.probe.after_open(before, opened.tokenizer, self.source)
        self.probe.refresh()
        settle_garbage()  # the model and what opening it imported stay: out of later collections
        if opened.note:
            self.statusMessage.emit(opened.note)
        return opened.note


__all__ = ["Session"]
