import json

import pytest

from model.config import CHOICES, ConfigError, GPTConfig


def test_defaults_are_the_small_gpt2():
    cfg = GPTConfig()
    assert (cfg.core.d_model, cfg.attention.n_heads, cfg.core.n_layers, cfg.core.context_length) == (
        128,
        4,
        4,
        256,
    )
    assert (
        cfg.positional.positions,
        cfg.normalization.norm,
        cfg.normalization.norm_position,
        cfg.feed_forward.mlp,
    ) == ("learned", "layernorm", "pre", "gelu")
    assert (
        cfg.attention.attn_scale == "sqrt_dk"
        and cfg.core.causal
        and cfg.core.bias == "all"
        and not cfg.core.tie_embeddings
    )
    assert cfg.hidden == 4 * cfg.core.d_model and cfg.d_head == cfg.core.d_model // cfg.attention.n_heads
    assert cfg.kv_heads == cfg.attention.n_heads and cfg.n_rep == 1
    assert cfg.problems() == []


def test_json_round_trip_keeps_every_field():
    cfg = GPTConfig(
        vocab_size=77,
        n_kv_heads=2,
        head_dim=48,
        d_ff=300,
        mlp="swiglu",
        positions="rope",
        norm="rmsnorm",
        attn_scale="qk_norm",
        causal=False,
        bias="qkv",
        tie_embeddings=True,
    )
    again = GPTConfig.from_json(cfg.to_json())
    assert again == cfg
    assert set(json.loads(cfg.to_json())) == set(GPTConfig.field_names())


def test_omitted_fields_take_defaults():
    cfg = GPTConfig.from_dict({"d_model": 64, "n_heads": 2})
    assert cfg.core.n_layers == GPTConfig().core.n_layers and cfg.core.vocab_size is None


def test_all_problems_are_reported_at_once():
    cfg = GPTConfig(d_model=130, n_heads=4, n_layers=0, context_length=-5, dropout=1.5, mlp="tanh")
    problems = cfg.problems()
    text = "\n".join(problems)
    assert "d_model=130 is not divisible by n_heads=4" in text
    assert "n_layers=0" in text and "context_length=-5" in text
    assert "dropout" in text and "mlp='tanh'" in text
    assert len(problems) == 5
    with pytest.raises(ConfigError) as err:
        cfg.validate()
    assert err.value.problems == problems


def test_kv_heads_must_divide_heads():
    text = "; ".join(GPTConfig(d_model=96, n_heads=6, n_kv_heads=4).problems())
    assert "n_heads=6 is not a multiple of n_kv_heads=4" in text
    assert "larger than n_heads" in "; ".join(GPTConfig(n_kv_heads=8).problems())


def test_free_head_dim_lifts_the_divisibility_rule():
    cfg = GPTConfig(d_model=130, n_heads=4, head_dim=32)
    assert cfg.problems() == [] and cfg.d_head == 32


def test_rope_needs_even_head_dim():
    assert any("even" in p for p in GPTConfig(positions="rope", head_dim=15).problems())


def test_unknown_option_names_are_errors_with_a_hint():
    with pytest.raises(ConfigError) as err:
        GPTConfig.from_dict({"n_head": 4, "colour": "red"})
    text = str(err.value)
    assert "unknown option 'n_head'" in text and "did you mean 'n_heads'" in text
    assert "unknown option 'colour'" in text


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_each_choice_field_rejects_nonsense(name):
    problems = GPTConfig(**{name: "nonsense"}).problems()
    assert len(problems) == 1 and problems[0].startswith(f"{name}='nonsense'")


def test_bad_json_and_missing_file_are_clear(tmp_path):
    with pytest.raises(ConfigError, match="not valid JSON"):
        GPTConfig.from_json("{d_model: 3")
    with pytest.raises(ConfigError, match="does not exist"):
        GPTConfig.load(tmp_path / "nope.json")
    with pytest.raises(ConfigError, match="JSON object"):
        GPTConfig.from_json("[1, 2]")


def test_booleans_are_not_sizes():
    assert any("whole number" in p for p in GPTConfig(n_layers=True).problems())


def test_a_config_file_with_a_byte_order_mark_loads(tmp_path):
    path = tmp_path / "cfg.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"n_layers": 3, "d_model": 32, "n_heads": 4}')
    cfg = GPTConfig.load(path)
    assert (cfg.core.n_layers, cfg.core.d_model, cfg.attention.n_heads) == (3, 32, 4)
