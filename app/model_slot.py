"""The model slot: the model every tab shows, what came with it, and the record of its training.

Both classes are Qt-free parts of the :class:`~app.session.Session` (``session.slot``, and
``session.slot.record``): the session changes them when a model is shown or a run reports, and
announces each change with its own signals (``modelChanged``, ``historyReset``, ``eventsAppended``,
``sampleAdded``, ``traceUpdated``, ``checkpointSaved``). Tabs read their fields under the session's
names (``session.model``, ``session.history``, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from model.interp.frame import AttentionFrame
from model.interp.probes import FrameHistory
from model.runtime import compute_lock

# model/'s trainer, loaders and data are imported where they are used: together they take ~0.15 s
# to import, which the window's first paint does not wait for (app/gui.py)
if TYPE_CHECKING:
    from model.config import GPTConfig
    from model.nn.gpt import GPT
    from model.train.trainer import Trainer


def config_key(config: GPTConfig) -> str:
    """A config as a key that ignores ``vocab_size`` (which follows the tokenizer)."""
    d = config.to_dict()
    d.pop("vocab_size", None)
    return repr(sorted(d.items()))


class Record:
    """The loss history, generated samples and probe frames of the shown model.

    ``history``: training-event dicts (``TrainEvent.to_dict()``) in step order; ``samples``:
    (step, text); ``latest_frame``: the newest probe frame (an :class:`AttentionFrame`, the one drawn) or
    None; ``frames``: the bounded :class:`FrameHistory` the step scrubber reads; ``dirty``: trained
    steps not yet saved; ``tokens_per_s``: the pace of the newest step.
    """

    def __init__(self, history_bytes: int = 64 * 2**20):
        self.history: list[dict] = []
        self.samples: list[tuple[int, str]] = []
        self.latest_frame: AttentionFrame | None = None
        self.frames = FrameHistory(max_bytes=history_bytes)
        self.dirty = False
        self.tokens_per_s = 0.0

    @property
    def step(self) -> int:
        """The newest step recorded (0 before any)."""
        return int(self.history[-1]["step"]) if self.history else 0

    def restart(self, history: list[dict] | tuple = ()) -> None:
        """A new record: the shown model's loss ``history`` (a file's), no samples or frames,
        nothing unsaved."""
        self.history = list(history)
        self.samples = []
        self.clear_frames()
        self.dirty = False
        self.tokens_per_s = float(self.history[-1].get("tokens_per_s", 0.0)) if self.history else 0.0

    def clear_frames(self) -> None:
        self.frames.clear()
        self.latest_frame = None

    def add_events(self, events: list[dict]) -> None:
        """Steps trained (here or by a followed run) since the last drain: not saved yet."""
        self.history.extend(events)
        self.tokens_per_s = float(events[-1].get("tokens_per_s", self.tokens_per_s) or 0.0)
        self.dirty = True

    def add_frames(self, frames: list[AttentionFrame]) -> AttentionFrame:
        """Keep every frame for the scrubber; the newest (the last) becomes ``latest_frame``."""
        for frame in frames:
            self.frames.offer(frame)
        self.latest_frame = frames[-1]
        return frames[-1]


class ModelSlot:
    """The shown model and what came with it.

    ``model``: the :class:`~model.nn.gpt.GPT` or None; ``tokenizer``: its tokenizer (the data's
    while no model is shown); ``trainer``: the :class:`~model.train.trainer.Trainer` of its run,
    which Start continues (None: untrained, or opened without training state); ``path``: where it
    was last saved or opened (None: Save asks); ``meta``: what its files say (name, kind, source,
    ``starter``); ``record``: its :class:`Record`.
    """

    def __init__(self, history_bytes: int = 64 * 2**20):
        self.model: GPT | None = None
        self.tokenizer: Any = None
        self.trainer: Trainer | None = None
        self.path: str | None = None
        self.meta: dict = {}
        self.record = Record(history_bytes)
        self._config_key: str | None = None

    def show(self, model: GPT, *, trainer: Trainer | None, path: str | None, meta: dict) -> None:
        """``model`` replaces the shown one (the caller restarts the record when it is another's)."""
        self.model, self.trainer, self.path, self.meta = model, trainer, path, dict(meta)
        self._config_key = config_key(model.config)

    def take_trainer(self, trainer: Trainer, *, fresh: bool) -> bool:
        """A run's trainer exists; ``fresh``: a new run, whose record replaces the shown one. True
        when it trains another model than the one shown (which it then becomes)."""
        if fresh:
            self.record.restart()
            self.path = None
            if self.meta.get("starter") or trainer.model is not self.model:
                self.meta = {}  # a fresh model is nobody's file (a fine-tune keeps its name)
        self.trainer = trainer
        self.tokenizer = trainer.tokenizer
        self._config_key = config_key(trainer.model.config)
        other = trainer.model is not self.model
        self.model = trainer.model
        return other

    def move_to(self, device: Any) -> None:
        """The shown model on ``device``; its run goes on there (the optimizer state moves along)."""
        from model.train.trainer import Trainer

        if self.model is None:
            return
        with compute_lock:
            t = self.trainer
            if t is not None:
                settings = t.settings.replace(device=str(device))
                self.trainer = Trainer(t.config, t.source, settings, model=self.model, state=t.state_dict())
            else:
                self.model.to(device)

    def shows_config(self, config: GPTConfig) -> bool:
        """Whether the shown model was built from ``config`` (its vocabulary aside)."""
        return self._config_key == config_key(config)

    @property
    def step(self) -> int:
        return int(self.trainer.step) if self.trainer is not None else self.record.step

    def origin(self) -> str:
        """Where the model came from, for the status bar: name, kind, tokenizer (its parameters
        are the status bar's own count, of the model as built: one number, not two). Empty for a
        model built here and not yet saved or opened."""
        from model.io.pretrained import describe_origin

        return describe_origin({k: v for k, v in self.meta.items() if k != "n_params"}, self.path)

    def name(self) -> str:
        """Its short name (the window title's): its folder, or what it is called (``starter
        model``, a Hub repo id); empty for a model built here and never saved."""
        return Path(self.path).name if self.path else str(self.meta.get("name") or "")


__all__ = ["ModelSlot", "Record", "config_key"]
