"""What the History tab draws, without Qt: the open :class:`~model.io.history.traced.History`, the step shown,
and the plot's choice (the best head of each kind, or every head of one kind)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from app.core.state import Signal
from model.io.history.traced import BEST, History, Snapshot

#: The plot's choices: (key, label). ``best``: the best head of each kind; else every head of a kind.
PLOT_CHOICES = (
    ("best", "best head of each kind"),
    ("induction", "every head: induction"),
    ("prev_token", "every head: previous-token"),
    ("sink", "every head: sink"),
    ("entropy", "every head: entropy (normalised)"),
)
#: Legend names of the kinds.
KIND_TITLES = {"induction": "induction", "prev_token": "previous-token", "sink": "sink", "entropy": "entropy"}


#: Where step 0 is drawn on the log axis (log 0 does not exist).
STEP0_X = 0.5


def plot_x(step: float) -> float:
    """Where ``step`` is drawn on the log axis (step 0 at :data:`STEP0_X`)."""
    return float(step) if step > 0 else STEP0_X


def step_ticks(steps) -> list[tuple[float, str]]:
    """Ticks of the log step axis (positions in log10): 1, 2, 5 × 10^k within the steps' range, and 0."""
    steps = [float(s) for s in steps]
    positive = [s for s in steps if s > 0] or [1.0]
    lo, hi = min(positive), max(positive)
    ticks = [(math.log10(STEP0_X), "0")] if min(steps) <= 0 else []
    for k in range(math.floor(math.log10(lo)), math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10**k
            if lo / 1.5 <= v <= hi * 1.5:
                text = f"{v // 1000}k" if v >= 1000 else str(v)
                ticks.append((math.log10(v), text))
    return ticks


class HistoryState:
    """The History tab's state and its change signals (:class:`app.core.state.Signal`, called at once).

    ``history``: the open history (None before one is opened); ``index``: the revision asked for
    (the scrubber's position); ``shown``: the snapshot drawn (the newest delivered, possibly of an
    earlier request while the asked one loads); ``plot``: a key of :data:`PLOT_CHOICES`.
    """

    #: (): a history was opened (or closed)
    opened = Signal()
    #: (index): the scrubber moved
    index_changed = Signal()
    #: (snapshot): a snapshot is to be drawn
    shown_changed = Signal()
    #: (): a revision was traced (the plot and the table grow)
    table_changed = Signal()
    #: (text)
    message = Signal()

    def __init__(self) -> None:
        self.history: History | None = None
        self.index = 0
        self.shown: Snapshot | None = None
        self.plot = "best"

    def open(self, history: History | None) -> None:
        self.history, self.index, self.shown = history, 0, None
        self.opened.emit()

    def set_index(self, i: int) -> None:
        if self.history is None or not 0 <= i < len(self.history) or i == self.index:
            return
        self.index = i
        self.index_changed.emit(i)

    def show(self, snap: Snapshot) -> None:
        self.shown = snap
        self.shown_changed.emit(snap)
        self.table_changed.emit()

    def say(self, text: str) -> None:
        self.message.emit(text)

    def series(self) -> list[tuple[str, np.ndarray, np.ndarray]]:
        """The plot's lines ``(name, steps, values)``, over the revisions traced so far."""
        h = self.history
        if h is None:
            return []
        snaps = h.in_memory()  # what the compute thread delivered: no disk access here
        if not snaps:
            return []
        steps = np.array([s.step for s in snaps], dtype=np.float64)
        if self.plot == "best":
            return [
                (KIND_TITLES[kind], steps, np.array([s.best(kind)[0] for s in snaps]))
                for kind in BEST
                if all(BEST[kind][0] in s.metrics for s in snaps)
            ]
        metric = BEST[self.plot][0]
        L, H = snaps[0].shape
        return [
            (f"L{layer}H{head}", steps, np.array([float(s.metrics[metric][layer, head]) for s in snaps]))
            for layer in range(L)
            for head in range(H)
        ]

    def describe(self, snap: Snapshot | None = None) -> str:
        """One line on the shown step's best heads."""
        snap = snap or self.shown
        if snap is None:
            return ""
        parts = []
        for kind in BEST:
            if BEST[kind][0] in snap.metrics:
                v, layer, head = snap.best(kind)
                parts.append(f"{KIND_TITLES[kind]} {v:.2f} (L{layer}H{head})")
        return " · ".join(parts)

    def info(self) -> dict[str, Any]:
        h = self.history
        return {} if h is None else {"name": h.name, "steps": h.steps, "prompt": h.prompt}


__all__ = ["KIND_TITLES", "PLOT_CHOICES", "STEP0_X", "HistoryState", "plot_x", "step_ticks"]
