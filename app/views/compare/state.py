"""What the Compare tab's pages draw, in one object without Qt: :class:`CompareState`.

The runs (each a :class:`~app.session.compare_runs.Run`: name, config, history, model; its colour is
its index), the A/B pair and its difference, the prompt and the per-run results it gave, the base
config variants change, whether the variants are training, and the messages under each control.
The tab (and its training) write into it; the pages read it and follow its signals
(:class:`app.core.state.Signal`: called at once, in the emitting thread), never the tab nor each other.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from app.core.state import Signal
from app.session.compare_runs import Run
from app.views.compare import words
from model.compare import comparison as cmp
from model.compare.tables import HISTORY_KEYS, SUMMARY_KEYS, metric_table, summary_row
from model.compare.variants import unique_name
from model.config import GPTConfig
from model.interp.analysis.compare import HeadDiff, head_diff_summary, weights_difference

#: The compute key of the variants' training on the session's job board.
TRAIN_JOB = "compare.train"


class CompareState:
    """The Compare tab's state and its change signals (see the module docstring).

    ``runs``: the runs in order (run ``i`` is drawn in ``run_color(i)``); ``pair``: the names of A and
    B; ``diff``: A − B of their attention weights [L, H, T, T] (None without a pair of the same shape,
    then ``pair_problem`` says why) and ``diff_summary`` (:class:`~model.interp.analysis.compare.HeadDiff`);
    ``prompt``: the prompt that runs through every model (new lines included); ``base``: the config
    variants change and ``source`` its data; ``messages``: the line under each control
    ("variants", "training", "prompt", "file"). How far a training is: its job on the session's board.
    """

    #: (): a run was added, removed or replaced, or its status changed
    runs_changed = Signal()
    #: (names): new training points of these runs
    history_changed = Signal()
    #: (): the prompt's results (attention snapshots, head metrics) changed
    attention_changed = Signal()
    #: (a, b): the pair or its difference changed
    pair_changed = Signal()
    #: (text)
    prompt_changed = Signal()
    #: (): the base config, its source or whether there is a model changed
    base_changed = Signal()
    #: (training: bool)
    training_changed = Signal()
    #: (where, text)
    message = Signal()
    #: (value, maximum, text)

    def __init__(self) -> None:
        self.runs: list[Run] = []
        self.pair: tuple[str, str] = ("", "")
        self.diff: np.ndarray | None = None
        self.diff_summary: HeadDiff | None = None
        self.pair_problem = ""
        self.prompt = ""
        self.base = GPTConfig()
        self.source = ""
        self.has_model = False
        self.training = False
        self.messages: dict[str, str] = {}
        # what the comparison file records besides the runs
        self.path: str | None = None
        self.title = ""
        self.settings_used: dict[str, Any] = {}
        self.source_used = ""

    # ---- reading -------------------------------------------------------------------------------
    def names(self) -> list[str]:
        return [r.name for r in self.runs]

    def run(self, name: str) -> Run:
        for r in self.runs:
            if r.name == name:
                return r
        raise KeyError(name)

    def index(self, run: Run) -> int:
        """The run's place (its colour); -1 when it is no longer compared."""
        return self.runs.index(run) if run in self.runs else -1

    def with_attention(self) -> list[Run]:
        """The runs the prompt went through, in order."""
        return [r for r in self.runs if r.record.attention is not None]

    def unique_name(self, name: str) -> str:
        return unique_name(name, self.names())

    def summary_rows(self) -> list[dict[str, Any]]:
        """One :func:`model.compare.comparison.summary_row` per run (kept in each record's ``summary``)."""
        rows = []
        for r in self.runs:
            try:
                row = summary_row(r.config, r.record.history, context=r.context)
            except Exception:
                row = dict.fromkeys(SUMMARY_KEYS)
            if not r.record.history and r.record.summary:
                row.update({k: v for k, v in r.record.summary.items() if v is not None})
            r.record.summary = row
            rows.append(row)
        return rows

    def metric_rows(self, metric: str) -> tuple[list[str], list[dict[str, Any]]]:
        """The measured runs' names and :func:`model.compare.comparison.metric_table` of ``metric``."""
        measured = {r.name: r.metrics for r in self.runs if r.metrics is not None}
        return list(measured), (metric_table(measured, metric) if measured else [])

    def comparison(self, *, prompt: str, source: str, base: GPTConfig) -> cmp.Comparison:
        """What the comparison file saves (the summary rows up to date)."""
        self.summary_rows()
        return cmp.Comparison(
            runs=[r.record for r in self.runs],
            title=self.title or " vs ".join(self.names()),
            source=self.source_used or source,
            settings=dict(self.settings_used),
            prompt=prompt,
            base_config=base.to_dict(),
        )

    # ---- the runs ------------------------------------------------------------------------------
    def add(self, run: Run) -> Run:
        self.runs.append(run)
        self.changed()
        return run

    def take(self, runs: tuple[Run, ...], prompt: str) -> list[str]:
        """Runs another tab hands over (:class:`~app.session.messages.CompareRuns`): each added under a
        name not yet taken (its ``name`` from then on), and ``prompt`` set; their names, in order."""
        for run in runs:
            run.record.name = self.unique_name(run.name)
            self.add(run)
        self.set_prompt(prompt)
        return [run.name for run in runs]

    def remove(self, name: str) -> bool:
        """Drop run ``name``; not a variant being trained (False then)."""
        if self.training and self.run(name).kind == "variant":
            return False
        self.runs = [r for r in self.runs if r.name != name]
        self.changed()
        return True

    def replace(self, comp: cmp.Comparison, path: str) -> None:
        """The runs of an opened comparison file (models stay on disk until a prompt needs them)."""
        runs = []
        for rec in comp.runs:
            context = rec.summary.get("context")
            run = Run(
                rec,
                status="from file" + (" (weights on disk)" if rec.path else ""),
                context=context if isinstance(context, int) else None,
            )
            if rec.attention is not None:
                run.metrics = cmp.frame_metrics(rec.attention, causal=run.config.core.causal)
            runs.append(run)
        self.runs = runs
        self.path = str(path)
        self.title = comp.title
        self.settings_used = comp.settings
        self.source_used = comp.source
        self.set_prompt(comp.prompt)
        self.changed()

    def changed(self) -> None:
        """Runs (or their status, models, histories) changed: every page follows."""
        self.runs_changed.emit()
        self._update_pair()

    def add_history(self, events: list[tuple[str, dict]]) -> set[str]:
        """Training events ``(run name, event)``: one history point each; returns the runs touched."""
        touched = set()
        for name, ev in events:
            try:
                run = self.run(name)
            except KeyError:
                continue
            run.record.history.append({k: ev.get(k) for k in HISTORY_KEYS})
            touched.add(name)
        if touched:
            self.history_changed.emit(touched)
        return touched

    def set_results(self, results: dict[str, tuple]) -> list[str]:
        """The prompt's results per run ``name: (snapshot, metrics, loaded checkpoint | None,
        error | None)``; returns "name: error" of the runs that failed."""
        problems = []
        for name, (snap, metrics, loaded, err) in results.items():
            try:
                run = self.run(name)
            except KeyError:
                continue
            if err is not None:
                problems.append(f"{name}: {err}")
                continue
            if loaded is not None:
                run.model, run.tokenizer = loaded.model, loaded.tokenizer
                run.status = "weights loaded"
            run.record.attention = snap
            run.metrics = metrics
        self.runs_changed.emit()
        self.attention_changed.emit()
        self._update_pair()
        return problems

    # ---- the pair ------------------------------------------------------------------------------
    def set_pair(self, a: str, b: str) -> None:
        """Show ``a − b`` (names of runs the prompt went through; an unknown name leaves no pair)."""
        self.pair = (a, b)
        self._compute_diff()

    def _update_pair(self) -> None:
        """Keep the pair while its runs have attention, else the first two such runs (A = B with one)."""
        names = [r.name for r in self.with_attention()]
        pair = []
        for current, default in zip(self.pair, (0, 1), strict=True):
            if current in names:
                pair.append(current)
            else:
                pair.append(names[min(default, len(names) - 1)] if names else "")
        self.set_pair(*pair)

    def _compute_diff(self) -> None:
        self.diff = self.diff_summary = None
        self.pair_problem = ""
        a, b = self.pair
        seen = {r.name: r.record.attention for r in self.with_attention()}
        ra, rb = seen.get(a), seen.get(b)
        if ra is not None and rb is not None:
            problem = words.pair_mismatch(a, ra.weights, ra.labels, b, rb.weights, rb.labels)
            if problem is None:
                self.diff = weights_difference(ra.weights, rb.weights)
                self.diff_summary = head_diff_summary(self.diff)
            else:
                self.pair_problem = problem
        self.pair_changed.emit(a, b)

    # ---- the rest ------------------------------------------------------------------------------
    def set_prompt(self, text: str) -> None:
        if text != self.prompt:
            self.prompt = text
            self.prompt_changed.emit(text)

    def set_base(self, base: GPTConfig, source: str, has_model: bool) -> None:
        self.base, self.source, self.has_model = base, source, has_model
        self.base_changed.emit()

    def set_training(self, training: bool) -> None:
        self.training = training
        self.training_changed.emit(training)

    def say(self, where: str, text: str) -> None:
        """The line under a control: "variants", "training", "prompt" or "file"."""
        self.messages[where] = text
        self.message.emit(where, text)


__all__ = ["TRAIN_JOB", "CompareState"]
