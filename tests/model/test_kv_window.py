"""The KV cache of a local (sliding-window) layer keeps its window only (``model.nn.attention.KVCache``):
Gemma 3's five local layers of six keep ``W`` positions, not the whole sequence, and generation
through such a cache gives what the model without a cache gives."""

from __future__ import annotations

import pytest
import torch

from model.budget import arithmetic as budget
from model.config import GPTConfig
from model.nn.generate import generate
from model.nn.gpt import KVCache, init_model

W = 4
#: Gemma 3's block in small: five local layers (window W) to one global, sandwich norms, QK-norm
GEMMA3 = GPTConfig(
    vocab_size=37,
    context_length=40,
    n_layers=6,
    d_model=32,
    n_heads=4,
    n_kv_heads=1,
    head_dim=8,
    d_ff=64,
    mlp="geglu",
    norm="rmsnorm",
    norm_position="sandwich",
    norm_offset=True,
    positions="rope",
    rope_local_base=100.0,
    qk_rmsnorm=True,
    bias="none",
    tie_embeddings=True,
    embed_scale=True,
    sliding_window=W,
    window_pattern="LLLLLG",
)


@pytest.fixture(scope="module")
def model():
    m = init_model(GEMMA3, seed=0).eval()
    with torch.no_grad():  # uneven weights: a window that leaked would change the tokens
        for p in m.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())))
    return m


def test_a_local_layer_keeps_only_its_window():
    T = 30
    cache = KVCache(GEMMA3, 1, T)
    assert cache.kept == [W] * 5 + [T]
    per_position = 2 * 1 * 8 * 4  # K and V of one KV head of 8 values, float32
    assert cache.nbytes == (5 * W + 1 * T) * per_position
    assert cache.nbytes == budget.kv_cache(GEMMA3, seq_len=T, bytes_per_value=4).windowed_bytes


def test_generation_through_the_window_gives_the_tokens_of_the_model_without_a_cache(model):
    prompt = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6, 5, 3])  # longer than the window
    cached = generate(model, prompt, 20, greedy=True, use_cache=True)
    assert torch.equal(cached, generate(model, prompt, 20, greedy=True, use_cache=False))
    sampled = generate(model, prompt, 20, temperature=1.0, seed=1, use_cache=True)
    assert torch.equal(sampled, generate(model, prompt, 20, temperature=1.0, seed=1, use_cache=False))


@pytest.mark.parametrize("chunks", [(1,) * 24, (3, 9, 1, 1, 10), (7, 17)], ids=["one", "mixed", "long"])
def test_cached_logits_equal_the_full_forward_whatever_the_chunks(model, chunks):
    """Chunks shorter and longer than the window, after a cache that holds less and more than it."""
    seq = torch.randint(0, 37, (2, sum(chunks)), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        full, _ = model(seq)
        cache = KVCache(GEMMA3, 2, seq.shape[1])
        parts, start = [], 0
        for n in chunks:
            parts.append(model(seq[:, start : start + n], kv_cache=cache)[0])
            start += n
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=1e-4, atol=1e-5)
    assert cache.length == seq.shape[1] and all(k.shape[2] == W for k in cache.keys[:5])


def test_every_layer_local_keeps_the_window_in_each():
    cfg = GEMMA3.replace(window_pattern="", rope_local_base=None)  # Mistral: one window for all
    m = init_model(cfg, seed=1).eval()
    seq = torch.randint(0, 37, (1, 19), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full, _ = m(seq)
        cache = KVCache(cfg, 1, 19)
        steps = [m(seq[:, :6], kv_cache=cache)[0]] + [
            m(seq[:, i : i + 1], kv_cache=cache)[0] for i in range(6, 19)
        ]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, rtol=1e-4, atol=1e-5)
    assert cache.kept == [W] * 6
