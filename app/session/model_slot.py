"""The model slot: the model every tab shows, what came with it, and the record of its training.

Both classes are Qt-free parts of the :class:`~app.session.session.Session` (``session.slot``, and
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
# to import, which the window's first paint does not wait for (app/shell/gui.py)
if TYPE_CHECKING:
    from model.config import GPTConfig
    from model.nn.gpt import GPT
    from model.train.trainer import Trainer


#: ``meta`` keys of a model a run made here: a fresh run (the name of the model whose shape it took),
#: and a fine-tune of an opened model's weights
NEW_RUN, FINE_TUNED = "new_run", "fine_tuned"


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
    steps not yet saved, ``saved_step`` the step of the newest save (or of the file it was opened from; 0
    for a model made here); ``tokens_per_s``: the pace of the newest step.
    """

    def __init__(self, history_bytes: int = 64 * 2**20):
        self.history: list[dict] = []
        self.samples: list[tuple[int, str]] = []
        self.latest_frame: AttentionFrame | None = None
        self.frames = FrameHistory(max_bytes=history_bytes)
        self.dirty = False
        self.saved_step = 0
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
        self.saved_step = self.step  # a file's history ends where the file was saved
        self.tokens_per_s = float(self.history[-1].get("tokens_per_s", 0.0)) if self.history else 0.0

    def clear_frames(self) -> None:
        self.frames.clear()
        self.latest_frame = None

    def add_events(self, events: list[dict]) -> None:
        """Steps trained (here or by a followed run) since the last drain: not saved yet."""
        self.history.extend(events)
        self.tokens_per_s = float(events[-1].get("tokens_per_s", self.tokens_per_s) or 0.0)
        self.dirty = True

    def mark_saved(self, step: int, now: int) -> None:
        """A save holding ``step`` was written while the model is at step ``now`` (later, when it
        was written between two steps of a run that went on): the steps after it stay unsaved."""
        self.saved_step = int(step)
        self.dirty = now > step

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
            was = self.name()
            if self.meta.get("starter") or trainer.model is not self.model:
                # a fresh model is nobody's file: named as new, with the model whose shape it took
                self.meta = {NEW_RUN: was} if was else {NEW_RUN: ""}
            elif was:
                self.meta = {**self.meta, "name": was, FINE_TUNED: True}
        self.trainer = trainer
        self.tokenizer = trainer.tokenizer
        self._config_key = config_key(trainer.model.config)
        other = trainer.model is not self.model
        self.model = trainer.model
        return other

    def saved_to(self, path: str) -> None:
        """The model was written to ``path``: our checkpoint format now, whatever it was opened from."""
        self.path = path
        self.meta = {**self.meta, "kind": "attention-lab"}

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
        """The step the shown model is at, the one every label names: its run's (a trainer's, or the
        newest recorded), else the step its files say it was trained to (the starter's 500), else 0."""
        if self.trainer is not None:
            return int(self.trainer.step)
        return self.record.step or self.steps_before() or 0

    def origin(self) -> str:
        """Where the model came from, for the status bar: name, kind, tokenizer (its parameters
        are the status bar's own count, of the model as built: one number, not two). Empty for a
        model built here and not yet saved or opened."""
        from model.io.pretrained import describe_origin

        if NEW_RUN in self.meta and not self.path:
            shape = f", in the shape of {self.meta[NEW_RUN]}" if self.meta[NEW_RUN] else ""
            return f"new run, trained here from random weights{shape}"
        meta = {k: v for k, v in self.meta.items() if k not in ("n_params", FINE_TUNED)}
        origin = describe_origin(meta, self.path)
        return f"{origin} · fine-tuned here" if self.meta.get(FINE_TUNED) and not self.path else origin

    def name(self) -> str:
        """Its short name (the window title's): its folder, or what it is called (``starter
        model``, a Hub repo id, ``new run``); empty for a model built here and never trained or saved."""
        if self.path:
            return Path(self.path).name
        if NEW_RUN in self.meta:
            return "new run"
        name = str(self.meta.get("name") or "")
        return f"{name} (fine-tuned)" if name and self.meta.get(FINE_TUNED) else name

    def opened_untracked(self) -> bool:
        """Whether the shown model came from files that keep none of its training steps."""
        return not (self.record.history or self.trainer is not None or not self.meta or NEW_RUN in self.meta)

    def steps_before(self) -> int | None:
        """The steps its files say it was trained for (the starter's ``step``), when they say."""
        step = self.meta.get("step") if self.opened_untracked() else None
        return step if isinstance(step, int) and not isinstance(step, bool) and step > 0 else None

    def training_note(self) -> str:
        """How far the shown model had trained when this window has none of its steps: "trained 500
        steps before it was opened", "pretrained elsewhere", or "" (its steps are here, or none)."""
        if not self.opened_untracked():
            return ""
        step = self.steps_before()
        if step:
            return f"trained {step:,} steps before it was opened"
        if self.meta.get("kind") == "attention-lab":
            return "opened without training state"
        return "pretrained elsewhere: its files keep no training history"


__all__ = ["ModelSlot", "Record", "config_key"]
