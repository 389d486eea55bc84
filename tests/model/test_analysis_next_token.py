"""Top-k next tokens at each position."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.next_token import prompt_next_tokens, top_k_next_tokens
from model.nn.gpt import init_model


def test_top_k_on_known_logits():
    logits = np.log(np.array([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]]))
    nt = top_k_next_tokens(logits, k=2, targets=[2, -1])
    np.testing.assert_array_equal(nt.ids, [[1, 2], [0, 1]])
    np.testing.assert_allclose(nt.probs, [[0.6, 0.3], [0.5, 0.25]], rtol=1e-6)
    np.testing.assert_allclose(nt.entropy[1], -(0.5 * np.log(0.5) + 0.5 * np.log(0.25)), rtol=1e-6)
    assert nt.target_prob[0] == pytest.approx(0.3) and nt.target_rank[0] == 1
    assert np.isnan(nt.target_prob[1]) and nt.target_rank[1] == -1
    assert nt.strings(lambda i: "abc"[i]) == [["b", "c"], ["a", "b"]]
    hot = top_k_next_tokens(logits, k=1, temperature=0.1)
    assert hot.probs[0, 0] > 0.99


def test_prompt_next_tokens_matches_the_model_softmax():
    cfg = GPTConfig(vocab_size=25, context_length=16, n_layers=1, d_model=16, n_heads=2)
    model = init_model(cfg, seed=0)
    idx = torch.randint(0, 25, (10,), generator=torch.Generator().manual_seed(0))
    nt = prompt_next_tokens(model, idx, k=25)
    probs = torch.softmax(model(idx[None])[0][0], -1).detach().numpy()
    np.testing.assert_allclose(nt.probs.sum(-1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(nt.target_prob[:-1], probs[np.arange(9), idx[1:].numpy()], rtol=1e-5)
    assert np.all(np.diff(nt.probs, axis=-1) <= 0)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_ranked_in_blocks_of_positions_equals_the_whole_softmax(temperature):
    """150 positions (blocks of 64, 64, 22) against the softmax of every position at once: top-k,
    entropy −Σ p log p, and the real next token's probability and rank."""
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(150, 1000, generator=gen) * 6 + 40  # large logits: no cancellation either
    targets = torch.randint(0, 1000, (150,), generator=gen)
    targets[-1] = -1
    nt = top_k_next_tokens(logits, k=7, temperature=temperature, targets=targets)
    p = torch.softmax(logits.double() / temperature, -1)
    top = torch.topk(p, 7, -1)
    np.testing.assert_array_equal(nt.ids, top.indices.numpy())
    np.testing.assert_allclose(nt.probs, top.values.numpy(), rtol=1e-5)
    np.testing.assert_allclose(nt.entropy, torch.special.entr(p).sum(-1).numpy(), rtol=1e-5, atol=1e-5)
    tp = p[torch.arange(149), targets[:-1]]
    np.testing.assert_allclose(nt.target_prob[:-1], tp.numpy(), rtol=1e-5)
    np.testing.assert_array_equal(nt.target_rank[:-1], (p[:-1] > tp[:, None]).sum(-1).numpy())
    assert np.isnan(nt.target_prob[-1]) and nt.target_rank[-1] == -1
