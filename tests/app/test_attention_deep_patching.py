"""The Patching page on a model of SmolLM2-135M's shape (30 layers × 9 heads; random weights, narrow)
in a 1280×800 window (maximised: 1280×750) beside the setup docks. Issue 53: the 270-head map was
about 70×240 px with a single column label while the 14-position stream map took most of the width.
Now both maps have a row per layer and share the width by their columns: a head's column about as
wide as a position's, every head named on its column and the layers named as densely as fits."""

from __future__ import annotations

from PySide6.QtCore import QRectF

from tests.app.layout_probe import axis_texts, text_problems
from tests.app.test_attention_deep_grid import H, L, _config

TIMEOUT = 60_000
CLEAN = "Ann met Bo; Bo"  # 14 tokens of the primer's characters, as many as the prompt


def _data(panel) -> QRectF:
    """The scene rectangle the matrix's cells take (the image, clipped to its view box)."""
    return panel.image.sceneBoundingRect().intersected(panel.vb.sceneBoundingRect())


def test_the_heads_map_of_a_30_by_9_model_is_as_readable_as_the_stream_map(qtbot, window_of_one_tab):
    from model.train.settings import TrainSettings

    win, tab, scroll = window_of_one_tab("attention", "app.views.attention.tab:AttentionTab", (1280, 750))
    s = win.session
    s.set_device("cpu")
    s.set_source("builtin:primer")
    s.train_settings = TrainSettings()
    s.set_config(_config())
    s.build_model(seed=1)
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT, check_params_cb=lambda r: r.prompt == CLEAN):
        tab.set_prompt(CLEAN)
    with qtbot.waitSignal(tab.causalReady, timeout=TIMEOUT, check_params_cb=lambda k, _r: k == "patching"):
        page = tab.show_page("patching")
    qtbot.waitUntil(lambda: not page.stale and page.heads_plot.isVisible(), timeout=TIMEOUT)
    heads, resid = page.heads_plot.panel, page.resid_plot.panel
    T = resid.matrix.shape[1]
    assert heads.matrix.shape == (L, H) and T >= 10

    def cells() -> tuple[float, float, float, float]:
        page.grab()  # lays out what is pending
        h, r = _data(heads), _data(resid)
        return h.width() / H, h.height() / L, r.width() / T, r.height() / L

    def readable() -> bool:
        head_w, _, pos_w, _ = cells()
        return head_w >= 20 and head_w >= 0.8 * pos_w

    qtbot.waitUntil(readable, timeout=5000)  # was ~8 px a head against ~23 px a position
    head_w, head_h, pos_w, pos_h = cells()
    assert abs(head_h - pos_h) <= 1  # a row per layer in both, at one height
    # and the stream map is not starved in turn: the heads take at most 3/5 of the cells' width
    assert H * head_w <= 0.62 * (H * head_w + T * pos_w)
    # a label on every head's column (it was one, "H5")
    assert sorted(t for t, _ in axis_texts(heads.top_axis)) == sorted(f"H{h}" for h in range(H))
    # the layers named as densely as 13 px labels allow on rows head_h px apart: every layer at
    # 13 px a row, every other one above 6.5 px (once the axis has taken the width of "L29")
    stride = 1 if head_h >= 13 else 2
    assert head_h >= 6.5

    def layers() -> list[int]:
        page.grab()
        return sorted(int(t[1:]) for t, _ in axis_texts(heads.left_axis))

    qtbot.waitUntil(lambda: layers() == list(range(0, L, stride)), timeout=5000)
    assert text_problems(page) == []
    assert scroll.horizontalScrollBar().maximum() == 0
