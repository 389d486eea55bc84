"""Follow a run folder that another process writes (File → Follow a run folder…).

:class:`FollowWorker` polls a :class:`~model.io.runfolder.RunFollower` in a background thread every
``interval`` seconds and posts what is new into the same mailbox kinds a
:class:`~app.workers.TrainWorker` uses (``"events"``, ``"frames"``), so the session's ~30 Hz drain
and the Train tab draw a followed run exactly as one trained here: curves, the live head grid and
the step scrubber. The follower reads only whole log lines and whole probes, so a half-written file
is never shown. The worker ends when the run's ``run.json`` says it finished, stopped or failed (after
reading everything written before), when the folder disappears, or when the user stops following.

:class:`FollowingRun` is the session's half (a mixin of :class:`~app.session.Session`, like
:class:`~app.training_run.TrainingRun`): :meth:`~FollowingRun.follow_run`,
:meth:`~FollowingRun.stop_following` and :meth:`~FollowingRun.open_followed_checkpoint`, which
loads the run's newest checkpoint off the GUI thread and makes it the session's model (the Attention
tab then shows it) without touching the followed curves.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

from app.workers import LoopWorker

#: Seconds between two looks at the folder.
POLL_S = 0.25


class FollowWorker(LoopWorker):
    """Polls a run folder until the run ends or the folder disappears (see the module docstring).

    ``target``: the run's step budget (from ``run.json``); ``status``: its last status;
    ``checkpoint_step``: the newest checkpoint's step (None before the first).
    """

    thread_name = "attention-lab-follow"

    def __init__(self, path: str | Path, interval: float = POLL_S):
        from model.io.runfolder import RunFollower

        super().__init__()
        from app.workers import Mailbox

        self.mailbox = Mailbox(bounds={"frames": 4096})  # every probe reaches the scrubber
        self.path = Path(path)
        self.follower = RunFollower(self.path)
        self.interval = float(interval)
        self.target = 0
        self.start_step = 0
        self.status: str | None = None
        self.checkpoint_step: int | None = None
        self.world_size = 1
        self.shown: tuple | None = None  # (status, world_size, checkpoint_step) the GUI last showed
        self.prompt: str | None = None  # the run's probe prompt (from its newest probe)
        self._wake = threading.Event()
        self._last_step = 0

    def stop(self) -> None:
        super().stop()
        self._wake.set()

    def work(self) -> Iterator[None]:
        while True:
            up = self.follower.poll()
            if up.restarted:
                self.mailbox.put("restart", True)
            self.target = int(up.info.get("steps") or self.target or 0)
            self.world_size = int(up.info.get("world_size") or self.world_size)
            for row in up.rows:
                self._last_step = int(row["step"])
                self.mailbox.put("events", row)
            for frame in up.frames:
                self.mailbox.put("frames", frame)
                self.prompt = frame.prompt
            if up.checkpoint_step is not None:
                self.checkpoint_step = up.checkpoint_step
                self.mailbox.put("checkpoints", up.checkpoint_step)
            self.status = up.status
            if up.done:
                return
            yield
            self._wake.wait(self.interval)
            self._wake.clear()

    def reprobe(self) -> None:
        """The followed run traces its own prompt; an edited one applies to runs trained here."""

    def end(self, reason: str) -> tuple[str, str]:
        step, where = self._last_step, self.path
        if reason == "stopped":
            return reason, f"stopped following at step {step} ({where})"
        if self.status == "gone":
            return "done", f"the run folder disappeared; following stopped at step {step} ({where})"
        return "done", f"the followed run {self.status} at step {step} ({where})"


class FollowingRun:
    """Following a run folder, for :class:`~app.session.Session` (see the module docstring)."""

    @property
    def is_following(self) -> bool:
        return self.state == "following"

    @property
    def follow_worker(self) -> FollowWorker | None:
        worker = self._worker
        return worker if isinstance(worker, FollowWorker) else None

    def follow_run(self, path: str | Path, interval: float = POLL_S) -> None:
        """Show the run that another process writes to ``path`` in the Train tab, live.

        Raises ValueError (one line) while training here, or when ``path`` is not a run folder.
        """
        from model.io.runfolder import is_run_folder

        if self.is_training:
            raise ValueError("stop training before following another run")
        if not is_run_folder(path):
            raise ValueError(f"{path} is not a run folder: it has no run.json, log.jsonl or checkpoint/")
        if self.is_following:
            self.stop_following(wait=True)
        worker = FollowWorker(path, interval)
        if self._compute is not None:
            self._compute.cancel("session.probe")  # the idle model's frame must not join the run's
        self.trainer = None
        self._start_record()
        self.historyReset.emit()
        worker.finished.connect(self._on_follow_finished)
        self._worker = worker
        self._set_state("following")
        self._drain_timer.start()
        worker.start()

    def stop_following(self, wait: bool = False) -> None:
        worker = self.follow_worker
        if worker is None:
            return
        worker.stop()
        if wait:
            worker.join(5.0)
            self._on_follow_finished(*(worker.result or ("stopped", "")))

    def _drain_follow(self, worker: FollowWorker) -> None:
        """The follow-only mailbox kinds: a restarted log and new checkpoints."""
        restart, checkpoints = worker.mailbox.take("restart", "checkpoints")
        if restart:
            self.history = []
            self.frames.clear()
            self.latest_frame = None
            self.historyReset.emit()
        if checkpoints and (self.model is None or self.checkpoint_path is None):
            self.open_followed_checkpoint()  # the first one at once; later ones on request
        if worker.prompt is not None and worker.prompt != self.probe_prompt:
            self._set_probe_prompt(worker.prompt, from_source=True)  # show what the frames trace
        seen = (worker.status, worker.world_size, worker.checkpoint_step)
        if seen != worker.shown:
            worker.shown = seen
            self.followUpdated.emit()

    def _on_follow_finished(self, reason: str, message: str) -> None:
        worker = self.follow_worker
        sender = self.sender() if hasattr(self, "sender") else None
        if worker is None or (sender is not None and sender is not worker):
            return  # an earlier follow's late signal
        self._drain()
        path = worker.path
        self._finish_worker()
        if worker.checkpoint_step is not None and worker.status != "gone":
            self.open_followed_checkpoint(path)
        self.trainingFinished.emit(reason, message)

    def open_followed_checkpoint(self, path: str | Path | None = None) -> None:
        """Load the followed run's newest checkpoint off the GUI thread; it becomes the session's
        model (for the Attention tab) while the curves stay those of the followed run."""
        worker = self.follow_worker
        folder = Path(path) if path is not None else (worker.path if worker is not None else None)
        if folder is None:
            return

        def job():
            from model.io.pretrained import open_model

            return open_model(str(folder), device="cpu")

        def done(ckpt, error):
            if error is not None or ckpt is None:
                self.statusMessage.emit(f"could not open the newest checkpoint of {folder.name}: {error}")
                return
            model = ckpt.model
            model.eval()
            self.model = model
            self.config = model.config
            self.tokenizer = ckpt.tokenizer
            self._model_config_key = self._config_key(model.config)
            self.checkpoint_path = str(folder)
            self.checkpoint_meta = dict(ckpt.meta or {})
            self.modelChanged.emit(model)
            self.configChanged.emit(model.config)
            step = (ckpt.meta or {}).get("step")
            self.statusMessage.emit(f"opened the checkpoint of step {step} from {folder.name}")

        self.compute.submit("follow.checkpoint", job, done)
