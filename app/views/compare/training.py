"""The variants of a comparison trained together: :class:`VariantTraining`.

One :class:`~app.session.workers.GroupWorker` (a :class:`~model.train.multitrain.TrainerGroup` in its own
thread: the same batches in the same order for every variant); its events reach the
:class:`~app.views.compare.state.CompareState` from a ~30 Hz drain timer, and when it ends each run
keeps its trained model.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.core.jobs import Job
from app.session.model_files import check_fits
from app.session.workers import GroupSpec, GroupWorker, drain_timer
from app.views.compare.state import TRAIN_JOB
from model.budget.sizing import ModelTooLarge
from model.compare.tables import history_points
from model.config import ConfigError
from model.train.settings import TrainSettings


class VariantTraining(QObject):
    """Trains the state's variant runs with the session's data and training settings.

    ``finished(reason, message)`` once the worker has ended and the runs hold their models.
    """

    finished = Signal(str, str)

    def __init__(self, session, state, parent: QObject | None = None):
        super().__init__(parent)
        self.session = session
        self.state = state
        self.worker: GroupWorker | None = None
        #: the training's job on the session's board (how far, Cancel) while it runs
        self.job: Job | None = None
        self.target = 0
        self._timer = drain_timer(self, self.drain)

    def start(self, steps: int) -> bool:
        """Train every variant run from scratch, together; False (and a message) when it cannot."""
        st, s = self.state, self.session
        if self.worker is not None:
            return False
        variants = [r for r in st.runs if r.kind == "variant"]
        if not variants:
            st.say("training", "Add at least one variant first (a quick comparison, or field=value).")
            return False
        if s.source is None:
            st.say("training", "Choose a data source in the Data panel first.")
            return False

        try:
            base = s.train_settings or TrainSettings()
            settings = base.replace(
                steps=steps, probe_every=0, probe_prompt=None, device=str(s.device or "cpu")
            ).validate()
            V = s.source.tokenizer.vocab_size
            configs = {r.name: r.record.gpt_config().with_vocab(V).validate() for r in variants}
        except ConfigError as exc:
            st.say("training", "Cannot train: " + "; ".join(exc.problems))
            return False
        for name, cfg in configs.items():  # sized first, and said as the Train tab says it
            try:
                check_fits(cfg, device=s.device, settings=settings, model_where="the variant")
            except ModelTooLarge as exc:
                st.say("training", f"Cannot train {name}: {exc}")
                return False
        for r in variants:
            r.record.history = []
            r.record.summary = {}
            r.record.attention = None
            r.record.config = configs[r.name].to_dict()
            r.model, r.tokenizer, r.metrics = None, None, None
            r.status = "training"
        st.settings_used = settings.to_dict()
        st.source_used = s.source_spec
        self.target = steps
        worker = GroupWorker(GroupSpec(configs, s.source, settings))
        worker.finished.connect(self._on_finished)
        self.worker = worker
        self.job = worker.announce(
            s.jobs, TRAIN_JOB, f"Training {len(configs)} variants", f"for {steps} steps"
        )
        self.job.progress.describe(0, steps, "building the models…")
        st.say(
            "training",
            f"Training {len(configs)} variants for {steps} steps each on {s.source_spec}, "
            f"batch {settings.batch_size} × {settings.seq_len or 'context'} tokens, seed {settings.seed}.",
        )
        st.set_training(True)
        st.changed()
        worker.start()
        self._timer.start()
        return True

    def stop(self) -> None:
        """Stop after the current step (what the busy line's Cancel does)."""
        self.session.jobs.cancel(TRAIN_JOB)

    def drain(self) -> None:
        worker = self.worker
        if worker is None:
            self._timer.stop()
            return
        (events,) = worker.mailbox.take("events")
        if not events:
            return
        st = self.state
        st.add_history(events)
        names = st.names()
        done = sum(len(st.run(r).record.history) for r in worker.variants if r in names)
        step = min(done // max(1, len(worker.variants)), self.target)
        if self.job is not None:
            self.job.progress.describe(step, self.target, f"step {step} of {self.target}")

    def trainer(self, name: str):
        """The trainer of variant ``name`` while it trains (its model is live), else None."""
        group = self.worker.group if self.worker is not None else None
        return group.trainers.get(name) if group is not None else None

    def _on_finished(self, reason: str, message: str) -> None:
        worker = self.worker
        if worker is None:
            return
        worker.join(10.0)
        self.drain()
        self._timer.stop()
        group = worker.group
        self.worker = None
        st = self.state
        if group is not None:
            for name, trainer in group.trainers.items():
                try:
                    run = st.run(name)
                except KeyError:
                    continue
                run.model = trainer.model
                run.tokenizer = trainer.tokenizer
                run.context = trainer.seq_len
                run.record.history = history_points(trainer.history)
                run.status = (
                    f"trained {trainer.step} steps" if reason == "done" else f"stopped at step {trainer.step}"
                )
                if name in group.diverged:  # dropped by the group; the others went on
                    run.status = f"diverged after step {trainer.step}"
        if reason == "error":
            st.say("training", f"Training stopped with an error: {message}")
            for r in st.runs:
                if r.kind == "variant" and r.status == "training":
                    r.status = "error"
        else:
            st.say("training", f"Variants {message}. The prompt now runs through every model.")
        self.job = None  # the worker ended it on the board
        st.set_training(False)
        st.changed()
        self.finished.emit(reason, message)

    def shutdown(self) -> None:
        """Stop the training and wait for it."""
        worker = self.worker
        if worker is not None:
            worker.control.stop()
            worker.join(30.0)
        self._timer.stop()


__all__ = ["VariantTraining"]
