"""Follow a run folder that another process writes (File → Follow a run folder…).

:class:`FollowWorker` polls a :class:`~model.io.runs.follow.RunFollower` in a background thread every
``interval`` seconds and posts what is new into the same mailbox kinds a
:class:`~app.session.workers.TrainWorker` uses (``"events"``, ``"frames"``), so the session's ~30 Hz drain
and the Train tab draw a followed run exactly as one trained here: curves, the live head grid and
the step scrubber. The follower reads only whole log lines and whole probes, so a half-written file
is never shown. The worker ends when the run's ``run.json`` says it finished, stopped or failed (after
reading everything written before), when the folder disappears, or when the user stops following.

:class:`FollowedRun` is the session's part that follows (``session.follow``, beside
``session.run``), with its own state and signals; it reads and tells the session only through
:class:`FollowHost`. :meth:`~FollowedRun.start`, :meth:`~FollowedRun.stop` and
:meth:`~FollowedRun.open_checkpoint`, which loads the run's newest checkpoint off the GUI thread and
makes it the session's model (the Attention tab then shows it) without touching the followed curves.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from app.core.state import Signal
from app.session.training_run import RunHost, WorkerRun, deliver
from app.session.workers import LoopWorker, Mailbox

# model/'s trainer, loaders and data are imported where they are used: together they take ~0.15 s
# to import, which the window's first paint does not wait for (app/shell/gui.py)
if TYPE_CHECKING:
    from app.session.probe import Probe
    from model.nn.gpt import GPT

#: Seconds between two looks at the folder.
POLL_S = 0.25


class FollowWorker(LoopWorker):
    """Polls a run folder until the run ends or the folder disappears (see the module docstring).

    ``target``: the run's step budget (from ``run.json``); ``status``: its last status;
    ``checkpoint_step``: the newest checkpoint's step (None before the first).
    """

    thread_name = "attention-lab-follow"

    def __init__(self, path: str | Path, interval: float = POLL_S):
        from model.io.runs.follow import RunFollower

        super().__init__()
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
        self._last_step = 0

    def work(self) -> Generator[None, None, None]:
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
            self.control.sleep(self.interval)  # a stop ends the wait at once

    def end(self, reason: str) -> tuple[str, str]:
        step, where = self._last_step, self.path
        if reason == "stopped":
            return reason, f"stopped following at step {step} ({where})"
        if self.status == "gone":
            return "done", f"the run folder disappeared; following stopped at step {step} ({where})"
        return "done", f"the followed run {self.status} at step {step} ({where})"


class FollowHost(RunHost, Protocol):
    """What a :class:`FollowedRun` needs of the session beyond :class:`~app.session.training_run.RunHost`."""

    @property
    def compute(self) -> Any: ...
    def begin_record(self) -> None: ...
    def restart_history(self) -> None: ...
    def show_model(self, model: GPT, tokenizer: Any, *, path: str, meta: dict) -> None: ...
    @property
    def probe(self) -> Probe: ...


class FollowedRun(WorkerRun):
    """Following a run folder (see the module docstring). ``state``: "following", then "idle" once
    the follow ended; ``finished``: "done" | "stopped" and a message."""

    #: the followed folder's status, world size or newest checkpoint changed
    updated = Signal()

    def __init__(self, host: FollowHost):
        super().__init__()
        self.host = host
        #: the worker of the folder followed now, or None
        self.worker: FollowWorker | None = None

    @property
    def active(self) -> bool:
        return self.state == "following"

    def start(self, path: str | Path, interval: float = POLL_S) -> None:
        """Show the run that another process writes to ``path`` in the Train tab, live.

        Raises ValueError (one line) while training here, or when ``path`` is not a run folder.
        """
        from model.io.runs.folder import is_run_folder

        if self.host.is_training:
            raise ValueError("stop training before following another run")
        if not is_run_folder(path):
            raise ValueError(f"{path} is not a run folder: it has no run.json, log.jsonl or checkpoint/")
        if self.active:
            self.stop(wait=True)
        worker = FollowWorker(path, interval)
        self.host.begin_record()
        worker.finished.connect(self._on_finished)
        self.worker = worker
        self._set_state("following")
        self._drain_timer.start()
        worker.start()

    def stop(self, wait: bool = False) -> None:
        worker = self.worker
        if worker is None:
            return
        worker.control.stop()
        if wait:
            worker.join(5.0)
            worker.finished.disconnect(self._on_finished)  # its finished, still on its way, ends nothing
            self._on_finished(*(worker.result or ("stopped", "")))

    def _drain(self) -> None:
        """The follow-only mailbox kinds (a restarted log, new checkpoints), then what every run
        posts (events, frames) into the session's record."""
        worker = self.worker
        if worker is None:
            self._drain_timer.stop()
            return
        host = self.host
        restart, checkpoints = worker.mailbox.take("restart", "checkpoints")
        if restart:
            host.restart_history()
        if checkpoints and (host.model is None or host.checkpoint_path is None):
            self.open_checkpoint()  # the first one at once; later ones on request
        if worker.prompt is not None and worker.prompt != host.probe_prompt:
            host.probe.adopt(worker.prompt)  # show what the frames trace
        seen = (worker.status, worker.world_size, worker.checkpoint_step)
        if seen != worker.shown:
            worker.shown = seen
            self.updated.emit()
        deliver(worker.mailbox, host)

    def _on_finished(self, reason: str, message: str) -> None:
        worker = self.worker
        if worker is None:
            return
        self._drain()
        path = worker.path
        self._finish_worker()
        if worker.checkpoint_step is not None and worker.status != "gone":
            self.open_checkpoint(path)
        self.finished.emit(reason, message)

    def open_checkpoint(self, path: str | Path | None = None) -> None:
        """Load the followed run's newest checkpoint off the GUI thread; it becomes the session's
        model (for the Attention tab) while the curves stay those of the followed run."""
        worker = self.worker
        folder = Path(path) if path is not None else (worker.path if worker is not None else None)
        if folder is None:
            return
        host = self.host

        def job():
            from model.io.pretrained import open_model

            return open_model(str(folder), device="cpu")

        def done(ckpt, error):
            if error is not None or ckpt is None:
                host.statusMessage.emit(f"could not open the newest checkpoint of {folder.name}: {error}")
                return
            ckpt.model.eval()
            host.show_model(ckpt.model, ckpt.tokenizer, path=str(folder), meta=dict(ckpt.meta or {}))
            step = (ckpt.meta or {}).get("step")
            host.statusMessage.emit(f"opened the checkpoint of step {step} from {folder.name}")

        host.compute.submit("follow.checkpoint", job, done)


__all__ = ["POLL_S", "FollowHost", "FollowWorker", "FollowedRun"]
