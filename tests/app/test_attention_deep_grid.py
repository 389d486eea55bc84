"""The Attention tab's Heads page on a model of SmolLM2-135M's shape (Llama family: 30 layers, 9 query
heads over 3 key/value heads, RoPE; random weights, narrow), in a 1280×800 window beside the setup
docks: every layer and K/V group labelled, layers folded, named heads found, heads selected and
inspected by pointer and keys."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PySide6.QtCore import Qt

from tests.app.layout_probe import axis_texts, text_problems

TIMEOUT = 30_000
L, H, KV = 30, 9, 3
PROMPT = "The cat sat on the mat. The cat sat on the mat."


def _config():
    from model.config import GPTConfig

    return GPTConfig(
        context_length=64,
        n_layers=L,
        d_model=72,
        n_heads=H,
        n_kv_heads=KV,
        head_dim=8,
        positions="rope",
        norm="rmsnorm",
        mlp="swiglu",
        bias="none",
        tie_embeddings=True,
    )


@pytest.fixture
def deep(qtbot, window_of_one_tab):
    """(window, tab, Heads page) at 1280×800, the prompt inspected and its metrics measured."""
    from model.train.settings import TrainSettings

    win, tab, _ = window_of_one_tab("attention", "app.views.attention.tab:AttentionTab", (1280, 800))
    s = win.session
    s.set_device("cpu")
    s.set_source("builtin:primer")
    s.train_settings = TrainSettings()
    s.set_config(_config())
    with qtbot.waitSignal(tab.metricsReady, timeout=TIMEOUT):
        s.build_model(seed=1)
        tab.set_prompt(PROMPT)
    qtbot.waitUntil(lambda: tab.inspection is not None and tab.inspection.n_layers == L, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: s.compute.idle, timeout=TIMEOUT)
    page = tab.show_page("heads")
    qtbot.waitUntil(lambda: page.mosaic.isVisible() and not page.stale, timeout=TIMEOUT)
    page.grab()  # lays out what is pending
    return win, tab, page


def _row_names(m) -> set[str]:
    """The layer names on screen: the axis's (first band) and those beside the other bands."""
    return {t for t, _ in axis_texts(m.plot.getAxis("left"))} | set(m.marks.row_texts())


def _head_px(m) -> float:
    g = m.geom
    return m.fit.cell_px() * g.S / (g.S + g.g)


def _in_view(m, layer: int, head: int) -> bool:
    return m.vb.viewRect().adjusted(-0.01, -0.01, 0.01, 0.01).contains(m.cell_rect(layer, head))


def _named_metrics(tab):
    """Metrics that name three heads: induction at L4 h2 and L21 h7, previous-token at L3 h1."""
    from model.interp.analysis.heads import HeadMetrics
    from model.interp.measures import MetricsResult

    zero = np.zeros((L, H))
    induction, prev = zero.copy(), zero.copy()
    induction[4, 2] = induction[21, 7] = 0.9
    prev[3, 1] = 0.9
    m = HeadMetrics(
        entropy=zero + 1.0,
        entropy_norm=zero + 0.5,
        prev_token=prev,
        sink=zero,
        self_score=zero,
        induction=induction,
    )
    return MetricsResult(m, period=8)


def test_all_270_heads_show_at_1280x800_with_every_layer_and_kv_group_named(qtbot, deep):
    win, _, page = deep
    m = page.mosaic
    assert m.row_labels == [f"L{r}" for r in range(L)]
    assert m.drawn_rows == tuple(range(L)) and not m.scrolling  # nothing folded, nothing scrolled
    assert all(_in_view(m, r, h) for r in (0, 14, 15, L - 1) for h in (0, H - 1))
    assert _head_px(m) >= 20  # each head still readable
    assert _row_names(m) == {f"L{r}" for r in range(L)}
    groups = m.top_axis.group_texts()  # over every band: K/V head 0, 1, 2 (kv0 … when narrow)
    assert sorted({t[-1] for t in groups}) == ["0", "1", "2"] and len(groups) == KV * m.geom.bands
    assert {t for t, _ in axis_texts(m.top_axis)} >= {f"h{h}" for h in range(H)}
    assert m.cell_name(5, 4) == "layer 5, head 4 (K/V head 1)"
    assert text_problems(page) == []
    assert win._holders["attention"].scroll_area.horizontalScrollBar().maximum() == 0  # no sideways scrolling


def test_folding_the_layers_shows_only_those_larger_and_all_again(qtbot, deep):
    _, tab, page = deep
    m, fold = page.mosaic, page.fold
    assert fold.isVisible() and fold.combo.currentText() == "all 30"
    all_px = _head_px(m)
    i = fold.combo.findText("10–19")
    fold.combo.setCurrentIndex(i)
    fold.combo.activated.emit(i)
    qtbot.waitUntil(lambda: m.drawn_rows == tuple(range(10, 20)), timeout=5000)
    page.grab()
    assert _row_names(m) == {f"L{r}" for r in range(10, 20)}
    assert _head_px(m) > 1.3 * all_px
    assert text_problems(page) == []
    fold.last.setValue(12)  # a range typed in
    qtbot.waitUntil(lambda: m.drawn_rows == (10, 11, 12), timeout=5000)
    assert fold.combo.currentText() == "range"
    with qtbot.waitSignal(m.headClicked, timeout=5000) as blk:  # a click still opens the real head
        qtbot.mouseClick(m.view.viewport(), Qt.MouseButton.LeftButton, pos=m.widget_pos_of(11, 6))
    assert tuple(blk.args) == (11, 6) and tab.selected == (11, 6)
    tab.show_page("heads")
    fold.combo.setCurrentIndex(0)
    fold.combo.activated.emit(0)
    qtbot.waitUntil(lambda: m.drawn_rows == tuple(range(L)), timeout=5000)


def test_named_heads_are_framed_and_find_jumps_to_each_unfolding_the_grid(qtbot, deep):
    from app.views.attention.grid_controls import ROLE_COLORS

    _, tab, page = deep
    m, finder, fold = page.mosaic, page.finder, page.fold
    tab.state.set_metrics(_named_metrics(tab), tab.state.request)
    frames = {(round(r.x()), round(r.y())): c.name() for r, c in m.marks.frames()}
    want = {(4, 2): "induction", (21, 7): "induction", (3, 1): "previous-token"}
    assert frames == {
        (round(m.cell_rect(*lh).x()), round(m.cell_rect(*lh).y())): ROLE_COLORS[role]
        for lh, role in want.items()
    }
    assert "induction 2" in page.roles_label.text() and "prev 1" in page.roles_label.text()
    fold.set_range((0, 9))
    assert [finder.combo.itemText(i) for i in range(finder.combo.count())][1:] == [
        "induction · 2",
        "prev · 1",
    ]
    finder.combo.setCurrentIndex(1)
    finder.combo.activated.emit(1)  # induction: its first head
    assert tab.selected == (4, 2) and m.marks.selected == (4, 2)
    assert finder.where.text() == "L4 h2 · 1 of 2"
    qtbot.mouseClick(finder.next_button, Qt.MouseButton.LeftButton)  # the next one is folded away
    assert tab.selected == (21, 7)
    assert m.drawn_rows == tuple(range(20, 30))  # the fold moved to its block
    assert _in_view(m, 21, 7) and m.marks._select_item.isVisible()
    assert finder.where.text() == "L21 h7 · 2 of 2"
    qtbot.mouseClick(finder.next_button, Qt.MouseButton.LeftButton)  # and round again
    assert tab.selected == (4, 2) and m.drawn_rows == tuple(range(10)) and m.view.hasFocus()


def test_heads_are_selected_by_keys_and_inspected_on_the_30x9_model(qtbot, deep):
    _, tab, page = deep
    m = page.mosaic
    insp = tab.inspection
    assert insp.weights.shape[:2] == (L, H) and m.weights.shape[:2] == (L, H)
    tab.select_head(14, 8)
    m.view.setFocus()
    qtbot.keyClick(m.view, Qt.Key.Key_Right)  # past the last head of L14: L15, at the top of the next band
    assert tab.selected == (15, 0) and m.marks.selected == (15, 0)
    qtbot.keyClick(m.view, Qt.Key.Key_Down)
    qtbot.keyClick(m.view, Qt.Key.Key_Right)
    assert tab.selected == (16, 1) and _in_view(m, 16, 1)
    # hover: the readout names the head and its K/V head, with the model's own weight
    q, k = 7, 3
    with qtbot.waitSignal(m.cellHovered, timeout=5000) as blk:
        qtbot.mouseMove(m.view.viewport(), m.widget_pos_of(23, 5, q, k))
    r, c, q2, k2 = blk.args  # a head is ~22 px for 47 tokens: a token is less than a pixel, and the
    # pointer lands on a whole pixel: within the tokens one pixel spans of the one aimed at
    px = m.scene_pos_of(23, 5, q + 1, k).y() - m.scene_pos_of(23, 5, q, k).y()
    near = math.ceil(1 / px)
    assert (r, c) == (23, 5) and abs(q2 - q) <= near and abs(k2 - k) <= near
    text = m.readout.text()  # (the head's name, when it has one, in brackets before the colon)
    assert text.startswith("layer 23, head 5 (K/V head 1)") and f": query {q2} " in text
    assert f"weight {float(insp.weights[23, 5, q2, k2]):.3f}" in text
    # Enter opens the selected head large, exactly the model's weights
    with qtbot.waitSignal(tab.headDetailReady, timeout=TIMEOUT):
        qtbot.keyClick(m.view, Qt.Key.Key_Return)
    assert tab.current_page is tab.pages["head"]
    shown = tab.pages["head"].heatmap.matrix
    np.testing.assert_array_equal(shown[insp.mask], insp.weights[16, 1][insp.mask])


def test_at_101_tokens_the_metrics_maps_and_the_kv_headers_stay(qtbot, window_of_one_tab):
    """A prompt of 101 tokens on the 30×9 GQA model (it was: the Metrics maps collapsed to empty axes
    under overlapping titles, and the grid's header lost its K/V groups)."""
    from model.train.settings import TrainSettings

    win, tab, _ = window_of_one_tab("attention", "app.views.attention.tab:AttentionTab", (1280, 800))
    s = win.session
    s.set_device("cpu")
    s.set_source("builtin:primer")
    s.train_settings = TrainSettings()
    s.set_config(_config().replace(context_length=128))
    prompt = ("The cat sat on the mat. " * 5)[:101]
    with qtbot.waitSignal(tab.metricsReady, timeout=TIMEOUT):
        s.build_model(seed=1)
        tab.set_prompt(prompt)
    qtbot.waitUntil(lambda: tab.inspection is not None and len(tab.inspection.ids) == 101, timeout=TIMEOUT)

    page = tab.show_page("metrics")
    qtbot.waitUntil(lambda: page.table.rowCount() == L * H and not page.stale, timeout=TIMEOUT)
    page.grab()
    maps = [p.image.sceneBoundingRect().intersected(p.vb.sceneBoundingRect()) for p in page.maps.values()]
    assert all(r.width() >= 3 * H and r.height() >= 3.5 * L for r in maps), maps  # rows stay rows
    assert text_problems(page) == []  # no title over another or over the data

    heads = tab.show_page("heads")
    qtbot.waitUntil(lambda: heads.mosaic.isVisible() and not heads.stale, timeout=TIMEOUT)
    heads.grab()
    m = heads.mosaic
    groups = m.top_axis.group_texts()
    assert sorted({t[-1] for t in groups}) == ["0", "1", "2"] and len(groups) == KV * m.geom.bands
    assert {t for t, _ in axis_texts(m.top_axis)} >= {f"h{h}" for h in range(H)}
    assert text_problems(heads) == []


#: The width the Attention tab's pages get in a 1024×768 window beside the default setup dock, measured in
#: a real window: the tab's area is 680 px, less the tab's own margins.
PAGE_WIDTH_AT_1024 = 656


def test_the_heads_page_of_a_30_layer_model_fits_a_1024_px_window_beside_the_dock(qtbot, deep):
    """The grid's controls (the layer fold, the finder, Log colours, Fit) once asked for 718 px, so the
    whole tab scrolled sideways at 1024 px on a real model's 30 layers."""
    _, tab, page = deep
    assert page.fold.isVisibleTo(page)  # 30 layers: the fold is there
    assert page.minimumSizeHint().width() <= PAGE_WIDTH_AT_1024
    assert tab.page_tabs.minimumSizeHint().width() <= PAGE_WIDTH_AT_1024
