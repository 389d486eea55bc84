"""The Head and Rollout pages at a real model's scale: a head of 3,000 tokens shows its structure in
every row (each row coloured over its largest weight, the legend naming that scale, the map pooled to
the screen so a one-token diagonal stays a line), and a map fills its plot, its axes ending with it."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QColor

T = 3000


def _previous_token_head(T: int) -> np.ndarray:
    """Row i: a weight on every key j ≤ i, five times more on j = i − 1 (uniform background plus a
    previous-token head): ``(1 + 4·[j = i − 1]) / (i + 5)``, falling like 1/i down the rows."""
    w = np.tril(np.ones((T, T), np.float32))
    q = np.arange(1, T)
    w[q, q - 1] += 4.0
    return w / w.sum(-1, keepdims=True)


def _inspection(w: np.ndarray):
    from model.config import GPTConfig
    from model.interp.inspection import Inspection

    T = w.shape[-1]
    labels = [f"t{i}" for i in range(T)]
    weights = w[None, None]
    return Inspection(
        prompt=" ".join(labels),
        labels=labels,
        weights=weights,
        ids=list(range(T)),
        texts=labels,
        dropped=0,
        overview=weights,
        block=1,
        mask=np.tril(np.ones((T, T), bool)),
        logits=np.zeros((T, 4), np.float32),
        target_labels=[*labels[1:], ""],
        ablate={},
        config=GPTConfig(n_layers=1, n_heads=1, d_model=16, context_length=T, vocab_size=4),
    )


def _screen_rect(plot, item):
    return plot.view.mapFromScene(item.sceneBoundingRect()).boundingRect()


def assert_fills_its_plot(plot) -> None:
    """The map of ``plot`` (a MatrixPlot) takes its whole view box, and the top axis (its line and its
    labels' room) ends where the map ends: no empty plot beside the map, no axis running on past it."""
    panel = plot.panel
    box, image = _screen_rect(plot, panel.vb), _screen_rect(plot, panel.image)
    for a, b in ((image.left(), box.left()), (image.right(), box.right())):
        assert abs(a - b) <= 1.5, (image, box)
    for a, b in ((image.top(), box.top()), (image.bottom(), box.bottom())):
        assert abs(a - b) <= 1.5, (image, box)
    axis = _screen_rect(plot, panel.top_axis)
    assert abs(axis.left() - image.left()) <= 1.5 and abs(axis.right() - image.right()) <= 1.5, (axis, image)


def _is_bright(c: QColor) -> bool:
    """The top of the map (viridis yellow-green), not its dark bottom nor the masked grey."""
    return c.green() > 150 and c.blue() < 140


def test_a_head_of_3000_tokens_shows_its_previous_token_line_in_every_row(qtbot):
    from app.views.attention.head_page import HeadPage
    from app.views.attention.state import AttentionState

    w = _previous_token_head(T)
    state = AttentionState()
    page = HeadPage(state)
    qtbot.addWidget(page)
    page.resize(860, 560)  # what the page gets in a 1280 × 800 window beside the docks
    page.ensure_built()
    page.show()
    qtbot.waitExposed(page)
    state.set_inspection(_inspection(w), 1)
    page.refresh()
    plot = page.heatmap
    # the scale is named on the page: the chooser and the colour bar
    assert page.scale == "row" and "row max" in page.scale_box.currentText()
    assert plot.panel.legend.label == "attention weight ÷ row max"
    qtbot.waitUntil(lambda: plot.panel.pool > 1, timeout=5000)  # pooled to the screen's resolution
    image = plot.view.grab().toImage()
    rect = _screen_rect(plot, plot.panel.image)
    kx, ky = rect.width() / T, rect.height() / T  # screen pixels a token
    lit = dark = 0
    rows = range(rect.top() + 3, rect.bottom() - 2, 3)
    for y in rows:
        q = (y - rect.top() + 0.5) / ky
        x_line = rect.left() + (q - 1) * kx
        lit += any(_is_bright(image.pixelColor(round(x_line) + d, y)) for d in range(-2, 3))
        x_back = rect.left() + 0.5 * (q - 1) * kx  # halfway from the first key to the line
        if q > 200:
            dark += not _is_bright(image.pixelColor(round(x_back), y))
    assert lit / len(rows) > 0.95  # the line, bright from the first row to the last
    assert dark == sum(1 for y in rows if (y - rect.top() + 0.5) / ky > 200)  # and the background not
    # the hover gives the weight itself, not its colour's scale
    plot.hover_at(2500, 2499)
    assert f"weight {w[2500, 2499]:.4f}" in plot.readout.text()
    # the other scales are one choice away, named as well
    page.scale_box.setCurrentIndex(page.scale_box.findData("log"))
    assert plot.panel.legend.label == "log₁₀ attention weight"
    assert_fills_its_plot(plot)


def test_a_short_head_fills_its_plot_too(qtbot):
    from app.views.attention.head_page import HeadPage
    from app.views.attention.state import AttentionState

    state = AttentionState()
    page = HeadPage(state)
    qtbot.addWidget(page)
    page.resize(860, 560)
    page.ensure_built()
    page.show()
    qtbot.waitExposed(page)
    state.set_inspection(_inspection(_previous_token_head(12)), 1)
    page.refresh()
    page.grab()
    assert_fills_its_plot(page.heatmap)


def test_the_head_s_role_line_never_squeezes_the_map_in_a_1024_px_window(qtbot):
    """At 1024 × 768 the page is 650 px wide: the role line once sat between the controls, wrapped into a
    column of ten lines, and took the map's height."""
    from app.views.attention.head_page import HeadPage
    from app.views.attention.state import AttentionState

    state = AttentionState()
    page = HeadPage(state)
    qtbot.addWidget(page)
    page.resize(650, 480)
    page.ensure_built()
    page.show()
    qtbot.waitExposed(page)
    state.set_inspection(_inspection(_previous_token_head(12)), 1)
    page.refresh()
    page.role_label.setText(  # what SmolLM2's first head says
        "layer 0, head 0: no named role · on the prompt: spread 0.82, prev-token 0.21, sink 0.08 · "
        "induction 0.02 on 2 × 24 random tokens"
    )
    for _ in range(3):  # a wrapped label's height follows its width after a layout pass or two
        page.layout().activate()
        page.grab()
    line = page.role_label.fontMetrics().lineSpacing()
    assert page.role_label.height() <= 3 * line + 4  # two lines at most, the page's width
    assert page.heatmap.height() >= 0.55 * page.height()
