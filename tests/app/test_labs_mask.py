"""Mask lab: the three matrices follow the chosen mask and match model/; the missing-mask comparison
trains both variants and stops cleanly."""

import numpy as np
import pytest
import torch

from model.interp.analysis.masks import causal_mask, sliding_window_mask
from model.interp.prompt import encode_prompt
from model.interp.trace import run_with_trace
from model.nn.hooks import use_mask


@pytest.fixture
def stages(labs, qtbot, wait_results):
    tab, session = labs
    page = tab.show_page("mask-stages")
    page.set_mask("causal")
    page.tokens.setValue(8)
    wait_results(qtbot, page, "stages")
    return page, session


def test_causal_weights_match_the_model_and_hide_the_future(stages, qtbot, wait_results):
    page, session = stages
    page.layer.setValue(1)
    page.head.setValue(1)
    st = wait_results(qtbot, page, "stages")
    ids = list(
        encode_prompt(session.tokenizer, session.probe_prompt, min(32, 8), keep="first", errors="replace").ids
    )
    trace = run_with_trace(session.model, ids, kinds=("pattern",), hooks=use_mask(causal_mask(len(ids))))
    expected = trace["pattern", 1][0, 1].numpy()
    assert np.allclose(page.weights_view.matrix, expected, atol=1e-6)
    assert np.allclose(st.weights, expected, atol=1e-6)
    upper = np.triu(np.ones_like(expected, dtype=bool), 1)
    assert np.all(page.weights_view.matrix[upper] == 0.0)
    texts = page.mask_view.cell_texts()
    assert texts[0][1] == "−∞" and texts[1][0] == "0" and texts[3][3] == "0"
    assert "0.000" in page.summary.text()  # no weight on keys after the query


def test_toggling_the_mask_off_fills_the_upper_triangle(stages, qtbot, wait_results):
    page, _ = stages
    st = wait_results(qtbot, page, "stages", page.toggle_causal)
    assert page.kind.currentData() == "none"
    upper = np.triu(np.ones_like(st.weights, dtype=bool), 1)
    assert np.all(page.weights_view.matrix[upper] > 0)
    assert np.allclose(page.weights_view.matrix.sum(-1), 1.0, atol=1e-5)
    assert all(t == "0" for row in page.mask_view.cell_texts() for t in row)
    assert st.future > 0.1
    page.toggle_causal()
    assert page.kind.currentData() == "causal"


def test_sliding_window_and_prefix_masks(stages, qtbot, wait_results):
    page, _ = stages
    page.window_size.setValue(3)
    st = wait_results(qtbot, page, "stages", lambda: page.set_mask("sliding"))
    assert np.array_equal(st.mask, sliding_window_mask(8, 3).numpy())
    assert np.all(page.weights_view.matrix[~st.mask] == 0)
    page.prefix.setValue(4)
    st = wait_results(qtbot, page, "stages", lambda: page.set_mask("prefix"))
    assert st.mask[0, 3] and not st.mask[0, 4] and st.mask[6, 6] and not st.mask[6, 7]
    assert page.weights_view.matrix[0, 3] > 0


def _tiny_comparison(page, steps):
    page.steps.setValue(steps)
    page.n_layers.setValue(1)
    page.d_model.setValue(16)
    page.n_heads.setValue(2)
    page.seq_len.setValue(16)  # the copy task needs room for an episode: shorter windows can be all-ignored
    page.batch.setValue(4)


def test_missing_mask_comparison_trains_both_and_samples(labs, qtbot):
    tab, _ = labs
    page = tab.show_page("mask-bug")
    _tiny_comparison(page, 3)
    with qtbot.waitSignal(page.panel.finished, timeout=60000) as blocker:
        page.panel.start_button.click()
    assert blocker.args[0] == "done"
    assert set(page.panel.losses) == {"with mask", "without mask"}
    assert all(xs == [1, 2, 3] for xs, _ in page.panel.losses.values())
    # the masked model never looks ahead; the unmasked one does from its first step
    steps, values = page.panel.probes["with mask"]
    assert steps[0] == 0 and all(v == 0.0 for v in values)
    assert all(v > 0 for v in page.panel.probes["without mask"][1])
    assert set(page.panel.sample_texts) == {"with mask", "without mask"}
    assert page.panel.sample_boxes["without mask"].toPlainText().startswith("[step 3]")
    assert page.idle and not page.panel.running


def test_comparison_stops_cleanly(labs, qtbot):
    tab, _ = labs
    page = tab.show_page("mask-bug")
    _tiny_comparison(page, 100000)
    page.panel.start()
    assert page.panel.running and page.panel.stop_button.isEnabled()
    qtbot.waitUntil(lambda: sum(len(x) for x, _ in page.panel.losses.values()) >= 2, timeout=60000)
    worker = page.panel.worker
    with qtbot.waitSignal(page.panel.finished, timeout=60000) as blocker:
        page.panel.stop_button.click()
    assert blocker.args[0] == "stopped"
    assert not worker.alive and page.panel.worker is None
    assert page.panel.start_button.isEnabled()


def test_same_seed_same_initial_weights():
    """The two variants differ only in the mask: built from one seed, their weights are identical."""
    from model.config import GPTConfig
    from model.nn.gpt import init_model

    cfg = GPTConfig(vocab_size=12, context_length=8, n_layers=1, d_model=16, n_heads=2)
    a, b = init_model(cfg, seed=0), init_model(cfg.replace(causal=False), seed=0)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
