"""The one table of bounds the Budget tab and ``attention-lab budget`` share (model/budget/bounds.py)."""

from __future__ import annotations

import typing

import pytest

from model.budget import bounds, presets
from model.budget.checks import problems as budget_problems
from model.config import GPTConfig


def _whole_fields() -> set[str]:
    hints = GPTConfig.field_types()
    return {f.name for f in GPTConfig.fields() if int in (typing.get_args(hints[f.name]) or (hints[f.name],))}


def test_every_whole_number_field_of_the_config_has_a_bound():
    fields = _whole_fields()
    assert {"n_layers", "vocab_size", "n_kv_heads", "n_experts"} <= fields  # the probe finds them
    assert set(bounds.CONFIG_BOUNDS) == fields


@pytest.mark.parametrize("name", presets.names())
def test_every_preset_lies_within_the_bounds(name):
    p = presets.get(name)
    assert bounds.out_of_bounds(bounds.config_counts(p.gpt_config())) == {}
    assert bounds.out_of_bounds({"tokens": p.training_tokens, "peak_tflops": p.peak_tflops}) == {}


@pytest.mark.parametrize("value", [-5, 0, 100_000_000_000, 10**29, "abc", 2.5, True])
def test_a_count_out_of_bounds_is_one_line_naming_the_field_the_value_and_the_limits(value):
    found = bounds.config_problems(GPTConfig(vocab_size=10, n_layers=value))
    assert [p for p in found if "n_layers" in p] == [
        f"n_layers={bounds.short(value)} must be a whole number from 1 to 10,000"
    ]
    assert bounds.config_problems(GPTConfig(vocab_size=10)) == []


def test_settings_are_bounded_in_the_units_typed():
    found = bounds.out_of_bounds(
        {"batch": 0, "tokens": 1e30, "peak_tflops": 1e9, "mfu": 1.5, "seq_len": None}
    )
    assert found == {
        "batch": "batch=0 must be a whole number from 1 to 1,000,000",
        "tokens": "tokens=1e30 must be a number from 1 to 1e18",
        "peak_tflops": "peak_tflops=1e9 must be a number from 0.001 to 100,000 TFLOP/s",
        "mfu": "mfu=1.5 must be a number from 0.001 to 1",
    }
    # a field shown in percent: the same bound, its limits scaled
    assert bounds.SETTING_BOUNDS["mfu"].problem("mfu", 150, scale=100, unit="%") == (
        "mfu=150 must be a number from 0.1 to 100 %"
    )
    assert bounds.SETTING_BOUNDS["mfu"].problem("mfu", 40, scale=100) is None


def test_merged_keeps_one_line_per_field():
    cfg = GPTConfig(vocab_size=10, n_layers=-1, d_model=100, n_heads=3)
    calculator = budget_problems(cfg, mfu=2.0, peak_flops=0.0)
    assert any(p.startswith("n_layers=") for p in calculator) and any(
        p.startswith("mfu=") for p in calculator
    )
    bounded = bounds.out_of_bounds({**bounds.config_counts(cfg), "mfu": 2.0, "peak_tflops": 0.0})
    found = bounds.merged(bounded, calculator)
    assert [bounds.named_field(p) for p in found].count("n_layers") == 1
    assert [bounds.named_field(p) for p in found].count("mfu") == 1
    assert [bounds.named_field(p) for p in found].count("peak_tflops") == 1  # peak_flops is its alias
    assert any("n_heads=3" in p for p in found)  # the calculator's other problems stay
