"""Comparing two runs."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.compare import align_metrics, config_diff, head_diff_summary, weights_difference
from model.interp.analysis.heads import head_metrics_from_trace
from model.interp.trace import run_with_trace
from model.nn.gpt import init_model


def traces():
    cfg = GPTConfig(vocab_size=20, context_length=16, n_layers=2, d_model=16, n_heads=2)
    idx = torch.randint(0, 20, (1, 10), generator=torch.Generator().manual_seed(0))
    a = run_with_trace(init_model(cfg, seed=0), idx)
    b = run_with_trace(init_model(cfg, seed=1), idx)
    return cfg, a, b


def test_weights_difference_of_traces():
    cfg, a, b = traces()
    d = weights_difference(a, b)
    assert d.shape == (2, 2, 10, 10)
    np.testing.assert_allclose(d, a.stack("pattern") - b.stack("pattern"))
    assert np.abs(weights_difference(a, a)).max() == 0
    np.testing.assert_allclose(d.sum(-1), 0, atol=1e-6)  # both rows sum to 1
    s = head_diff_summary(d)
    assert s.max_abs.shape == (2, 2) and np.all(s.row_tv <= 1) and np.all(s.row_tv > 0)
    short = run_with_trace(init_model(cfg, seed=0), torch.arange(8)[None])
    with pytest.raises(ValueError, match=r"\[2, 2, 10, 10\] vs \[2, 2, 8, 8\]"):
        weights_difference(a, short)


def test_aligned_metrics_and_config_diff():
    cfg, a, b = traces()
    ma, mb = head_metrics_from_trace(a), head_metrics_from_trace(b)
    rows = align_metrics(ma, mb)
    assert len(rows) == 5 * 4  # five metrics (no induction) × four heads
    r = next(r for r in rows if r.metric == "sink" and (r.layer, r.head) == (1, 0))
    assert r.a == pytest.approx(ma.sink[1, 0]) and r.delta == pytest.approx(mb.sink[1, 0] - ma.sink[1, 0])
    diff = config_diff(cfg, cfg.replace(n_heads=4, causal=False))
    assert diff == {"causal": (True, False), "n_heads": (2, 4)}
    assert config_diff(cfg, cfg) == {}
