"""The Attention tab's Q–K map page on the starter model: the chosen head's queries and keys over a
corpus drawn as points with the correlation of distance with q·k beside them, the typed prompt's
queries and keys placed into the map (again for a new prompt, the map kept), every head's thumbnail,
a click on one mapping that head, and a corpus the tokenizer cannot read said in one line."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from PySide6.QtCore import QPointF

TIMEOUT = 60_000
PROMPT = "vsqyrnmezgcovsqyrnmezgco"  # the starter's own probe prompt (24 tokens)


@pytest.fixture
def page(window_of_one_tab, qtbot, shipped_starter):
    win, tab, _ = window_of_one_tab("attention", "app.views.attention.tab:AttentionTab", (1280, 750))
    assert win.session.open_starter()
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.set_prompt(PROMPT)
    page = tab.show_page("qkmap")
    page.prompts_spin.setValue(8)
    page.tokens_spin.setValue(16)
    page.corpus_box.setCurrentText("task:induction")
    return tab, page


def _drawn(qtbot, tab, page, layer, head, n_prompt):
    def done():
        m = page._map
        return m is not None and (m.layer, m.head) == (layer, head) and len(page.prompt_q.data) == n_prompt

    qtbot.waitUntil(done, timeout=TIMEOUT)
    return page._map


def test_the_page_draws_the_heads_map_and_places_the_typed_prompt(qtbot, page):
    tab, page = page
    page.layer_spin.setValue(1)
    page.head_spin.setValue(3)
    qmap = _drawn(qtbot, tab, page, 1, 3, 24)
    assert len(page.points_item.data) == 2 * 8 * 16  # every sampled token's query and key
    np.testing.assert_allclose(page.points_item.getData()[0], qmap.points[:, 0])
    assert f"{qmap.corr_full:+.3f}".replace("-", "−") in page.corr_label.text()
    assert "Distance vs dot product" in page.corr_label.text()
    # the prompt's 24 queries and 24 keys, where the model puts them in this map
    from model.interp.analysis.qk_map import project_prompt

    session = tab.session
    want = project_prompt(session.model, session.tokenizer, qmap, list(tab.state.inspection.ids))
    got = np.c_[page.prompt_q.getData()]
    np.testing.assert_allclose(got, want.points[want.is_query], atol=1e-5)
    assert [item.toPlainText() for item in page.labels[:3]] == list(PROMPT[:3])
    # hovering names a point's token in its window's text
    assert page.describe_point(0).startswith(f"query of “{qmap.token[0]}” at position")

    # a new prompt places its own points; the map of the corpus is not made again
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.set_prompt("abcab")
    qtbot.waitUntil(lambda: len(page.prompt_q.data) == 5, timeout=TIMEOUT)
    assert page._map is qmap


def test_every_head_has_a_thumbnail_and_a_click_maps_it(qtbot, page):
    tab, page = page
    qtbot.waitUntil(lambda: page._thumbs is not None and page._map is not None, timeout=TIMEOUT)
    th = page._thumbs
    assert th.points.shape[:2] == (2, 4)  # 2 layers × 4 heads
    assert len(page.thumb_q.data) == len(page.thumb_k.data) == 2 * 4 * th.n_points
    vb = page.thumbs_view.getPlotItem().vb
    click = SimpleNamespace(scenePos=lambda: vb.mapViewToScene(QPointF(2.5, 1.5)))  # the cell of L1H2
    page._thumb_clicked(click)
    qmap = _drawn(qtbot, tab, page, 1, 2, 24)
    assert (qmap.layer, qmap.head) == (1, 2) and page.thumb_frame.rect().topLeft() == QPointF(2, 1)
    # more windows for the map: the thumbnails (a few windows, always) are not made again
    page.prompts_spin.setValue(9)
    qtbot.waitUntil(
        lambda: page._map is not None and int(page._map.is_query.sum()) == 9 * 16, timeout=TIMEOUT
    )
    assert page._thumbs is th


def test_a_corpus_the_tokenizer_cannot_read_is_one_line_on_the_page(qtbot, page):
    tab, page = page
    page.corpus_box.setCurrentText("builtin:primer")
    qtbot.waitUntil(lambda: "No map:" in page.corr_label.text(), timeout=TIMEOUT)
    assert "not in the tokenizer's vocabulary" in page.corr_label.text()
    assert tab.wait_ready(timeout=30)  # the wait for the page ends: the failure is not asked for again


def test_the_map_runs_in_the_background_and_cancel_stops_it(qtbot, page):
    from app.views.attention.job_keys import QK_MAP_JOB

    tab, page = page
    board = tab.session.jobs
    page.prompts_spin.setValue(64)
    page.tokens_spin.setValue(32)
    page.method_box.setCurrentIndex(page.method_box.findData("tsne"))  # 4,000 points: seconds of t-SNE
    qtbot.waitUntil(lambda: board.get(QK_MAP_JOB) is not None, timeout=TIMEOUT)
    job = board.get(QK_MAP_JOB)
    qtbot.waitUntil(lambda: job.state == "running" and page.job_bar.job() is job, timeout=TIMEOUT)
    assert job.title == "Mapping the queries and keys of L0H0 (TSNE)"  # the page's busy line says it
    page.job_bar.cancel_button.click()
    qtbot.waitUntil(lambda: job.state == "cancelled", timeout=TIMEOUT)
    qtbot.waitUntil(lambda: tab.session.compute.idle, timeout=TIMEOUT)
    assert tab.state.qk_map_for(page.map_key()) is None  # nothing of the cancelled run was delivered
    assert tab.wait_ready(timeout=30) and board.get(QK_MAP_JOB) is job  # and it is not asked for again
