"""Today's block, each part against a direct written-out reference (a few lines of plain torch here):
mixture-of-experts routing and combination, its load-balancing loss, multi-head latent attention and
its cache, attention sinks, soft-capping, local and global layers, sandwich and output norms; and the
fused and recorded paths agree for every part."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from model.config import ConfigError, GPTConfig
from model.interp.trace import run_with_trace
from model.nn.gpt import GPT, KVCache
from model.nn.layers import apply_rope

BASE = dict(
    vocab_size=53,
    context_length=48,
    n_layers=3,
    d_model=32,
    n_heads=4,
    positions="rope",
    norm="rmsnorm",
    mlp="swiglu",
    bias="none",
)


def model_of(**kw) -> GPT:
    """A model with uneven weights (every parameter shaken), in evaluation mode."""
    torch.manual_seed(0)
    model = GPT(GPTConfig(**{**BASE, **kw})).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def tokens(T: int = 30, B: int = 2) -> torch.Tensor:
    return torch.randint(0, BASE["vocab_size"], (B, T), generator=torch.Generator().manual_seed(T))


def captured(model: GPT, idx: torch.Tensor, names: list[str]) -> dict[str, torch.Tensor]:
    """The activations at ``names`` in one forward pass (hooks that read)."""
    got: dict[str, torch.Tensor] = {}
    hooks = [(n, lambda x, hook, n=n: got.__setitem__(n, x.detach().clone())) for n in names]
    with torch.no_grad(), model.hooks(hooks):
        model(idx)
    return got


# ---------------------------------------------------------------------------------------------
# mixture of experts
# ---------------------------------------------------------------------------------------------
ROUTERS = ["topk_softmax", "softmax_topk", "softmax_topk_norm", "sigmoid_topk_norm"]


def _route_by_hand(z: torch.Tensor, k: int, rule: str) -> tuple[list[int], list[float]]:
    """One token's chosen experts and weights from its router logits z [E], as each family writes it."""
    if rule == "topk_softmax":  # Mixtral: top-k of the logits, softmax over those k
        top = sorted(range(len(z)), key=lambda e: -float(z[e]))[:k]
        w = torch.softmax(z[top], dim=0)
        return top, w.tolist()
    p = torch.sigmoid(z) if rule.startswith("sigmoid") else torch.softmax(z, dim=0)
    top = sorted(range(len(z)), key=lambda e: -float(p[e]))[:k]
    w = p[top]
    if rule != "softmax_topk":
        w = w / w.sum()
    return top, w.tolist()


@pytest.mark.parametrize("rule", ROUTERS)
def test_moe_routes_and_combines_token_by_token(rule):
    model = model_of(n_experts=5, n_experts_per_token=2, n_shared_experts=1, expert_d_ff=24, router=rule)
    moe = model.blocks[1].mlp
    idx = tokens()
    got = captured(model, idx, ["blocks.1.mlp.router", "blocks.1.mlp.chosen", "blocks.1.mlp.gates"])
    x_in = captured(model, idx, ["blocks.1.resid_mid"])["blocks.1.resid_mid"]
    x = model.blocks[1].norm2(x_in)  # what the feed-forward reads
    with torch.no_grad():
        out = moe(x)
        for b in range(2):
            for t in range(idx.shape[1]):
                z = moe.gate.weight @ x[b, t]  # no router bias (bias="none")
                torch.testing.assert_close(got["blocks.1.mlp.router"][b, t], z, rtol=1e-5, atol=1e-6)
                experts, weights = _route_by_hand(z, 2, rule)
                assert sorted(got["blocks.1.mlp.chosen"][b, t].tolist()) == sorted(experts)
                by_expert = dict(
                    zip(got["blocks.1.mlp.chosen"][b, t].tolist(), got["blocks.1.mlp.gates"][b, t])
                )
                for e, w in zip(experts, weights):
                    assert float(by_expert[e]) == pytest.approx(w, rel=1e-5)
                y = sum(w * moe.experts[e](x[b, t][None])[0] for e, w in zip(experts, weights))
                y = y + moe.shared(x[b, t][None])[0]  # the shared expert, always on
                torch.testing.assert_close(out[b, t], y, rtol=1e-4, atol=1e-6)
    if rule == "softmax_topk":  # not renormalised: the weights of a token sum to less than 1
        assert (got["blocks.1.mlp.gates"].sum(-1) < 1).all()
    else:
        torch.testing.assert_close(got["blocks.1.mlp.gates"].sum(-1), torch.ones(2, idx.shape[1]))


def test_moe_dense_first_layers_and_the_load_balancing_loss():
    model = model_of(n_experts=4, n_experts_per_token=2, moe_dense_layers=1, router_aux_loss=0.05)
    assert not hasattr(model.blocks[0].mlp, "gate") and hasattr(model.blocks[1].mlp, "gate")
    idx = tokens()
    targets = torch.randint(0, BASE["vocab_size"], idx.shape, generator=torch.Generator().manual_seed(1))
    model.train()
    logits, loss = model(idx, targets)
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    aux = []
    x = captured(model.eval(), idx, ["blocks.1.mlp.router", "blocks.2.mlp.router"])
    model.train()
    for layer in (1, 2):
        z = x[f"blocks.{layer}.mlp.router"].reshape(-1, 4)
        chosen = z.topk(2, dim=-1).indices  # topk_softmax picks the largest logits
        f = torch.stack([(chosen == e).float().sum() for e in range(4)]) / chosen.numel()
        P = torch.softmax(z, dim=-1).mean(0)
        aux.append(4 * (f * P).sum())
        torch.testing.assert_close(model.blocks[layer].mlp.load, f)  # what the Train tab shows
    torch.testing.assert_close(loss, ce + 0.05 * torch.stack(aux).mean(), rtol=1e-5, atol=1e-6)
    loss.backward()
    assert model.blocks[1].mlp.gate.weight.grad.abs().sum() > 0  # the router learns from it


def test_moe_fields_are_checked_in_one_line_each():
    with pytest.raises(ConfigError, match="n_experts_per_token=5 is more than n_experts=4"):
        GPTConfig(**BASE, n_experts=4, n_experts_per_token=5).validate()
    with pytest.raises(ConfigError, match="n_shared_experts needs n_experts"):
        GPTConfig(**BASE, n_shared_experts=1).validate()
    with pytest.raises(ConfigError, match="moe_dense_layers=3 leaves no mixture-of-experts layer"):
        GPTConfig(**BASE, n_experts=4, moe_dense_layers=3).validate()
    with pytest.raises(ConfigError, match="router='top1' is not one of"):
        GPTConfig(**BASE, n_experts=4, router="top1").validate()


# ---------------------------------------------------------------------------------------------
# multi-head latent attention
# ---------------------------------------------------------------------------------------------
MLA = dict(kv_lora_rank=10, q_lora_rank=12, qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=6)


def test_latent_attention_scores_and_output_equal_the_written_out_formulas():
    model = model_of(**MLA)
    attn, cfg = model.blocks[1].attn, model.config
    idx = tokens(T=20, B=1)
    got = captured(model, idx, ["blocks.1.resid_pre", "blocks.1.attn.pattern", "blocks.1.attn.out"])
    x = model.blocks[1].norm1(got["blocks.1.resid_pre"])[0]  # [T, d]
    T, H, r, nope, rope, dv = 20, 4, 10, 8, 4, 6
    with torch.no_grad():
        c_q = attn.q_a_norm(x @ attn.q_a.weight.T)
        q = (c_q @ attn.q_b.weight.T).view(T, H, nope + rope)
        kv_a = x @ attn.kv_a.weight.T
        c_kv, k_r = attn.kv_a_norm(kv_a[:, :r]), kv_a[:, r:]  # the latent, the shared rotary key
        cos, sin = model.pos_emb(0, T)
        q_r = apply_rope(q[..., nope:].transpose(0, 1)[None], cos, sin)[0]  # [H, T, rope]
        k_r = apply_rope(k_r[None, None], cos, sin)[0, 0]  # [T, rope]
        kv = (c_kv @ attn.kv_b.weight.T).view(T, H, nope + dv)
        out = torch.zeros(T, H * dv)
        for h in range(H):
            k_h = torch.cat([kv[:, h, :nope], k_r], dim=-1)
            q_h = torch.cat([q[:, h, :nope], q_r[h]], dim=-1)
            s = q_h @ k_h.T / math.sqrt(nope + rope)
            s = s.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
            a = torch.softmax(s, dim=-1)
            torch.testing.assert_close(got["blocks.1.attn.pattern"][0, h], a, rtol=1e-4, atol=1e-6)
            out[:, h * dv : (h + 1) * dv] = a @ kv[:, h, nope:]
        torch.testing.assert_close(
            got["blocks.1.attn.out"][0], out @ attn.o_proj.weight.T, rtol=1e-4, atol=1e-5
        )
    assert cfg.qk_dim == 12 and cfg.v_dim == 6


def test_the_latent_cache_holds_the_latent_and_is_smaller_by_its_formula():
    model = model_of(**MLA)
    cfg = model.config
    idx = tokens(T=24, B=2)
    with torch.no_grad():
        whole, _ = model(idx)
        cache = KVCache(cfg, 2, 24)
        first, _ = model(idx[:, :15], kv_cache=cache)
        rest, _ = model(idx[:, 15:], kv_cache=cache)
    torch.testing.assert_close(torch.cat([first, rest], 1), whole, rtol=1e-4, atol=1e-5)
    # the cache of block 0 holds its latent c_KV: Norm(W_DKV x) of every position
    x = captured(model, idx, ["blocks.0.resid_pre"])["blocks.0.resid_pre"]
    attn = model.blocks[0].attn
    with torch.no_grad():
        latent = attn.kv_a_norm((model.blocks[0].norm1(x) @ attn.kv_a.weight.T)[..., :10])
    torch.testing.assert_close(cache.keys[0][:, 0], latent, rtol=1e-5, atol=1e-6)
    allocated = cache.nbytes
    assert allocated == 3 * 2 * 24 * (10 + 4) * 4  # L·B·T·(r + d_rope) float32
    plain = dict(kv_lora_rank=None, q_lora_rank=None, qk_rope_head_dim=None, qk_nope_head_dim=None)
    mha = KVCache(cfg.replace(**plain, v_head_dim=None), 2, 24)
    mha_bytes = mha.nbytes
    assert mha_bytes / allocated == pytest.approx((2 * 4 * 8) / (10 + 4))  # 2·H·d_k / (r + d_rope)


def test_latent_attention_fields_are_checked():
    with pytest.raises(ConfigError, match="needs positions='rope'"):
        GPTConfig(**{**BASE, "positions": "learned"}, kv_lora_rank=8).validate()
    with pytest.raises(ConfigError, match="leave n_kv_heads empty"):
        GPTConfig(**BASE, kv_lora_rank=8, n_kv_heads=2).validate()
    with pytest.raises(ConfigError, match="v_head_dim needs kv_lora_rank"):
        GPTConfig(**BASE, v_head_dim=8).validate()


# ---------------------------------------------------------------------------------------------
# sinks, soft-capping, local and global layers, sandwich and output norms
# ---------------------------------------------------------------------------------------------
def test_a_sink_joins_the_softmax_denominator_and_keeps_its_share():
    model = model_of(attn_sinks=True, n_kv_heads=2)
    with torch.no_grad():
        model.blocks[0].attn.sinks.copy_(torch.tensor([-2.0, 0.0, 1.0, 3.0]))
    idx = tokens(T=12, B=1)
    got = captured(model, idx, ["blocks.0.attn.scores", "blocks.0.attn.pattern"])
    s = got["blocks.0.attn.scores"][0]  # [H, T, T], before the mask
    s = s.masked_fill(~torch.ones(12, 12, dtype=torch.bool).tril(), float("-inf"))
    b = model.blocks[0].attn.sinks.detach().view(4, 1, 1)
    want = torch.exp(s) / (torch.exp(s).sum(-1, keepdim=True) + torch.exp(b))
    torch.testing.assert_close(got["blocks.0.attn.pattern"][0], want, rtol=1e-5, atol=1e-6)
    share = 1 - got["blocks.0.attn.pattern"][0].sum(-1)  # what went to the sink
    torch.testing.assert_close(
        share, (torch.exp(b) / (torch.exp(s).sum(-1, keepdim=True) + torch.exp(b)))[..., 0]
    )
    assert share[3].mean() > share[0].mean()  # the larger the sink logit, the more it takes


def test_soft_capped_scores_and_logits():
    capped = model_of(attn_softcap=2.0, final_softcap=3.0)
    plain = model_of()  # the same weights (same seed), no caps
    idx = tokens(T=10, B=1)
    q = captured(capped, idx, ["blocks.0.attn.q", "blocks.0.attn.k", "blocks.0.attn.scores"])
    raw = q["blocks.0.attn.q"] @ q["blocks.0.attn.k"].transpose(-2, -1) / math.sqrt(8)
    torch.testing.assert_close(q["blocks.0.attn.scores"], 2.0 * torch.tanh(raw / 2.0), rtol=1e-5, atol=1e-6)
    assert q["blocks.0.attn.scores"].abs().max() < 2.0  # no score beyond the cap
    with torch.no_grad():
        one_layer = [model_of(n_layers=1, final_softcap=3.0), model_of(n_layers=1)]
        lc, lp = (m(idx)[0] for m in one_layer)
    torch.testing.assert_close(lc, 3.0 * torch.tanh(lp / 3.0), rtol=1e-5, atol=1e-6)
    assert plain(idx)[0].shape == lc.shape


def test_local_layers_see_only_the_window_and_global_ones_everything():
    model = model_of(
        n_layers=4, sliding_window=4, window_pattern="LLG"
    )  # layers 0, 1 local; 2 global; 3 local
    assert [model.config.is_local_layer(i) for i in range(4)] == [True, True, False, True]
    idx = tokens(T=20, B=1)  # longer than the window
    got = captured(model, idx, [f"blocks.{i}.attn.pattern" for i in range(4)])
    q = torch.arange(20)[:, None]
    k = torch.arange(20)[None, :]
    window = (k <= q) & (k > q - 4)
    for i in range(4):
        w = got[f"blocks.{i}.attn.pattern"][0]
        allowed = window if model.config.is_local_layer(i) else (k <= q)
        assert (w[:, ~allowed] == 0).all() and (w[:, allowed] > 0).all()
        assert torch.equal(model.attention_mask(20, layer=i), allowed)


@pytest.mark.parametrize("position", ["sandwich", "output"])
def test_sandwich_and_output_norms(position):
    model = model_of(norm_position=position)
    block = model.blocks[1]
    idx = tokens(T=9, B=1)
    got = captured(model, idx, ["blocks.1.resid_pre", "blocks.1.attn.out", "blocks.1.resid_mid"])
    x, a = got["blocks.1.resid_pre"], got["blocks.1.attn.out"]
    with torch.no_grad():
        want = x + (block.post_norm1(a) if position == "sandwich" else block.norm1(a))
    torch.testing.assert_close(got["blocks.1.resid_mid"], want, rtol=1e-5, atol=1e-6)
    assert model.norm_f is not None and (position == "sandwich") == hasattr(block, "post_norm2")


# ---------------------------------------------------------------------------------------------
# every part: the fused path, the recorded one and incremental decoding agree
# ---------------------------------------------------------------------------------------------
PARTS = {
    "moe": dict(n_experts=4, n_experts_per_token=2, n_shared_experts=1, moe_dense_layers=1),
    "moe-sigmoid": dict(n_experts=4, n_experts_per_token=3, router="sigmoid_topk_norm"),
    "mla": MLA,
    "mla-full-q": dict(kv_lora_rank=8),
    "sinks-gqa": dict(attn_sinks=True, n_kv_heads=2),
    "softcaps": dict(attn_softcap=4.0, final_softcap=6.0),
    "local-global": dict(sliding_window=6, window_pattern="LG"),
    "sandwich": dict(norm_position="sandwich"),
    "output-norms": dict(norm_position="output"),
    "deepseek-router": dict(
        n_experts=8,
        n_experts_per_token=2,
        router="sigmoid_topk_norm",
        router_choice_bias=True,
        router_groups=4,
        router_topk_groups=2,
        router_scale=2.5,
        kv_lora_rank=8,
        positions="rope",
        rope_scaling="yarn",
        rope_factor=4.0,
        rope_original_context=8,
        attn_scale_dim=5.0,
    ),
    "gpt-oss-clamped-yarn": dict(
        n_experts=4,
        bias="all",
        swiglu_limit=1.0,
        attn_sinks=True,
        sliding_window=6,
        window_pattern="LG",
        rope_scaling="yarn",
        rope_factor=8.0,
        rope_original_context=8,
        rope_truncate=False,
    ),
    "gemma3-local-rope": dict(
        sliding_window=6,
        window_pattern="LLG",
        rope_local_base=100.0,
        rope_scaling="linear",
        rope_factor=4.0,
        qk_rmsnorm=True,
        norm_offset=True,
        attn_scale_dim=12.0,
        norm_position="sandwich",
    ),
    "olmo2-qk-norm-all": dict(qk_rmsnorm=True, qk_norm_scope="all", norm_position="output", n_kv_heads=2),
    "everything": dict(
        n_experts=4,
        kv_lora_rank=8,
        attn_sinks=True,
        attn_softcap=5.0,
        final_softcap=9.0,
        sliding_window=6,
        window_pattern="LLG",
        norm_position="sandwich",
        bias="all",
    ),
}


@pytest.mark.parametrize("kw", PARTS.values(), ids=list(PARTS))
def test_fused_recorded_and_cached_paths_agree(kw, monkeypatch):
    from model.nn.attention import Attention

    monkeypatch.setattr(Attention, "QUERY_BLOCK", 8)  # the recorded path in several blocks
    model = model_of(**kw)
    idx = tokens(T=26)
    with torch.no_grad():
        fast, _ = model(idx)
        cache = KVCache(model.config, 2, 26)
        head, _ = model(idx[:, :11], kv_cache=cache)
        tail, _ = model(idx[:, 11:], kv_cache=cache)
    torch.testing.assert_close(torch.cat([head, tail], 1), fast, rtol=1e-4, atol=1e-5)
    for kinds in (None, ("pattern",)):  # the square softmax, and the blocked one
        trace = run_with_trace(model, idx, kinds=kinds)
        torch.testing.assert_close(trace.logits, fast, rtol=1e-4, atol=1e-5)
    w = trace.stack("pattern")
    assert w.shape == (3, 4, 26, 26) and (w.sum(-1) <= 1 + 1e-5).all()
    if kw.get("n_experts"):
        full = run_with_trace(model, idx, kinds=("chosen", "gates"))
        moe_layers = [i for i in range(3) if model.config.is_moe_layer(i)]
        assert full.layers == moe_layers and full["chosen", moe_layers[0]].dtype == torch.int64


# ---------------------------------------------------------------------------------------------
# the instruments on today's block
# ---------------------------------------------------------------------------------------------
def test_a_local_heads_pipeline_masks_with_its_window_and_a_sink_says_its_share():
    from model.interp.inspection import head_detail

    model = model_of(n_layers=2, sliding_window=3, window_pattern="LG", attn_sinks=True, attn_softcap=9.0)
    ids = tokens(T=10, B=1)[0].tolist()
    local, global_ = head_detail(model, ids, 0, 1), head_detail(model, ids, 1, 1)
    hidden = lambda d: int(np.isinf(d["scores_masked"].value).sum())  # noqa: E731
    assert hidden(global_) == 45 and hidden(local) == 45 + 28  # the window hides 28 more of 100
    assert "soft-capped: 9·tanh" in local["scores"].formula
    assert "the head's sink b_h takes" in local["pattern"].formula


def test_logit_attribution_adds_up_on_latent_attention_and_moe():
    from model.interp.analysis.attribution import direct_logit_attribution

    model = model_of(**MLA, n_experts=4)
    ids = tokens(T=12, B=1)[0]
    a = direct_logit_attribution(model, ids)
    assert a.heads.shape == (3, 4) and a.total == pytest.approx(a.logit, abs=1e-4)


@pytest.mark.parametrize(
    "kw",
    [
        dict(norm_position="sandwich", norm="rmsnorm", norm_offset=True),  # Gemma 2/3
        dict(norm_position="output", norm="rmsnorm"),  # OLMo 2
        dict(norm_position="sandwich", norm="layernorm"),  # the β of each sublayer norm too
        dict(final_softcap=0.5, norm="rmsnorm", norm_offset=True),  # Gemma 2's final cap
    ],
    ids=["gemma-sandwich", "olmo2-output", "layernorm-sandwich", "final-softcap"],
)
def test_logit_attribution_adds_up_through_norms_after_the_sublayers_and_a_final_cap(kw):
    """Each sublayer norm's scale frozen like the final norm's: the parts add up to the logit (before
    the cap, which ``capped`` holds), and a head's part is its write through both frozen norms."""
    from model.interp.analysis.attribution import direct_logit_attribution

    model = model_of(**kw)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    ids = tokens(T=12, B=1)[0]
    with torch.no_grad():
        logits, _ = model(torch.as_tensor(ids)[None])
    a = direct_logit_attribution(model, ids, token=3, other=5, position=7)
    assert a.total == pytest.approx(a.logit, abs=1e-5 * max(1.0, abs(a.logit)))
    want = float(logits[0, 7, 3] - logits[0, 7, 5])
    if "final_softcap" in kw:
        c = kw["final_softcap"]
        assert a.softcap == c and a.capped == pytest.approx(want, abs=1e-5)
        assert abs(a.capped) < 2 * c and abs(a.logit - a.capped) > 0.05  # the cap bends it
        z = np.arctanh(np.clip(logits[0, 7, [3, 5]].double().numpy() / c, -1, 1)) * c
        assert a.logit == pytest.approx(float(z[0] - z[1]), rel=1e-3)
    else:
        assert a.capped is None and a.logit == pytest.approx(want, abs=1e-5)
    assert len({round(float(v), 6) for v in a.heads.ravel()}) == a.heads.size  # every head its own part


@pytest.mark.parametrize(
    "kw",
    [dict(n_kv_heads=2), dict(kv_lora_rank=12, qk_rope_head_dim=4, qk_nope_head_dim=8, v_head_dim=8)],
    ids=["gqa", "mla"],
)
def test_the_allocated_kv_cache_per_token_is_the_budgets_formula(kw):
    from model.nn.measure import measure_kv_cache

    cfg = GPTConfig(**BASE, **kw)
    rows = {r.kind: r for r in measure_kv_cache(cfg)}
    for r in rows.values():
        assert r.measured_bytes is None or r.measured_bytes == r.formula_bytes, r.kind
    assert rows["MLA"].measured_bytes is not None
    assert rows["MHA"].formula_bytes / rows["MQA"].formula_bytes == BASE["n_heads"]
    if "n_kv_heads" in kw:
        assert rows["MHA"].measured_bytes / rows["GQA"].measured_bytes == BASE["n_heads"] / 2


def test_the_budget_check_places_every_parameter_of_todays_block():
    """The Budget tab's check (measured_parameters): each parameter of a model with every new part
    falls in one budget component, and the counts equal the calculator's."""
    from model.nn.measure import measured_parameters

    cfg = GPTConfig(**{**BASE, **PARTS["everything"]}, q_lora_rank=12, n_shared_experts=1, moe_dense_layers=1)
    check = measured_parameters(cfg)
    assert check.ok, check.mismatches()
    assert {"latent KV down", "router", "experts", "shared experts", "attention sinks"} <= set(check.measured)


# ---------------------------------------------------------------------------------------------
# the parts the families of today need beyond the block: score scale, QK-norm over all heads, a
# local RoPE base, YaRN, gpt-oss's clamped SwiGLU, DeepSeek-V3's router
# ---------------------------------------------------------------------------------------------
def test_attn_scale_dim_replaces_the_square_root_of_d_k():
    model = model_of(attn_scale_dim=3.0, attn_softcap=None)
    idx = tokens(T=10, B=1)
    got = captured(model, idx, ["blocks.0.attn.q", "blocks.0.attn.k", "blocks.0.attn.scores"])
    raw = got["blocks.0.attn.q"] @ got["blocks.0.attn.k"].transpose(-2, -1)
    torch.testing.assert_close(got["blocks.0.attn.scores"], raw / math.sqrt(3.0), rtol=1e-5, atol=1e-6)


def test_qk_norm_over_all_heads_normalises_q_and_k_before_the_split():
    model = model_of(qk_rmsnorm=True, qk_norm_scope="all", n_kv_heads=2)
    attn = model.blocks[0].attn
    assert attn.q_norm.weight.shape == (32,) and attn.k_norm.weight.shape == (16,)  # H·d_k, H_kv·d_k
    idx = tokens(T=9, B=1)
    got = captured(model, idx, ["blocks.0.resid_pre", "blocks.0.attn.q", "blocks.0.attn.k"])
    x = model.blocks[0].norm1(got["blocks.0.resid_pre"])[0]  # [T, d]

    def rms(v, w):
        return v / torch.sqrt(v.pow(2).mean(-1, keepdim=True) + model.config.normalization.norm_eps) * w

    cos, sin = model.pos_emb(0, 9)
    with torch.no_grad():
        q = rms(x @ attn.q_proj.weight.T, attn.q_norm.weight).view(9, 4, 8).transpose(0, 1)
        k = rms(x @ attn.k_proj.weight.T, attn.k_norm.weight).view(9, 2, 8).transpose(0, 1)
    torch.testing.assert_close(
        got["blocks.0.attn.q"][0], apply_rope(q[None], cos, sin)[0], rtol=1e-5, atol=1e-6
    )
    torch.testing.assert_close(
        got["blocks.0.attn.k"][0], apply_rope(k[None], cos, sin)[0], rtol=1e-5, atol=1e-6
    )


def test_local_layers_rotate_with_their_own_base_and_global_ones_with_the_scaled_one():
    model = model_of(
        n_layers=2,
        sliding_window=4,
        window_pattern="LG",
        rope_local_base=50.0,
        rope_scaling="linear",
        rope_factor=2.0,
    )
    T, d_k = 12, 8
    idx = tokens(T=T, B=1)
    names = [f"blocks.{i}.{n}" for i in (0, 1) for n in ("resid_pre", "attn.q", "attn.k")]
    got = captured(model, idx, names)
    pos = torch.arange(T, dtype=torch.float32)[:, None]
    for layer, base, factor in (
        (0, 50.0, 1.0),
        (1, model.config.positional.rope_base, 2.0),
    ):  # local, then global
        block = model.blocks[layer]
        theta = 1.0 / (base ** (torch.arange(0, d_k, 2, dtype=torch.float32) / d_k)) / factor
        cos, sin = torch.cos(pos * theta), torch.sin(pos * theta)
        with torch.no_grad():
            x = block.norm1(got[f"blocks.{layer}.resid_pre"])[0]
            for n, heads in (("q", 4), ("k", 4)):
                proj = getattr(block.attn, f"{n}_proj")
                before = (x @ proj.weight.T).view(T, heads, d_k).transpose(0, 1)[None]
                want = apply_rope(before, cos, sin)
                torch.testing.assert_close(got[f"blocks.{layer}.attn.{n}"], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("truncate", [True, False])
def test_yarn_frequencies_and_attention_factor_by_the_formula(truncate):
    from model.nn.layers import rope_frequencies

    cfg = GPTConfig(
        **{**BASE, "d_model": 64, "n_heads": 2},  # d_k 32
        rope_base=500.0,
        rope_scaling="yarn",
        rope_factor=16.0,
        rope_original_context=64,
        rope_beta_fast=8.0,
        rope_beta_slow=2.0,
        rope_truncate=truncate,
    ).validate()
    r = 32

    def dim(rotations):  # the dimension pair turning this many times over the original context
        return r * math.log(64 / (rotations * 2 * math.pi)) / (2 * math.log(500.0))

    lo, hi = dim(8.0), dim(2.0)
    if truncate:
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, r - 1)
    want = []
    for i in range(r // 2):
        theta = 500.0 ** (-2 * i / r)
        ramp = min(max((i - lo) / (hi - lo), 0.0), 1.0)  # 0: keep θ (fast pairs), 1: θ / factor
        want.append(theta / 16.0 * ramp + theta * (1 - ramp))
    torch.testing.assert_close(rope_frequencies(cfg), torch.tensor(want), rtol=1e-6, atol=0)
    assert cfg.rope_attention == pytest.approx(0.1 * math.log(16.0) + 1.0)
    model = GPT(cfg)
    cos, sin = model.pos_emb(0, 5)
    angles = torch.arange(5.0)[:, None] * rope_frequencies(cfg)[None]
    torch.testing.assert_close(cos, torch.cos(angles) * cfg.rope_attention)
    torch.testing.assert_close(sin, torch.sin(angles) * cfg.rope_attention)
    assert cfg.replace(rope_attn_factor=1.0).rope_attention == 1.0


def test_gpt_oss_clamped_swiglu_by_the_formula():
    model = model_of(swiglu_limit=0.5, bias="all")
    mlp = model.blocks[0].mlp
    x = torch.randn(7, 32, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        g, u = mlp.w_gate(x), mlp.w_up(x)
        assert (g > 0.5).any() and (u.abs() > 0.5).any()  # the clamps bite
        g, u = g.clamp(max=0.5), u.clamp(-0.5, 0.5)
        want = mlp.w_down((u + 1) * g * torch.sigmoid(1.702 * g))
        torch.testing.assert_close(mlp(x), want)


def test_deepseek_router_chooses_with_its_bias_among_the_best_groups_and_scales_the_weights():
    model = model_of(
        n_experts=8,
        n_experts_per_token=2,
        router="sigmoid_topk_norm",
        router_choice_bias=True,
        router_groups=4,
        router_topk_groups=2,
        router_scale=2.5,
    )
    moe = model.blocks[1].mlp
    assert not moe.choice_bias.requires_grad  # chosen by a rule of its own, not by gradient
    with torch.no_grad():
        moe.choice_bias.copy_(torch.tensor([0.0, 0.3, -0.3, 0.1, 0.2, -0.1, 0.0, 0.4]))
    idx = tokens()
    got = captured(model, idx, ["blocks.1.mlp.router", "blocks.1.mlp.chosen", "blocks.1.mlp.gates"])
    for b in range(2):
        for t in range(idx.shape[1]):
            z = got["blocks.1.mlp.router"][b, t]
            s = torch.sigmoid(z)
            c = (s + moe.choice_bias).tolist()
            group = [sum(sorted(c[2 * g : 2 * g + 2])[-2:]) for g in range(4)]  # the two best of each group
            allowed = sorted(range(4), key=lambda g: -group[g])[:2]
            experts = sorted((e for e in range(8) if e // 2 in allowed), key=lambda e: -c[e])[:2]
            assert sorted(got["blocks.1.mlp.chosen"][b, t].tolist()) == sorted(experts)
            w = {e: 2.5 * s[e] / sum(s[x] for x in experts) for e in experts}  # from s, not s + bias
            for e, g in zip(got["blocks.1.mlp.chosen"][b, t].tolist(), got["blocks.1.mlp.gates"][b, t]):
                assert float(g) == pytest.approx(float(w[e]), rel=1e-5)


def test_the_new_fields_are_checked_in_one_line_each():
    cases = [
        (dict(attn_scale_dim=0), "attn_scale_dim=0 must be a positive number"),
        (dict(attn_scale_dim=4.0, attn_scale="none"), "attn_scale_dim replaces √d_k"),
        (dict(qk_norm_scope="all"), "qk_norm_scope='all' needs qk_rmsnorm"),
        (dict(qk_norm_scope="some"), "qk_norm_scope='some' is not one of head, all"),
        (dict(rope_local_base=100.0), "rope_local_base needs local layers"),
        (dict(rope_local_base=1.0, sliding_window=4), "rope_local_base=1.0 must be greater than 1"),
        (dict(rope_beta_fast=-1.0), "rope_beta_fast=-1.0 must be a positive number"),
        (dict(rope_truncate="yes"), "rope_truncate='yes' must be true or false"),
        (dict(swiglu_limit=7.0, mlp="gelu"), "swiglu_limit .* needs mlp='swiglu'"),
        (dict(router_groups=4), "router_groups needs n_experts"),
        (dict(n_experts=6, router_groups=4), "router_groups=4 does not divide n_experts=6"),
        (dict(n_experts=8, router_groups=4, router_topk_groups=5), "router_topk_groups=5 is more than"),
        (
            dict(n_experts=8, n_experts_per_token=4, router_groups=4, router_topk_groups=1),
            "n_experts_per_token=4 is more than the 2 experts",
        ),
        (dict(n_experts=8, router_scale=0), "router_scale=0 must be a positive number"),
    ]
    for kw, words in cases:
        with pytest.raises(ConfigError, match=words):
            GPTConfig(**{**BASE, **kw}).validate()


def test_the_budget_check_places_every_parameter_of_the_new_parts():
    from model.nn.measure import measured_parameters

    for kw in (PARTS["deepseek-router"], PARTS["olmo2-qk-norm-all"], PARTS["gpt-oss-clamped-yarn"]):
        check = measured_parameters(GPTConfig(**{**BASE, **kw}))
        assert check.ok, check.mismatches()
    assert check.measured["expert biases"] > 0
    deepseek = measured_parameters(GPTConfig(**{**BASE, **PARTS["deepseek-router"]}))
    assert deepseek.measured["router choice bias"] == 3 * 8  # E per mixture-of-experts block
    olmo = measured_parameters(GPTConfig(**{**BASE, **PARTS["olmo2-qk-norm-all"]}))
    assert olmo.measured["qk norms"] == 3 * (4 + 2) * 8  # L·(h + h_kv)·d_k
