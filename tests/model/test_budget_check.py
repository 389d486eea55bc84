"""The calculator checked against a built model, and the throughput measurement."""

from __future__ import annotations

import pytest

from model.budget import arithmetic as budget
from model.budget.presets import get
from model.config import GPTConfig
from model.nn.gpt import GPT
from model.nn.measure import (
    REAL_BUILD_MAX_PARAMS,
    component_of,
    measure_throughput,
    measured_parameters,
    scaled_down,
)

TINY = GPTConfig(vocab_size=13, context_length=16, n_layers=2, d_model=16, n_heads=4, n_kv_heads=2)


def test_every_parameter_name_has_one_component():
    assert component_of("blocks.3.attn.q_proj.weight") == "attention Q"
    assert component_of("blocks.0.mlp.w_gate.bias") == "mlp biases"
    assert component_of("norm_f.bias") == "final norm"
    with pytest.raises(ValueError, match="no"):
        component_of("blocks.0.attn.rotary.weight")


@pytest.mark.parametrize(
    "cfg",
    [
        TINY,
        TINY.replace(mlp="swiglu", norm="rmsnorm", bias="none", positions="rope", tie_embeddings=True),
        TINY.replace(attn_scale="qk_norm", norm_position="post", bias="qkv", head_dim=6, positions="none"),
    ],
)
def test_small_configs_are_built_for_real_and_match_per_component(cfg):
    check = measured_parameters(cfg)
    assert check.device == "cpu" and check.ok and check.mismatches == []
    assert check.measured_total == sum(p.numel() for p in GPT(cfg).parameters())


def test_a_7b_config_is_counted_on_the_meta_device():
    cfg = get("llama2-7b").gpt_config()
    check = measured_parameters(cfg)
    assert check.device == "meta"
    assert check.measured_total == check.calculated_total == budget.parameters(cfg).total


def test_mismatches_are_reported_by_component():
    check = measured_parameters(TINY)
    off_by_one = {**check.measured, "norms": check.measured["norms"] + 1}
    wrong = type(check)(check.device, off_by_one, check.calculated)
    assert wrong.mismatches == ["norms"] and not wrong.ok


def test_scaled_down_keeps_the_architecture_and_fits_the_limit():
    cfg = get("llama3-8b").gpt_config()
    small, notes = scaled_down(cfg)
    assert budget.parameters(small).total <= REAL_BUILD_MAX_PARAMS < budget.parameters(cfg).total
    for name in ("mlp", "norm", "positions", "bias", "tie_embeddings", "norm_position", "attn_scale"):
        assert small.get(name) == cfg.get(name)
    assert small.d_head == cfg.d_head and small.n_rep == cfg.n_rep == 4  # still 4 query heads per KV head
    assert notes and any("n_layers" in n for n in notes)
    assert scaled_down(TINY) == (TINY, [])


def test_throughput_of_a_tiny_model():
    stops = iter([False, True])
    r = measure_throughput(
        TINY, batch=2, seq_len=8, steps=5, warmup=1, measure_peak=False, should_stop=lambda: next(stops, True)
    )
    assert not r.scaled and r.config == TINY
    assert 1 <= r.steps <= 2  # should_stop ended it after the second timed step
    assert r.tokens_per_s == pytest.approx(16 / r.median_step_seconds)
    assert r.train_flops_per_token == budget.flops(TINY, 8).train_total_per_token
    assert r.achieved_flops == pytest.approx(r.tokens_per_s * r.train_flops_per_token)
    # the estimate for the same config at the same T is the measured speed
    assert r.estimate_tokens_per_s(TINY) == pytest.approx(r.tokens_per_s)
    bigger = TINY.replace(n_layers=4)
    assert r.estimate_tokens_per_s(bigger) < r.tokens_per_s
    assert r.mfu is None
