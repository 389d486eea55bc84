"""The Train tab's loss plot keeps its guide labels inside the curves' box: "shown step" (the step the
scrubber shows) and "uniform guess: ln V" sit neither on the legend row nor on each other, in the
window as a 1024×768 and a 1280×800 screen show it (maximised)."""

from __future__ import annotations

import math

import pytest

from tests.app.layout_probe import text_problems


@pytest.mark.parametrize("size", [(1024, 718), (1280, 750)])
@pytest.mark.parametrize("shown", [10, 38])  # right of the line, and left of it near the right edge
def test_the_shown_step_label_stays_off_the_legend(qtbot, window_of_one_tab, size, shown):
    _win, tab, _scroll = window_of_one_tab("train", "app.views.train.tab:TrainTab", size)
    plots = tab.plots
    events = [
        {
            "step": s,
            "train_loss": 4 * math.exp(-s / 20) + 0.5,
            "lr": 1e-3,
            "grad_norm": 1,
            "tokens_per_s": 1e4,
        }
        for s in range(1, 41)
    ]
    plots.append([*events, {"step": 40, "val_loss": 0.9}], now=True)
    plots.set_reference_loss(math.log(64))
    plots.set_step_marker(shown)
    qtbot.waitUntil(lambda: plots.marker is not None and plots.marker.isVisible(), timeout=5000)

    def none_left() -> None:
        plots.grab()  # lays out what is pending
        assert [p for p in text_problems(plots) if "guide label" in p] == []

    qtbot.waitUntil(none_left, timeout=5000)  # once laid out; at the time-out it says what is left
