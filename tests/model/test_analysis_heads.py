"""Per-head metrics and names on hand-built heads whose answers are known."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.heads import (
    HeadMetrics,
    HeadThresholds,
    classify_heads,
    entropy,
    entropy_norm,
    head_metrics,
    induction_score,
    measure_induction,
    prev_token_score,
    repeated_sequence,
    self_score,
    sink_score,
)
from model.nn.gpt import init_model

T = 12


def uniform_causal(T):
    w = np.tril(np.ones((T, T)))
    return w / w.sum(-1, keepdims=True)


def prev_head(T):
    w = np.zeros((T, T))
    w[0, 0] = 1
    w[np.arange(1, T), np.arange(T - 1)] = 1
    return w


def sink_head(T):
    w = np.zeros((T, T))
    w[:, 0] = 1
    return w


def induction_head(T, period, start):
    """Previous-token behaviour except in the repeats, where it attends to i - period + 1."""
    w = prev_head(T)
    for i in range(start + period, T):
        w[i] = 0
        w[i, i - period + 1] = 1
    return w


def test_entropy_of_uniform_and_one_hot_heads():
    u = uniform_causal(T)
    expected = np.mean([np.log(i + 1) for i in range(1, T)])  # row 0 is forced, so left out
    assert entropy(u) == pytest.approx(expected)
    assert entropy_norm(u) == pytest.approx(1.0)
    for w in (prev_head(T), np.eye(T), sink_head(T)):
        assert entropy(w) == pytest.approx(0.0)
        assert entropy_norm(w) == pytest.approx(0.0)


def test_entropy_with_bidirectional_mask_counts_every_row():
    full = np.ones((T, T), dtype=bool)
    w = np.full((T, T), 1.0 / T)
    assert entropy(w, full) == pytest.approx(np.log(T))
    assert entropy_norm(w, full) == pytest.approx(1.0)
    # the same weights read as causal would be wrong: causal rows cannot be uniform over T keys
    half = np.eye(T) * 0.5 + np.roll(np.eye(T), 1, axis=1) * 0.5
    assert entropy_norm(half, full) == pytest.approx(np.log(2) / np.log(T))


def test_position_scores_of_pure_heads():
    assert prev_token_score(prev_head(T)) == pytest.approx(1.0)
    assert self_score(np.eye(T)) == pytest.approx(1.0)
    assert sink_score(sink_head(T)) == pytest.approx(1.0)
    assert prev_token_score(np.eye(T)) == pytest.approx(0.0)
    assert sink_score(prev_head(T)) == pytest.approx(1.0 / (T - 1))  # only query 1's previous is key 0
    u = uniform_causal(T)
    # a uniform causal head puts 1/(i+1) on each of keys 0, i-1, i
    expect = np.mean([1 / (i + 1) for i in range(1, T)])
    for score in (prev_token_score, sink_score, self_score):
        assert score(u) == pytest.approx(expect)


def test_induction_score_perfect_head_and_others():
    period, start = 5, 1
    n = start + 2 * period
    w = induction_head(n, period, start)
    assert induction_score(w, period, start) == pytest.approx(1.0)
    assert induction_score(prev_head(n), period, start) == pytest.approx(0.0)
    # off by one period is no longer an induction pattern
    assert induction_score(w, period + 1, start) < 0.5
    with pytest.raises(ValueError, match="no repeat"):
        induction_score(w, n, 0)


def test_metrics_keep_leading_axes_and_accept_torch_half():
    stack = np.stack([np.stack([prev_head(T), np.eye(T)]), np.stack([sink_head(T), uniform_causal(T)])])
    assert stack.shape == (2, 2, T, T)
    prev = prev_token_score(torch.tensor(stack, dtype=torch.float16))
    assert prev.shape == (2, 2)
    np.testing.assert_allclose(prev[0], [1.0, 0.0], atol=1e-3)
    m = head_metrics(stack)
    assert m.entropy.shape == (2, 2) and m.induction is None
    assert len(m.rows()) == 4 and m.rows()[1]["self_score"] == pytest.approx(1.0)


def test_mask_shape_is_checked():
    with pytest.raises(ValueError, match="mask has shape"):
        entropy(np.eye(4), np.ones((3, 3), dtype=bool))


def test_repeated_sequence_repeats_distinct_tokens():
    p = repeated_sequence(50, 10, n_repeats=3, prefix=[7], exclude=[7, 0], seed=3)
    assert p.start == 1 and p.period == 10 and len(p.tokens) == 31
    block = p.tokens[1:11]
    assert len(set(block.tolist())) == 10 and not {0, 7} & set(block.tolist())
    np.testing.assert_array_equal(p.tokens[11:21], block)
    np.testing.assert_array_equal(p.tokens[21:], block)
    assert not np.array_equal(block, repeated_sequence(50, 10, seed=4).tokens[:10])


def test_classify_names_each_hand_built_head():
    period, start = 5, 0
    n = 2 * period
    heads = [induction_head(n, period, start), prev_head(n), np.eye(n), sink_head(n), uniform_causal(n)]
    mixed = 0.5 * np.eye(n) + 0.5 * uniform_causal(n)
    w = np.stack(heads)[None]  # [1, 5, T, T]
    m = head_metrics(w, period=period, start=start)
    cls = classify_heads(m)
    assert list(cls.names[0]) == ["induction", "previous-token", "self", "sink", "broad"]
    assert cls.heads_named("sink") == [(0, 3)]
    lab = cls.labels[0][1]
    assert lab.metric == "prev_token" and lab.value == pytest.approx(1.0) and "≥ 0.50" in str(lab)
    assert (lab.rank, lab.of, lab.relative) == (1, 1, False)  # one of its kind, the fixed threshold
    # a head half on itself, half uniform: named "self" at 0.5, nothing at a stricter threshold
    mm = head_metrics(mixed[None, None])
    assert classify_heads(mm).names[0, 0] == "self"
    strict = HeadThresholds(self=0.9)
    assert classify_heads(mm, strict).names[0, 0] == ""


def test_a_sink_most_heads_share_names_only_the_heads_that_stand_out():
    """At scale the BOS sink is everywhere: with 80 of 100 heads above the fixed 0.5, "sink" rises to
    the model's own top quarter and each named head knows its rank; a rare sink keeps the fixed bar."""
    n = 8
    rng = np.random.default_rng(0)
    shares = np.concatenate([rng.uniform(0.55, 0.95, 80), rng.uniform(0.0, 0.3, 20)])
    w = np.stack([a * sink_head(n) + (1 - a) * uniform_causal(n) for a in shares]).reshape(10, 10, n, n)
    m = head_metrics(w)
    cls = classify_heads(m)
    sinks = cls.heads_named("sink")
    assert len(sinks) == 25 and cls.effective["sink"] == pytest.approx(np.quantile(m.sink, 0.75))
    top = cls.labels[sinks[0][0]][sinks[0][1]]
    assert (top.rank, top.of, top.relative) == (1, 25, True) and top.value == pytest.approx(m.sink.max())
    assert "sink #1 of 25" in str(top) and "top quarter" in str(top)
    ranks = [cls.labels[l][h].rank for l, h in sinks]
    assert ranks == list(range(1, 26))  # strongest first
    fixed = classify_heads(m, HeadThresholds(max_share=None))
    assert len(fixed.heads_named("sink")) == 80 and fixed.effective["sink"] == 0.5
    all_sinks = head_metrics(w[:2])  # 20 heads, every one a sink: the top quarter is named
    assert len(classify_heads(all_sinks).heads_named("sink")) == 5
    one = np.stack([sink_head(n)] + [np.eye(n)] * 9)[None]  # 1 sink of 10: the fixed bar holds
    assert classify_heads(head_metrics(one)).heads_named("sink") == [(0, 0)]
    assert classify_heads(head_metrics(one)).counts() == {
        "induction": 0, "previous-token": 0, "self": 9, "sink": 1, "broad": 0
    }  # fmt: skip


def test_classify_without_induction_measurement_skips_that_rule():
    m = HeadMetrics(*(np.zeros((1, 1)) for _ in range(5)))
    assert classify_heads(m).names[0, 0] == ""
    with pytest.raises(ValueError, match=r"\[L, H\]"):
        classify_heads(HeadMetrics(*(np.zeros(3) for _ in range(5))))


def test_measure_induction_on_a_tiny_model():
    cfg = GPTConfig(vocab_size=30, context_length=32, n_layers=2, d_model=16, n_heads=2)
    model = init_model(cfg, seed=0)
    scores, prompt = measure_induction(model, period=8)
    assert scores.shape == (2, 2)
    assert len(prompt.tokens) == 16
    # an untrained model attends almost uniformly: its induction score is the uniform head's
    u = induction_score(uniform_causal(16), 8)
    np.testing.assert_allclose(scores, u, atol=0.05)
    assert model.training  # mode restored
