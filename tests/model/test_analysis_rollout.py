"""Attention rollout (Abnar & Zuidema 2020)."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.rollout import ROLLOUT_CAVEAT, attention_rollout, rollout_of_means
from model.interp.trace import run_with_trace
from model.nn.gpt import GPT


def causal_weights(L, H, T, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.random((L, H, T, T)) * np.tril(np.ones((T, T)))
    return w / w.sum(-1, keepdims=True)


def test_rows_sum_to_one_and_causal_stays_lower_triangular():
    w = causal_weights(4, 3, 9)
    r = attention_rollout(w)
    assert r.rollout.shape == (9, 9) and r.per_layer.shape == (4, 9, 9) and r.layer_mix.shape == (4, 9, 9)
    np.testing.assert_allclose(r.rollout.sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(r.per_layer.sum(-1), 1.0, atol=1e-12)
    assert np.allclose(np.triu(r.rollout, 1), 0.0) and np.allclose(np.triu(r.per_layer, 1), 0.0)
    np.testing.assert_array_equal(r.per_layer[-1], r.rollout)
    # cumulative: each layer's mix times the rollout below it
    np.testing.assert_allclose(r.per_layer[2], r.layer_mix[2] @ r.per_layer[1], atol=1e-12)
    assert r.rollout[0, 0] == pytest.approx(1.0)  # the first token only ever sees itself


def test_one_layer_is_half_attention_half_identity():
    w = causal_weights(1, 4, 6, seed=1)
    r = attention_rollout(w)
    np.testing.assert_allclose(r.rollout, 0.5 * w[0].mean(0) + 0.5 * np.eye(6), atol=1e-12)
    np.testing.assert_allclose(attention_rollout(w, residual=0.0).rollout, w[0].mean(0), atol=1e-12)
    with pytest.raises(ValueError, match=r"\[L, H, T, T\]"):
        attention_rollout(w[0])
    with pytest.raises(ValueError, match="residual share"):
        attention_rollout(w, residual=1.5)
    assert "ignores the MLPs" in ROLLOUT_CAVEAT


def test_rollout_of_a_model_trace():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=20, context_length=16, n_layers=3, d_model=32, n_heads=4)).eval()
    trace = run_with_trace(model, torch.randint(0, 20, (1, 10)), kinds=("pattern",))
    r = attention_rollout(trace.stack("pattern"))
    np.testing.assert_allclose(r.rollout.sum(-1), 1.0, atol=1e-6)
    assert np.allclose(np.triu(r.rollout, 1), 0.0)


def test_rollout_of_layer_means_equals_rollout_of_the_heads():
    w = causal_weights(3, 4, 7, seed=2)
    np.testing.assert_allclose(rollout_of_means(w.mean(1)).rollout, attention_rollout(w).rollout, atol=1e-12)
    np.testing.assert_allclose(
        rollout_of_means(w.astype(np.float16).astype(np.float32).mean(1)).rollout,
        attention_rollout(w.astype(np.float16)).rollout,
        atol=1e-6,
    )
    with pytest.raises(ValueError, match=r"\[L, T, T\]"):
        rollout_of_means(w)
