"""Runs of a comparison as the app holds them, and the worker that trains variants together.

A :class:`Run` is a :class:`~model.comparison.RunRecord` (what a comparison file saves) plus what
lives only in memory: the model, its tokenizer and the per-head metrics of the last prompt.

:class:`GroupTrainWorker` trains the variant runs with one
:class:`~model.multitrain.TrainerGroup` in its own thread: the same data source, settings and seed
for every variant, so each sees the same batches in the same order, one step each in turn. Events
go into a lock-protected list the tab drains with a ~30 Hz timer (the trainer never waits for the
GUI); ``finished(reason, message)`` is a Qt signal, delivered in the GUI thread.
"""

from __future__ import annotations

import threading
import traceback
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.workers import GroupThread
from model.comparison import RunRecord
from model.config import GPTConfig


@dataclass
class Run:
    """One run of the comparison: the saved ``record`` and the in-memory model."""

    record: RunRecord
    model: Any = None
    tokenizer: Any = None
    metrics: Any = None  # HeadMetrics of record.attention
    status: str = ""
    context: int | None = None  # T of the FLOPs-per-token figure (the training seq_len)

    @property
    def name(self) -> str:
        return self.record.name

    @property
    def kind(self) -> str:
        return self.record.kind

    @property
    def config(self) -> GPTConfig:
        if self.model is not None:
            return self.model.config
        return self.record.gpt_config()


class GroupTrainWorker(QObject, GroupThread):
    """Trains ``{name: GPTConfig}`` round-robin on ``source`` with ``settings`` in a thread.

    ``take()`` returns the events since the last call as ``(name, event dict)``; after
    ``finished``, ``group`` holds the trainers (models, histories, summary).
    """

    finished = Signal(str, str)  # "done" | "stopped" | "error", message
    thread_name = "attention-lab-compare"

    def __init__(self, variants: dict[str, GPTConfig], source: Any, settings: Any):
        super().__init__()
        self.variants = dict(variants)
        self.source = source
        self.settings = settings
        self.group: Any = None
        self.error: str | None = None
        self._lock = threading.Lock()
        self._events: list[tuple[str, dict]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def take(self) -> list[tuple[str, dict]]:
        with self._lock:
            out, self._events = self._events, []
        return out

    def _run(self) -> None:
        from model.multitrain import TrainerGroup

        reason, message = "done", ""
        try:
            group = TrainerGroup(self.variants, self.source, self.settings)
            self.group = group
            if self._stop.is_set():
                group.stop()
            for ev in group.iter_steps():
                with self._lock:
                    self._events.append((ev.name, ev.event.to_dict()))
            reason = "stopped" if group.stopped else "done"
            message = f"{'reached' if reason == 'done' else 'stopped at'} step {group.step}"
        except Exception as exc:  # a config the data cannot feed, a diverged loss: tell the user
            reason, message = "error", str(exc) or type(exc).__name__
            self.error = traceback.format_exc()
        self.finished.emit(reason, message)
