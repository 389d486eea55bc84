"""The training half of the :class:`~app.session.Session`: start, pause, stop, the worker's results.

:class:`TrainingRun` is a mixin of ``Session`` (it reads and sets the session's fields and emits its
signals; see ``app/session.py`` for them). Training runs in a :class:`~app.workers.TrainWorker`;
its events, probe frames and samples arrive through the worker's mailbox, drained ~30 times a
second in the GUI thread, so a burst of steps becomes one ``eventsAppended`` and only the newest
probe frame is drawn. The probe prompt is the session's ``probe_prompt``, the one copy: the
trainer's :class:`~model.interp.probes.Prober` reads it at each probe.
"""

from __future__ import annotations

from typing import Any

from app.workers import TrainWorker
from model.interp.probes import ProbeFrame


class TrainingRun:
    """Training control and the idle model's probe, for :class:`~app.session.Session`."""

    # ---- probe outside training ----------------------------------------------------------------
    def refresh_probe(self) -> None:
        """Recompute the probe frame of an idle model (off the GUI thread; training does its own)."""
        if self.model is None or self.tokenizer is None or self.is_training or not self.probe_prompt:
            return
        if self.is_following:  # the frames are the followed run's
            return
        model, tokenizer, prompt, step = self.model, self.tokenizer, self.probe_prompt, self.step

        def job():
            from model.interp.probes import probe_frame

            return probe_frame(model, tokenizer, prompt, step)

        def done(frame, error):
            idle = not self.is_training and not self.is_following
            if error is None and frame is not None and model is self.model and idle:
                self._accept_frame(frame)

        self.compute.submit("session.probe", job, done)

    def _accept_frame(self, frame: ProbeFrame) -> None:
        self.latest_frame = frame
        self.frames.offer(frame)
        self.traceUpdated.emit(frame)

    # ---- training ------------------------------------------------------------------------------
    def start_problems(self) -> list[str]:
        """Why Start may not run now, first reason first (empty: it may). The one place that
        decides: the Train tab disables Start and shows the first reason, :meth:`start_training`
        raises them. Milliseconds, nothing allocated: the config's own problems, the training
        settings against this model and data (``TrainSettings.problems_for``: a sequence longer
        than the context), and whether the run fits this machine's memory."""
        from model.budget.sizing import ModelTooLarge

        if self.is_training:
            return ["training is running"]
        if self.is_following:
            return ["following a run folder (Stop following first)"]
        if self.source is None:
            if self.initialising:
                return ["loading the default corpus and model…"]
            return ["choose a data source in the Data panel"]
        if self.train_settings is None:
            return ["the training settings are not set yet (Training panel)"]
        config = self.config.with_vocab(self.source.tokenizer.vocab_size)
        problems = config.problems()
        if problems:
            return problems
        if self.can_continue():  # the run keeps its own sequence length, seed and device
            return self.train_settings.problems()
        problems = self.train_settings.problems_for(config, self.source)
        if problems:
            return problems
        try:
            self.check_fits(config, train=True)
        except ModelTooLarge as exc:
            return [str(exc)]
        return []

    def start_training(self) -> None:
        """Start (or continue) training in the worker thread; see :class:`~app.workers.TrainWorker`.

        Raises ``ConfigError`` with :meth:`start_problems` when Start may not run, before anything
        changes. Continue (``can_continue()``): the run's trainer goes on with the Training panel's
        settings (seed, sequence length, device and threads stay those of the run) up to ``steps``,
        or ``steps`` more when that budget is already reached. Otherwise a fresh Trainer is built in
        the worker thread: on the current model when it is untrained or loaded without training
        state and fits the config and data (fine-tuning), else on a new seeded model. The current
        model, its curves, frames and name stay until that trainer exists: a run that cannot be
        built ends with an error and leaves the session as it was.
        """
        from model.config import ConfigError
        from model.train.trainer import Trainer

        if self.is_training:
            return
        if self.is_following:
            raise ValueError("stop following the run folder first")
        problems = self.start_problems()
        if problems:
            raise ConfigError(problems)
        config = self.config.with_vocab(self.source.tokenizer.vocab_size)
        settings = self.train_settings.replace(device=str(self.device or "cpu")).validate()
        self.train_settings = settings
        self._awaiting_trainer = False
        if self.can_continue():
            trainer = self.trainer
            old = trainer.settings
            target = settings.steps if trainer.step < settings.steps else trainer.step + settings.steps
            trainer.settings = settings.replace(
                seed=old.seed,
                seq_len=old.seq_len,
                device=old.device,
                threads=old.threads,
                steps=settings.steps if trainer.step < settings.steps else old.steps,
            )
            trainer.clear_stop()
            make = None
        else:
            trainer = None
            target = settings.steps
            source = self.source
            model = None
            if (
                self.model is not None
                and self._model_config_key == self._config_key(config)
                and self.tokenizer is not None
                and self.tokenizer == source.tokenizer
                and self.model.config.vocab_size == config.vocab_size
                and not self.checkpoint_meta.get("starter")  # the starter is shown, never trained on
            ):
                model = self.model  # untrained, or loaded without training state: train these weights

            def make():
                return Trainer(model.config if model is not None else config, source, settings, model=model)

            self._awaiting_trainer = True  # the fresh run replaces what is shown once it exists
        worker = TrainWorker(
            trainer=trainer,
            make_trainer=make,
            target_steps=int(target),
            sample_every=int(self.sample_every),
            probe_prompt=lambda: self.probe_prompt,
            sample_prompt=self.sample_prompt,
        )
        worker.trainerReady.connect(self._on_trainer_ready)
        worker.stateChanged.connect(self._set_state)
        worker.finished.connect(self._on_worker_finished)
        worker.saved.connect(self._on_saved)
        self._worker = worker
        self._set_state("starting")
        self._drain_timer.start()
        worker.start()

    def pause_training(self) -> None:
        if self._worker is not None:
            self._worker.pause()

    def resume_training(self) -> None:
        if self._worker is not None:
            self._worker.resume()

    def stop_training(self) -> None:
        if self.is_following:
            self.stop_following()
        elif self._worker is not None:
            self._worker.stop()
            if self.state != "stopping":
                self._set_state("stopping")

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Stop every worker and wait for them (the window's closeEvent); True if all ended."""
        ok = True
        if self._worker is not None:
            self._worker.stop()
            ok = self._worker.join(timeout)
            self._drain()
            if ok:
                self._finish_worker()
        if self._compute is not None:
            ok = self._compute.shutdown(timeout) and ok
        return ok

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until the training worker has ended (used by the command line and benchmarks)."""
        if self._worker is None:
            return True
        return self._worker.join(timeout)

    def _set_state(self, state: str) -> None:
        if state != self.state:
            self.state = state
            self.trainingStateChanged.emit(state)

    _awaiting_trainer = False

    def _on_trainer_ready(self, trainer: Any) -> None:
        if self._awaiting_trainer:  # a fresh run exists: now the old one's curves and frames go
            self._awaiting_trainer = False
            self._start_record()
            if self.checkpoint_meta.get("starter") or trainer.model is not self.model:
                self.checkpoint_meta = {}  # a fresh model is nobody's file (a fine-tune keeps its name)
            self.historyReset.emit()
        self.trainer = trainer
        self.tokenizer = trainer.tokenizer
        self._model_config_key = self._config_key(trainer.model.config)
        if trainer.model is not self.model:
            self.model = trainer.model
            self.config = trainer.model.config
            self.modelChanged.emit(self.model)

    def _drain(self) -> None:
        worker = self._worker
        if worker is None:
            self._drain_timer.stop()
            return
        if self.follow_worker is not None:
            self._drain_follow(worker)
        if self._awaiting_trainer:  # nothing of a fresh run is taken before its trainer is installed
            return
        events, frames, samples = worker.mailbox.take("events", "frames", "samples")
        if events:
            self.history.extend(events)
            self._last_tps = float(events[-1].get("tokens_per_s", self._last_tps) or 0.0)
            self.dirty = True
            self.eventsAppended.emit(events)
        for step, text in samples:
            self.samples.append((step, text))
            self.sampleAdded.emit(step, text)
        if frames:
            for frame in frames[:-1]:
                self.frames.offer(frame)  # kept for the scrubber, never drawn live
            self._accept_frame(frames[-1])

    def _on_worker_finished(self, reason: str, message: str) -> None:
        never_started = self._awaiting_trainer  # the trainer could not be built: nothing changed
        self._awaiting_trainer = False
        self._drain()
        self._finish_worker()
        if reason == "error" and never_started:
            message = f"could not start: {message}"  # said where Start is, not in a dialog
        elif reason == "error":
            self.errorOccurred.emit("Training stopped", message)
        self.trainingFinished.emit(reason, message)

    def _finish_worker(self) -> None:
        worker = self._worker
        if worker is None:
            return
        worker.join(5.0)
        self._worker = None
        self._drain_timer.stop()
        self._set_state("idle")

    # ---- generation ----------------------------------------------------------------------------
    def generation_model(self):
        """The model generation should read: a snapshot while training runs, else the model itself."""
        return self.generation_source()()

    def generation_source(self):
        """A function returning :meth:`generation_model`'s model, to call in a worker thread: while
        training runs the snapshot waits for the step in progress (``compute_lock``), which must not
        be the GUI thread's wait (a step can take a second on a busy machine)."""
        model, training, lock = self.model, self.is_training, self.compute_lock

        def source():
            if model is None or not training:
                return model
            import copy

            with lock:
                snap = copy.deepcopy(model)
            snap.eval()
            return snap

        return source

    # ---- convenience for tests and benchmarks --------------------------------------------------
    def eta_seconds(self, target: int | None = None) -> float | None:
        """Seconds left to reach ``target`` (default: the step budget) at the recent pace."""
        from model.train.trainer import eta_seconds

        return eta_seconds(self.history, self.step, target or self.target_steps)
