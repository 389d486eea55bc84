"""One rule for masked cells: every grid paints what the causal mask hides in the same grey, and its
colour bar says so, whether the weights come from an inspection, a training frame or a checkpoint."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtGui import QColor

from app.widgets.palette import HIDDEN_COLOR
from model.interp.frame import carried_mask
from model.interp.probes import FrameHistory

TIMEOUT = 60_000


@pytest.fixture
def tiny_window_tabs():
    return ["train", "history", "attention"]


def _mosaic_colour(mosaic, q: int, k: int) -> tuple[int, int, int]:
    """The colour the grid paints at token pair (q, k) of its first head (grabbed first: a grab lays
    out what was pending, and the position is read from that layout)."""
    image = mosaic.view.grab().toImage()
    c = QColor(image.pixel(mosaic.widget_pos_of(0, 0, q, k)))
    return (c.red(), c.green(), c.blue())


def test_the_carried_mask_is_causal_or_a_window_and_never_a_stray_zero():
    T = 6
    w = np.tril(np.full((2, 3, T, T), 0.2, np.float16))
    assert (carried_mask(w) == np.tril(np.ones((T, T), bool))).all()
    w[0, 0, 5, 0] = 0  # one head ignores a pair: the others still see it
    assert (carried_mask(w) == np.tril(np.ones((T, T), bool))).all()
    w[..., 4:, 0] = w[..., 5:, 1] = 0  # nothing 4 or more tokens back: a window of 4
    i, j = np.indices((T, T))
    assert (carried_mask(w) == ((j <= i) & (i - j < 4))).all()
    assert carried_mask(np.full((1, 1, T, T), 1 / T, np.float32)) is None  # not causal: no mask
    assert carried_mask(np.tril(np.ones((1, 1, T, T), np.float32))[..., ::-1, :]) is None


def test_a_masked_cell_is_the_same_grey_in_the_train_history_and_attention_grids(qtbot, tiny_window):
    from model.io.history.traced import trace_snapshot

    win, s = tiny_window, tiny_window.session
    win.resize(1280, 750)  # the window as a laptop shows it maximised
    prompt = "abcdabcd"
    # Train: a frame as the scrubber gets it back from the history (packed, then unpacked)
    train = win.tabs["train"]
    snap = trace_snapshot(s.model, s.tokenizer, prompt, 0, "step 0", "test")
    T = len(snap.labels)
    kept = FrameHistory()
    kept.offer(snap)  # a snapshot is an AttentionFrame
    frame = kept[0]
    assert np.triu(frame.weights.astype(np.float32), 1).max() == 0  # the mask is only in the data
    train.live._draw(frame, live=True)
    # History: a checkpoint's snapshot
    hist = win.tabs["history"]
    win.tab_widget.setCurrentWidget(win._holders["history"])
    hist._draw_snapshot(snap)
    # Attention: an inspection, which carries the model's mask
    att = win.tabs["attention"]
    win.tab_widget.setCurrentWidget(win._holders["attention"])
    with qtbot.waitSignal(att.inspected, timeout=TIMEOUT):
        att.set_prompt(prompt)
    grid = att.pages["heads"].mosaic
    qtbot.waitUntil(lambda: grid.weights is not None and grid.weights.shape[-1] == T, timeout=TIMEOUT)

    win.tab_widget.setCurrentWidget(win._holders["train"])
    qtbot.waitUntil(lambda: train.live.head_grid.isVisible(), timeout=5000)
    painted = {"Train": _mosaic_colour(train.live.head_grid, 0, T - 1)}
    win.tab_widget.setCurrentWidget(win._holders["history"])
    qtbot.waitUntil(lambda: hist.mosaic.isVisible(), timeout=5000)
    painted["History"] = _mosaic_colour(hist.mosaic, 0, T - 1)
    win.tab_widget.setCurrentWidget(win._holders["attention"])
    qtbot.waitUntil(lambda: grid.isVisible(), timeout=5000)
    painted["Attention"] = _mosaic_colour(grid, 0, T - 1)
    assert painted == dict.fromkeys(painted, HIDDEN_COLOR)
    # a seen cell is not grey (the test looks at the heads, not at a gap)
    assert _mosaic_colour(train.live.head_grid, T - 1, 0) != HIDDEN_COLOR
    # and every colour bar says what the grey is
    for mosaic in (train.live.head_grid, hist.mosaic, grid):
        assert mosaic.legend.hidden_text == "masked" and mosaic.legend.swatch.isVisible()
