"""The Attention tab's causal pages: Patching and Logit attribution (rollout: test_attention_rollout).

Each number drawn is checked against the model run by hand through its hook points (one patched run
per checked cell, the model's own logits), not against the batched analysis the page calls.
"""

from __future__ import annotations

import csv

import numpy as np
import pytest
import torch

from app.views.attention.state import CausalFailure

TIMEOUT = 30_000
CLEAN = "When Mary and Anne went out, Anne gave it to"  # fits the primer's characters and 48 tokens
CORRUPT = "When Anne and Mary went out, Mary gave it to"


@pytest.fixture
def tab(qtbot, attention_tab):
    """The Attention tab with the name-swap prompt inspected."""
    check = lambda r: r.prompt == CLEAN  # noqa: E731
    with qtbot.waitSignal(attention_tab.inspected, timeout=TIMEOUT, check_params_cb=check):
        attention_tab.set_prompt(CLEAN)
    return attention_tab


def _wait_causal(qtbot, tab, kind, trigger):
    with qtbot.waitSignal(tab.causalReady, timeout=TIMEOUT, check_params_cb=lambda k, _r: k == kind) as blk:
        trigger()
    return blk.args[1]


def _logit_diff(model, ids, hooks, pos, a, b):
    with torch.no_grad(), model.hooks(hooks):
        logits, _ = model(torch.tensor([ids]))
    return float(logits[0, pos, a] - logits[0, pos, b])


def test_patching_page_suggests_the_name_swap_and_draws_what_patching_each_head_restores(qtbot, tab):
    model, tok = tab.session.model, tab.session.tokenizer
    res = _wait_causal(qtbot, tab, "patching", lambda: tab.show_page("patching"))
    page = tab.pages["patching"]
    # the suggestion swaps the two names and keeps the token count
    assert res.corrupt_prompt == CORRUPT and page.corrupt_edit.toPlainText() == CORRUPT
    ids, bad = tok.encode(CLEAN), tok.encode(CORRUPT)
    L, H = model.config.core.n_layers, model.config.attention.n_heads
    T = len(ids)
    assert page.heads_plot.matrix.shape == (L, H) and page.resid_plot.matrix.shape == (L, T)
    a, b, pos = res.heads.answer, res.heads.wrong, res.heads.position
    m_clean, m_bad = _logit_diff(model, ids, [], pos, a, b), _logit_diff(model, bad, [], pos, a, b)
    assert res.heads.clean_diff == pytest.approx(m_clean, abs=1e-4)
    assert res.heads.corrupt_diff == pytest.approx(m_bad, abs=1e-4)
    # each head by hand: the clean run's z of that head written into the corrupted run
    clean_z = {}
    hooks = [
        (f"blocks.{l}.attn.z", lambda x, hook: clean_z.__setitem__(hook.name, x.clone())) for l in range(L)
    ]
    _logit_diff(model, ids, hooks, pos, a, b)
    for l in range(L):
        for h in range(H):

            def patch(x, hook, l=l, h=h):
                x = x.clone()
                x[:, h] = clean_z[f"blocks.{l}.attn.z"][:, h]
                return x

            m = _logit_diff(model, bad, [(f"blocks.{l}.attn.z", patch)], pos, a, b)
            want = (m - m_bad) / (m_clean - m_bad)
            assert page.heads_plot.matrix[l, h] == pytest.approx(want, rel=1e-3, abs=1e-3)
    # row 0 patches one token's embedding: where both prompts have the same token it changes nothing
    same = np.array(ids) == np.array(bad)
    assert same.any() and not same.all()
    np.testing.assert_allclose(page.resid_plot.matrix[0, same], 0.0, atol=1e-5)
    assert np.abs(page.resid_plot.matrix[0, ~same]).max() > 1e-3
    assert f"L{res.heads.best[0]}H{res.heads.best[1]}" in page.summary.text()


def test_clicking_a_patching_cell_opens_its_head(qtbot, tab):
    _wait_causal(qtbot, tab, "patching", lambda: tab.show_page("patching"))
    page = tab.pages["patching"]
    page.heads_plot.clicked.emit(1, 0)
    assert tab.current_page is tab.pages["head"] and tab.selected == (1, 0)
    tab.show_page("patching")
    page.resid_plot.clicked.emit(0, 3)  # the layer's most restoring head
    best = int(np.nanargmax(page.result.heads.restored[0]))
    assert tab.current_page is tab.pages["head"] and tab.selected == (0, best)


def test_a_corrupted_prompt_of_another_length_is_explained_on_the_page(qtbot, tab):
    _wait_causal(qtbot, tab, "patching", lambda: tab.show_page("patching"))
    page = tab.pages["patching"]
    page.corrupt_edit.setPlainText("When Anne went")
    res = _wait_causal(qtbot, tab, "patching", page.run_button.click)
    assert isinstance(res, CausalFailure) and "same length" in res.message
    assert "Cannot measure" in page.summary.text() and "same length" in page.summary.text()
    # a token that is several tokens is refused by name
    page.corrupt_edit.setPlainText(CORRUPT)
    page.answer_edit.setText("Mary")
    res = _wait_causal(qtbot, tab, "patching", page.run_button.click)
    assert isinstance(res, CausalFailure) and "'Mary' is 4 tokens" in res.message
    page.answer_edit.setText("")
    res = _wait_causal(qtbot, tab, "patching", page.run_button.click)
    assert not isinstance(res, CausalFailure) and res.corrupt_prompt == CORRUPT


def test_logit_attribution_parts_add_up_to_the_models_logit(qtbot, tab):
    model, tok = tab.session.model, tab.session.tokenizer
    res = _wait_causal(qtbot, tab, "attribution", lambda: tab.show_page("attribution"))
    page = tab.pages["attribution"]
    ids = tok.encode(CLEAN)
    with torch.no_grad():
        logits, _ = model(torch.tensor([ids]))
    row = logits[0, -1]
    top = int(row.argmax())
    a = res.attr
    assert a.token == top and a.position == len(ids) - 1
    drawn = page.heads_plot.matrix.sum() + sum(v for name, v in _bars(page) if not name.endswith("attn"))
    drawn += a.attn_bias.sum()  # the attention bars hold the heads and the output bias
    assert drawn == pytest.approx(float(row[top]), abs=1e-4)
    assert sum(v for _, v in _bars(page)) == pytest.approx(float(row[top]), abs=1e-4)
    assert "frozen from this run" in page.summary.text()
    # a difference of two tokens at another position
    page.token_edit.setText("a")
    page.token_edit.editingFinished.emit()
    page.other_edit.setText("e")
    res = _wait_causal(qtbot, tab, "attribution", page.other_edit.editingFinished.emit)
    ia, ie = tok.encode("a")[0], tok.encode("e")[0]
    assert res.attr.logit == pytest.approx(float(row[ia] - row[ie]), abs=1e-4)
    assert res.target == "logit('a') − logit('e')"
    page.position_spin.setValue(3)
    res = _wait_causal(qtbot, tab, "attribution", page.position_spin.editingFinished.emit)
    assert res.attr.position == 3 and res.attr.logit == pytest.approx(
        float(logits[0, 3, ia] - logits[0, 3, ie]), abs=1e-4
    )


def _bars(page):
    heights = page.bars.opts["height"]
    return list(zip(page.bar_axis.labels, (float(v) for v in heights), strict=True))


def test_attribution_of_a_post_ln_model_says_why_not(qtbot, make_attention_session):
    from app.views.attention.tab import AttentionTab
    from model.config import GPTConfig

    s = make_attention_session(
        GPTConfig(context_length=48, n_layers=1, d_model=16, n_heads=2, norm_position="post")
    )
    s.build_model(seed=0)
    try:
        t = AttentionTab(s)
        qtbot.addWidget(t)
        with qtbot.waitSignal(t.inspected, timeout=TIMEOUT):
            t.set_prompt("The head looks back.", run=False)
            t.show()
        res = _wait_causal(qtbot, t, "attribution", lambda: t.show_page("attribution"))
        assert isinstance(res, CausalFailure) and "Post-LN" in res.message
        assert "Post-LN" in t.pages["attribution"].summary.text()
    finally:
        t.shutdown()
        s.shutdown(timeout=30)


def test_a_causal_page_exports_its_numbers_as_csv_and_npz(qtbot, tab, tmp_path):
    res = _wait_causal(qtbot, tab, "patching", lambda: tab.show_page("patching"))
    written = tab.export_numbers(tmp_path / "patch.csv")
    assert [p.rsplit("/", 1)[-1] for p in written] == ["patch-heads.csv", "patch-resid.csv"]
    with open(written[0], newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["layer \\ head", "H0", "H1"] and [r[0] for r in rows[1:]] == ["L0", "L1"]
    got = np.array([[float(v) for v in r[1:]] for r in rows[1:]])
    np.testing.assert_allclose(got, res.heads.restored, rtol=1e-7)
    (npz,) = tab.export_numbers(tmp_path / "patch.npz")
    with np.load(npz, allow_pickle=False) as data:
        np.testing.assert_array_equal(data["restored_resid"], res.resid.restored)
        assert data["clean_logit_diff"] == pytest.approx(res.heads.clean_diff)
        assert list(data["tokens"]) == res.labels
    png = tab.export_view(tmp_path / "patch.png")
    svgs = tab.export_view(tmp_path / "patch.svg")
    assert len(png) == 1 and len(svgs) == 2
    with pytest.raises(ValueError, match=r"\.csv or \.npz"):
        tab.export_numbers(tmp_path / "patch.txt")
    tab.show_page("next")
    with pytest.raises(ValueError, match="no numbers"):
        tab.export_numbers(tmp_path / "next.csv")
