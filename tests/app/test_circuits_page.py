"""The Attention tab's Circuits page: the starter model's induction circuit in the head graph, a head's
circuits, path patching of an edge, every export; a RoPE model's offset; a model the circuits refuse."""

from __future__ import annotations

import math

import numpy as np
import pytest

from model.config import GPTConfig

TIMEOUT = 60_000
PROMPT = "vsqyrnmezgcovsqyrnmezgco"  # the starter's own probe prompt


@pytest.fixture
def starter_tab(window_of_one_tab, qtbot, shipped_starter):
    """(window, tab): the Attention tab on the shipped starter model in a 1280×750 window."""
    win, tab, _ = window_of_one_tab("attention", "app.views.attention.tab:AttentionTab", (1280, 750))
    assert win.session.open_starter()
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.set_prompt(PROMPT)
    return win, tab


def _circuits(qtbot, tab):
    page = tab.show_page("circuits")
    assert tab.wait_ready(timeout=60)
    qtbot.waitUntil(lambda: not page.stale, timeout=TIMEOUT)
    return page


def test_the_graph_draws_the_starters_induction_circuit_and_a_click_selects_a_head(qtbot, starter_tab):
    _, tab = starter_tab
    page = _circuits(qtbot, tab)
    comp = page.circuits.composition
    assert page.threshold.value() == pytest.approx(math.ceil(2 * comp.baseline * 1000) / 1000)
    edges = {(k, w, r) for k, w, r, _s in page.edges()}
    assert ("K", (0, 1), (1, 3)) in edges and ("K", (0, 3), (1, 3)) in edges
    assert all(s >= page.threshold.value() for *_x, s in page.graph.edges)
    assert "chance 0.088" in page.chance_label.text()
    # named heads are labelled in the graph, and its legend says what they are
    assert {item.textItem.toPlainText() for item in page.graph.names} >= {"prev", "ind"}
    assert "induction" in page.legend.text() and "fold_ln" in page.legend.text()

    graph = page.graph
    item = graph.item_at(graph.scene_pos_of_head(1, 3))
    assert item == ("head", (1, 3))
    graph.click(item)
    assert tab.state.selected == (1, 3) and page.tabs.currentIndex() == 0
    qtbot.waitUntil(lambda: page._detail() is not None and not page.stale, timeout=TIMEOUT)
    text = page.head_summary.text()
    assert "L1H3" in text and "induction" in text and "copying" in text and "rank 32 of 32" in text
    assert page.reads.item(0, 0).text() == "L0H1" and page.reads.item(0, 1).text() == "K"
    assert page.reads.item(0, 2).text() == "0.264" and page.reads.item(0, 3).text() == "3.0×"
    assert "raises" in page.promoted.text() and "σ" in page.promoted.text()

    # its inputs and outputs are drawn strong, the others faded
    def drawn(curve) -> int:
        x = curve.getData()[0]
        return 0 if x is None else len(x)

    strong = {key for key, curve in graph.curves.items() if key[2] and drawn(curve)}
    faded = {key for key, curve in graph.curves.items() if not key[2] and drawn(curve)}
    assert strong and faded  # L1H3's inputs strong; the other heads' faded
    # a double click opens it on the Head page
    graph.click(("head", (0, 1)), double=True)
    assert tab.current_page is tab.pages["head"] and tab.state.selected == (0, 1)


def test_clicking_an_edge_path_patches_it_and_every_number_exports(qtbot, starter_tab, tmp_path):
    _, tab = starter_tab
    page = _circuits(qtbot, tab)
    graph = page.graph
    i = next(n for n, e in enumerate(graph.edges) if e[:3] == ("K", (0, 1), (1, 3)))
    assert graph.item_at(graph.scene_pos_of_edge(i))[0] == "edge"  # an edge answers to the pointer
    graph.click(("edge", i))  # (the strongest edge: its path may already be measured)
    assert page.tabs.currentIndex() == 2
    assert tab.state.path_heads() == ((0, 1), (1, 3))
    qtbot.waitUntil(lambda: page.path_result() is not None, timeout=TIMEOUT)
    res = page.path_result()
    p = res.paths
    assert p.sender == (0, 1) and "induction corruption" in res.corruption
    assert p.restored(p.total) > 0.5  # the previous-token head carries most of the gap
    assert "L0H1" in page.path_summary.text() and "L1H3" in page.path_summary.text()
    assert page.sender_combo.currentText() == "L0H1" and page.receiver_combo.currentText() == "L1H3"
    lengths = page.bar_item.opts["x1"]  # q, k, v of the receiver, direct, total
    assert len(lengths) == 5 and lengths[-1] == pytest.approx(p.restored(p.total))
    assert page.path_map.matrix.shape == (3, 4)  # q, k, v of each head of layer 1
    # a cell of the map makes that head the receiver (no new run: the layer is measured)
    page._on_path_cell(1, 0)
    assert tab.state.path_heads() == ((0, 1), (1, 0)) and page.path_result() is res

    csvs = tab.export_numbers(tmp_path / "circuits.csv")
    assert sorted(p.rsplit("-", 1)[-1] for p in csvs) == ["K.csv", "Q.csv", "V.csv", "heads.csv", "path.csv"]
    (npz,) = tab.export_numbers(tmp_path / "circuits.npz")
    data = np.load(npz)
    assert data["composition"].shape == (3, 2, 4, 2, 4) and data["path_effects"].shape == (3, 2, 4)
    assert data["full_ov_circuit"].shape == (26, 26) and "notes" in data
    assert len(tab.export_view(tmp_path / "circuits.svg")) == 5
    assert tab.export_view(tmp_path / "circuits.png")


def test_a_rope_models_qk_circuits_follow_the_offset(qtbot, make_attention_session):
    from app.views.attention.tab import AttentionTab

    s = make_attention_session(
        GPTConfig(context_length=48, n_layers=2, d_model=32, n_heads=4, n_kv_heads=2, positions="rope")
    )
    s.build_model(seed=1)
    tab = AttentionTab(s)
    qtbot.addWidget(tab)
    tab.resize(1100, 760)
    try:
        with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
            tab.set_prompt("The head looks back.", run=False)
            tab.show()
        page = _circuits(qtbot, tab)
        assert page.offset.isVisibleTo(page) and page.circuits.rope_offset == 0
        with qtbot.waitSignal(
            tab.circuitsReady, timeout=TIMEOUT, check_params_cb=lambda k, _r: k == "circuits"
        ):
            page.offset.setValue(3)
            page.offset.editingFinished.emit()
        qtbot.waitUntil(lambda: page.circuits is not None and page.circuits.rope_offset == 3, timeout=TIMEOUT)
        assert any("RoPE" in note for note in page.circuits.notes)
    finally:
        tab.shutdown()
        s.shutdown(timeout=30)


def test_a_post_ln_model_is_refused_in_one_line(qtbot, make_attention_session):
    from app.views.attention.tab import AttentionTab

    s = make_attention_session(
        GPTConfig(context_length=48, n_layers=2, d_model=32, n_heads=2, norm_position="post")
    )
    s.build_model(seed=1)
    tab = AttentionTab(s)
    qtbot.addWidget(tab)
    tab.resize(1100, 760)
    try:
        with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
            tab.set_prompt("The head looks back.", run=False)
            tab.show()
        page = _circuits(qtbot, tab)
        assert page.circuits is None and "Post-LN" in page.status.text()
        page.tabs.setCurrentIndex(2)  # a tab is drawn when it comes into view
        assert "Cannot path-patch" in page.path_summary.text() and "Post-LN" in page.path_summary.text()
        assert page.numbers() is None and page.graph.edges == []
    finally:
        tab.shutdown()
        s.shutdown(timeout=30)


def test_the_legend_and_the_footer_count_the_same_scores(qtbot, starter_tab):
    """One count said one way: the legend's "N drawn of the M composition scores ≥ t (of T)" and the
    footer's "T composition scores (…; M ≥ t)" are the page's own data (issue: '16 of the 16
    compositions' above a footer saying '48 composition scores')."""
    import re

    _, tab = starter_tab
    page = _circuits(qtbot, tab)
    comp = page.circuits.composition
    t = page.threshold.value()
    total = int(np.isfinite(comp.scores).sum())
    above = len(comp.strongest(minimum=t))
    drawn = len(page.edges())
    legend = re.search(
        r"([\d,]+) drawn of the ([\d,]+) composition scores ≥ ([\d.]+) \(of ([\d,]+)\)", page.legend.text()
    )
    footer = re.search(
        r"([\d,]+) composition scores \(Q, K and V .*; ([\d,]+) ≥ ([\d.]+)\)", page.status.text()
    )
    assert legend and footer, (page.legend.text(), page.status.text())
    number = lambda s: int(s.replace(",", ""))  # noqa: E731
    assert (number(legend[1]), number(legend[2]), number(legend[4])) == (drawn, above, total)
    assert (number(footer[1]), number(footer[2])) == (total, above)
    assert legend[3] == footer[3] == f"{t:.3f}"
    assert above < total  # the two numbers differ, so a page that said one for the other would fail
