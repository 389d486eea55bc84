"""The streamed inspection of long prompts (``model.interp.streamed``) against the held patterns: every
head recomputed on demand, and the pooled overviews, equal the full [L, H, T, T] of today's trace."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.inspection import block_max
from model.interp.streamed import PatternsNotHeld, block_counts, stream_prompt
from model.interp.trace import run_with_trace
from model.nn.gpt import init_model

T = 150  # more than two query blocks of 64, and a short last one

CONFIGS = {
    "mha-learned": dict(positions="learned"),
    "gqa-rope": dict(positions="rope", n_heads=4, n_kv_heads=2),
    "mqa-rope-window": dict(positions="rope", n_heads=4, n_kv_heads=1, sliding_window=40),
    "local-global-softcap": dict(
        positions="rope", sliding_window=33, window_pattern="LG", attn_softcap=20.0, n_heads=2
    ),
    "sinks-qknorm": dict(positions="rope", attn_sinks=True, attn_scale="qk_norm"),
    "learned-scale": dict(positions="sinusoidal", attn_scale="learned"),
    "non-causal": dict(positions="learned", causal=False),
}


def model_of(**kw):
    base = dict(vocab_size=50, context_length=256, n_layers=2, d_model=32, n_heads=4)
    cfg = GPTConfig(**{**base, **kw})
    model = init_model(cfg, seed=0).eval()
    with torch.no_grad():  # sinks and per-head scales away from their initial values
        for name, p in model.named_parameters():
            if name.endswith(("sinks", "scale", "qk_gain")):
                p.add_(torch.randn_like(p) * 0.3)
    return model


@pytest.mark.parametrize("name", list(CONFIGS))
def test_each_head_recomputed_and_pooled_equals_the_held_patterns(name):
    model = model_of(**CONFIGS[name])
    ids = torch.randint(0, 50, (T,), generator=torch.Generator().manual_seed(1)).tolist()
    held = run_with_trace(model, ids, kinds=("pattern",)).stack("pattern")  # [L, H, T, T]
    b = 8
    run = stream_prompt(model, ids, b)
    p = run.patterns
    assert p.shape == held.shape
    for layer in range(held.shape[0]):
        for head in range(held.shape[1]):
            np.testing.assert_allclose(p[layer, head], held[layer, head], rtol=0, atol=1e-6)
    assert p[1, 1, 100, 90] == pytest.approx(float(held[1, 1, 100, 90]), abs=1e-6)  # one value, by its rows
    np.testing.assert_array_equal(run.overview, block_max(torch.from_numpy(held), b).numpy())
    sums = torch.from_numpy(held).unflatten(-1, (-1, 1)).squeeze(-1)
    S = -(-T // b)
    padded = torch.zeros(*held.shape[:2], S * b, S * b)
    padded[..., :T, :T] = sums
    mean = padded.unflatten(-2, (S, b)).unflatten(-1, (S, b)).sum((-3, -1)) / block_counts(T, b)
    np.testing.assert_allclose(run.overview_mean, mean.numpy(), rtol=1e-5, atol=1e-7)


def test_logits_unembedded_by_blocks_equal_the_forward_and_the_whole_array_is_refused():
    model = model_of(positions="rope", n_heads=4, n_kv_heads=2)
    ids = list(range(40))
    run = stream_prompt(model, ids, 4, limit=20)
    with torch.no_grad():
        logits = model(torch.tensor([ids]))[0][0]
    torch.testing.assert_close(run.logits[0:40], logits, rtol=1e-5, atol=1e-5)
    with pytest.raises(PatternsNotHeld, match="at most 20 tokens"):
        np.asarray(run.patterns)
    with pytest.raises(PatternsNotHeld):
        run.patterns[0]


def test_switched_off_heads_change_the_later_layers_as_in_the_held_run():
    model = model_of(positions="rope")
    ids = [i % 50 for i in range(70)]
    from model.nn.hooks import ablate_heads

    ablate = {(0, 1): "zero"}
    held = run_with_trace(model, ids, kinds=("pattern",), hooks=ablate_heads(ablate)).stack("pattern")
    run = stream_prompt(model, ids, 2, ablate=ablate)
    np.testing.assert_allclose(run.patterns[1, 2], held[1, 2], rtol=0, atol=1e-6)


def test_the_tab_s_inspection_streams_past_the_held_limit_with_the_held_numbers(monkeypatch):
    from model.interp import plan as plans
    from model.interp.inspection import inspect_prompt
    from model.interp.measures import next_tokens_of
    from model.text.tokens import CharTokenizer

    text = "the cat sat on the mat and the dog sat on the log. " * 3
    tok = CharTokenizer.from_text(text)
    cfg = GPTConfig(vocab_size=tok.vocab_size, context_length=256, n_layers=2, d_model=16, n_heads=2)
    model = init_model(cfg, seed=0)
    held = inspect_prompt(model, tok, plans.plan_prompt(cfg, tok, text))
    monkeypatch.setattr(plans, "HELD_LIMIT", 2 * 2 * 100**2)  # past 100 tokens: streamed
    plan = plans.plan_prompt(cfg, tok, text)
    assert held.held and not plan.held and plans.view_need(cfg, held.T).total < 2**25
    long = inspect_prompt(model, tok, plan)
    assert not long.held and long.held_limit == 100 and long.T == held.T
    np.testing.assert_allclose(long.head(1, 1), held.head(1, 1), rtol=0, atol=1e-6)
    np.testing.assert_array_equal(long.overview, held.overview)
    np.testing.assert_array_equal(long.mask, held.mask)
    a, b = next_tokens_of(held.logits, held.ids, tok), next_tokens_of(long.logits, long.ids, tok)
    np.testing.assert_array_equal(a.tokens.ids, b.tokens.ids)
    np.testing.assert_allclose(a.tokens.probs, b.tokens.probs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("layers", "heads", "most"), [(30, 9, 1410), (12, 12, 1930)])
def test_the_held_limit_is_the_last_length_whose_patterns_fit(layers, heads, most):
    """The figures the README and the tab's status line give: SmolLM2's 30 × 9 heads hold 1,410 tokens."""
    from model.interp.plan import HELD_LIMIT, held_tokens, holds_patterns

    cfg = GPTConfig(vocab_size=64, n_layers=layers, n_heads=heads, d_model=heads * 8, context_length=4096)
    assert held_tokens(cfg) == most
    assert holds_patterns(cfg, most) and not holds_patterns(cfg, most + 1)
    assert layers * heads * most**2 <= HELD_LIMIT < layers * heads * (most + 1) ** 2
