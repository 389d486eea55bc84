"""Heads compared by their patterns on shared prompts (model.interp.corpus.patterns): the similarity is
1 − the mean Jensen–Shannon divergence of two heads' rows, symmetric with 1 on the diagonal; heads
with the same patterns are 1 apart from nothing and land on one place; on the starter the induction
head and a previous-token head are placed apart; the result keeps it all in its .npz form."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from model.interp.corpus import CorpusSettings, HeadScores, PatternSimilarity, cluster_heads, corpus_run


@pytest.fixture(scope="module")
def starter():
    from model.io.checkpoint import starter
    from model.io.pretrained import open_model

    if not (starter.STARTER_DIR / "model.safetensors").is_file():
        pytest.skip("no starter model built (make starter)")
    return open_model(starter.STARTER_DIR)


def _causal_patterns(rng, B: int, H: int, T: int) -> np.ndarray:
    """Random causal softmax rows [B, H, T, T]."""
    logits = rng.normal(scale=2.0, size=(B, H, T, T))
    logits[..., np.triu(np.ones((T, T), dtype=bool), 1)] = -np.inf
    w = np.exp(logits - logits.max(-1, keepdims=True))
    return (w / w.sum(-1, keepdims=True)).astype(np.float32)


def _js_bits(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """JS divergence (bits) of the rows of ``p`` and ``q`` [..., K], directly from its definition."""

    def kl(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(a > 0, a * np.log2(a / b), 0.0).sum(-1)

    m = 0.5 * (p + q)
    return 0.5 * kl(p, m) + 0.5 * kl(q, m)


def test_the_similarity_is_one_minus_the_mean_js_of_rows_and_identical_heads_are_one_and_one_place():
    L, H, T, N = 3, 2, 9, 5
    rng = np.random.default_rng(0)
    mask = np.tril(np.ones((T, T), dtype=bool))
    acc = PatternSimilarity(L, H, n_shared=4)  # the 5th prompt is not a shared one
    layers = [_causal_patterns(rng, N, H, T) for _ in range(L)]
    layers[2][:, 1] = layers[0][:, 0]  # L2H1 attends exactly as L0H0 on every prompt
    D = T * (T + 1) // 2 - 1  # the entries of rows 1..T−1 a causal query sees
    for first, stop in ((0, 3), (3, 5)):  # two batches
        for layer in range(L):
            acc.offer(layer, layers[layer][first:stop], first, mask)
            if layer < L - 1:  # in flight: the batch's shared prompts' rows of every head, float16
                assert acc.nbytes == (L * H) ** 2 * 8 + (min(stop, 4) - first) * L * H * D * 2
        assert acc.nbytes == (L * H) ** 2 * 8  # after the pass, only the sums [L·H, L·H]
    s = acc.matrix()
    assert acc.prompts == 4 and s.shape == (L * H, L * H)
    np.testing.assert_array_equal(s, s.T)
    np.testing.assert_array_equal(np.diag(s), 1.0)
    assert s[0, 2 * H + 1] == pytest.approx(1.0, abs=1e-6)
    off = s[~np.eye(L * H, dtype=bool)]
    assert np.sort(off)[-2:] == pytest.approx([1.0, 1.0], abs=1e-6) and np.sort(off)[-3] < 0.99
    # every entry: 1 − JS averaged over the queries with two keys or more (rows 1..T−1) and the 4 prompts
    heads = np.stack(layers, 1)[:4].reshape(4, L * H, T, T)
    heads = heads.astype(np.float16).astype(np.float64)  # as the rows are held
    for a, b in ((0, 1), (1, 4), (3, 5), (0, 5)):
        want = 1 - _js_bits(heads[:, a, 1:], heads[:, b, 1:]).mean()
        assert s[a, b] == pytest.approx(want, abs=1e-5), (a, b)
    # placed (and grouped) by the patterns: the two alike heads at one place, in one cluster
    clusters = cluster_heads(rng.normal(size=(3, L, H)), ["a", "b", "c"], 4, similarity=s)
    np.testing.assert_allclose(clusters.coords[2, 1], clusters.coords[0, 0], atol=1e-6)
    assert clusters.labels[2, 1] == clusters.labels[0, 0]
    assert np.ptp(clusters.coords[..., 0]) > 0.1 and 0 < clusters.explained[1] <= clusters.explained[0]


def test_heads_of_the_same_weights_get_similarity_one_and_one_place_in_a_corpus_run(starter):
    """The starter with L1H2's query and key weights made L1H1's: over a corpus their patterns are the
    same on every prompt, so they are 1 alike and placed on one point; the others are not."""
    model = copy.deepcopy(starter.model)
    attn = model.blocks[1].attn
    d_k = model.config.d_head
    with torch.no_grad():
        for proj in (attn.q_proj, attn.k_proj):
            proj.weight[2 * d_k : 3 * d_k] = proj.weight[d_k : 2 * d_k]
            proj.bias[2 * d_k : 3 * d_k] = proj.bias[d_k : 2 * d_k]
    settings = CorpusSettings("task:induction", n_prompts=6, seq_len=24, resamples=50, shared_prompts=4)
    result = corpus_run(model, starter.tokenizer, settings, use_cache=False)
    s, H = result.pattern_similarity, 4
    assert s[H + 1, H + 2] == pytest.approx(1.0, abs=1e-6)
    assert s[H + 0, H + 1] < 0.999 and s[1, H + 1] < 0.999
    places = result.alike("patterns").coords
    np.testing.assert_allclose(places[1, 1], places[1, 2], atol=1e-6)
    assert np.linalg.norm(places[1, 1] - places[0, 1]) > 0.05


def test_on_the_starter_the_induction_head_and_a_previous_token_head_are_placed_apart(starter, tmp_path):
    settings = CorpusSettings("task:induction", n_prompts=16, seq_len=48, resamples=50, shared_prompts=8)
    result = corpus_run(starter.model, starter.tokenizer, settings, cache_dir=tmp_path)
    (induction,) = result.top_heads("induction", 1)
    (prev,) = result.top_heads("prev_token", 1)
    assert induction[0] == 1 and prev[0] == 0  # the starter's circuit: previous-token, then induction
    H = result.shape[1]
    assert result.pattern_similarity[induction[0] * H + induction[1], prev[0] * H + prev[1]] < 0.5
    by = result.alike("patterns")
    xy = by.coords.reshape(-1, 2)
    diameter = np.max(np.linalg.norm(xy[:, None] - xy[None], axis=-1))
    assert np.linalg.norm(by.coords[induction] - by.coords[prev]) > 0.5 * diameter
    assert by.labels[induction] != by.labels[prev]
    # the patterns' placement is its own, not the scores' under another name
    assert not np.allclose(by.coords, result.alike("scores").coords)
    # and it is kept: the .npz form (the cache's) gives it back, and the CSV has both places
    again = corpus_run(starter.model, starter.tokenizer, settings, cache_dir=tmp_path)
    assert again.from_cache
    back = HeadScores.from_arrays(result.arrays())
    for r in (again, back):
        np.testing.assert_array_equal(r.pattern_similarity, result.pattern_similarity)
        np.testing.assert_array_equal(r.pattern_clusters.coords, by.coords)
        assert r.pattern_clusters.names == by.names
    header = result.csv().splitlines()[0].split(",")
    assert {"pattern_cluster", "pattern_x", "pattern_y", "score_x", "score_y"} <= set(header)
