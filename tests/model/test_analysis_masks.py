"""Masks: their rules, and that the model obeys them on both paths."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.masks import (
    apply_mask,
    causal_mask,
    full_mask,
    future_weight,
    make_mask,
    prefix_lm_mask,
    sliding_window_mask,
)
from model.interp.trace import run_with_trace
from model.nn.gpt import init_model
from model.nn.hooks import use_mask


def test_mask_rules_by_counting_visible_keys():
    T = 9
    assert causal_mask(T).sum(-1).tolist() == list(range(1, T + 1))
    assert full_mask(T).sum(-1).tolist() == [T] * T
    assert sliding_window_mask(T, 3).sum(-1).tolist() == [1, 2, 3, 3, 3, 3, 3, 3, 3]
    assert prefix_lm_mask(T, 4).sum(-1).tolist() == [4, 4, 4, 4, 5, 6, 7, 8, 9]
    # a window as long as the prompt, and a prefix of one token, are the causal mask
    assert torch.equal(sliding_window_mask(T, T), causal_mask(T))
    assert torch.equal(prefix_lm_mask(T, 1), causal_mask(T))
    sw = sliding_window_mask(T, 3)
    assert sw[5, 3] and not sw[5, 2] and not sw[5, 6]


def test_make_mask_names_and_errors():
    assert torch.equal(make_mask("sliding", 6, window=2), sliding_window_mask(6, 2))
    with pytest.raises(ValueError, match="not one of"):
        make_mask("diagonal", 4)
    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(4, 0)


def test_apply_mask_and_future_weight():
    s = apply_mask(np.ones((3, 3)), causal_mask(3))
    assert np.isneginf(s[0, 1]) and s[1, 0] == 1.0
    w = np.full((2, 4, 4), 0.25)
    np.testing.assert_allclose(future_weight(w), [(0.75 + 0.5 + 0.25) / 4] * 2)
    assert future_weight(np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]) == 0.0


@pytest.mark.parametrize("kind", ["sliding", "prefix", "none"])
def test_model_weights_respect_each_mask(kind):
    cfg = GPTConfig(vocab_size=20, context_length=16, n_layers=1, d_model=16, n_heads=2)
    model = init_model(cfg, seed=0).eval()
    idx = torch.randint(0, 20, (1, 12), generator=torch.Generator().manual_seed(0))
    m = make_mask(kind, 12, window=3, prefix=5)
    with model.hooks(use_mask(m)):
        tr = run_with_trace(model, idx)
        fast, _ = model(idx)
    w = tr.stack("pattern")
    assert np.all(w[..., ~m.numpy()] == 0)
    assert np.all(w[..., m.numpy()] > 0)
    torch.testing.assert_close(fast, tr.logits, atol=1e-5, rtol=1e-5)
    causal, _ = model(idx)
    assert not torch.allclose(fast, causal)
