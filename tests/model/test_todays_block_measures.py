"""What the Attention tab measures on today's block: the experts each token went to
(``measures.expert_choice_of``), the learned sinks' share (``heads.learned_sink_share`` and the
``learned_sink`` metric) and each layer's own mask in a model of local and global layers
(``measures.layer_masks``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp import measures
from model.interp.analysis.heads import head_metrics, learned_sink_share
from model.interp.trace import run_with_trace
from model.nn.gpt import init_model

T = 14


def model_of(**kw):
    cfg = GPTConfig(vocab_size=40, context_length=32, n_layers=3, d_model=32, n_heads=4, positions="rope")
    cfg = cfg.replace(**kw)
    torch.manual_seed(0)
    model = init_model(cfg)
    with torch.no_grad():  # away from the initialisation: routers and sinks that differ per token and head
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return model.eval()


def ids_of(n: int = T) -> list[int]:
    return torch.randint(0, 40, (n,), generator=torch.Generator().manual_seed(1)).tolist()


def test_expert_choice_is_what_the_router_chose_in_each_router_layer():
    model = model_of(n_experts=4, n_experts_per_token=2, moe_dense_layers=1, router="softmax_topk_norm")
    ids = ids_of()
    ec = measures.expert_choice_of(model, ids)
    trace = run_with_trace(model, ids, kinds=("chosen", "gates"))
    assert ec.moe_layers == trace.layers == [1, 2]
    assert (ec.n_layers, ec.n_experts, ec.k, ec.T, ec.router) == (3, 4, 2, T, "softmax_topk_norm")
    for m, layer in enumerate(ec.moe_layers):
        np.testing.assert_array_equal(ec.chosen[m], trace["chosen", layer][0].numpy())
        np.testing.assert_allclose(ec.gates[m], trace["gates", layer][0].numpy(), rtol=1e-6)
    # ranked by weight: the top expert of each token is the one with the largest gate
    _, w_r = ec.ranked()
    assert (np.diff(w_r, axis=-1) <= 0).all()
    top = ec.top(0)
    assert np.isnan(top[0]).all()  # the dense first layer
    for layer in ec.moe_layers:
        g = trace["gates", layer][0].numpy()
        c = trace["chosen", layer][0].numpy()
        np.testing.assert_array_equal(top[layer], c[np.arange(T), g.argmax(-1)])
        np.testing.assert_allclose(ec.top_weight(0)[layer], g.max(-1), rtol=1e-6)
        np.testing.assert_array_equal(ec.top(1)[layer], c[np.arange(T), g.argmin(-1)])
    # the prompt's load: each expert's share of the T·k assignments, 1 in all per layer
    load = ec.load()
    assert load.shape == (2, 4)
    np.testing.assert_allclose(load.sum(-1), 1.0)
    np.testing.assert_allclose(load[0], np.bincount(ec.chosen[0].ravel(), minlength=4) / (T * 2))
    assert set(ec.arrays()) == {"moe_layers", "chosen", "gates", "load", "n_experts"}


def test_expert_choice_follows_the_switched_off_heads_and_a_dense_model_has_none():
    model = model_of(n_experts=4, n_experts_per_token=1, router="softmax_topk")  # the top probability
    ids = ids_of()
    plain = measures.expert_choice_of(model, ids)
    assert plain.moe_layers == [0, 1, 2] and plain.k == 1
    off = {(layer, h): "zero" for layer in range(3) for h in range(4)}
    ablated = measures.expert_choice_of(model, ids, ablate=off)
    assert not np.array_equal(plain.gates, ablated.gates)  # the router sees another residual stream
    dense = measures.expert_choice_of(model_of(), ids)
    assert dense.moe_layers == [] and dense.n_experts == 0 and np.isnan(dense.top(0)).all()
    assert dense.load().shape == (0, 0)


def test_the_learned_sink_is_one_minus_the_row_sum_and_zero_without_sinks():
    ids = ids_of()
    model = model_of(attn_sinks=True)
    trace = run_with_trace(model, ids, kinds=("pattern",))
    w = trace.stack("pattern")  # [L, H, T, T]
    assert (w.sum(-1) < 1 - 1e-4).all()  # a sink takes a share of every row
    want = (1.0 - w.astype(np.float64).sum(-1)).mean(-1)  # mean over every query of 1 − Σ_j w_ij
    res = measures.head_metrics_of(model, w, trace.mask.numpy())
    np.testing.assert_allclose(res.metrics.learned_sink, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(learned_sink_share(w, trace.mask), want, rtol=1e-5, atol=1e-7)
    assert "learned_sink" in res.metrics.as_dict() and "learned_sink" in res.metrics.rows()[0]
    # the first-token "sink" score is another number (the weight on key 0)
    np.testing.assert_allclose(res.metrics.sink, w[..., 1:, 0].mean(-1), rtol=1e-5)

    plain = model_of()
    trace = run_with_trace(plain, ids, kinds=("pattern",))
    w = trace.stack("pattern")
    res = measures.head_metrics_of(plain, w, trace.mask.numpy())
    assert res.metrics.learned_sink.shape == (3, 4) and (res.metrics.learned_sink == 0).all()
    assert (head_metrics(w, trace.mask, sinks=False).learned_sink == 0).all()  # no sinks: exactly 0
    assert head_metrics(w, trace.mask).learned_sink is None  # not asked: not measured, as before
    assert "learned_sink" not in head_metrics(w, trace.mask).as_dict()
    assert np.abs(learned_sink_share(w, trace.mask)).max() < 1e-5  # rows sum to 1


@pytest.mark.parametrize(("pattern", "local"), [("LG", [0, 2]), ("", [0, 1, 2]), ("GGL", [2])])
def test_each_layer_gets_the_mask_it_attended_with(pattern, local):
    model = model_of(sliding_window=4, window_pattern=pattern)
    cfg = model.config
    ids = ids_of()
    trace = run_with_trace(model, ids, kinds=("pattern",))
    masks = measures.layer_masks(cfg, trace.mask)
    assert [layer for layer in range(3) if cfg.is_local_layer(layer)] == local
    for layer, m in enumerate(masks):
        np.testing.assert_array_equal(m, model.attention_mask(T, layer=layer).numpy())
        np.testing.assert_array_equal(m, trace.layer_mask(layer).numpy())
    assert len({id(m) for m in masks}) <= 2  # one array per kind of layer
    some = measures.layer_masks(cfg, trace.mask, 2)  # some layers only: which they are is unknown
    assert len(some) == 2 and all(np.array_equal(m, trace.mask.numpy()) for m in some)
    # the metrics of a local layer count the keys its window lets it see
    w = trace.stack("pattern")
    res = measures.head_metrics_of(model, w, trace.mask.numpy())
    for layer in range(3):
        alone = head_metrics(w[layer], masks[layer])
        np.testing.assert_allclose(res.metrics.entropy_norm[layer], alone.entropy_norm, rtol=1e-6)
