"""The Attention tab's Heads-over-a-corpus page on the starter model over ``task:induction``: the run in
the compute worker, the heads × scores table with intervals (L1H3 on top by induction, as the issue
says), its sort and CSV export, a top example opening its prompt at its head, Cancel leaving the
previous result and the cache as they were, and a result of the previous model marked stale."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from PySide6.QtCore import QUrl

TIMEOUT = 60_000
PROMPT = "vsqyrnmezgcovsqyrnmezgco"  # the starter's own probe prompt


@pytest.fixture
def page(window_of_one_tab, qtbot, shipped_starter, tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))
    win, tab, _ = window_of_one_tab("attention", "app.views.attention.tab:AttentionTab", (1280, 750))
    assert win.session.open_starter()
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.set_prompt(PROMPT)
    page = tab.show_page("corpus")
    page.prompts_spin.setValue(64)
    page.tokens_spin.setValue(64)
    page.corpus_box.setCurrentText("task:induction")
    qtbot.waitUntil(lambda: page._result is not None and page._result_key == page.run_key(), timeout=TIMEOUT)
    return tab, page


def test_the_run_shows_every_heads_scores_with_intervals_and_l1h3_tops_induction(qtbot, page):
    from app.views.attention.job_keys import CORPUS_JOB

    tab, page = page
    res = page._result
    job = tab.session.jobs.get(CORPUS_JOB)
    assert job.state == "done" and "task:induction" in job.subject  # a job of the compute worker
    assert (res.settings.corpus, res.settings.n_prompts, res.settings.seq_len) == ("task:induction", 64, 64)
    assert page.table.table.rowCount() == 2 * 4
    page.table.sort_by("induction")
    assert page.table.head_at(0) == (1, 3)
    col = res.names.index("induction") + 1
    low, high = res.interval("induction")
    assert page.table.table.item(0, col).text() == f"{res.score('induction')[1, 3]:.2f}"
    text = f"{res.score('induction')[1, 3]:.2f} [{low[1, 3]:.2f}, {high[1, 3]:.2f}]"
    assert text in page.table.table.item(0, col).toolTip()  # the interval, as the card gives it
    # the map of the score chosen is the [L, H] means
    page.score_box.setCurrentText("prev_token")
    np.testing.assert_allclose(page.map_plot.matrix, res.score("prev_token"), rtol=1e-6)
    # a head's card: its scores with intervals, its cluster, its top examples with key and query marked
    tab.select_head(1, 3)
    cluster = res.clusters.names[int(res.clusters.labels[1, 3])]
    assert f"cluster <b>{cluster}</b>" in page.card.text() and text in page.card.text()
    assert page.examples_view.toHtml().count("example:attention:") == 5
    # every head in the plane of heads that behave alike, hover names it
    assert sum(len(item.data) for item in page.alike.items) == 8
    assert page.alike.describe(1, 3).startswith(f"<b>L1H3</b>: cluster {cluster}")
    # Help → What am I looking at? explains the scores and the interval
    from app.views.page import page_help

    assert "bootstrap over prompts" in page_help(page) and "standardised scores" in page_help(page)
    # the same inputs again: the result comes back at once, not run again
    page.prompts_spin.setValue(65)
    qtbot.waitUntil(lambda: page._result is not res and page._result_key == page.run_key(), timeout=TIMEOUT)
    page.prompts_spin.setValue(64)
    assert page._result is res and not page.job_bar.stale


def test_the_table_sorts_by_any_column_and_exports_csv(qtbot, page, tmp_path, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    _, page = page
    res = page._result
    for name in ("prev_token", "entropy", "sink"):
        page.table.sort_by(name, descending=False)
        order = [page.table.head_at(r) for r in range(8)]
        values = [res.score(name)[h] for h in order]
        assert values == sorted(values)  # by the number, not by its text
    path = tmp_path / "heads.csv"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(path), "CSV (*.csv)"))
    page.csv_button.click()
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    assert len(rows) == 8
    for row in rows:
        layer, head = int(row["layer"]), int(row["head"])
        assert float(row["induction"]) == pytest.approx(res.score("induction")[layer, head], rel=1e-5)
        assert float(row["induction_low"]) == pytest.approx(
            res.interval("induction")[0][layer, head], rel=1e-5
        )


def test_clicking_a_top_example_opens_its_prompt_at_its_head(qtbot, page):
    tab, page = page
    res = page._result
    tab.select_head(1, 3)
    ex = res.examples["attention"]
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        page.examples_view.anchorClicked.emit(QUrl("example:attention:0"))
    assert tab.current_page is tab.pages["head"] and tab.state.selected == (1, 3)
    ids = tab.session.tokenizer.encode(tab.prompt())
    assert len(ids) == 64
    c, q, k = ex.context, int(ex.query[1, 3, 0]), int(ex.key[1, 3, 0])
    for row, centre in ((0, k), (1, q)):  # the tokens kept around its key and query are the prompt's
        for offset, tid in enumerate(ex.tokens[1, 3, 0, row]):
            if tid >= 0:
                assert ids[centre - c + offset] == tid


def test_cancel_leaves_the_previous_result_and_the_cache_as_they_were(qtbot, page, tmp_path):
    from app.views.attention.job_keys import CORPUS_JOB

    tab, page = page
    res, old_key = page._result, page._result_key
    cached = sorted((tmp_path / "cache").rglob("*.npz"))
    assert len(cached) == 1
    page.prompts_spin.setValue(20_000)  # a minute or more of prompts
    board = tab.session.jobs
    qtbot.waitUntil(
        lambda: board.get(CORPUS_JOB) is not None and board.get(CORPUS_JOB).state == "running",
        timeout=TIMEOUT,
    )
    job = board.get(CORPUS_JOB)
    qtbot.waitUntil(lambda: page.job_bar.job() is job, timeout=TIMEOUT)
    assert page.job_bar.stale and "until the new run is done" in page.job_bar.stale_note
    page.job_bar.cancel_button.click()
    qtbot.waitUntil(lambda: job.state == "cancelled", timeout=TIMEOUT)
    qtbot.waitUntil(lambda: tab.session.compute.idle, timeout=TIMEOUT)
    assert tab.state.corpus_result_for(old_key) is res and page._result is res
    assert page.job_bar.stale and "Cancelled" in page.status_label.text()  # not shown as the new inputs'
    assert sorted((tmp_path / "cache").rglob("*.npz")) == cached
    assert tab.wait_ready(timeout=30) and board.get(CORPUS_JOB) is job  # and it is not asked for again


def test_a_result_of_the_previous_model_is_marked_stale(qtbot, page):
    tab, page = page
    res = page._result
    assert not page.job_bar.stale
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.session.build_model(seed=3)
    # the new model's run is on its way (its result cannot have been delivered yet): the old one is greyed
    assert page._result is res and page._result_key != page.run_key()
    assert page.job_bar.stale and "previous model" in page.job_bar.stale_note
    (veil,) = page.job_bar._veils  # greyed at once, the whole result under the veil
    assert page.job_bar.greyed and veil.target.isAncestorOf(page.table)
    assert page.split.count() == 2  # the veil is no pane of its own (a QSplitter makes one of every child)
    qtbot.waitUntil(lambda: tab.session.compute.idle, timeout=TIMEOUT)


def test_a_head_card_gives_its_layers_router_load_with_intervals_most_chosen_first():
    from types import SimpleNamespace

    from app.views.attention.corpus_heads_views import router_text

    load = np.array([[np.nan] * 3, [0.2, 0.5, 0.3]])  # a dense layer 0, then three experts
    res = SimpleNamespace(router_load=load, router_low=load - 0.05, router_high=load + 0.05)
    assert router_text(res, 0) == "" and router_text(SimpleNamespace(router_load=None), 1) == ""
    text = router_text(res, 1, most=2)
    assert text.index("e1 <b>50%</b> [45, 55]") < text.index("e2 <b>30%</b> [25, 35]") and "1 more" in text


def _placed(alike) -> dict[tuple[int, int], tuple[float, float]]:
    """Each head's place in the plane as drawn."""
    out = {}
    for item in alike.items:
        x, y = item.getData()
        for (layer, head), px, py in zip(item.data["data"], x, y, strict=True):
            out[(int(layer), int(head))] = (float(px), float(py))
    return out


def test_the_heads_alike_are_placed_by_their_scores_or_by_their_patterns_as_chosen(qtbot, page):
    tab, page = page
    res = page._result
    assert page.basis() == "scores"
    by_scores = _placed(page.alike)
    assert by_scores[(1, 3)] == pytest.approx(tuple(res.clusters.coords[1, 3]))
    with qtbot.waitSignal(page.alike.placed, timeout=TIMEOUT) as drawn:
        page.alike_box.setCurrentIndex(page.alike_box.findData("patterns"))
    assert drawn.args == ["patterns"] and tab.state.corpus_setup["alike"] == "patterns"
    by_patterns = _placed(page.alike)
    c = res.pattern_clusters
    for (layer, head), xy in by_patterns.items():
        assert xy == pytest.approx(tuple(c.coords[layer, head]))
    assert by_patterns != by_scores and len(by_patterns) == 8
    assert "MDS 1" in page.alike.view.getPlotItem().getAxis("bottom").labelText
    tab.select_head(1, 3)  # the card names the head's cluster by its patterns
    assert f"cluster <b>{c.names[int(c.labels[1, 3])]}</b>" in page.card.text()
    assert page.alike.describe(1, 3).startswith(f"<b>L1H3</b>: cluster {c.names[int(c.labels[1, 3])]}")
    # the choice stays with the page's inputs: a new run's result is placed by the patterns too
    with qtbot.waitSignal(page.alike.placed, timeout=TIMEOUT) as drawn:
        page.prompts_spin.setValue(40)
    assert drawn.args == ["patterns"] and page._result is not res
    assert _placed(page.alike)[(1, 3)] == pytest.approx(tuple(page._result.pattern_clusters.coords[1, 3]))


def test_at_1024_px_the_map_of_a_score_gives_its_pane_to_the_matrix(qtbot, page):
    """Beside the table (never narrower than its columns) and a dock, the map's pane is ~115 px wide:
    no title and no axis titles over the matrix (the chooser names the score, the ticks L0, H0 the axes),
    so the matrix has most of the pane's height; and a map too large for numbers in its cells (SmolLM2's
    30 × 9) drops its colour legend there, which took the whole width, and has it back when wide."""
    from PySide6.QtWidgets import QApplication

    tab, page = page
    win = tab.window()
    win.resize(1024, 718)
    qtbot.waitUntil(lambda: win.width() == 1024, timeout=5000)
    for _ in range(3):
        QApplication.processEvents()
    pane, vb = page.map_plot.view, page.map_plot.panel.vb
    qtbot.waitUntil(lambda: vb.height() > 0, timeout=5000)
    assert vb.height() >= 0.6 * pane.height(), (vb.height(), pane.height())  # it had a sixth of it
    assert vb.width() >= 0.4 * pane.width(), (vb.width(), pane.width())
    legend = page.map_plot.panel.legend
    page.map_plot.set_matrix(np.random.default_rng(0).random((30, 9)))  # no numbers in 30 × 9 cells
    for _ in range(3):
        QApplication.processEvents()
    assert not legend.isVisible() and vb.width() >= 0.4 * pane.width(), (vb.width(), pane.width())
    win.resize(1600, 900)
    qtbot.waitUntil(lambda: legend.isVisible() and page.map_plot.width() >= 200, timeout=5000)
