"""The Features tab's training loop: :func:`model.interp.sae.train.train_sae` in a thread of its own.

An SAE trains for minutes, so it does not take the shared compute worker (every other page's job would
wait behind it): :class:`SAETrainLoop` is a :class:`~app.session.workers.LoopWorker` on the session's
job board (the busy line: tokens done of the run's, the time left, Cancel). It holds the process-wide
compute lock for one step at a time, letting it go between two steps, so an inspection typed meanwhile
runs between steps instead of after the run. Each step's figures (:class:`~model.interp.sae.train.TrainStep`)
go to the mailbox (``"steps"``), drained by the page at ~30 Hz. Cancel stops at the next step: the
trainer saves its state into the folder first, and the same settings with the same folder resume it.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

from app.session.workers import LoopWorker
from model.interp.sae.train import SAETrainResult, SAETrainSettings, TrainStep, train_sae
from model.progress import Cancelled, reporting
from model.runtime import compute_lock, threads

#: The compute key of an SAE's training.
TRAIN_JOB = "features.train"


class SAETrainLoop(LoopWorker):
    """Train one SAE (module docstring); ``trained`` the :class:`SAETrainResult` once done."""

    thread_name = "attention-lab-sae"

    def __init__(self, model, tokenizer, settings: SAETrainSettings, out: Path, *, model_name: str = "",
                 n_threads: int = -1):  # fmt: skip
        super().__init__()
        self.model, self.tokenizer, self.settings, self.out = model, tokenizer, settings, Path(out)
        self.model_name, self.n_threads = model_name, n_threads
        self.trained: SAETrainResult | None = None

    def _step(self, step: TrainStep) -> None:
        self.mailbox.put("steps", step)
        compute_lock.release()  # a gap between two steps for the other pages' work
        compute_lock.acquire()

    def work(self) -> Generator[None, None, None]:
        assert self.job is not None, "announce the loop on a board before starting it"
        try:
            with threads(self.n_threads), compute_lock, reporting(self.job.progress):
                self.trained = train_sae(
                    self.model, self.tokenizer, self.settings, out=self.out, on_step=self._step,
                    model_name=self.model_name,
                )  # fmt: skip
        except Cancelled:
            self.control.stop()  # the loop ends as stopped: the job as cancelled
        yield

    def _announce_end(self, reason: str, message: str) -> None:
        self.model = self.tokenizer = None  # a replaced model is not kept alive by a finished run
        super()._announce_end(reason, message)


__all__ = ["TRAIN_JOB", "SAETrainLoop"]
