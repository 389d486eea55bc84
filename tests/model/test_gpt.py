"""The two forward paths agree, and the trace records what attention really computed."""

import math

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from model.config import ConfigError, GPTConfig
from model.interp.plan import estimate_nbytes
from model.interp.trace import run_with_trace
from model.nn.gpt import GPT, KVCache, init_model
from model.nn.hooks import ablate_heads, use_mask
from model.nn.layers import apply_rope, rope_tables, sinusoidal_table

VARIANTS = {
    "default": {},
    "sinusoidal": {"positions": "sinusoidal"},
    "rope": {"positions": "rope"},
    "no-positions": {"positions": "none"},
    "rmsnorm": {"norm": "rmsnorm"},
    "post-ln": {"norm_position": "post"},
    "post-ln-rms": {"norm_position": "post", "norm": "rmsnorm"},
    "relu": {"mlp": "relu"},
    "swiglu": {"mlp": "swiglu", "d_ff": 40},
    "gelu-tanh": {"gelu_approx": "tanh"},
    "gqa": {"n_kv_heads": 2},
    "mqa": {"n_kv_heads": 1},
    "free-head-dim": {"head_dim": 12},
    "unscaled": {"attn_scale": "none"},
    "learned-scale": {"attn_scale": "learned"},
    "qk-norm": {"attn_scale": "qk_norm"},
    "bidirectional": {"causal": False},
    "bias-qkv": {"bias": "qkv"},
    "no-bias": {"bias": "none"},
    "tied": {"tie_embeddings": True},
}


def tiny(**kw) -> GPTConfig:
    base = dict(vocab_size=37, context_length=24, n_layers=2, d_model=32, n_heads=4)
    base.update(kw)
    return GPTConfig(**base)


@pytest.fixture(params=sorted(VARIANTS), ids=sorted(VARIANTS))
def variant(request):
    torch.manual_seed(0)
    model = GPT(tiny(**VARIANTS[request.param])).eval()
    # shake the norms and scales away from their init so equality is not an accident of 1s and 0s
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    idx = torch.randint(0, 37, (2, 19))
    return model, idx


def test_trace_logits_equal_fast_logits(variant):
    model, idx = variant
    fast, _ = model(idx)
    trace = run_with_trace(model, idx)
    torch.testing.assert_close(trace.logits, fast, rtol=1e-4, atol=1e-5)


def test_weights_are_softmax_of_masked_scaled_scores(variant):
    model, idx = variant
    trace = run_with_trace(model, idx)
    for layer in range(model.config.core.n_layers):
        scaled = trace["scores", layer]
        masked = scaled.masked_fill(~trace.mask, float("-inf"))
        torch.testing.assert_close(trace["pattern", layer], torch.softmax(masked, dim=-1))
        rows = trace["pattern", layer].sum(-1)
        torch.testing.assert_close(rows, torch.ones_like(rows))


def test_scaling_rule_is_what_the_config_says(variant):
    model, idx = variant
    cfg = model.config
    trace = run_with_trace(model, idx)
    raw, scaled = trace["scores_raw", 0], trace["scores", 0]
    if cfg.attention.attn_scale == "sqrt_dk":
        torch.testing.assert_close(scaled, raw / math.sqrt(cfg.d_head))
    elif cfg.attention.attn_scale == "none":
        torch.testing.assert_close(scaled, raw)
    elif cfg.attention.attn_scale == "learned":
        tau = model.blocks[0].attn.scale.detach().view(1, -1, 1, 1)
        torch.testing.assert_close(scaled, raw * tau)
    else:  # qk_norm: g · cos(q, k)
        q, k = trace["q", 0], trace["k", 0]
        cos = raw / (q.norm(dim=-1)[..., :, None] * k.norm(dim=-1)[..., None, :])
        gain = model.blocks[0].attn.qk_gain.detach().view(1, -1, 1, 1)
        torch.testing.assert_close(scaled, gain * cos, rtol=1e-4, atol=1e-5)


def test_future_is_exactly_zero_when_causal_and_not_otherwise(variant):
    model, idx = variant
    trace = run_with_trace(model, idx)
    T = idx.shape[1]
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    w = trace["pattern", 1]
    if model.config.core.causal:
        assert torch.equal(trace.mask, ~future)
        assert (w[..., future] == 0).all()
    else:
        assert trace.mask.all()
        assert (w[..., future] > 0).all()


def test_gqa_heads_share_keys_and_values():
    torch.manual_seed(1)
    model = GPT(tiny(n_kv_heads=2)).eval()
    trace = run_with_trace(model, torch.randint(0, 37, (1, 10)))
    k = trace["k", 0]  # [B, H, T, d_k], expanded from 2 kv heads to 4 query heads
    assert torch.equal(k[:, 0], k[:, 1]) and torch.equal(k[:, 2], k[:, 3])
    assert not torch.equal(k[:, 0], k[:, 2])


def test_kv_cache_gives_the_same_logits_as_one_pass(variant):
    model, idx = variant
    if not model.config.core.causal:
        pytest.skip("a bidirectional model's earlier positions see later ones: no incremental decoding")
    full, _ = model(idx)
    cache = KVCache(model.config, batch=2, max_len=24)
    parts = [model(idx[:, a:b], kv_cache=cache)[0] for a, b in ((0, 7), (7, 8), (8, 19))]
    torch.testing.assert_close(torch.cat(parts, dim=1), full, rtol=1e-4, atol=1e-5)
    assert cache.length == 19


def test_kv_cache_size_shrinks_with_fewer_kv_heads():
    sizes = {h: KVCache(tiny(n_kv_heads=h), 1, 24).nbytes for h in (4, 2, 1)}
    assert sizes[4] == 2 * sizes[2] == 4 * sizes[1]


def test_ablating_a_head_changes_logits_and_only_that_head():
    torch.manual_seed(2)
    model = GPT(tiny()).eval()
    idx = torch.randint(0, 37, (1, 12))
    base = run_with_trace(model, idx)
    with model.hooks(ablate_heads({(0, 1): "zero"})):
        zeroed = run_with_trace(model, idx)
    assert (zeroed["z", 0][:, 1] == 0).all()
    torch.testing.assert_close(zeroed["z", 0][:, 0], base["z", 0][:, 0])
    assert not torch.allclose(zeroed.logits, base.logits)
    with model.hooks(ablate_heads({(0, 1): "mean"})):
        meaned = run_with_trace(model, idx)
    h = meaned["z", 0][0, 1]
    torch.testing.assert_close(h, base["z", 0][0, 1].mean(0, keepdim=True).expand_as(h))
    # restoring means running without ablation: exactly the original logits
    assert torch.equal(model(idx)[0], model(idx)[0])
    torch.testing.assert_close(run_with_trace(model, idx).logits, base.logits, rtol=0, atol=0)


def test_custom_mask_overrides_causal():
    torch.manual_seed(3)
    model = GPT(tiny()).eval()
    T = 10
    window = torch.tril(torch.ones(T, T, dtype=torch.bool)) & ~torch.tril(
        torch.ones(T, T, dtype=torch.bool), diagonal=-3
    )
    idx = torch.randint(0, 37, (1, T))
    with model.hooks(use_mask(window)):
        trace = run_with_trace(model, idx)
        fast, _ = model(idx)
    assert torch.equal(trace.mask, window)
    assert (trace["pattern", 0][..., ~window] == 0).all()
    torch.testing.assert_close(fast, trace.logits, rtol=1e-4, atol=1e-5)
    with (
        pytest.raises(ValueError, match=r"attn_mask has shape \(10, 10\), expected \(9, 9\)"),
        model.hooks(use_mask(window)),
    ):
        model(idx[:, :9])


def test_selective_trace_and_float16_memory():
    torch.manual_seed(4)
    cfg = tiny(n_layers=3)
    model = GPT(cfg).eval()
    idx = torch.randint(0, 37, (1, 16))
    full32 = run_with_trace(model, idx)
    some16 = run_with_trace(model, idx, layers=[1], kinds=["pattern", "resid_post"], dtype=torch.float16)
    assert some16.layers == [1] and some16.kinds == {"pattern", "resid_post"}
    assert some16["pattern", 1].dtype == torch.float16
    torch.testing.assert_close(some16.logits, full32.logits, rtol=1e-4, atol=1e-5)
    expected = estimate_nbytes(3, 4, 16, 32, 8, kinds=["pattern", "resid_post"], bytes_per_value=2) // 3
    assert some16.nbytes == expected
    assert full32.nbytes == estimate_nbytes(3, 4, 16, 32, 8, bytes_per_value=4)
    with pytest.raises(KeyError, match="recorded kinds"):
        some16["pattern", 0]


def test_trace_budget_for_a_gpt2_sized_prompt_is_as_documented():
    # 12 layers, 12 heads, 1024 tokens, weights only in float16: 302 MB, not gigabytes
    n = estimate_nbytes(12, 12, 1024, 768, 64, kinds=["pattern"], bytes_per_value=2)
    assert n == 12 * 12 * 1024 * 1024 * 2 and 300e6 < n < 310e6


def test_resid_norms_and_numpy_export():
    torch.manual_seed(5)
    model = GPT(tiny()).eval()
    trace = run_with_trace(model, torch.randint(0, 37, (1, 9)))
    names, norms = trace.resid_norms()
    assert names == ["embed", "L0.mid", "L0.post", "L1.mid", "L1.post"]
    assert norms.shape == (5, 9) and (norms > 0).all()
    arrays = trace.to_numpy()
    assert arrays["pattern"].shape == (2, 4, 9, 9)
    assert arrays["logits"].shape == (9, 37) and arrays["mask"].dtype == bool
    torch.testing.assert_close(
        torch.from_numpy(arrays["attn_write_norm"][0]), trace["attn_out", 0][0].norm(dim=-1)
    )


def test_post_ln_has_no_final_norm_and_tied_head_shares_weights():
    post = GPT(tiny(norm_position="post"))
    assert post.norm_f is None and not any(n.startswith("norm_f") for n, _ in post.named_parameters())
    tied = GPT(tiny(tie_embeddings=True))
    assert tied.lm_head is None
    assert tied.num_params() == GPT(tiny()).num_params() - 37 * 32


def test_rope_score_depends_only_on_offset():
    cos, sin = rope_tables(64, 8)
    torch.manual_seed(6)
    q, k = torch.randn(8), torch.randn(8)

    def score(m, n):
        qm = apply_rope(q.view(1, 1, 1, 8), cos[m : m + 1], sin[m : m + 1])
        kn = apply_rope(k.view(1, 1, 1, 8), cos[n : n + 1], sin[n : n + 1])
        return (qm * kn).sum().item()

    assert score(10, 7) == pytest.approx(score(40, 37), abs=1e-5)
    assert score(10, 7) != pytest.approx(score(10, 3), abs=1e-3)


def test_sinusoidal_table_values():
    t = sinusoidal_table(50, 16)
    assert t[0, 0] == 0 and t[0, 1] == 1
    assert t[3, 2] == pytest.approx(math.sin(3 / 10000 ** (2 / 16)), abs=1e-6)


def test_building_needs_a_vocabulary_and_a_valid_config():
    with pytest.raises(ConfigError, match="vocab_size"):
        GPT(GPTConfig())
    with pytest.raises(ConfigError, match="divisible"):
        GPT(GPTConfig(vocab_size=10, d_model=30))


def test_too_long_input_is_a_clear_error():
    model = GPT(tiny())
    with pytest.raises(ValueError, match="longer than context_length=24"):
        model(torch.zeros(1, 25, dtype=torch.long))


def test_seeded_build_is_reproducible():
    a, b = init_model(tiny(), seed=7), init_model(tiny(), seed=7)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n_heads=st.sampled_from([1, 2, 4]),
    kv_div=st.sampled_from([1, 2, 4]),
    head_dim=st.sampled_from([None, 4, 6]),
    positions=st.sampled_from(["learned", "sinusoidal", "rope", "none"]),
    norm=st.sampled_from(["layernorm", "rmsnorm"]),
    norm_position=st.sampled_from(["pre", "post"]),
    mlp=st.sampled_from(["gelu", "relu", "swiglu"]),
    attn_scale=st.sampled_from(["sqrt_dk", "none", "learned", "qk_norm"]),
    causal=st.booleans(),
    bias=st.sampled_from(["all", "qkv", "none"]),
    tie=st.booleans(),
    T=st.integers(1, 12),
)
def test_trace_equals_fast_for_random_configs(
    n_heads, kv_div, head_dim, positions, norm, norm_position, mlp, attn_scale, causal, bias, tie, T
):
    n_kv = max(1, n_heads // kv_div)
    cfg = GPTConfig(
        vocab_size=23,
        context_length=12,
        n_layers=2,
        d_model=8 * n_heads,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=head_dim,
        positions=positions,
        norm=norm,
        norm_position=norm_position,
        mlp=mlp,
        attn_scale=attn_scale,
        causal=causal,
        bias=bias,
        tie_embeddings=tie,
    )
    torch.manual_seed(0)
    model = GPT(cfg).eval()
    idx = torch.randint(0, 23, (1, T))
    fast, _ = model(idx)
    trace = run_with_trace(model, idx)
    torch.testing.assert_close(trace.logits, fast, rtol=1e-4, atol=1e-5)
    w = trace.stack("pattern")
    assert w.shape == (2, n_heads, T, T)
    assert abs(w.sum(-1) - 1).max() < 1e-5


def test_non_embedding_count_leaves_out_tables_and_untied_head():
    untied, tied = GPT(tiny()), GPT(tiny(tie_embeddings=True))
    blocks = sum(p.numel() for p in untied.blocks.parameters()) + sum(
        p.numel() for p in untied.norm_f.parameters()
    )
    assert untied.num_params(non_embedding=True) == blocks
    assert tied.num_params(non_embedding=True) == blocks


def test_layernorm_without_shift_is_one_field_away():
    cfg = tiny(norm_bias=False)
    model = GPT(cfg)
    assert model.blocks[0].norm1.bias is None and model.norm_f.bias is None
    assert GPT(tiny()).num_params() - model.num_params() == (2 * cfg.core.n_layers + 1) * cfg.core.d_model
    # RMSNorm never has a shift, whatever the field says
    assert GPT(tiny(norm="rmsnorm", norm_bias=False)).num_params() == GPT(tiny(norm="rmsnorm")).num_params()


# ---- the written-out softmax in blocks of query rows (Attention.attend) ----------------------------
BLOCKED = {
    "causal": {},
    "gqa": {"n_kv_heads": 2, "positions": "rope"},
    "mqa-learned-scale": {"n_kv_heads": 1, "attn_scale": "learned"},
    "qk-norm": {"attn_scale": "qk_norm"},
    "sliding-window": {"sliding_window": 5, "positions": "rope"},
}


@pytest.mark.parametrize("kw", BLOCKED.values(), ids=list(BLOCKED))
def test_blocked_softmax_equals_the_square_one(kw, monkeypatch):
    """Recording only ``pattern`` takes the query rows in blocks (each reads only the keys it may see);
    recording ``scores`` too forms the whole square. Both give the same weights, and the fused logits."""
    from model.nn.gpt import Attention

    monkeypatch.setattr(Attention, "QUERY_BLOCK", 4)  # 19 tokens: blocks of 4, 4, 4, 4 and 3 rows
    torch.manual_seed(0)
    model = GPT(tiny(**kw)).eval()
    idx = torch.randint(0, 37, (2, 19))
    fast, _ = model(idx)
    blocked = run_with_trace(model, idx, kinds=("pattern",))
    square = run_with_trace(model, idx, kinds=("pattern", "scores"))
    for layer in range(2):
        torch.testing.assert_close(blocked["pattern", layer], square["pattern", layer], rtol=0, atol=1e-6)
        assert torch.equal(blocked["pattern", layer] > 0, square["pattern", layer] > 0)  # zeros are exact
    torch.testing.assert_close(blocked.logits, fast, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(square.logits, fast, rtol=1e-4, atol=1e-5)
    assert not torch.equal(blocked["pattern", 0], blocked["pattern", 1])  # each layer its own copy


def test_blocked_softmax_after_a_kv_cache_sees_every_cached_key(monkeypatch):
    from model.nn.gpt import Attention

    monkeypatch.setattr(Attention, "QUERY_BLOCK", 3)
    torch.manual_seed(1)
    model = GPT(tiny(n_kv_heads=2, positions="rope")).eval()
    idx = torch.randint(0, 37, (1, 17))
    whole, _ = model(idx)
    cache = KVCache(model.config, 1, 17)
    seen = []
    with torch.no_grad():
        model(idx[:, :9], kv_cache=cache)
        with model.hooks({"blocks.1.attn.pattern": lambda x, hook: seen.append(x.clone())}):
            rest, _ = model(idx[:, 9:], kv_cache=cache)
    torch.testing.assert_close(rest, whole[:, 9:], rtol=1e-4, atol=1e-5)
    (pattern,) = seen  # [1, H, 8 new queries, 17 keys]: query i sees keys 0..9+i
    assert pattern.shape == (1, 4, 8, 17)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(1, 4, 8))
    for i in range(8):
        assert (pattern[..., i, 10 + i :] == 0).all() and (pattern[..., i, : 10 + i] > 0).all()


def test_a_pattern_edited_in_place_or_replaced_is_what_attention_uses(monkeypatch):
    """An intervention on ``attn.pattern`` (in place, or by returning a new tensor) changes ``z`` in the
    blocked path exactly as in the square one (which also records ``scores``)."""
    from model.nn.gpt import Attention

    monkeypatch.setattr(Attention, "QUERY_BLOCK", 4)
    torch.manual_seed(2)
    model = GPT(tiny()).eval()
    with torch.no_grad():  # a head's output large enough that its pattern visibly moves the logits
        model.blocks[0].attn.o_proj.weight.mul_(30)
    idx = torch.randint(0, 37, (1, 15))

    def self_in_place(x, hook):  # head 1 attends to its own token only
        x[:, 1] = torch.eye(x.shape[-1])

    def self_new(x, hook):
        x = x.clone()
        self_in_place(x, hook)
        return x

    fast, _ = model(idx)
    for edit in (self_in_place, self_new):
        hooks = {"blocks.0.attn.pattern": edit}
        blocked = run_with_trace(model, idx, kinds=("pattern",), hooks=hooks)
        square = run_with_trace(model, idx, kinds=("pattern", "scores"), hooks=hooks)
        torch.testing.assert_close(blocked.logits, square.logits, rtol=1e-5, atol=1e-6)
        assert (blocked.logits - fast).abs().max() > 1e-2  # the edit did change the output
        torch.testing.assert_close(blocked["pattern", 0], square["pattern", 0], rtol=0, atol=1e-6)


def test_a_hook_that_keeps_the_pattern_gets_each_layers_own(monkeypatch):
    """Only hooks marked ``reader`` (they copy what they keep) let the layers share one pattern array;
    a hook that keeps the tensor itself gets a fresh one per layer."""
    from model.nn.gpt import Attention
    from model.nn.hooks import reader

    monkeypatch.setattr(Attention, "QUERY_BLOCK", 4)
    torch.manual_seed(3)
    model = GPT(tiny(n_layers=3)).eval()
    idx = torch.randint(0, 37, (1, 11))
    kept, copied, ptrs = [], [], []
    hooks = [(f"blocks.{i}.attn.pattern", lambda x, hook: kept.append(x)) for i in range(3)]
    with torch.no_grad(), model.hooks(hooks):
        model(idx)
    assert len({t.data_ptr() for t in kept}) == 3

    @reader
    def copy(x, hook):
        copied.append(x.clone())
        ptrs.append(x.data_ptr())

    with torch.no_grad(), model.hooks([(f"blocks.{i}.attn.pattern", copy) for i in range(3)]):
        model(idx)
    assert len(set(ptrs)) == 1  # one array for the three layers
    for a, b in zip(kept, copied):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
