"""The Train tab's four live plots: loss (train raw and smoothed, validation), learning rate, grad norm,
tokens/s: one :class:`~app.widgets.curves.Curves` with three extra panels, so they share its smoothing
control (loss only), its log-y toggle (loss only) and its throttled repaint.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtWidgets import QWidget

from app.widgets.curves import Curves, history_points
from app.widgets.palette import PALETTE

TRAIN = "train"
#: The plots' titles: four plots share a third of a 1280×800 screen (two lines when a title wraps)
TITLE_SIZE = "9.5pt"
#: (series, panel and event key, panel title, colour, line width, row, column, column span)
EXTRA_PANELS = (
    ("lr", "Learning rate", PALETTE[2], 2.0, 1, 0, 1),
    ("grad_norm", "Gradient norm, unclipped", PALETTE[4], 1.0, 1, 1, 1),
    ("tokens_per_s", "Training tokens / s", PALETTE[7], 1.0, 2, 0, 2),
)


class TrainPlots(Curves):
    """Four live plots over training steps; ``reset(history)`` then ``append(events)``.

    ``append`` redraws at most every :attr:`REDRAW_MS` (curves a few hundred ms old look live;
    repainting four plots on every training step would cost the GUI thread for nothing).
    """

    def __init__(self, parent: QWidget | None = None):
        super().__init__(
            "Loss (cross-entropy, nats/token)",
            x_label="",  # the four plots share their steps: only the lowest says "step"
            colspan=2,
            smoothing=0.9,
            legend_text_size="8pt",
            parent=parent,
        )
        last_row = max(row for *_, row, _col, _span in EXTRA_PANELS)
        for key, title, _color, _width, row, col, span in EXTRA_PANELS:
            self.add_panel(
                key, title, x_label="step" if row == last_row else "", row=row, col=col, colspan=span
            )
        for panel in self.panels.values():  # four plots in a third of a laptop screen: smaller titles
            panel.setTitle(panel.titleLabel.text, size=TITLE_SIZE)
        # the small plots ask for 28 px of curve, so on a short screen the loss keeps its room (a grid
        # shares out a shortfall by preferred heights; what is over goes 3 to 1 to the loss's row)
        grid = self.view.ci.layout
        for key, *_, row, _col, _span in EXTRA_PANELS:
            panel = self.panels[key]
            panel.setPreferredHeight(panel.minimumHeight() + 28)
            grid.setRowStretchFactor(row, 1)
        grid.setRowStretchFactor(0, 3)
        self.set_series(
            TRAIN,
            [],
            [],
            color=PALETTE[0],
            label="train (smoothed)",
            raw_label="train (raw)",
            val_label="validation",
            val_color=PALETTE[3],
        )
        for key, _title, color, width, *_ in EXTRA_PANELS:
            self.set_series(key, [], [], panel=key, color=color, width=width, smooth=False, label="")

    # ---- data ----------------------------------------------------------------------------------
    def set_reference_loss(self, value: float | None) -> None:
        """Draw a dashed line at ``value`` (ln V: the loss of a uniform guess), or hide it."""
        # under the line at its right end: a loss curve starts near ln V, top left, and falls away
        self.set_hline("uniform", value, "uniform guess: ln V", position=0.97)

    def set_step_marker(self, step: int | None) -> None:
        """Mark the step whose attention the scrubber shows (None: hide the mark)."""
        self.set_marker(step, "shown step", color=(200, 40, 40))

    def reset(self, history: list[dict] | None = None) -> None:
        for name in self.series:
            self.set_series(name, [], [])
        self.append(history or [], now=True)

    def append(self, events: list[dict], now: bool = False) -> None:
        """Add training events; the curves follow within ``REDRAW_MS`` (at once with ``now``)."""
        steps, loss, val_steps, val = history_points(events)
        self.extend(TRAIN, steps, loss, val_steps, val)
        rows = [e for e in events if e.get("train_loss") is not None and math.isfinite(e["train_loss"])]
        for key, *_ in EXTRA_PANELS:
            self.extend(key, steps, np.array([float(e.get(key) or 0.0) for e in rows]))
        if now:
            self.redraw()

    @property
    def n_points(self) -> int:
        return self.points(TRAIN)
