"""The Attention tab's Rollout page: attention rollout (Abnar & Zuidema 2020) on a page of its own, with
its caveat; the Aggregates page no longer offers it."""

from __future__ import annotations

import numpy as np
import torch

from model.interp.analysis.rollout import ROLLOUT_CAVEAT, attention_rollout
from model.interp.trace import run_with_trace
from tests.app.test_head_page_maps import assert_fills_its_plot

TIMEOUT = 30_000
PROMPT = "When Mary and Anne went out, Anne gave it to"


def test_rollout_page_draws_the_models_rollout_with_its_caveat(qtbot, attention_tab, tmp_path):
    tab = attention_tab
    titles = [tab.page_tabs.tabText(i) for i in range(tab.page_tabs.count())]
    assert "Rollout" in titles and titles.index("Rollout") == titles.index("Aggregates") + 1
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT, check_params_cb=lambda r: r.prompt == PROMPT):
        tab.set_prompt(PROMPT)
    with qtbot.waitSignal(tab.aggregatesReady, timeout=TIMEOUT):
        page = tab.show_page("rollout")
    qtbot.waitUntil(lambda: page.rollout is not None and not page.stale, timeout=TIMEOUT)
    ids = tab.session.tokenizer.encode(PROMPT)
    with torch.no_grad():
        trace = run_with_trace(tab.session.model, torch.tensor([ids]), kinds=("pattern",))
    want = attention_rollout(trace.stack("pattern")).rollout
    mask = tab.inspection.mask
    assert page.heatmap.matrix.shape == want.shape == (len(ids), len(ids))
    np.testing.assert_allclose(page.heatmap.matrix[mask], want[mask], atol=1e-5)
    assert np.isnan(page.heatmap.matrix[~mask]).all()  # the future is masked, not a share of 0
    assert page.caveat.isVisible() and ROLLOUT_CAVEAT in page.caveat.text()
    page.grab()  # laid out: the map fills its plot, the axes end with it
    assert_fills_its_plot(page.heatmap)
    # the sentence names the last position's largest share, as drawn
    last = len(ids) - 1
    j = int(np.argmax(want[last]))
    summary = page.summary.text()
    assert f"at {j}: {want[last, j]:.2f}" in summary and f"keeps {want[last, last]:.2f}" in summary
    (csv,) = tab.export_numbers(tmp_path / "rollout.csv")
    assert csv.endswith(".csv")


def test_aggregates_no_longer_offer_rollout_nor_compute_it(qtbot, attention_tab):
    tab = attention_tab
    with qtbot.waitSignal(tab.aggregatesReady, timeout=TIMEOUT):
        page = tab.show_page("aggregates")
    modes = [page.mode_combo.itemData(i) for i in range(page.mode_combo.count())]
    assert modes == ["layers", "heads", "all", "chosen"]
    assert not any("rollout" in page.mode_combo.itemText(i).lower() for i in range(page.mode_combo.count()))
    assert not hasattr(page, "caveat")
    assert page.result.rollout is None  # L products of [T, T]: only for the Rollout page
    with qtbot.waitSignal(tab.aggregatesReady, timeout=TIMEOUT):
        tab.show_page("rollout")
    assert tab.state.aggregates.rollout is not None
