"""The joint query–key map (model.interp.analysis.qk_map): on a model built by hand to have a
previous-token head, each query sits beside the key one position back, and distance tracks the dot
product (a strongly negative correlation, reported in the full space and in the map)."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.qk_map import (
    QKMapError,
    distance_correlation,
    normalise,
    project_prompt,
    qk_map,
    qk_thumbnails,
)
from model.nn.gpt import init_model
from model.text.corpora import TextCorpus
from model.text.tokens import CharTokenizer

T = 16


def previous_token_model():
    """One layer, two heads of d_k = 16 over d = 32. Stream dimensions 0 and 1 carry the position ``i``
    as a point of a circle, ``(cos θ_i, sin θ_i)`` with ``θ_i = 2π i / T`` (learned positions set by
    hand); dimensions 16..31 carry the token (small, random). Head 0's W_Q reads the point as it is and
    its W_K turns it one step on (θ_j → θ_{j+1}), so ``q_i · k_j ∝ cos(θ_i − θ_{j+1})``: largest at
    ``j = i − 1`` among the keys ``j ≤ i``, a previous-token head. Head 1 keeps its random weights."""
    rng = random.Random(0)
    text = "".join(rng.choice("abcdefghijklmnop") for _ in range(4000))
    tok = CharTokenizer.from_text(text)
    cfg = GPTConfig(vocab_size=tok.vocab_size, context_length=T, n_layers=1, n_heads=2, d_model=2 * T)
    model = init_model(cfg, seed=0)
    theta = 2 * torch.pi * torch.arange(T) / T
    step = torch.tensor(2 * torch.pi / T)
    turn = torch.stack([torch.stack([step.cos(), -step.sin()]), torch.stack([step.sin(), step.cos()])])
    with torch.no_grad():
        model.tok_emb.weight.zero_()
        noise = 0.05 * torch.randn(tok.vocab_size, T, generator=torch.Generator().manual_seed(1))
        model.tok_emb.weight[:, T:] = noise
        model.pos_emb.weight.zero_()
        model.pos_emb.weight[:, 0], model.pos_emb.weight[:, 1] = theta.cos(), theta.sin()
        attn = model.blocks[0].attn
        for proj, read in ((attn.q_proj, torch.eye(2)), (attn.k_proj, turn)):
            proj.weight[:T].zero_()  # head 0's rows
            proj.weight[:2, :2] = 8 * read
            proj.bias.zero_()
    return model.eval(), tok, TextCorpus(text, tokenizer=tok)


@pytest.fixture(scope="module")
def built():
    return previous_token_model()


def _nearest_key_is_previous(queries, keys, window, position) -> float:
    """The share of queries (position ≥ 1) whose nearest key of their own window, among the keys they may
    see (position ≤ theirs), is the one at position − 1."""
    hits, total = 0, 0
    P = len(queries)
    for i in range(P):
        if position[i] == 0:
            continue
        seen = np.nonzero((window == window[i]) & (position <= position[i]))[0]
        d = np.linalg.norm(keys[seen] - queries[i], axis=1)
        hits += int(position[seen[np.argmin(d)]] == position[i] - 1)
        total += 1
    return hits / total


def test_the_map_of_a_previous_token_head_puts_each_query_beside_the_key_one_back(built):
    model, tok, corpus = built
    m = qk_map(model, tok, corpus, 0, 0, n_prompts=24, seq_len=T, method="pca")
    P = int(m.is_query.sum())
    assert P == 24 * T  # every token of the windows is a point, once as a query and once as a key
    q, k = m.vectors[:P], m.vectors[P:]
    w, pos = m.window[:P], m.position[:P]
    assert _nearest_key_is_previous(q, k, w, pos) > 0.95  # the full d_k space, after the normalisation
    assert _nearest_key_is_previous(m.points[:P], m.points[P:], w, pos) > 0.95  # PCA's 2-D map
    # the correlation between distance and dot product is reported, and strongly negative in d_k
    assert m.corr_full < -0.95
    assert np.isfinite(m.corr_map) and m.corr_map < 0
    # and it is the correlation of these points, computed again here from the pairs j ≤ i
    i, j = np.nonzero((w[:, None] == w[None, :]) & (pos[None, :] <= pos[:, None]))
    dist = np.linalg.norm(q[i] - k[j], axis=1)
    dot = np.einsum("pd,pd->p", q[i], k[j])
    assert m.corr_full == pytest.approx(np.corrcoef(dist, dot)[0, 1], abs=0.02)


def test_the_normalisation_leaves_every_score_row_unchanged_up_to_a_constant(built):
    model, tok, corpus = built
    m = qk_map(model, tok, corpus, 0, 1, n_prompts=4, seq_len=T)  # a random head
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(50, 8)), rng.normal(2.0, 3.0, size=(40, 8))
    n = normalise(q, k)
    qn, kn = n.queries(q), n.keys(k)
    # the two conditions: centroids together, equal mean norms
    np.testing.assert_allclose(qn.mean(0), kn.mean(0), atol=1e-4)
    assert np.linalg.norm(qn, axis=1).mean() == pytest.approx(np.linalg.norm(kn, axis=1).mean(), rel=1e-4)
    # each query's scores move by one constant (q·t): the softmax is the same
    diff = qn @ kn.T - q @ k.T
    np.testing.assert_allclose(diff - diff[:, :1], 0, atol=1e-3)
    assert m.norm.alpha > 0


def test_a_typed_prompt_lands_on_the_maps_own_points(built):
    """A window of the map projected as a prompt lands where the map put that window's points (PCA)."""
    model, tok, corpus = built
    m = qk_map(model, tok, corpus, 0, 0, n_prompts=8, seq_len=T)
    ids = [int(i) for i in m.windows[3]]
    got = project_prompt(model, tok, m, ids)
    mine = np.r_[np.nonzero(m.is_query & (m.window == 3))[0], np.nonzero(~m.is_query & (m.window == 3))[0]]
    np.testing.assert_allclose(got.points, m.points[mine], atol=1e-4)
    assert got.token[:T] == [tok.token_strings([i])[0] for i in ids]


def test_thumbnails_and_bad_inputs(built):
    model, tok, corpus = built
    th = qk_thumbnails(model, tok, corpus, n_prompts=6, seq_len=T, max_points=40)
    assert th.points.shape == (1, 2, 80, 2) and np.abs(th.points).max() <= 1.0 + 1e-6
    assert th.corr_full[0, 0] < -0.95  # the previous-token head's thumbnail keeps the same correlation
    for kwargs in ({"layer": 1, "head": 0}, {"layer": 0, "head": 2}, {"layer": -1, "head": 0}):
        with pytest.raises(QKMapError):
            qk_map(model, tok, corpus, n_prompts=2, seq_len=T, **kwargs)
    with pytest.raises(QKMapError, match="prompts"):
        qk_map(model, tok, corpus, 0, 0, n_prompts=0, seq_len=T)
    with pytest.raises(QKMapError, match="seq-len"):
        qk_map(model, tok, corpus, 0, 0, n_prompts=2, seq_len=T + 1)
    assert np.isnan(distance_correlation(np.zeros((1, 2)), np.zeros((1, 2)), np.zeros(1), np.zeros(1)))


def test_tsne_places_a_prompt_near_its_own_points(built):
    model, tok, corpus = built
    m = qk_map(model, tok, corpus, 0, 0, n_prompts=6, seq_len=T, method="tsne")
    assert m.points.shape == (2 * 6 * T, 2) and np.isfinite(m.corr_map)
    got = project_prompt(model, tok, m, [int(i) for i in m.windows[0]])
    assert got.points.shape == (2 * T, 2) and np.isfinite(got.points).all()


def test_the_sampled_vectors_are_those_the_softmax_multiplies_under_rope_gqa_and_qk_norm():
    """q_i · k_j of the sampled vectors is the head's score s(Q Kᵀ)[i, j] as the model computes it: RoPE
    and QK-norm applied, the scale 1/√d_k folded in, and the key head h // n_rep a query head reads."""
    from model.interp.analysis.qk_map import sample_head
    from model.interp.trace import run_with_trace

    rng = random.Random(1)
    text = "".join(rng.choice("abcdefgh") for _ in range(3000))
    tok = CharTokenizer.from_text(text)
    cfg = GPTConfig(
        vocab_size=tok.vocab_size, context_length=T, n_layers=2, n_heads=4, n_kv_heads=2, d_model=32,
        positions="rope", norm="rmsnorm", qk_rmsnorm=True,
    )  # fmt: skip
    model = init_model(cfg, seed=3).eval()
    corpus = TextCorpus(text, tokenizer=tok)
    s = sample_head(model, tok, corpus, 1, 3, n_prompts=2, seq_len=T, max_points=10_000)
    scores = run_with_trace(model, torch.as_tensor(s.ids[1]), kinds=["scores"], layers=[1])["scores", 1]
    mine = s.window == 1
    np.testing.assert_allclose(s.q[mine] @ s.k[mine].T, scores[0, 3].numpy(), rtol=1e-4, atol=1e-5)


def test_a_capped_sample_takes_the_same_vectors_of_fewer_tokens(built):
    """``max_points`` draws tokens before the passes (each batch keeps only its drawn tokens): the
    capped sample's vectors are the full sample's at the same (window, position)."""
    from model.interp.analysis.qk_map import sample_head

    model, tok, corpus = built
    full = sample_head(model, tok, corpus, 0, 1, n_prompts=20, seq_len=T, max_points=10_000)
    few = sample_head(model, tok, corpus, 0, 1, n_prompts=20, seq_len=T, max_points=7)
    assert len(few.q) == 7 and len(full.q) == 20 * T
    at = few.window * T + few.position  # full samples every token, in order
    np.testing.assert_array_equal(few.q, full.q[at])
    np.testing.assert_array_equal(few.k, full.k[at])
    np.testing.assert_array_equal(few.weight, full.weight[at])
