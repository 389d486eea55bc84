"""A prompt too long to hold every head's pattern (streamed, ``model.interp.streamed``) in the Attention
tab: the grid draws the pooled overview and reads values from the recomputed rows, the Head page computes
its head on opening, and a page that needs every pattern says which prompt length it needs."""

from __future__ import annotations

import numpy as np
import pytest

from model.interp import plan as plans
from model.interp.trace import run_with_trace

TIMEOUT = 30_000
TEXT = "the head looks back at the tree and the cat"


@pytest.fixture
def long_tab(attention_tab, monkeypatch):
    monkeypatch.setattr(plans, "HELD_LIMIT", 2 * 2 * 12**2)  # the 2 × 2-head model holds 12 tokens at most
    return attention_tab


def _run(qtbot, tab, text):
    tab.set_prompt(text, run=False)
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT, check_params_cb=lambda r: r.prompt == text) as blk:
        tab.run_inspection()
    return blk.args[0]


def test_a_streamed_prompt_draws_the_overview_and_opens_heads_exactly(qtbot, long_tab):
    tab = long_tab
    insp = _run(qtbot, tab, TEXT)
    ids = tab.session.tokenizer.encode(TEXT)
    held = run_with_trace(tab.session.model, ids, kinds=("pattern",)).stack("pattern")
    assert not insp.held and insp.T == len(ids) == held.shape[-1] and insp.held_limit == 12
    assert "Streamed" in tab.status_label.text()
    grid = tab.pages["heads"].mosaic
    assert grid.values is insp.weights  # one head computed when read, never the whole array
    grid.hover_at(1, 1, 20, 7)
    assert grid.readout.text().endswith(f"weight {held[1, 1, 20, 7]:.3f}")
    tab.open_head(1, 0)
    heat = tab.pages["head"].heatmap
    shown = np.nan_to_num(heat.matrix, nan=0.0)
    np.testing.assert_allclose(shown, held[1, 0], rtol=0, atol=1e-6)
    heat.hover_at(9, 4)
    assert "kept for prompts of at most 12 tokens" in heat.readout.text()
    for key in ("metrics", "focus", "aggregates"):
        page = tab.show_page(key)
        assert "at most 12 tokens" in page.long_note, key
    insp = _run(qtbot, tab, TEXT[:10])  # a short prompt again: the page draws
    assert insp.held and tab.pages["aggregates"].long_note == ""


def test_a_prompt_longer_than_the_context_is_cut_or_refused_as_the_user_chooses(qtbot, attention_tab):
    tab = attention_tab
    n = tab.session.model.config.core.context_length
    text = "ab" * n  # 2 × context tokens (one character each)
    insp = _run(qtbot, tab, text)
    assert insp.T == n and f"The first {n} tokens were left out" in tab.status_label.text()
    tab.prompt_bar.cut_box.setChecked(False)
    with qtbot.waitSignal(tab.failed, timeout=TIMEOUT) as blk:
        tab.run_inspection()
    assert blk.args[0] == (
        f"the prompt is {2 * n:,} tokens, longer than the model's context of {n:,}: shorten it, or let "
        "its first tokens be left out"
    )
