"""The budget calculator reproduces the source chapter's worked example and keeps its own books.

Expected numbers come from the chapter, the papers and the released checkpoints; the code computes
them from the preset configs (no count is stored anywhere in model/).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.budget import arithmetic as budget
from model.budget import presets
from model.budget.arithmetic import (
    attention_crossover,
    flop_shares,
    flops,
    kv_cache,
    memory,
    parameters,
    training_cost,
)
from model.config import ConfigError, GPTConfig

GiB = 2**30


def cfg_of(name: str) -> GPTConfig:
    return presets.get(name).gpt_config()


# ---- the worked example: Llama 2 7B -----------------------------------------------------------
def test_llama2_7b_matches_the_chapter_table():
    cfg = cfg_of("llama2-7b")
    L, d, V, d_ff = cfg.core.n_layers, cfg.core.d_model, cfg.core.vocab_size, cfg.hidden
    assert (L, d, V, d_ff) == (32, 4096, 32000, 11008)
    p = parameters(cfg)
    # the chapter's rows, each by its own formula and by its printed value
    assert p.attention_per_layer == 4 * d * d == 67_108_864
    assert p.mlp_per_layer == 3 * d * d_ff == 135_266_304
    assert p.layers == L * (4 * d * d + 3 * d * d_ff) == 6_476_005_376
    assert p.embeddings_and_head == 2 * V * d == 262_144_000
    assert p.norms == 2 * d * L + d == 266_240
    assert p.total == 6_738_415_616
    assert p.layers + p.embeddings_and_head + p.norms == p.total
    assert p.non_embedding == p.total - 2 * V * d


def test_gpt2_small_and_family_match_the_released_checkpoints():
    # parameter counts of the released GPT-2 checkpoints (sum of numel of their weights)
    released = {
        "gpt2": 124_439_808,
        "gpt2-medium": 354_823_168,
        "gpt2-large": 774_030_080,
        "gpt2-xl": 1_557_611_200,
    }
    for name, n in released.items():
        assert parameters(cfg_of(name)).total == n, name


def test_released_llama_family_counts():
    released = {
        "llama2-13b": 13_015_864_320,
        "llama2-70b": 68_976_648_192,
        "llama3-8b": 8_030_261_248,
        "llama3-70b": 70_553_706_496,
        "mistral-7b": 7_241_732_096,
        "tinyllama-1.1b": 1_100_048_384,
        "llama3.1-405b": 405_853_388_800,
    }
    for name, n in released.items():
        assert parameters(cfg_of(name)).total == n, name


def test_gpt3_is_12_L_d2_plus_embeddings():
    cfg = cfg_of("gpt3-175b")
    L, d = cfg.core.n_layers, cfg.core.d_model
    p = parameters(cfg)
    weights = sum(
        p[n].count for n in ("attention Q", "attention K", "attention V", "attention O", "mlp weights")
    )
    assert weights == 12 * L * d**2
    assert round(weights / 1e9, 1) == 173.9
    assert round(p.embedding / 1e9, 1) == 0.6
    # GPT-3's paper reports 3.14e23 training FLOPs for 300B tokens; 6·N·D must agree to 1%
    pre = presets.get("gpt3-175b")
    cost = training_cost(cfg, pre.training_tokens)
    assert cost.flops == pytest.approx(pre.reported_flops, rel=0.01)


def test_llama2_7b_training_cost():
    pre = presets.get("llama2-7b")
    cfg = pre.gpt_config()
    cost = training_cost(cfg, pre.training_tokens, pre.peak_tflops * 1e12, mfu=0.4)
    assert cost.flops == 6 * parameters(cfg).total * 2e12
    assert f"{cost.flops:.1e}" == "8.1e+22"
    assert cost.gpu_hours == pytest.approx(180_000, rel=0.01)
    assert cost.gpu_hours == pytest.approx(pre.reported_gpu_hours, rel=0.03)  # the paper: 184,320
    # 2048 GPUs share the GPU-hours: wall clock divides, GPU-hours do not
    many = training_cost(cfg, 2e12, pre.peak_tflops * 1e12, mfu=0.4, gpus=2048)
    assert many.gpu_hours == pytest.approx(cost.gpu_hours)
    assert many.days == pytest.approx(cost.gpu_hours / 24 / 2048)


def test_llama_reported_gpu_hours_are_within_the_6n_estimate_reach():
    # every preset with public figures lands within 15% at 40% MFU; a wrong count or unit would not
    for pre in presets.PRESETS.values():
        if pre.reported_gpu_hours and pre.peak_tflops and pre.name.startswith("llama2"):
            cost = training_cost(pre.gpt_config(), pre.training_tokens, pre.peak_tflops * 1e12, mfu=0.4)
            assert cost.gpu_hours == pytest.approx(pre.reported_gpu_hours, rel=0.15), pre.name


def test_attention_score_flops_at_4096():
    cfg = cfg_of("llama2-7b")
    f = flops(cfg, seq_len=4096)
    assert f.attention_forward_per_token == 4 * 32 * 4096 * 4096
    assert round(f.attention_forward_per_token / 1e9, 1) == 2.1
    assert round(f.forward_2n / 1e9, 1) == 13.5
    halved = flops(cfg, seq_len=4096, causal_halving=True)
    assert 2 * halved.attention_forward_per_token == f.attention_forward_per_token
    assert halved.forward_per_token == f.forward_per_token


def test_forward_flops_count_every_matmul_weight_once():
    cfg = cfg_of("llama2-7b")
    p, f = parameters(cfg), flops(cfg, 4096)
    # the token-embedding lookup and the norms cost no matmul FLOPs; the untied head does
    assert f.matmul_params == p.total - p["token embedding"].count - p.norms
    tied = cfg_of("gpt2")
    pt = parameters(tied)
    # tied: the one V·d matrix is both the lookup (free) and the head (2·V·d per token)
    assert pt.matmul == pt.total - pt["position embedding"].count - pt.norms - sum(
        pt[n].count for n in ("attention biases", "mlp biases")
    )
    assert f.train_per_token == 3 * f.forward_per_token
    assert f.train_total_per_token == 3 * (f.forward_per_token + f.attention_forward_per_token)
    assert sum(f.parts.values()) == f.forward_total_per_token


def test_kv_cache_llama2():
    c7 = kv_cache(cfg_of("llama2-7b"), seq_len=4096, batch=1, bytes_per_value=2)
    assert c7.bytes == 2 * GiB
    assert c7.saving_factor == 1 and c7.saved_bytes == 0
    c70 = kv_cache(cfg_of("llama2-70b"), seq_len=4096, batch=1, bytes_per_value=2)
    cfg70 = cfg_of("llama2-70b")
    per_layer_head_mha = c70.mha_bytes / (cfg70.core.n_layers * cfg70.attention.n_heads)
    per_layer_head_gqa = c70.bytes / (cfg70.core.n_layers * cfg70.attention.n_heads)
    assert per_layer_head_mha / per_layer_head_gqa == 8 == c70.saving_factor
    # linear in T and batch
    assert kv_cache(cfg_of("llama2-7b"), 8192, 3, 2).bytes == 6 * c7.bytes
    assert kv_cache(cfg_of("llama2-7b"), 4096, 1, 1).bytes == GiB


def test_crossover_and_shares():
    gpt2 = cfg_of("gpt2")
    # a 4d GELU MLP: attention scores overtake it at T = 4·d
    assert attention_crossover(gpt2) == 4 * gpt2.core.d_model
    assert attention_crossover(gpt2, causal_halving=True) == 8 * gpt2.core.d_model
    cfg = cfg_of("llama2-7b")
    T_star = attention_crossover(cfg)
    f = flops(cfg, seq_len=round(T_star))
    assert f.parts["attention scores"] == pytest.approx(f.parts["mlp"], rel=1e-3)
    sh = flop_shares(cfg, [128, 1024, 4096, 32768, 131072])
    assert set(sh) == {"seq_len", *budget.FLOP_PARTS}
    for i in range(5):
        assert sum(sh[k][i] for k in budget.FLOP_PARTS) == pytest.approx(1.0)
    att = sh["attention scores"]
    assert all(a < b for a, b in itertools.pairwise(att))
    assert att[2] == pytest.approx(flops(cfg, 4096).shares()["attention scores"])
    assert att[-1] > sh["mlp"][-1] and att[2] < sh["mlp"][2]


# ---- memory ------------------------------------------------------------------------------------
def test_memory_modes_multiply_the_parameter_count():
    cfg = cfg_of("llama2-7b")
    n = parameters(cfg).total
    for mode, pr in budget.PRECISIONS.items():
        m = memory(cfg, mode, seq_len=1024, batch=1)
        assert m.training_states == n * sum(m.bytes_per_param.values()), mode
        assert m.weights == n * pr.weights
        assert m.inference_weights == n * pr.inference_weights
        assert m.kv_cache == kv_cache(cfg, 1024, 1, pr.inference_weights).bytes
        assert m.inference_total == m.inference_weights + m.kv_cache
    fp32, mixed, bf16 = (memory(cfg, k).training_states for k in ("fp32", "bf16-mixed", "bf16"))
    assert fp32 == mixed == 2 * bf16


def test_activation_estimate_reproduces_korthikanti_for_gpt_shapes():
    # Korthikanti et al. 2022, eq. (1): one layer keeps s·b·h·(34 + 5·a·s/h) bytes in 16 bit
    # (GPT shapes: 4d GELU MLP, multi-head attention, dropout on, attention not fused).
    s, b, h, a = 512, 2, 256, 8
    cfg = GPTConfig(vocab_size=100, context_length=s, d_model=h, n_heads=a, dropout=0.1)

    def act(n_layers: int, **kw) -> int:
        return budget.activation_bytes(cfg.replace(n_layers=n_layers), s, b, 2, fused_attention=False, **kw)

    per_layer = act(3) - act(2)  # the model-level tensors cancel
    assert per_layer == s * b * h * 34 + 5 * a * s * s * b
    # full recomputation keeps one layer input per layer (2·s·b·h bytes) plus one rebuilt layer
    assert act(5, recompute=True) - act(4, recompute=True) == 2 * s * b * h
    assert act(4, recompute=True) < act(4)


# ---- properties over random configs -----------------------------------------------------------
@st.composite
def configs(draw):
    n_kv = draw(st.sampled_from([1, 2, 4]))
    n_heads = n_kv * draw(st.sampled_from([1, 2, 3]))
    head_dim = draw(st.sampled_from([None, 2, 8, 64]))
    d_model = n_heads * draw(st.integers(1, 64)) * 2
    return GPTConfig(
        vocab_size=draw(st.integers(1, 200_000)),
        context_length=draw(st.integers(1, 8192)),
        n_layers=draw(st.integers(1, 128)),
        d_model=d_model,
        n_heads=n_heads,
        n_kv_heads=draw(st.sampled_from([None, n_kv])),
        head_dim=head_dim,
        d_ff=draw(st.sampled_from([None, 1, 100, 3 * d_model])),
        mlp=draw(st.sampled_from(["gelu", "relu", "swiglu"])),
        norm=draw(st.sampled_from(["layernorm", "rmsnorm"])),
        norm_position=draw(st.sampled_from(["pre", "post"])),
        positions=draw(st.sampled_from(["learned", "sinusoidal", "rope", "none"])),
        attn_scale=draw(st.sampled_from(["sqrt_dk", "none", "learned", "qk_norm"])),
        bias=draw(st.sampled_from(["all", "qkv", "none"])),
        tie_embeddings=draw(st.booleans()),
    )


@settings(max_examples=150, deadline=None)
@given(configs())
def test_books_balance(cfg):
    p = parameters(cfg)
    assert p.total == sum(p.counts().values())
    assert p.total == p.layers + p.embeddings_and_head + p.norms
    assert p.per_layer * cfg.core.n_layers + p.embeddings_and_head + p["final norm"].count == p.total
    assert p.non_embedding == p.total - p.embeddings_and_head
    assert all(v >= 0 for v in p.counts().values())
    # tying removes exactly one V·d matrix, and changes no FLOP
    other = parameters(cfg.replace(tie_embeddings=not cfg.core.tie_embeddings))
    assert abs(p.total - other.total) == cfg.core.vocab_size * cfg.core.d_model
    assert p.matmul == other.matmul
    # K and V shrink with the number of KV heads; Q and O do not
    mha = parameters(cfg.replace(n_kv_heads=None))
    assert p["attention K"].count * cfg.n_rep == mha["attention K"].count
    assert p["attention Q"].count == mha["attention Q"].count
    f = flops(cfg, seq_len=min(cfg.core.context_length, 4096))
    assert sum(f.parts.values()) == f.forward_total_per_token
    assert f.forward_per_token == 2 * p.matmul <= 2 * p.total + 2 * cfg.core.vocab_size * cfg.core.d_model
    kv = kv_cache(cfg, seq_len=min(16, cfg.core.context_length), batch=2, bytes_per_value=2)
    assert kv.mha_bytes == kv.bytes * cfg.n_rep
    assert kv.saving_factor == cfg.n_rep


@settings(max_examples=60, deadline=None)
@given(configs(), st.integers(1, 100_000))
def test_crossover_is_where_scores_meet_the_mlp(cfg, T):
    f = flops(cfg.replace(positions="rope" if cfg.d_head % 2 == 0 else "none"), seq_len=T)
    T_star = attention_crossover(cfg)
    if T < T_star:
        assert f.parts["attention scores"] < f.parts["mlp"]
    elif T > T_star:
        assert f.parts["attention scores"] > f.parts["mlp"]


# ---- validation --------------------------------------------------------------------------------
def test_every_problem_is_listed_at_once():
    cfg = GPTConfig(vocab_size=100, d_model=100, n_heads=3, n_layers=-2)
    found = budget.problems(cfg, mfu=1.5, tokens=-1, batch=0, precision="fp8", seq_len=10)
    text = "\n".join(found)
    for needle in ("n_heads=3", "n_layers=-2", "mfu=1.5", "tokens=-1", "batch=0", "precision='fp8'"):
        assert needle in text
    assert len(found) == 6
    with pytest.raises(ConfigError) as err:
        budget.report(cfg, mfu=1.5)
    assert len(err.value.problems) >= 3


def test_bad_settings_are_refused():
    cfg = cfg_of("gpt2")
    assert budget.problems(cfg) == []
    assert budget.problems(cfg.replace(vocab_size=None))  # V is needed
    assert budget.problems(cfg, seq_len=2048)  # beyond GPT-2's learned table
    assert budget.problems(cfg_of("llama2-7b"), seq_len=100_000) == []  # rope has no table
    assert budget.problems(cfg, mfu=0)
    assert budget.problems(cfg, mfu=1) == []
    assert budget.problems(cfg, gpus=0) and budget.problems(cfg, gpus=1.5)
    assert budget.problems(cfg, cost_basis="7N")
    with pytest.raises(ConfigError):
        parameters(cfg.replace(n_kv_heads=5))
    with pytest.raises(ConfigError):
        training_cost(cfg, 1e9, 1e12, mfu=1.2)


# ---- the report -------------------------------------------------------------------------------
def test_report_is_json_and_consistent():
    pre = presets.get("llama2-7b")
    rep = budget.report(pre.gpt_config(), seq_len=4096, tokens=2e12, peak_flops=312e12, mfu=0.4)
    rep = json.loads(json.dumps(rep))
    assert rep["params"]["total"] == sum(rep["params"]["components"].values())
    assert rep["params"]["non_embedding"] < rep["params"]["total"]
    assert rep["flops"]["train_per_token"] == 3 * rep["flops"]["forward_per_token"]
    assert rep["flops"]["attention_forward_per_token"] == 4 * 32 * 4096 * 4096
    assert rep["kv_cache"]["bytes"] == 2 * GiB
    assert rep["training"]["flops"] == 6 * rep["params"]["total"] * 2e12
    assert rep["training"]["gpu_hours"] == pytest.approx(rep["training"]["flops"] / (312e12 * 0.4) / 3600)
    no_cost = budget.report(pre.gpt_config())
    assert "training" not in no_cost
    flops_only = budget.report(pre.gpt_config(), tokens=1e9)
    assert flops_only["training"]["gpu_hours"] is None and flops_only["training"]["flops"] > 0


def test_matmul_cost_basis_adds_the_attention_term():
    cfg = cfg_of("llama2-7b")
    plain = training_cost(cfg, 1e12, basis="matmul", seq_len=4096)
    f = flops(cfg, 4096)
    assert plain.flops == 3 * (f.forward_per_token + f.attention_forward_per_token) * 1e12
    halved = training_cost(cfg, 1e12, basis="matmul", seq_len=4096, causal_halving=True)
    assert plain.flops - halved.flops == 3 * f.attention_forward_per_token // 2 * 1e12


def test_presets_are_valid_and_saved_configs_are_found(tmp_path):
    for name in presets.names():
        assert budget.problems(presets.get(name).gpt_config()) == [], name
    assert presets.get("Llama 2 7B").name == "llama2-7b"
    assert presets.get("GPT2_small").name == "gpt2"
    with pytest.raises(ConfigError, match="llama2-7b"):
        presets.get("llama2-7")
    cfg = GPTConfig(vocab_size=65, n_layers=2)
    (tmp_path / "tiny.json").write_text(cfg.to_json())
    (tmp_path / "run1").mkdir()
    (tmp_path / "run1" / "config.json").write_text(cfg.replace(n_layers=3).to_json())
    (tmp_path / "notes.json").write_text(json.dumps({"hello": 1}))
    (tmp_path / "broken.json").write_text("{")
    found = presets.saved_configs(tmp_path)
    assert [(s.name, s.config.core.n_layers) for s in found] == [("run1", 3), ("tiny", 2)]
    assert presets.load_config(tmp_path / "run1").core.n_layers == 3
    assert presets.saved_configs(tmp_path / "missing") == []


def test_budget_needs_no_torch():
    code = (
        "import sys; from model.budget import arithmetic as budget, presets; "
        "budget.report(presets.get('llama2-70b').gpt_config(), tokens=2e12, peak_flops=3e14); "
        "assert 'torch' not in sys.modules and 'numpy' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
