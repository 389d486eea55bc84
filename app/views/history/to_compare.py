"""Two steps of a history as runs of the Compare tab (A − B per head, metrics aligned by head)."""

from __future__ import annotations

from typing import Any

from app.session.compare_runs import Run
from model.compare import comparison as cmp
from model.interp.analysis.heads import HeadMetrics


def add_steps(window: Any, history: Any, steps: list[tuple[int, tuple[Any, Any]]]) -> list[str] | None:
    """Add each ``(index, (snapshot, checkpoint))`` of ``history`` to ``window``'s Compare tab as a run
    (its attention on the history's prompt and its metrics already measured), make the first two the
    A/B pair, show the A − B page and bring the tab forward; the run names (None without the tab)."""

    try:
        compare = window.tab("Compare")
    except (AttributeError, KeyError):
        return None
    names = []
    for i, (snap, ckpt) in steps:
        rev = history.revisions[i]
        name = compare.state.unique_name(f"step {rev.step}")
        path = history.source.located(rev)
        record = cmp.RunRecord(
            name=name,
            kind="checkpoint",
            config=ckpt.model.config.to_dict(),
            path=str(path) if path is not None else None,
            attention=snap,  # a Snapshot is the revision's AttentionFrame
        )
        run = Run(record, model=ckpt.model, tokenizer=ckpt.tokenizer, status=f"history: {rev.label}")
        run.metrics = HeadMetrics(**{k: v for k, v in snap.metrics.items() if k in HeadMetrics.COLUMNS})
        compare.state.add(run)
        names.append(name)
    compare.set_prompt(history.prompt)
    compare.state.set_pair(*names[:2])
    if "difference" in getattr(compare, "pages", {}):
        compare.show_page("difference")
    tabs = window.tab_widget
    for k in range(tabs.count()):
        if tabs.tabText(k) == "Compare":
            tabs.setCurrentIndex(k)
    return names


__all__ = ["add_steps"]
