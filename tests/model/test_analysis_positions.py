"""Positions: sinusoidal dot products, RoPE's offset property, permutation equivariance."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.positions import (
    by_offset,
    permutation_experiment,
    position_similarity,
    rope_pair_path,
    rope_rotate,
    rope_scores,
    sinusoidal_heatmap,
    sinusoidal_offset_profile,
)
from model.nn.gpt import build_model


def test_sinusoidal_table_and_offset_dependence():
    t = sinusoidal_heatmap(40, 16)
    assert t.shape == (40, 16)
    np.testing.assert_allclose(t[:, 0::2] ** 2 + t[:, 1::2] ** 2, 1.0, rtol=1e-5)  # unit circle per pair
    prof = sinusoidal_offset_profile(40, 16)
    assert prof.max_spread < 1e-4
    np.testing.assert_allclose(prof.mean, prof.theory, atol=1e-4)
    assert prof.mean[prof.offsets == 0][0] == pytest.approx(8.0, rel=1e-5)  # d/2 pairs, cos 0 = 1
    # a table that is not made of rotations has no such property
    rand = np.random.default_rng(0).standard_normal((40, 16))
    assert by_offset(position_similarity(rand)).max_spread > 1.0


def test_rope_score_depends_only_on_offset():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal(16), rng.standard_normal(16)
    check = rope_scores(q, k, 50)
    assert check.profile.max_spread < 1e-4 * np.abs(check.scores).max()
    assert np.ptp(check.scores) > 1.0  # but it does change with the offset
    r = rope_rotate(q, [0, 7, 30])
    np.testing.assert_allclose(r[0], q, rtol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(r, axis=1), np.linalg.norm(q), rtol=1e-5)  # rotations
    path = rope_pair_path(q, np.arange(4), pair=0)  # θ_0 = 1 rad per position
    ang = np.unwrap(np.arctan2(path[:, 1], path[:, 0]))
    np.testing.assert_allclose(np.diff(ang), 1.0, rtol=1e-5)
    with pytest.raises(ValueError, match="even"):
        rope_rotate(np.ones(5), [0])


def _model(positions):
    cfg = GPTConfig(vocab_size=30, context_length=32, n_layers=2, d_model=32, n_heads=4, positions=positions)
    return build_model(cfg, seed=0)


def test_permutation_permutes_outputs_only_without_positions_and_mask():
    idx = torch.randint(0, 30, (16,), generator=torch.Generator().manual_seed(1))
    free = permutation_experiment(_model("none"), idx, seed=2)
    assert free.equivariant and free.error < 1e-5
    assert not np.array_equal(free.perm, np.arange(16))
    np.testing.assert_allclose(free.logits_permuted, free.logits[free.perm], atol=1e-5)
    assert not permutation_experiment(_model("learned"), idx, seed=2).equivariant
    assert not permutation_experiment(_model("none"), idx, seed=2, mask="model").equivariant
    with pytest.raises(ValueError, match="permutation"):
        permutation_experiment(_model("none"), idx, perm=[0] * 16)
