"""Positions lab: the sinusoidal table and its offset profile, RoPE's offset property, and the
permutation experiment on the session's model."""

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel

from model.interp.analysis.positions import sinusoidal_heatmap


def test_sinusoidal_table_and_offset_profile(labs, qtbot, wait_results):
    tab, _ = labs
    page = tab.show_page("positions-sinusoidal")
    page.n_pos.setValue(32)
    _, _, prof = wait_results(qtbot, page, "table", lambda: page.d_model.setValue(16))
    assert np.allclose(page.table_view.matrix, sinusoidal_heatmap(32, 16))
    assert prof.max_spread < 1e-4 and np.allclose(prof.mean, prof.theory, atol=1e-4)
    assert np.allclose(page.profile.curves["theory"].yData, prof.theory)
    assert prof.theory[31] == 8.0  # Δ = 0: d/2
    assert "= d/2" in page.message.text()


def test_rope_score_depends_only_on_the_offset(labs, qtbot, wait_results):
    tab, _ = labs
    page = tab.show_page("positions-rope")
    page.n_pos.setValue(12)
    qpath, _, check = wait_results(qtbot, page, "rope", lambda: page.d_k.setValue(8))
    assert check.scores.shape == (12, 12) and check.profile.max_spread < 1e-4
    assert np.allclose(np.linalg.norm(qpath, axis=1), np.linalg.norm(qpath[0]))  # a rotation keeps the length
    assert page.pair.maximum() == 3
    assert "only the offset matters" in page.message.text()


def test_permutation_without_positions_is_equivariant(labs, qtbot, wait_results):
    tab, session = labs
    page = tab.show_page("positions-permutation")
    runs = wait_results(qtbot, page, "perm", lambda: page.tokens.setValue(8))
    stripped_unmasked = runs[(True, "none")]
    assert stripped_unmasked.equivariant and stripped_unmasked.follows.all()
    T = page.table.columnCount()
    assert T == 8 and [page.table.item(5, t).text() for t in range(T)] == ["✓"] * T
    # the session's model has learned positions and a causal mask: neither run is equivariant
    assert session.model.config.positional.positions == "learned"
    assert not runs[(False, "none")].equivariant and not runs[(True, "model")].equivariant
    assert (
        "equivariant" in page.summary.item(0, 3).text()
        and "equivariant" not in page.summary.item(1, 3).text()
    )


def test_rope_on_the_models_heads_shifts_the_prompt(labs, qtbot, wait_results):
    """The session's model has learned positions: the shifted prompt's layer-0 scores move; the same
    session rebuilt with RoPE compares exactly the same scores at both places."""
    from model.config import GPTConfig

    tab, session = labs
    page = tab.show_page("positions-rope-model")
    page.tokens.setValue(12)
    check = wait_results(qtbot, page, "shift", lambda: page.shift.setValue(8))
    assert check.positions == "learned" and check.shift == 8 and check.scores.shape == (2, 12, 12)
    assert not check.invariant and "the scores move" in page.message.text()
    bars = page.change_bars.values["|Δ score| ÷ max |score|"]
    np.testing.assert_allclose(bars, check.change / check.size)
    assert page.change_bars.categories == ["H0", "H1"]
    assert page.at_zero.panel.hidden[0, 1] and not page.at_zero.panel.hidden[1, 0]  # the causal mask
    assert page.shift.maximum() == 30 and page.layer.maximum() == 1  # the model's own limits
    title = page.header.findChild(QLabel, "labTitle")  # an apostrophe is shown as one, not &#x27;
    assert title.text().endswith("RoPE's scores stay put") and title.textFormat() == Qt.TextFormat.PlainText
    original = session.config
    try:
        session.set_config(original.replace(positions="rope"))
        session.build_model()
        page.head.setValue(1)
        check = wait_results(qtbot, page, "shift", lambda: page.layer.setValue(1))
        assert check.positions == "rope" and check.layer == 1 and check.invariant
        np.testing.assert_allclose(page.at_shift.matrix, page.at_zero.matrix, atol=1e-5)
        assert np.allclose(
            page.at_zero.matrix[np.isfinite(page.at_zero.matrix)],
            check.scores[1][np.isfinite(check.scores[1])],
        )
        assert "only the offsets count" in page.message.text()
    finally:
        session.set_config(original)
        session.build_model()
    assert isinstance(session.config, GPTConfig) and session.config.positional.positions == "learned"
