"""Today's block in the views: the Experts page (which expert each token went to), the learned sinks'
share on the Metrics page, local layers marked in the head grids, and the router's load on the Train
tab. Every number shown is checked against the model itself (``run_with_trace``), not against the
views' own arithmetic."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt

from model.config import GPTConfig
from model.interp.trace import run_with_trace
from tests.app.layout_probe import text_problems

TIMEOUT = 30_000  # ms: the machine's two cores are shared with other test runs
PROMPT = "The head looks back."
#: A tiny model of today's block: a dense first layer then a mixture of experts, learned sinks, local
#: layers 0 and 2 (a window of 4 keys) and a global layer 1
MOE = GPTConfig(
    context_length=48,
    n_layers=3,
    d_model=32,
    n_heads=4,
    positions="rope",
    n_experts=4,
    n_experts_per_token=2,
    moe_dense_layers=1,
    attn_sinks=True,
    sliding_window=4,
    window_pattern="LG",
)
DENSE = GPTConfig(context_length=48, n_layers=2, d_model=32, n_heads=2)


@pytest.fixture
def tiny_window_tabs():
    """The Train tab only (the Attention tests below build their own tab)."""
    return ["train"]


@pytest.fixture
def open_tab(qtbot, make_attention_session):
    """``open_tab(config) -> tab``: the Attention tab on a fresh model of ``config``, shown, with
    :data:`PROMPT` inspected; stopped at teardown."""
    from app.views.attention.tab import AttentionTab

    opened = []

    def open_(config):
        s = make_attention_session(config)
        s.build_model(seed=1)
        tab = AttentionTab(s)
        qtbot.addWidget(tab)
        tab.resize(1100, 760)
        opened.append(tab)
        with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
            tab.set_prompt(PROMPT, run=False)
            tab.show()
        return tab

    yield open_
    for tab in opened:
        tab.shutdown()
        tab.session.shutdown(timeout=30)


def _trace(tab, **kw):
    with torch.no_grad():
        return run_with_trace(tab.session.model, torch.tensor([tab.inspection.ids]), **kw)


def _tab_shown(tab, key: str) -> bool:
    return tab.page_tabs.isTabVisible(tab.page_tabs.indexOf(tab.pages[key]))


# ---- the Experts page --------------------------------------------------------------------------
def test_the_experts_page_shows_exactly_the_experts_the_router_chose(qtbot, open_tab, tmp_path):
    from app.views.attention.experts_page import HIDDEN_COLOR, SHADE_FLOOR, expert_colors
    from model.interp.export import load_inspection

    tab = open_tab(MOE)
    page = tab.pages["experts"]
    assert _tab_shown(tab, "experts") and any(name.endswith("experts") for name, _ in tab.screenshot_pages())
    with qtbot.waitSignal(tab.expertsReady, timeout=TIMEOUT):
        tab.show_page("experts")
    qtbot.waitUntil(lambda: not page.stale, timeout=TIMEOUT)
    T = tab.inspection.T
    trace = _trace(tab, kinds=("chosen", "gates"))
    assert trace.layers == page.choice.moe_layers == [1, 2]
    cells = {(r, c): text for r, c, text, _ in page.grid.numbers.cells}
    colours = expert_colors(4)
    assert page.grid.row_labels == ["L0 · dense", "L1", "L2"]
    assert (page.grid.rgb[0] == HIDDEN_COLOR).all() and not any(r == 0 for r, _ in cells)
    for layer in (1, 2):
        chosen, gates = trace["chosen", layer][0].numpy(), trace["gates", layer][0].numpy()
        top = chosen[np.arange(T), gates.argmax(-1)]
        assert [int(cells[(layer, t)]) for t in range(T)] == top.tolist()  # the number in each cell
        for t in range(T):  # the top expert's colour, lighter the less weight it gets
            a = SHADE_FLOOR + (1 - SHADE_FLOOR) * gates[t].max()
            want = 255 - a * (255 - np.asarray(colours[top[t]], dtype=float))
            np.testing.assert_allclose(page.grid.rgb[layer, t], want, atol=1)
        # the readout (and tool tip) names every chosen expert with its weight
        text = page.describe(layer, 3)
        for e, w in zip(chosen[3], gates[3], strict=True):
            assert f"expert {int(e)} (weight {float(w):.3f})" in text
    # "Colour by: 2nd choice" shows each token's other expert
    page.rank_box.setCurrentIndex(1)
    cells = {(r, c): text for r, c, text, _ in page.grid.numbers.cells}
    chosen, gates = trace["chosen", 2][0].numpy(), trace["gates", 2][0].numpy()
    assert [int(cells[(2, t)]) for t in range(T)] == chosen[np.arange(T), gates.argmin(-1)].tolist()
    # hovering a cell writes the readout
    with qtbot.waitSignal(page.grid.hovered, timeout=TIMEOUT) as blk:
        qtbot.mouseMove(page.grid.view.viewport(), page.grid.view.mapFromScene(page.grid.scene_pos_of(1, 2)))
    assert tuple(blk.args) == (1, 2) and page.grid.readout.text().startswith("layer 1, token 2")
    # nothing cut or overlapping at this size
    page.grab()
    assert not text_problems(page)

    # its numbers export like every page's
    written = tab.export_numbers(tmp_path / "experts.csv")
    assert sorted(p.rsplit("-", 1)[-1] for p in written) == ["expert.csv", "load.csv", "weight.csv"]
    arrays = load_inspection(tab.export_numbers(tmp_path / "experts.npz")[0])
    np.testing.assert_array_equal(arrays["chosen"][1], trace["chosen", 2][0].numpy())
    assert list(arrays["moe_layers"]) == [1, 2] and list(arrays["labels"]) == tab.inspection.labels
    assert set(tab.export_targets()) == {"experts", "experts-load"}


def test_a_dense_model_has_no_experts_page(qtbot, open_tab):
    tab = open_tab(DENSE)
    page = tab.pages["experts"]
    assert not tab.offers(page) and not _tab_shown(tab, "experts")
    assert page not in tab.offered_pages() and len(tab.offered_pages()) == len(tab.pages) - 1
    assert not any(name.endswith("experts") for name, _ in tab.screenshot_pages())
    assert all(_tab_shown(tab, key) for key in tab.pages if key != "experts")


# ---- the learned sinks on the Metrics page -----------------------------------------------------
def test_the_metrics_page_maps_the_learned_sinks_share_only_with_sinks(qtbot, open_tab):
    from app.views.attention.metrics_page import COLUMNS

    col = [c[1] for c in COLUMNS].index("learned_sink")
    for config, sinks in ((MOE, True), (DENSE, False)):
        tab = open_tab(config)
        page = tab.show_page("metrics")
        qtbot.waitUntil(lambda tab=tab: tab.metrics is not None, timeout=TIMEOUT)
        qtbot.waitUntil(lambda page=page: not page.stale, timeout=TIMEOUT)
        w = _trace(tab, kinds=("pattern",)).stack("pattern").astype(np.float64)
        want = (1.0 - w.sum(-1)).mean(-1)  # [L, H]: the share that went to no key
        got = tab.metrics.metrics.learned_sink
        if sinks:
            assert (want > 0.01).all()
            np.testing.assert_allclose(got, want, atol=1e-5)
            np.testing.assert_allclose(page.maps["learned_sink"].matrix, want, atol=1e-5)
            assert not page.table.isColumnHidden(col)
            shown = {
                (page.table.item(r, 0).data(Qt.ItemDataRole.DisplayRole),
                 page.table.item(r, 1).data(Qt.ItemDataRole.DisplayRole)):
                page.table.item(r, col).data(Qt.ItemDataRole.DisplayRole)
                for r in range(page.table.rowCount())
            }  # fmt: skip
            assert shown[(2, 3)] == pytest.approx(want[2, 3], abs=1e-3)
            assert "learned sink" in tab.state.head_summary(2, 3)
        else:
            assert (got == 0).all() and np.abs(want).max() < 1e-5
            assert "learned_sink" not in page.maps and page.table.isColumnHidden(col)
        assert list(page.maps)[:5] == ["entropy_norm", "prev_token", "sink", "self_score", "induction"]


# ---- local layers in the head grids ------------------------------------------------------------
def test_the_head_grid_marks_exactly_the_local_layers_and_greys_their_window(qtbot, open_tab):
    from app.widgets.head_grid import readout_text

    tab = open_tab(MOE)
    page = tab.show_page("heads")
    qtbot.waitUntil(lambda: not page.stale, timeout=TIMEOUT)
    grid, T = page.mosaic, tab.inspection.T
    cfg = tab.session.model.config
    local = [layer for layer in range(3) if cfg.is_local_layer(layer)]
    assert local == [0, 2] and tab.state.local_layers() == local
    assert grid.row_labels == ["L0 · local", "L1", "L2 · local"]
    assert "sliding window of 4 keys" in grid.plot.getAxis("left").toolTip()
    assert "Local layers" in page.roles_label.text() and "L0, L2" in page.roles_label.text()
    # each layer greys what its own mask hides: the model's masks, layer by layer
    for layer in range(3):
        want = tab.session.model.attention_mask(T, layer=layer).numpy()
        np.testing.assert_array_equal(grid.mask_of(layer), want)
    assert "masked" in readout_text(grid, 0, 1, 9, 2) and "masked" not in readout_text(grid, 1, 1, 9, 2)
    assert "[local: sliding window of 4 keys]" in readout_text(grid, 2, 0, 9, 8)
    # what the window hides is painted grey in a local layer's cells, seen in a global layer's
    hidden = grid.painter._hidden_canvas(grid.geom, grid.row_masks, grid.block)
    for layer, seen in ((0, False), (1, True), (2, False)):
        x, y = grid.geom.origin(layer, 1)
        assert hidden[y + 9, x + 2] != seen  # query 9, key 2: 7 back, outside a window of 4
    # a dense model without windows: plain names, one mask
    dense = open_tab(DENSE).pages["heads"].mosaic
    assert dense.row_labels == ["L0", "L1"] and dense.row_masks is None


# ---- the router's load on the Train tab --------------------------------------------------------
@pytest.mark.parametrize("tiny_config", [MOE.replace(context_length=32)])
def test_the_train_tab_shows_the_router_load_of_each_step(qtbot, tiny_window, tiny_config):
    win, s = tiny_window, tiny_window.session
    tab = win.tabs["train"]
    load = tab.router_load
    assert tab.router_load_shown and tab.bottom_tabs.currentWidget() is load
    assert load.moe_layers == [1, 2] and load.n_experts == 4 and load.load is None
    seen = []
    s.eventsAppended.connect(lambda events: seen.append((events[-1]["step"], load.step)))
    with qtbot.waitSignal(s.trainingFinished, timeout=60_000):
        tab.start_button.click()
    # every drain drew its newest event's load
    assert seen and all(event_step == drawn for event_step, drawn in seen)
    last = s.history[-1]
    assert load.step == last["step"] == 6 and len(last["router_load"]) == 2
    np.testing.assert_allclose(load.load, last["router_load"])
    heights = load.bars.opts["height"]
    np.testing.assert_allclose(np.asarray(heights).reshape(2, 4), last["router_load"])
    assert load.ideal.isVisible() and load.ideal.value() == pytest.approx(0.25)
    assert [t.textItem.toPlainText() for t in load.layer_names] == ["L1", "L2"]
    assert "step 6" in load.readout.text() and "balanced 25%" in load.readout.text()
    assert "router-load" in tab.export_targets()
    win.resize(1280, 750)
    qtbot.waitUntil(lambda: load.view.isVisible(), timeout=5000)
    load.grab()  # lays out what is pending: no tick or name cut or on another
    assert text_problems(load) == []
    # the probe grid marks the local layers and greys their windows too
    grid = tab.live.head_grid
    assert grid.row_labels == ["0 local", "1", "2 local"]
    T = grid.weights.shape[-1]
    for layer in range(3):
        np.testing.assert_array_equal(grid.mask_of(layer), s.model.attention_mask(T, layer=layer).numpy())
    # a dense model: no router load
    win.config_panel.set_config(GPTConfig(context_length=32, n_layers=2, d_model=16, n_heads=2))
    s.build_model()
    assert not tab.router_load_shown and not load.is_moe and "router-load" not in tab.export_targets()
    assert tab.bottom_tabs.currentIndex() == 0


def test_a_dense_run_never_shows_the_router_load(qtbot, tiny_window):
    win, s = tiny_window, tiny_window.session
    tab = win.tabs["train"]
    assert not tab.router_load_shown
    with qtbot.waitSignal(s.trainingFinished, timeout=60_000):
        tab.start_button.click()
    assert "router_load" not in s.history[-1]
    assert not tab.router_load_shown and tab.router_load.load is None
    assert tab.live.head_grid.row_labels == ["0", "1"]


# ---- at 1280 × 750 beside the docks ------------------------------------------------------------
@pytest.mark.parametrize("key", ["experts", "metrics", "heads"])
def test_todays_pages_have_nothing_cut_at_1280(qtbot, window_of_one_tab, key):
    win, tab, scroll = window_of_one_tab("attention", "app.views.attention.tab:AttentionTab", (1280, 750))
    s = win.session
    s.set_device("cpu")
    s.set_source("builtin:primer")
    s.set_config(MOE)
    s.build_model(seed=0)
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.set_prompt(PROMPT)
    page = tab.show_page(key)
    assert tab.wait_ready(timeout=30)
    qtbot.waitUntil(lambda: not page.stale, timeout=TIMEOUT)
    page.grab()  # lays out what is pending
    assert text_problems(page) == []
    assert scroll.horizontalScrollBar().maximum() == 0
    if key == "metrics":  # the learned sink's column too: every column whole, none off to the side
        table, header = page.table, page.table.horizontalHeader()
        assert not table.isColumnHidden(table.columnCount() - 1)
        for c in range(table.columnCount()):
            text = table.horizontalHeaderItem(c).text()
            assert header.sectionSize(c) >= header.fontMetrics().horizontalAdvance(text), text
        assert table.horizontalScrollBar().maximum() == 0
