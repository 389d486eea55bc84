"""The Attention tab on a tiny model: typing, hovering, clicking, ablating and exporting.

Every number the tab shows is checked against the model itself (``GPT.trace``), not against the
tab's own arithmetic.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from model.interp.trace import run_with_trace
from model.text.tokens import visible

TIMEOUT = 30_000  # ms: the machine's two cores are shared with other test runs


@pytest.fixture
def session(attention_session):
    return attention_session


@pytest.fixture
def tab(attention_tab):
    return attention_tab


def _trace(session, text, **kw):
    ids = session.tokenizer.encode(text)
    with torch.no_grad():
        return ids, run_with_trace(session.model, torch.tensor([ids]), **kw)


def _type(qtbot, tab, text):
    """Replace the prompt by typing ``text``; returns the inspection of exactly that text."""
    tab.prompt_edit.clear()
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT, check_params_cb=lambda r: r.prompt == text) as blk:
        qtbot.keyClicks(tab.prompt_edit, text)
    return blk.args[0]


def test_typing_a_prompt_updates_the_grid(qtbot, tab, session):
    insp = _type(qtbot, tab, "a cat sat")
    grid = tab.pages["heads"].mosaic
    _, trace = _trace(session, "a cat sat", kinds=("pattern",))
    want = trace.stack("pattern")
    assert grid.weights.shape == (2, 2, 9, 9) == want.shape
    np.testing.assert_allclose(grid.weights, want, atol=1e-6)
    assert grid.tokens == ["a", "␣", "c", "a", "t", "␣", "s", "a", "t"] == insp.labels
    # what the image holds: cell (1, 0) shows layer 1 head 0 where the causal mask lets it see
    canvas = grid.canvas  # the values drawn (the image holds their colour-table entries)
    r = grid.cell_rect(1, 0)
    cell = canvas[int(r.y()) : int(r.y()) + 9, int(r.x()) : int(r.x()) + 9]
    lower = np.tril(np.ones((9, 9), bool))
    np.testing.assert_allclose(cell[lower], want[1, 0][lower], atol=1e-6)
    assert not np.allclose(cell[~lower], want[1, 0][~lower])  # masked cells drawn as "hidden", not 0
    assert "9 tokens" in tab.status_label.text()


def test_a_newer_prompt_supersedes_an_older_one(qtbot, tab):
    seen = []
    tab.inspected.connect(lambda r: seen.append(r.prompt))
    tab.set_prompt("ab", run=False)
    tab.run_inspection()
    tab.set_prompt("abc", run=False)
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT, check_params_cb=lambda r: r.prompt == "abc"):
        tab.run_inspection()
    qtbot.waitUntil(lambda: tab.session.compute.idle, timeout=TIMEOUT)
    assert seen == ["abc"]
    assert tab.inspection.T == 3


def test_a_prompt_the_vocabulary_lacks_is_explained_not_run(qtbot, tab):
    before = tab.inspection
    with qtbot.waitSignal(tab.failed, timeout=TIMEOUT) as blk:
        tab.set_prompt("héllo €")
    assert "€" in blk.args[0] or "é" in blk.args[0]
    assert tab.inspection is before
    assert "b00020" in tab.status_label.styleSheet()  # shown as an error


def test_opening_a_model_that_cannot_read_the_prompt_runs_one_it_can(qtbot, tab, session, shipped_starter):
    """The starter's 26 letters cannot encode "The head looks back.": the tab must not keep it (and
    show only an error) but run a prompt the new model reads (was: the old model's probe prompt,
    the new one not adopted yet when the tab heard of the model)."""
    session.probe.set("The head looks back.")  # the live-attention prompt too: the starter cannot read it
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT) as blk:
        assert session.open_starter()
    with pytest.raises(ValueError):
        session.tokenizer.encode("The head looks back.")
    assert blk.args[0].prompt == tab.prompt() != "The head looks back."
    assert session.tokenizer.encode(tab.prompt())  # readable by the model now open
    assert "vocabulary" not in tab.status_label.text() and "b00020" not in tab.status_label.styleSheet()


def test_hovering_the_grid_and_the_head_reports_the_right_cell(qtbot, tab, session):
    insp = _type(qtbot, tab, "the tree")
    grid = tab.pages["heads"].mosaic
    with qtbot.waitSignal(grid.cellHovered, timeout=TIMEOUT) as blk:
        qtbot.mouseMove(grid.view.viewport(), grid.widget_pos_of(1, 1, 5, 2))
    assert tuple(blk.args) == (1, 1, 5, 2)
    w = float(insp.weights[1, 1, 5, 2])
    text = grid.readout.text()
    assert text.startswith("layer 1, head 1") and text.endswith(f": query 5 'r' → key 2 'e': weight {w:.3f}")

    with qtbot.waitSignal(tab.headDetailReady, timeout=TIMEOUT):
        tab.open_head(0, 1)
    heat = tab.pages["head"].heatmap
    with qtbot.waitSignal(heat.hovered, timeout=TIMEOUT) as blk:
        qtbot.mouseMove(heat.view.viewport(), heat.widget_pos_of(6, 3))
    assert tuple(blk.args) == (6, 3)
    _, trace = _trace(session, "the tree", kinds=("q", "k", "pattern", "scores"))
    q, k = trace["q", 0][0, 1].numpy(), trace["k", 0][0, 1].numpy()
    raw = float(q[6] @ k[3])  # Q Kᵀ, computed here from the model's own queries and keys
    scaled = float(trace["scores", 0][0, 1, 6, 3])
    weight = float(trace["pattern", 0][0, 1, 6, 3])
    text = heat.readout.text()
    assert text.startswith("query 6 'e' → key 3 '␣': weight ")
    assert f"weight {weight:.4f}" in text
    assert f"raw score QKᵀ {raw:.4g}" in text and f"scaled score {scaled:.4g}" in text
    # a key above the diagonal is masked
    heat.hover_at(2, 5)
    assert "masked" in heat.readout.text()


def test_clicking_a_head_in_the_grid_opens_it(qtbot, tab):
    insp = tab.inspection
    grid = tab.pages["heads"].mosaic
    with qtbot.waitSignal(grid.headClicked, timeout=TIMEOUT) as blk:
        qtbot.mouseClick(grid.view.viewport(), Qt.MouseButton.LeftButton, pos=grid.widget_pos_of(1, 0))
    assert tuple(blk.args) == (1, 0)
    assert tab.current_page is tab.pages["head"]
    assert tab.selected == (1, 0)
    shown = tab.pages["head"].heatmap.matrix
    lower = insp.mask
    np.testing.assert_array_equal(shown[lower], insp.weights[1, 0][lower])
    assert np.isnan(shown[~lower]).all()
    assert "layer 1, head 0" in tab.pages["head"].heatmap.panel.plot.titleLabel.text


def test_pipeline_shows_every_stage_of_the_selected_head(qtbot, tab, session):
    insp = tab.inspection
    with qtbot.waitSignal(tab.headDetailReady, timeout=TIMEOUT):
        tab.select_head(1, 1)
        tab.show_page("pipeline")
    page = tab.pages["pipeline"]
    T, d_k = insp.T, session.model.config.d_head
    assert page.plots["q"].matrix.shape == (T, d_k)
    assert page.plots["scores_raw"].matrix.shape == (T, T)
    np.testing.assert_allclose(page.plots["pattern"].matrix, insp.weights[1, 1], atol=1e-6)
    assert np.isneginf(page.plots["scores_masked"].matrix[~insp.mask]).all()
    title = page.title_of("scores_raw")
    assert f"[{T}, {T}] = [{T}, {d_k}] · [{d_k}, {T}]" in title


def test_ablating_a_head_changes_the_logits_and_restore_brings_them_back_exactly(qtbot, tab, session):
    before = tab.inspection.logits.copy()
    page = tab.show_page("ablation")
    with (
        qtbot.waitSignal(tab.ablationReady, timeout=TIMEOUT) as abl,
        qtbot.waitSignal(tab.inspected, timeout=TIMEOUT),
    ):
        page.picker.button(0, 1).click()
    assert tab.ablation == {(0, 1): "zero"}
    after = tab.inspection.logits
    assert np.abs(after - before).max() > 1e-4
    ids = tab.inspection.ids
    from model.nn.hooks import ablate_heads

    with torch.no_grad(), session.model.hooks(ablate_heads({(0, 1): "zero"})):
        fast, _ = session.model(torch.tensor([ids]))
    np.testing.assert_allclose(after, fast[0].numpy(), atol=1e-4)
    res = abl.args[0]
    assert res.effect.logits_max_abs_diff > 0 and res.effect.kl.shape == (len(ids),)
    assert res.loss is not None and np.isfinite(res.loss.delta)
    assert tab.banner.isVisible()
    tab.show_page("heads")
    assert tab.pages["heads"].mosaic.marked == {(0, 1)}  # drawn with a red frame

    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.banner_restore.click()
    assert tab.ablation == {} and not tab.banner.isVisible()
    assert np.array_equal(tab.inspection.logits, before)
    assert page.picker.selected() == []

    # the grid's right-click menu switches heads too, and the Ablation page follows
    actions = dict(tab.pages["heads"].head_menu_actions(1, 0))
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        actions["Switch this head off (output → its mean)"]()
    assert tab.ablation == {(1, 0): "mean"} and page.picker.selected() == [(1, 0)]
    assert page.mode == "mean"


def test_next_token_panel_ranks_what_the_model_predicts(qtbot, tab, session):
    """The ranking is a job of the page's own, run when it is shown (the grid never waits for it)."""
    assert tab.state.next_tokens_for_current() is None
    with qtbot.waitSignal(tab.nextTokensReady, timeout=TIMEOUT):
        page = tab.show_page("next")
    insp = tab.inspection
    assert page.table.rowCount() == insp.T
    _, trace = _trace(session, insp.prompt, kinds=("pattern",))
    top = trace.logits[0].argmax(-1).numpy()
    for t in (0, insp.T - 1):
        first = page.table.item(t, 6).text()
        assert first.split()[0] == visible(session.tokenizer.token_strings([int(top[t])])[0])


def test_exports_write_readable_files_with_the_right_shapes(qtbot, tab, session, tmp_path):
    from model.interp.export import load_inspection, read_head_csv

    insp = tab.inspection
    L, H, T = insp.n_layers, insp.n_heads, insp.T
    for key in ("heads", "head", "lines"):
        tab.show_page(key)
        tab.wait_ready()
        png = tab.export_view(tmp_path / f"{key}.png")
        img = QImage(png[0])
        assert not img.isNull() and img.width() > 100
        for svg in tab.export_view(tmp_path / f"{key}.svg"):
            assert ET.parse(svg).getroot().tag.endswith("svg")

    # File → Export current view goes through the window's shared writer
    from app.shell.window import export_widget_targets

    for svg in export_widget_targets(tab, str(tmp_path / "menu.svg")):
        assert ET.parse(svg).getroot().tag.endswith("svg")

    with qtbot.waitSignal(tab.exported, timeout=TIMEOUT) as blk:
        assert tab.export_npz(tmp_path / "prompt.npz")
    arrays = load_inspection(blk.args[0])
    assert arrays["weights"].shape == (L, H, T, T)
    assert arrays["scores_raw"].shape == arrays["scores_scaled"].shape == (L, H, T, T)
    assert arrays["logits"].shape == (T, session.model.config.core.vocab_size)
    assert arrays["mask"].shape == (T, T) and list(arrays["tokens"]) == insp.texts
    np.testing.assert_allclose(arrays["weights"], insp.weights, atol=1e-6)

    tab.select_head(1, 0)
    path = tab.export_head_csv(tmp_path / "head.csv")
    rows, cols, m = read_head_csv(path)
    assert m.shape == (T, T)
    assert rows == cols == [f"{i}:{lab}" for i, lab in enumerate(insp.labels)]
    np.testing.assert_allclose(m, insp.weights[1, 0], rtol=1e-6, atol=1e-9)


def test_no_model_explains_and_builds_the_default_one(qtbot, make_attention_session):
    from app.views.attention.tab import AttentionTab
    from model.config import default_config

    s = make_attention_session(default_config())
    try:
        t = AttentionTab(s)
        qtbot.addWidget(t)
        t.show()
        assert t.stack.currentWidget() is t.empty
        with qtbot.waitSignal(t.inspected, timeout=TIMEOUT):
            t.build_button.click()
        assert s.model is not None and t.stack.currentWidget() is t.page_tabs
        cfg = default_config()
        assert (t.inspection.n_layers, t.inspection.n_heads) == (cfg.core.n_layers, cfg.attention.n_heads)
    finally:
        s.shutdown(timeout=30)


def test_a_long_prompt_is_pooled_in_the_overview_but_exact_everywhere_else(qtbot, make_attention_session):
    from app.views.attention.tab import AttentionTab
    from model.config import GPTConfig
    from model.interp.pooling import MAX_CELL

    assert 300 > MAX_CELL  # a head of 300 tokens does not fit a cell: the overview pools it
    s = make_attention_session(GPTConfig(context_length=300, n_layers=1, d_model=16, n_heads=2))
    s.build_model(seed=0)
    try:
        t = AttentionTab(s)
        qtbot.addWidget(t)
        t.resize(900, 700)
        text = ("the fox and the hen. " * 20)[:300]
        with qtbot.waitSignal(t.inspected, timeout=TIMEOUT):
            t.set_prompt(text, run=False)
            t.show()
        insp = t.inspection
        assert insp.T == 300 and insp.block == 2 and insp.overview.shape == (1, 2, 150, 150)
        assert np.array_equal(insp.overview[0, 1, 10, 7], insp.weights[0, 1, 20:22, 14:16].max())
        grid = t.pages["heads"].mosaic
        grid.hover_at(*grid.locate(*_view_xy(grid, 0, 1, 201, 150)))
        w = float(insp.weights[0, 1, 201, 150])
        want = f"query 201 '{insp.labels[201]}' → key 150 '{insp.labels[150]}': weight {w:.3f}"
        assert want in grid.readout.text()
        t.open_head(0, 1)
        assert t.pages["head"].heatmap.matrix.shape == (300, 300)
    finally:
        s.shutdown(timeout=30)


def _view_xy(grid, r, c, q, k):
    p = grid.vb.mapSceneToView(grid.scene_pos_of(r, c, q, k))
    return p.x(), p.y()


def test_metrics_table_sorts_by_number_and_thresholds_rename_heads(qtbot, tab):
    from app.views.attention.metrics_page import COLUMNS

    page = tab.show_page("metrics")
    qtbot.waitUntil(
        lambda: tab.metrics is not None and tab.state.metrics_request == tab.state.request, timeout=TIMEOUT
    )
    page.refresh()
    m = tab.metrics.metrics
    L, H = m.shape
    assert page.table.rowCount() == L * H
    col = [c[1] for c in COLUMNS].index("prev_token")
    page.table.sortItems(col, Qt.SortOrder.DescendingOrder)
    shown = [page.table.item(r, col).data(Qt.ItemDataRole.DisplayRole) for r in range(L * H)]
    assert shown == sorted(shown, reverse=True)
    assert shown[0] == pytest.approx(float(m.prev_token.max()), abs=1e-3)
    # an untrained model spreads its attention: every head is "broad" at the default 0.9, ranked ...
    spread = m.entropy_norm
    assert all(lab.name == "broad" for row in tab.classification.labels for lab in row)
    role = [c[1] for c in COLUMNS].index("role")
    page.table.sortItems(role, Qt.SortOrder.AscendingOrder)  # by name, then rank as a number
    assert [page.table.item(r, role).text() for r in range(3)] == ["broad #1", "broad #2", "broad #3"]
    first = (page.table.item(0, 0).data(Qt.ItemDataRole.DisplayRole), page.table.item(0, 1).data(0))
    most_even = np.unravel_index(np.argmax(spread), spread.shape)
    assert first == tuple(int(i) for i in most_even)  # #1: the most even head
    if L * H >= 10:
        assert page.table.item(9, role).text() == "broad #10"  # a number's order, not the text's
    induction = [c[1] for c in COLUMNS].index("induction")  # measured on its own sequence, and says so
    assert page.table.horizontalHeaderItem(induction).text() == "induction (random)"
    assert f"2 × {tab.metrics.period} random tokens" in page.table.horizontalHeaderItem(induction).toolTip()
    summary = tab.state.head_summary(0, 0)
    assert "on the prompt: spread" in summary and "random tokens" in summary
    # ... and a threshold above the least even head un-names exactly the heads below it
    cut = float(np.median(spread))
    page.spins["uniform"].setValue(round(cut, 2) + 0.005)
    labels = tab.classification.labels
    named = {(l, h) for l, row in enumerate(labels) for h, lab in enumerate(row) if lab.name}
    assert named == {(l, h) for l in range(L) for h in range(H) if spread[l, h] >= tab.thresholds.uniform}


def test_aggregates_token_focus_and_lines_draw_what_the_heads_hold(qtbot, tab):
    insp = tab.inspection
    w = insp.weights
    L, H, T, _ = w.shape
    with qtbot.waitSignal(tab.aggregatesReady, timeout=TIMEOUT):
        page = tab.show_page("aggregates")
    drawn = page.mosaic.weights  # mean over the heads of each layer, one cell per layer
    np.testing.assert_allclose(drawn[0], w.mean(1), atol=1e-6)
    page.set_mode("chosen")
    with qtbot.waitSignal(tab.aggregatesReady, timeout=TIMEOUT):
        page.picker.set_selected([(0, 1), (1, 0)])
    want = (w[0, 1] + w[1, 0]) / 2
    np.testing.assert_allclose(page.heatmap.matrix[insp.mask], want[insp.mask], atol=1e-6)

    focus = tab.show_page("focus")
    focus.set_token(3)
    np.testing.assert_array_equal(focus.heat_out.matrix, w[:, :, 3, :].reshape(L * H, T))
    np.testing.assert_array_equal(focus.heat_in.matrix, w[:, :, :, 3].reshape(L * H, T))

    lines = tab.show_page("lines")
    tab.select_head(1, 1)
    assert lines.lines.n_lines == int((w[1, 1] >= lines.min_spin.value()).sum())
    lines.picker.set_selected([(0, 0), (1, 1)])
    avg = (w[0, 0] + w[1, 1]) / 2
    assert lines.avg_radio.isChecked()
    np.testing.assert_allclose(lines.lines.weights, avg, atol=1e-6)


def test_pages_follow_the_state_whoever_changes_it(qtbot, tab):
    st = tab.state
    insp = st.inspection
    head = tab.show_page("head")
    assert not tab.pages["focus"].built
    with qtbot.waitSignal(tab.headDetailReady, timeout=TIMEOUT):
        assert st.select(1, 0)  # the state itself, not the tab: the page in view redraws, the tab computes
    assert head.selector.head() == (1, 0) and not head.stale
    assert "layer 1, head 0" in head.heatmap.panel.plot.titleLabel.text
    np.testing.assert_array_equal(head.heatmap.matrix[insp.mask], insp.weights[1, 0][insp.mask])
    assert tab.pages["focus"].stale and not tab.pages["focus"].built  # never shown: only marked

    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        st.set_ablation({(1, 1): "mean"})
    assert tab.banner.isVisible() and "L1H1" in tab.banner_label.text()
    assert tab.inspection.ablate == {(1, 1): "mean"}
    page = tab.show_page("ablation")
    assert page.picker.selected() == [(1, 1)] and page.mode == "mean"
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        st.set_ablation({})
    assert not tab.banner.isVisible() and page.picker.selected() == []


def test_a_page_draws_from_a_state_alone_and_asks_the_state_for_changes(qtbot, session):
    from app.views.attention.grid_page import GridPage
    from app.views.attention.lines_page import LinesPage
    from app.views.attention.state import AttentionState
    from app.views.page import Page
    from model.interp.inspection import inspect_prompt
    from model.interp.plan import plan_prompt

    state = AttentionState()
    lines = LinesPage(state)
    qtbot.addWidget(lines)
    assert isinstance(lines, Page)
    plan = plan_prompt(session.model.config, session.tokenizer, "a cat sat")
    state.set_inspection(inspect_prompt(session.model, session.tokenizer, plan), 1)
    assert lines.stale and not lines.built  # nothing is built before the page is needed
    lines.ensure_built()
    lines.show()
    lines.refresh()
    w = state.inspection.weights
    np.testing.assert_allclose(lines.lines.weights, w[0, 0], atol=1e-6)
    state.select(1, 1)  # in view: redrawn at once
    np.testing.assert_allclose(lines.lines.weights, w[1, 1], atol=1e-6)
    assert lines.caption.text().startswith("layer 1, head 1:")
    lines.selector.set_head(0, 1)
    lines.selector.next_button.click()  # the page's own control changes the state
    assert state.selected == (1, 0)

    grid = GridPage(state)
    qtbot.addWidget(grid)
    grid.ensure_built()
    opened = []
    grid.openHeadRequested.connect(lambda l, h: opened.append((l, h)))
    actions = dict(grid.head_menu_actions(1, 0))
    actions["Open layer 1, head 0"]()
    actions["Switch this head off (output × 0)"]()
    assert opened == [(1, 0)] and state.ablation == {(1, 0): "zero"}
    dict(grid.head_menu_actions(1, 0))["Switch every head back on"]()
    assert state.ablation == {}


def test_token_texts_that_look_like_tags_stay_text(qtbot):
    """A token such as Llama's <s> is text, not markup: the labels that say which token the pointer is
    over are plain text (rich text would drop <s> and strike the rest through)."""
    from app.widgets.head_grid import HeadMosaic
    from app.widgets.matrix_plot import MatrixPlot

    for widget in (HeadMosaic(), MatrixPlot()):
        qtbot.addWidget(widget)
        widget.readout.setText("query 0 '<s>' → key 0 '<s>'")
        assert widget.readout.textFormat() == Qt.TextFormat.PlainText


def test_attribution_colours_parts_that_push_the_token_up_blue(tab):
    """The heads' map, the bars and the text agree: blue up, red down."""
    from app.widgets.palette import matrix_lut

    page = tab.show_page("attribution")
    page.ensure_built()
    lut = matrix_lut(page.heads_plot.panel.cmap_name)
    top, bottom = lut[253], lut[0]  # the largest positive part, the largest negative one
    assert top[2] > top[0] and bottom[0] > bottom[2]
    assert "Blue parts push the token up" in page.blurb
