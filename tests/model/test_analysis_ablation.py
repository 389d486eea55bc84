"""Ablating heads changes the predictions; running without the ablation restores them exactly."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.ablation import (
    ablation_dict,
    ablation_effect,
    head_importance,
    kl_divergence,
    mean_loss,
    validation_batches,
    validation_loss_change,
)
from model.nn.gpt import init_model

V = 24


@pytest.fixture(scope="module")
def model():
    cfg = GPTConfig(vocab_size=V, context_length=16, n_layers=2, d_model=16, n_heads=2)
    m = init_model(cfg, seed=0)
    # larger weights than the 0.02 init so each head's output matters visibly
    with torch.no_grad():
        for p in m.parameters():
            if p.dim() == 2:
                p.mul_(10)
    return m


def batches(n=2):
    g = torch.Generator().manual_seed(5)
    out = []
    for _ in range(n):
        d = torch.randint(0, V, (4, 13), generator=g)
        out.append((d[:, :-1], d[:, 1:]))
    return out


def test_ablation_changes_logits_and_restoring_is_exact(model):
    idx = torch.randint(0, V, (1, 12), generator=torch.Generator().manual_seed(0))
    model.eval()
    before, _ = model(idx)
    eff = ablation_effect(model, idx, [(0, 1), (1, 0)])
    assert eff.logits_max_abs_diff > 1e-3
    assert eff.kl.shape == (12,) and np.all(eff.kl >= 0) and eff.mean_kl > 0
    np.testing.assert_allclose(eff.probs_before.sum(-1), 1.0)
    np.testing.assert_allclose(
        eff.kl, kl_divergence(np.log(eff.probs_before), np.log(eff.probs_after)), rtol=1e-6, atol=1e-12
    )
    np.testing.assert_allclose(eff.max_prob_change, np.abs(eff.probs_after - eff.probs_before).max(-1))
    np.testing.assert_array_equal(eff.top1_changed, eff.probs_before.argmax(-1) != eff.probs_after.argmax(-1))
    assert eff.top_before.ids.shape == (12, 5)
    after_restore, _ = model(idx)
    assert torch.equal(before, after_restore)


def test_zero_and_mean_ablation_differ(model):
    idx = torch.randint(0, V, (12,), generator=torch.Generator().manual_seed(1))
    z = ablation_effect(model, idx, [(1, 1)], "zero")
    m = ablation_effect(model, idx, {(1, 1): "mean"})
    assert not np.allclose(z.probs_after, m.probs_after)
    assert m.heads == {(1, 1): "mean"}


def test_ablation_arguments_are_checked(model):
    with pytest.raises(ValueError, match="outside"):
        ablation_dict([(2, 0)], config=model.config)
    with pytest.raises(ValueError, match="mode"):
        ablation_dict([(0, 0)], "half")


def test_validation_loss_change_uses_the_same_batches(model):
    calls = iter(batches(3))
    lc = validation_loss_change(model, [(0, 0), (0, 1), (1, 0), (1, 1)], lambda: next(calls), n_batches=3)
    assert lc.before == pytest.approx(mean_loss(model, batches(3)))
    assert lc.after != pytest.approx(lc.before)
    assert lc.delta == pytest.approx(lc.after - lc.before)
    imp = head_importance(model, batches(1))
    assert imp.shape == (2, 2) and np.any(np.abs(imp) > 1e-4)
    one = validation_loss_change(model, [(1, 0)], batches(1))
    assert imp[1, 0] == pytest.approx(one.delta)


class _TaskLike:
    """A source that scores only the second half of each row (like the synthetic tasks)."""

    def get_masked_batch(self, split, batch_size, seq_len, generator):
        d = torch.randint(0, V, (batch_size, seq_len + 1), generator=generator)
        keep = torch.zeros(batch_size, seq_len, dtype=torch.bool)
        keep[:, seq_len // 2 :] = True
        return d[:, :-1], d[:, 1:], keep

    def get_batch(self, split, batch_size, seq_len, generator):
        return self.get_masked_batch(split, batch_size, seq_len, generator)[:2]


def test_validation_batches_score_only_what_training_scores(model):
    src = _TaskLike()
    masked = validation_batches(src, 2, 3, 12, seed=4)
    plain = validation_batches(src, 2, 3, 12, seed=4, masked=False)
    assert (masked[0][1][:, :6] == -100).all() and torch.equal(masked[0][1][:, 6:], plain[0][1][:, 6:])
    assert torch.equal(masked[1][0], validation_batches(src, 2, 3, 12, seed=4)[1][0])  # seeded
    x, y = masked[0]
    model.eval()
    with torch.no_grad():
        logits, _ = model(x)
    expect = torch.nn.functional.cross_entropy(logits[:, 6:].reshape(-1, V), y[:, 6:].reshape(-1))
    assert mean_loss(model, masked[:1]) == pytest.approx(float(expect), rel=1e-5)
