"""Softmax saturation: the sampled theory and the model-side comparison."""

import math

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.saturation import mean_max_weight, model_saturation, score_spread, score_std
from model.interp.analysis.softmax_theory import (
    jacobian_norm,
    sample_logits,
    score_histogram,
    softmax_curves,
    softmax_rows,
    softmax_stats,
    theory_summary,
)
from model.interp.trace import run_with_trace
from model.nn.gpt import init_model

GRID = [1, 4, 16, 64, 128, 512]


@pytest.fixture(scope="module")
def curves():
    return softmax_curves(GRID, n_rows=256, n_keys=32, seed=0)


def test_raw_score_std_is_sqrt_dk(curves):
    un = curves["unscaled"]
    # relative standard error of a sample std over 256 rows × 32 keys is ~2-4% here; allow 10%
    np.testing.assert_allclose(un.score_std, np.sqrt(GRID), rtol=0.1)
    i64, i128 = GRID.index(64), GRID.index(128)
    assert un.score_std[i64] == pytest.approx(8.0, rel=0.1)
    assert un.score_std[i128] == pytest.approx(11.3, rel=0.1)
    for v in ("scaled", "init", "cosine"):
        np.testing.assert_allclose(curves[v].score_std, 1.0, rtol=0.1)
    np.testing.assert_allclose(curves["temperature"].score_std, np.sqrt(GRID) / 8, rtol=0.1)


def test_unscaled_saturates_while_scaled_stays_flat(curves):
    un, sc = curves["unscaled"], curves["scaled"]
    assert np.all(np.diff(un.max_weight) > 0)
    assert np.all(np.diff(un.entropy) < 0)
    big = np.array(GRID) >= 16  # the Jacobian first grows (uniform → peaked), then collapses
    assert np.all(np.diff(un.jacobian_norm[big]) < 0)
    assert un.max_weight[-1] > 0.85 and un.jacobian_norm[-1] < 0.6 * sc.jacobian_norm[-1]
    for name in ("max_weight", "entropy", "jacobian_norm"):
        flat, moving = getattr(sc, name), getattr(un, name)
        assert np.ptp(flat) < 0.15 * np.ptp(moving) and np.ptp(flat) < 0.15 * flat.mean()
    assert sc.entropy[-1] < sc.uniform_entropy


def test_sampling_is_seeded_and_jacobian_formula():
    a = sample_logits(32, "cosine", n_rows=8, seed=3)
    np.testing.assert_array_equal(a, sample_logits(32, "cosine", n_rows=8, seed=3))
    assert not np.array_equal(a, sample_logits(32, "cosine", n_rows=8, seed=4))
    assert np.abs(sample_logits(16, "cosine", n_rows=8, gain=2.0)).max() <= 2.0 + 1e-9
    p = softmax_rows(np.random.default_rng(0).standard_normal((3, 5)))
    for row in p:
        J = np.diag(row) - np.outer(row, row)
        assert jacobian_norm(row) == pytest.approx(np.linalg.norm(J))
    edges, dens = score_histogram(64, "unscaled", n_rows=64)
    assert len(edges) == 61 and edges[-1] == pytest.approx(32.0)
    assert (dens * np.diff(edges)).sum() == pytest.approx(1.0, abs=0.02)


@pytest.mark.parametrize("attn_scale", ["sqrt_dk", "none"])
def test_model_saturation_compares_with_and_without_scale(attn_scale):
    cfg = GPTConfig(
        vocab_size=20, context_length=16, n_layers=2, d_model=32, n_heads=2, attn_scale=attn_scale
    )
    model = init_model(cfg, seed=0)
    with torch.no_grad():
        for b in model.blocks:
            b.attn.q_proj.weight.mul_(30)
            b.attn.k_proj.weight.mul_(30)
    tr = run_with_trace(model, torch.randint(0, 20, (1, 14), generator=torch.Generator().manual_seed(0)))
    s = model_saturation(tr)
    assert s.entropy_model.shape == (2, 2)
    if attn_scale == "none":
        np.testing.assert_allclose(s.entropy_unscaled, s.entropy_model, atol=1e-5)
    else:
        # softmax(β s) gets sharper as β grows: removing 1/√d_k lowers entropy, raises max weight
        assert np.all(s.entropy_unscaled < s.entropy_model)
        assert np.all(s.max_weight_unscaled > s.max_weight_model)
        np.testing.assert_allclose(s.max_weight_model, mean_max_weight(tr.stack("pattern"), tr.mask))


def test_score_std_measures_the_visible_pairs_only():
    z = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    mask = np.tril(np.ones((6, 6), dtype=bool))
    z_masked = z.copy()
    z_masked[..., ~mask] = 1e6  # what a head never compares cannot move its spread
    got = score_std(z_masked, mask)
    assert got.shape == (2, 3)
    for a in range(2):
        for b in range(3):
            assert got[a, b] == pytest.approx(np.std(z[a, b][mask].astype(np.float64)), rel=1e-6)
    per_layer = np.stack([mask, np.eye(6, dtype=bool) | np.tri(6, k=-5, dtype=bool)])  # [L, T, S]
    got = score_std(z, per_layer)
    assert got[1, 2] == pytest.approx(np.std(z[1, 2][per_layer[1]].astype(np.float64)), rel=1e-6)
    assert np.isnan(score_std(z, np.zeros((6, 6), dtype=bool))).all()


@pytest.mark.parametrize("d_head", [16, 64])
def test_unit_variance_heads_spread_one_after_the_scale(d_head):
    """The textbook's argument, on the model's own forward pass: q and k of independent unit-variance
    components give raw scores of std √d_k and scaled scores of std 1; the spread is √d_k apart."""
    cfg = GPTConfig(
        vocab_size=64, context_length=128, n_layers=1, d_model=256, n_heads=256 // d_head, norm="rmsnorm"
    )
    model = init_model(cfg, seed=0)
    with torch.no_grad():  # rows of W_Q, W_K of norm 1 on an RMS-normed (unit-variance) stream
        model.tok_emb.weight.normal_()
        for p in (model.blocks[0].attn.q_proj.weight, model.blocks[0].attn.k_proj.weight):
            p.normal_(std=1 / math.sqrt(cfg.core.d_model))
    ids = torch.randint(0, 64, (1, 128), generator=torch.Generator().manual_seed(1))
    spread = score_spread(run_with_trace(model, ids, kinds=("scores_raw", "scores")))
    np.testing.assert_allclose(spread.raw / spread.scaled, math.sqrt(d_head), rtol=1e-4)
    assert spread.median_scaled == pytest.approx(1.0, abs=0.15)
    assert spread.share_above(1.25) < 0.5


@pytest.mark.parametrize("d_k", [16, 512])
def test_theory_summary_follows_the_ordering_measured(d_k):
    """The lab's "What to notice" sentence: at d_k = 16 the unscaled Jacobian is still the larger
    (peaked rows, not one-hot), at 512 the smaller; the words follow whichever side of 1 it is."""
    un = softmax_stats(sample_logits(d_k, "unscaled", n_rows=256))
    sc = softmax_stats(sample_logits(d_k, "scaled", n_rows=256))
    text = theory_summary(d_k, un, sc)
    ratio = un.jacobian_norm / sc.jacobian_norm
    assert f"{un.jacobian_norm:.4f}" in text and f"{sc.jacobian_norm:.4f}" in text
    assert (f"still {ratio:.2f}×" in text) == (ratio > 1)
    assert (f", {ratio:.2f}× the scaled" in text) == (ratio < 1)
    assert f"{un.vanished:.0%} of the unscaled rows" in text and f"(scaled: {sc.vanished:.0%})" in text
    assert sc.vanished == 0  # unit-spread scores never make a row one-hot
    assert ("vanishes row by row" in text) == (un.vanished > 0)
    assert ratio > 1 if d_k == 16 else ratio < 0.6  # both orderings are covered


def test_vanished_counts_rows_below_a_tenth_of_uniform():
    n = 8
    uniform = np.zeros((1, n))
    one_hot = np.array([[40.0] + [0.0] * (n - 1)])
    two = np.array([[20.0, 20.0] + [0.0] * (n - 2)])
    stats = softmax_stats(np.concatenate([uniform, one_hot, two, one_hot]))
    assert stats.vanished == pytest.approx(0.5)  # the two one-hot rows of four
    assert jacobian_norm(softmax_rows(two))[0] == pytest.approx(0.5)  # two keys sharing: 0.5
