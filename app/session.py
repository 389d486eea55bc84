"""Session: the one object every tab shares — the current model, its data, and the training run.

A tab receives the session in its constructor, reads numbers from ``model/`` through it, and
listens to its signals; it never reaches into another tab. All torch work that a tab does itself
goes through :attr:`Session.compute` (a :class:`~app.workers.ComputeWorker`: off the GUI thread,
under the process-wide ``compute_lock``, latest request wins).

State (read freely from the GUI thread; change only through the methods):

=====================  ===========================================================================
``config``             the :class:`~model.config.GPTConfig` of the current model (vocab set), or the
                       validated config the user is editing when no model is built yet
``source``             the :class:`~model.text.datasource.DataSource` (corpus or synthetic task) or ``None``
``source_spec``        how the source was named (``"builtin:stdlib"``, ``"task:induction"``, a path)
``tokenizer``          the model's tokenizer (from the source, or from a loaded checkpoint)
``model``              the :class:`~model.nn.gpt.GPT` or ``None``
``trainer``            the :class:`~model.train.trainer.Trainer` of the run, or ``None`` (untrained model)
``train_settings``     the :class:`~model.train.trainer.TrainSettings` the next Start will use
``device``             ``torch.device`` used for the next model (``device_choice``: auto/cpu/cuda)
``state``              ``"idle" | "starting" | "running" | "paused" | "stopping"``
``history``            list of training-event dicts (``TrainEvent.to_dict()``) of the current model
``latest_frame``       the newest :class:`ProbeFrame` (attention of the probe prompt) or ``None``
``frames``             :class:`FrameHistory`, a bounded history of probe frames for the scrubber
``checkpoint_path``    where the current model was last saved or loaded from (``None`` if never)
=====================  ===========================================================================

Signals are emitted in the GUI thread only (worker results arrive through a mailbox drained by a
~30 Hz timer, so a burst of training steps becomes one ``eventsAppended`` and only the newest probe
frame is ever drawn).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.follow import FollowingRun
from app.training_run import TrainingRun
from app.workers import ComputeWorker, drain_timer
from model.config import GPTConfig, default_config
from model.interp.probes import FrameHistory, ProbeFrame

DEFAULT_SOURCE = "builtin:stdlib"


class Session(QObject, TrainingRun, FollowingRun):
    """Shared state of the app; see the module docstring for the fields."""

    #: the validated config changed (GPTConfig); the model may not be rebuilt yet
    configChanged = Signal(object)
    #: the data source changed (DataSource)
    dataChanged = Signal(object)
    #: a new model is current (GPT or None): built, loaded from a checkpoint, or replaced
    modelChanged = Signal(object)
    #: a new probe frame is the latest (ProbeFrame); at most ~30 per second
    traceUpdated = Signal(object)
    #: new training events (list of dicts), in step order
    eventsAppended = Signal(list)
    #: the loss history was replaced (new run, checkpoint loaded): redraw from ``history``
    historyReset = Signal()
    #: one generated sample during training: (step, text)
    sampleAdded = Signal(int, str)
    #: idle / starting / running / paused / stopping, or following (a run folder; app/follow.py)
    trainingStateChanged = Signal(str)
    #: a run ended: reason "done" | "stopped" | "error", and a message
    trainingFinished = Signal(str, str)
    #: the device for new work changed (its str)
    deviceChanged = Signal(str)
    #: a checkpoint was written (its path)
    checkpointSaved = Signal(str)
    #: the probe prompt changed (str)
    probePromptChanged = Signal(str)
    #: something went wrong that the user should see: (title, message)
    errorOccurred = Signal(str, str)
    #: a passing remark for the status bar
    statusMessage = Signal(str)
    #: a followed run folder's status, world size or newest checkpoint changed (app/follow.py)
    followUpdated = Signal()

    def __init__(self, parent: QObject | None = None, *, history_bytes: int = 64 * 2**20):
        super().__init__(parent)
        self.config: GPTConfig = default_config()
        self.source: Any = None
        self.source_spec: str = ""
        self.tokenizer: Any = None
        self.model: Any = None
        self.trainer: Any = None
        self.train_settings: Any = None
        self.device_choice: str = "auto"
        self.device: Any = None
        self.state: str = "idle"
        self.history: list[dict] = []
        self.samples: list[tuple[int, str]] = []
        self.latest_frame: ProbeFrame | None = None
        self.frames = FrameHistory(max_bytes=history_bytes)
        self.checkpoint_path: str | None = None
        self.checkpoint_meta: dict = {}
        self.dirty = False  # trained steps not yet saved
        self.initialising = False  # True while the window loads the default corpus and model
        self.probe_prompt: str = ""
        self.sample_every: int = 100
        self.sample_prompt: str = ""
        self._worker: Any = None
        self._model_config_key: str | None = None
        self._last_tps: float = 0.0
        self._compute: Any = None

        self._drain_timer = drain_timer(self, self._drain)

    # ---- derived -------------------------------------------------------------------------------
    @property
    def compute_lock(self):
        from model.runtime import compute_lock

        return compute_lock

    @property
    def compute(self):
        """The shared :class:`~app.workers.ComputeWorker` for a tab's own torch work (created lazily)."""
        if self._compute is None:
            self._compute = ComputeWorker(self)
        return self._compute

    @property
    def is_training(self) -> bool:
        return self.state in ("starting", "running", "paused", "stopping")

    @property
    def step(self) -> int:
        if self.trainer is not None:
            return int(self.trainer.step)
        return int(self.history[-1]["step"]) if self.history else 0

    @property
    def num_params(self) -> int | None:
        return None if self.model is None else int(self.model.num_params())

    @property
    def tokens_per_s(self) -> float:
        return self._last_tps

    @property
    def target_steps(self) -> int:
        return int(getattr(self.train_settings, "steps", 0) or 0)

    def can_continue(self) -> bool:
        """Whether Start continues the current run (same config and data) instead of a fresh model."""
        return (
            self.trainer is not None
            and self._model_config_key == self._config_key(self.config)
            and self.trainer_source_matches()
        )

    def trainer_source_matches(self) -> bool:
        if self.trainer is None or self.source is None:
            return False
        try:
            return self.trainer.source.identity() == self.source.identity()
        except Exception:
            return False

    # ---- setting things up ---------------------------------------------------------------------
    def init_default(self) -> None:
        """The built-in default: default corpus, default config, an untrained model, auto device."""
        from model.train.trainer import TrainSettings

        self.initialising = True
        try:
            if self.train_settings is None:  # normally set by the Training panel
                self.train_settings = TrainSettings(probe_every=10)
            self.set_device("auto")
            if self.source is None:
                self.set_source(DEFAULT_SOURCE)
            if self.model is None:
                self.build_model()
        finally:
            self.initialising = False

    def open_starter(self, path: str | Path | None = None) -> bool:
        """First launch: the starter model shipped in ``assets/starter`` with its data and prompt.

        False (nothing changed) when it is missing or unreadable; the caller then builds the default
        untrained model. Start trains a fresh model of the same shape, never the starter itself.
        """
        from model.io.starter import STARTER_DIR, STARTER_SOURCE, describe, named_heads
        from model.train.trainer import TrainSettings

        path = Path(path or STARTER_DIR)
        if not (path / "model.safetensors").is_file():
            return False
        self.initialising = True
        try:
            if self.train_settings is None:
                self.train_settings = TrainSettings(probe_every=10)
            self.set_device("auto")
            self.set_source(STARTER_SOURCE)
            self.load_checkpoint(  # Save asks where: the starter's own folder stays as shipped
                path,
                meta={"starter": True, "name": "starter model", "source": STARTER_SOURCE},
                remember_path=False,
            )
        except Exception as exc:  # a damaged install must not keep the app from starting
            self.statusMessage.emit(f"the starter model could not be opened ({exc}): a fresh model instead")
            return False
        finally:
            self.initialising = False
        with self.compute_lock:
            named = named_heads(self.model, self.tokenizer, self.probe_prompt)
        heads = describe({r: h for r, h in named.items() if r in ("previous-token", "induction")})
        self.statusMessage.emit(
            f"Starter model, trained by Attention Lab on {STARTER_SOURCE}"
            f"{': ' + heads if heads else ''}. Start trains a fresh model."
        )
        return True

    def set_device(self, choice: str) -> None:
        """Choose ``auto``, ``cpu`` or ``cuda``; moves an idle model. Raises ValueError when training."""
        from model.runtime import pick_device

        if self.is_training:
            raise ValueError("the device can only be changed while no training runs")
        device = pick_device(choice)
        self.device_choice = choice
        changed = str(device) != str(self.device)
        self.device = device
        if self.model is not None and changed:
            with self.compute_lock:
                if self.trainer is not None:  # the run goes on there: optimizer state moves along
                    from model.train.trainer import Trainer

                    t = self.trainer
                    state = t.state_dict()
                    self.trainer = Trainer(
                        t.config,
                        t.source,
                        t.settings.replace(device=str(device)),
                        model=self.model,
                        state=state,
                    )
                else:
                    self.model.to(device)
        if changed:
            self.deviceChanged.emit(str(device))

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
        self.source = source
        self.source_spec = spec
        self.config = self.config.with_vocab(source.tokenizer.vocab_size)
        untrained = self.trainer is None and self.checkpoint_path is None and not self.history
        if self.model is None:
            self.tokenizer = source.tokenizer
        if not self.probe_prompt or self._prompt_from_source:
            self._set_probe_prompt(source.default_prompt, from_source=True)
        if not self.sample_prompt or self._sample_from_source:
            self.sample_prompt = source.default_prompt[:16]
            self._sample_from_source = True
        self.dataChanged.emit(source)
        if (
            self.model is not None
            and untrained
            and self.tokenizer != source.tokenizer
            and not self.is_training
        ):
            self.build_model()

    _sample_from_source = True
    _prompt_from_source = True

    def _set_probe_prompt(self, text: str, *, from_source: bool) -> None:
        self._prompt_from_source = from_source
        self.probe_prompt = text  # the one copy: a running worker's prober reads it at each probe
        if self._worker is not None:
            self._worker.reprobe()
        self.probePromptChanged.emit(text)

    def set_probe_prompt(self, text: str) -> None:
        """Use ``text`` as the live-attention prompt; raises the tokenizer's error for bad text."""
        tok = self.tokenizer
        if tok is not None:
            if not text:
                raise ValueError("the probe prompt is empty")
            tok.encode(text)  # raises with a clear message for characters the vocabulary lacks
        self._set_probe_prompt(text, from_source=False)
        self.refresh_probe()

    def set_config(self, config: GPTConfig) -> None:
        """Use a (valid) config for the next fresh model; vocab_size follows the tokenizer."""
        if self.tokenizer is not None:
            config = config.with_vocab(self.tokenizer.vocab_size)
        config.validate()
        self.config = config
        self.configChanged.emit(config)

    def set_train_settings(self, settings: Any) -> None:
        """The TrainSettings the next Start uses (a running worker keeps its own)."""
        self.train_settings = settings

    @staticmethod
    def _config_key(config: GPTConfig) -> str:
        d = config.to_dict()
        d.pop("vocab_size", None)
        return repr(sorted(d.items()))

    def build_model(self, seed: int | None = None) -> None:
        """Replace the model by a freshly initialised one of ``config`` (untrained; no trainer)."""
        from model.nn.gpt import build_model

        if self.is_training:
            raise ValueError("stop training before building a new model")
        if self.source is None:
            raise ValueError("choose a data source first")
        self.tokenizer = self.source.tokenizer
        config = self.config.with_vocab(self.tokenizer.vocab_size).validate()
        seed = seed if seed is not None else int(getattr(self.train_settings, "seed", 0) or 0)
        self.check_fits(config, train=False)  # one line naming what to lower, before allocating
        with self.compute_lock:
            model = build_model(config, seed=seed, device=self.device or "cpu")
            model.eval()
        self._install_model(model, config, trainer=None, history=[], path=None)
        self.refresh_probe()

    def check_fits(self, config: GPTConfig, *, train: bool) -> None:
        """Raise :class:`model.budget.sizing.ModelTooLarge` (one line: need, memory, what to lower) unless
        ``config`` fits this machine: to hold it (``train=False``), or to train it with the Training
        panel's batch and sequence length. Milliseconds; nothing is allocated."""
        from model.budget.sizing import OVERRIDE_ENV, ModelTooLarge, check, load_need, training_need

        if train and self.train_settings is not None:
            ts = self.train_settings
            seq = min(int(ts.seq_len or config.context_length), int(config.context_length))
            need = training_need(config, batch=int(ts.batch_size), seq_len=seq)
        else:
            need = load_need(
                config, copies=1, what=f"a model of {config.n_layers} layers × d_model {config.d_model}"
            )
        try:
            check(need, device=self.device or "cpu")
        except ModelTooLarge as exc:  # the window's override is the environment's, not a flag
            exc.args = (str(exc).replace("pass --no-size-check", f"start the app with {OVERRIDE_ENV}=1"),)
            raise

    def new_run(self) -> None:
        """File → New run: forget the trained model, rebuild it untrained from the current config."""
        self.build_model()

    def _start_record(self, history=(), path: str | None = None) -> None:
        """A new record of the model shown: its loss ``history``, no samples or frames, nothing
        unsaved, saved at ``path`` (the caller emits ``historyReset`` when its other fields are set)."""
        self.history = list(history)
        self.samples = []
        self.frames.clear()
        self.latest_frame = None
        self.checkpoint_path = path
        self.dirty = False
        self._last_tps = float(self.history[-1].get("tokens_per_s", 0.0)) if self.history else 0.0

    def _install_model(self, model, config, *, trainer, history, path, meta=None) -> None:
        self.checkpoint_meta = dict(meta or {})
        self.model = model
        self.config = config
        self.trainer = trainer
        self._model_config_key = self._config_key(config)
        self._start_record(history, path)
        self.modelChanged.emit(model)
        self.configChanged.emit(config)
        self.historyReset.emit()

    # ---- checkpoints ---------------------------------------------------------------------------
    def save_checkpoint(self, path: str | Path) -> None:
        """Write the current model (and training state) to ``path``.

        While training, the worker writes it between two steps and ``checkpointSaved`` follows;
        when idle it is written now (raises the checkpoint layer's error on failure).
        """
        from model.io.checkpoint import check_save_target

        path = str(path)
        if self.model is None:
            raise ValueError("there is no model to save")
        check_save_target(path)  # a read-only or wrong target fails now, not in the worker
        if self._worker is not None and self.is_training:
            self._worker.request_save(path)
            return
        with self.compute_lock:
            if self.trainer is not None:
                self.trainer.save(path)
            else:
                from model.io.checkpoint import save_checkpoint

                meta = {"source": self.source_spec, "name": Path(path).name}
                save_checkpoint(path, self.model, self.tokenizer, meta=meta)
        self._on_saved(path)

    def _on_saved(self, path: str) -> None:
        self.checkpoint_path = path
        self.dirty = False
        self.checkpointSaved.emit(path)

    def load_checkpoint(
        self, path: str | Path, *, meta: dict | None = None, remember_path: bool = True
    ) -> None:
        """Make the model at ``path`` current: config, weights, tokenizer and loss history.

        Any kind ``model.io.pretrained.open_model`` reads (our checkpoints, a Hugging Face GPT-2
        directory, a nanoGPT ``ckpt.pt``). With training state, Start continues the run exactly;
        when its data source cannot be rebuilt (a moved text file) the model still opens and
        ``statusMessage`` says why training starts afresh. Raises ``CheckpointError`` (or another
        clear error) and leaves the session unchanged when the model cannot be read. ``meta``
        adds to (or overrides) what the files say about the model (its name, ...);
        ``remember_path=False`` opens it without making ``path`` where Save writes.
        """
        from model.io.pretrained import open_model
        from model.text.sources import data_for_model, prompt_for
        from model.train.trainer import Trainer

        if self.is_training:
            raise ValueError("stop training before opening a checkpoint")
        path = str(path)
        note = ""
        with self.compute_lock:
            ckpt = open_model(path, device="cpu")
            trainer = None
            if ckpt.train_state is not None:
                try:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        trainer = Trainer.from_checkpoint(path, device=str(self.device or "cpu"))
                    if caught:
                        note = str(caught[-1].message)
                except Exception as exc:  # the model is fine; only continuing the run is not
                    note = f"training state not restored ({exc}); Start fine-tunes the weights afresh"
        meta = {**(ckpt.meta or {}), **(meta or {})}
        if trainer is not None:
            model, tokenizer, history = trainer.model, trainer.tokenizer, list(trainer.history)
            self.train_settings = trainer.settings
            source = trainer.source
            spec = getattr(source, "name", "")
        else:
            model, tokenizer, history = ckpt.model, ckpt.tokenizer, []
            if ckpt.train_state:
                history = list(ckpt.train_state.get("history") or [])
            source, spec, why = data_for_model(tokenizer, self.source, self.source_spec)
            note = note or why
            if self.device is not None and str(model.device) != str(self.device):
                with self.compute_lock:
                    model.to(self.device)
        model.eval()
        self.tokenizer = tokenizer
        if source is not None and source is not self.source:
            self.source = source
            self.source_spec = spec
            self.dataChanged.emit(source)
        self._install_model(
            model,
            model.config,
            trainer=trainer,
            history=history,
            path=path if remember_path else None,
            meta=meta,
        )
        prompt = prompt_for(tokenizer, self.probe_prompt, getattr(self.source, "default_prompt", ""))
        if prompt != self.probe_prompt:
            self._set_probe_prompt(prompt, from_source=True)
        self.refresh_probe()
        if note:
            self.statusMessage.emit(note)

    def model_origin(self) -> str:
        """Where the current model came from, for the status bar: name, kind, tokenizer (its
        parameters are the status bar's own count, of the model as built: one number, not two).

        Empty for a model built here and not yet saved or loaded.
        """
        from model.io.pretrained import describe_origin

        meta = {k: v for k, v in self.checkpoint_meta.items() if k != "n_params"}
        return describe_origin(meta, self.checkpoint_path)

    def model_name(self) -> str:
        """The current model's short name (the window title's): its folder, or what it is called
        (``starter model``, a Hub repo id); empty for a model built here and never saved."""
        if self.checkpoint_path:
            return Path(self.checkpoint_path).name
        return str(self.checkpoint_meta.get("name") or "")


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, interval_ms: int = 10) -> bool:
    """Run the Qt event loop until ``predicate()`` holds or ``timeout`` seconds pass.

    For the command line, benchmarks and screenshot hooks (tests use ``qtbot.waitUntil``). Between
    checks the loop sleeps in Qt (a short ``QEventLoop``), so timers and queued signals keep flowing.
    One loop and one timer serve every wait (a fresh ``singleShot`` per wait left a small object
    behind each time: 1 MiB over a soak's minutes).
    """
    from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer

    app = QCoreApplication.instance()
    deadline = time.monotonic() + timeout
    loop = QEventLoop()
    pause = QTimer()
    pause.setSingleShot(True)
    pause.setInterval(interval_ms)
    pause.timeout.connect(loop.quit)
    while True:
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        pause.start()
        loop.exec()


__all__ = ["Session", "wait_until"]
