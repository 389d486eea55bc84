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
    shift_check,
    sinusoidal_heatmap,
    sinusoidal_offset_profile,
)
from model.nn.gpt import init_model


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
    return init_model(cfg, seed=0)


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


def _trained_like(positions: str, **extra):
    cfg = GPTConfig(
        vocab_size=50, context_length=256, n_layers=2, d_model=32, n_heads=4, positions=positions, **extra
    )
    model = init_model(cfg, seed=0)
    with torch.no_grad():  # weights large enough that positions move the scores visibly
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(std=0.3)
    return model


@pytest.mark.parametrize("layer", [0, 1])
def test_rope_scores_of_the_model_do_not_move_when_the_prompt_shifts(layer):
    model = _trained_like("rope")
    ids = torch.randint(0, 50, (24,), generator=torch.Generator().manual_seed(0)).tolist()
    check = shift_check(model, ids, layer=layer, shift=150)
    assert check.scores.shape == (4, 24, 24) and np.isnan(check.scores[0, 0, 1])  # the mask hides it
    assert check.invariant and check.size.min() > 1.0
    assert check.change.max() < 1e-4 * check.size.max()
    # the prompt itself placed elsewhere is the same as the model's forward with that offset
    with torch.no_grad():
        a, _ = model(torch.tensor([ids]), position_offset=150)
        b, _ = model(torch.tensor([ids]))
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal"])
def test_added_positions_move_layer_0s_scores(positions):
    model = _trained_like(positions)
    ids = torch.randint(0, 50, (24,), generator=torch.Generator().manual_seed(0)).tolist()
    check = shift_check(model, ids, layer=0, shift=150)
    assert not check.invariant and check.change.min() > 0.01 * check.size.min()


def test_a_shift_past_the_context_is_one_clear_line():
    model = _trained_like("rope")
    with pytest.raises(ValueError, match="past the context length 256"):
        shift_check(model, list(range(24)), shift=240)
    with pytest.raises(ValueError, match="not one of the model's 2 blocks"):
        shift_check(model, list(range(24)), layer=2)
    with pytest.raises(ValueError, match="longer than context_length=256"):
        model(torch.zeros(1, 24, dtype=torch.long), position_offset=240)
