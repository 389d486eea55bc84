"""Two steps of a history as runs for the Compare tab (A − B per head, metrics aligned by head)."""

from __future__ import annotations

from typing import Any

from app.session.compare_runs import Run
from model.compare import comparison as cmp
from model.interp.analysis.heads import HeadMetrics


def runs_of_steps(history: Any, steps: list[tuple[int, tuple[Any, Any]]]) -> tuple[Run, ...]:
    """Each ``(index, (snapshot, checkpoint))`` of ``history`` as a run named ``"step N"``: its model,
    its attention on the history's prompt and its metrics already measured (the request
    :class:`~app.session.messages.CompareRuns` carries them to the Compare tab)."""
    runs = []
    for i, (snap, ckpt) in steps:
        rev = history.revisions[i]
        path = history.source.located(rev)
        record = cmp.RunRecord(
            name=f"step {rev.step}",
            kind="checkpoint",
            config=ckpt.model.config.to_dict(),
            path=str(path) if path is not None else None,
            attention=snap,  # a Snapshot is the revision's AttentionFrame
        )
        run = Run(record, model=ckpt.model, tokenizer=ckpt.tokenizer, status=f"history: {rev.label}")
        run.metrics = HeadMetrics(**{k: v for k, v in snap.metrics.items() if k in HeadMetrics.COLUMNS})
        runs.append(run)
    return tuple(runs)


__all__ = ["runs_of_steps"]
