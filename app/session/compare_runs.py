"""Runs of a comparison as the app holds them: the Compare tab's, and the steps the History tab
hands it (a module of its own, so that neither tab imports the other).

A :class:`Run` is a :class:`~model.compare.comparison.RunRecord` (what a comparison file saves) plus what
lives only in memory: the model, its tokenizer and the per-head metrics of the last prompt. The
variant runs train together in the app's :class:`~app.session.workers.GroupWorker`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from model.compare.comparison import RunRecord
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
