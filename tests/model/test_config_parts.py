"""A config is composed of parts (core, attention, feed-forward, norms, positions): every field belongs to
exactly one, each part finds the problems of its own fields, and the parameter rows the parts count add
up to the model's count, part by part as the built GPT holds them."""

from __future__ import annotations

import ast
import dataclasses
import math
import re
from pathlib import Path

import pytest

import model.config
from model.budget.parameters import parameters, parameters_by_part
from model.config import CHOICES, FIELD_HELP, FLOAT_RANGES, GPTConfig
from model.config.checks import config_problems
from model.config.parts import (
    PARTS,
    AttentionPart,
    CorePart,
    FeedForwardPart,
    NormPart,
    Part,
    PositionPart,
)
from model.nn.gpt import GPT

FIELDS = GPTConfig.field_names()


def owner(name: str) -> type[Part]:
    (found,) = [kind for kind in PARTS if name in kind.owns()]
    return found


def test_every_config_field_is_owned_by_exactly_one_part():
    owned = [name for kind in PARTS for name in kind.owns()]
    assert sorted(owned) == sorted(FIELDS)  # each once: no field twice, none left out
    assert len(set(owned)) == len(owned) == len(FIELDS)


def test_each_field_is_declared_once_in_its_part_and_the_config_is_composed_of_the_parts():
    """GPTConfig declares no field itself: its dataclass fields are its parts, one of each kind, and a
    field is read through the part that declares it; the flat names are only the file format's."""
    assert [(f.name, f.type) for f in dataclasses.fields(GPTConfig)] == [
        (kind.key, kind.__name__) for kind in PARTS
    ]
    cfg = GPTConfig(n_kv_heads=2, n_heads=4)
    for name in FIELDS:
        assert not hasattr(cfg, name), name  # no flat copy, no forwarding
        assert cfg.get(name) == getattr(getattr(cfg, owner(name).key), name)
    assert cfg.attention.n_kv_heads == cfg.get("n_kv_heads") == 2
    assert [f.name for f in GPTConfig.fields()] == FIELDS == list(cfg.to_dict())
    # each field's type and default are its part's declaration, and the config's defaults are theirs
    defaults = GPTConfig().to_dict()
    for kind in PARTS:
        for f in dataclasses.fields(kind):
            assert GPTConfig.field_types()[f.name] is not None and defaults[f.name] == f.default


def test_each_fields_help_choices_and_bounds_are_its_own_declarations():
    """A field's help line, the choices of a string field and the bounds of a real number are declared
    with the field, in its part's metadata; FIELD_HELP, CHOICES and FLOAT_RANGES are read from those
    declarations (the very objects, covering exactly the parts' fields), and no module of model.config
    holds a table of its own keyed by field names."""
    types = GPTConfig.field_types()
    for kind in PARTS:
        for f in dataclasses.fields(kind):
            assert isinstance(f.metadata.get("help"), str) and f.metadata["help"].strip(), f.name
            assert kind.declared(f.name) is f.metadata, f.name
            assert FIELD_HELP[f.name] is f.metadata["help"], f.name
            if types[f.name] is str and f.name != "window_pattern":  # letters L and G, not a choice
                assert CHOICES[f.name] is f.metadata["choices"] and f.default in CHOICES[f.name], f.name
            if "bounds" in f.metadata:
                lo, hi = FLOAT_RANGES[f.name]
                assert FLOAT_RANGES[f.name] is f.metadata["bounds"] and lo < hi, f.name
                assert f.default is None or lo <= f.default <= hi, f.name
    assert list(FIELD_HELP) == FIELDS
    assert set(CHOICES) | set(FLOAT_RANGES) <= set(FIELDS)
    config = Path(model.config.__file__).parent
    for path in sorted(config.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            keys = [k.value for k in getattr(node, "keys", []) if isinstance(k, ast.Constant)]
            assert not (isinstance(node, ast.Dict) and len(set(keys) & set(FIELDS)) > 2), (path.name, keys)


def test_the_flat_names_are_the_file_format():
    """The constructor, replace, from_dict and to_dict take and give the file's flat names."""
    cfg = GPTConfig(n_layers=3, n_kv_heads=1, rope_base=5e5, positions="rope", mlp="swiglu")
    assert cfg.core.n_layers == 3 and cfg.positional.rope_base == 5e5
    assert GPTConfig.from_dict(cfg.to_dict()) == cfg
    changed = cfg.replace(n_kv_heads=2, norm="rmsnorm")
    assert (changed.attention.n_kv_heads, changed.normalization.norm) == (2, "rmsnorm")
    assert changed.core == cfg.core and cfg.attention.n_kv_heads == 1  # a copy; the original is kept
    with pytest.raises(TypeError, match="n_kv_head"):
        GPTConfig(n_kv_head=2)


def test_the_core_is_the_model_level_fields():
    assert set(CorePart.owns()) == {
        "vocab_size",
        "context_length",
        "n_layers",
        "d_model",
        "causal",
        "bias",
        "tie_embeddings",
        "dropout",
        "embed_scale",
        "final_softcap",
    }
    assert {"n_heads", "n_kv_heads", "kv_lora_rank", "qk_rmsnorm", "sliding_window"} <= set(
        AttentionPart.owns()
    )
    assert {"d_ff", "mlp", "n_experts", "router", "swiglu_limit"} <= set(FeedForwardPart.owns())
    assert {"norm", "norm_position", "norm_eps", "parallel_residual"} <= set(NormPart.owns())
    assert {"positions", "rope_base", "rope_scaling", "rotary_pct"} <= set(PositionPart.owns())


def test_a_part_is_a_frozen_view_of_the_config():
    cfg = GPTConfig(n_heads=8, n_kv_heads=2, n_experts=4, norm="rmsnorm", positions="rope")
    assert (cfg.attention.n_heads, cfg.attention.n_kv_heads) == (8, 2)
    assert cfg.feed_forward.n_experts == 4 and cfg.normalization.norm == "rmsnorm"
    assert cfg.positional.positions == "rope" and cfg.core.d_model == cfg.core.d_model
    assert [type(p) for p in cfg.parts] == list(PARTS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.attention.n_heads = 2  # type: ignore[misc]
    # the parts together give back the config
    values = {k: v for part in cfg.parts for k, v in dataclasses.asdict(part).items()}
    assert GPTConfig(**values) == cfg


#: (fields, the part whose problem it is, the start of the problem)
PROBLEMS = [
    (dict(dropout=1.5), CorePart, "dropout=1.5 must be a probability"),
    (dict(final_softcap=float("nan")), CorePart, "final_softcap=nan must be a positive number"),
    (dict(n_layers=0), CorePart, "n_layers=0 must be a positive number"),
    (dict(d_model=130, n_heads=4), AttentionPart, "d_model=130 is not divisible by n_heads=4"),
    (dict(n_heads=4, n_kv_heads=3), AttentionPart, "n_heads=4 is not a multiple of n_kv_heads=3"),
    (dict(sliding_window=4, causal=False), AttentionPart, "sliding_window needs causal=True"),
    (dict(window_pattern="LG"), AttentionPart, "window_pattern needs sliding_window"),
    (dict(kv_lora_rank=8), AttentionPart, "kv_lora_rank (latent attention) needs positions='rope'"),
    (dict(v_head_dim=8), AttentionPart, "v_head_dim needs kv_lora_rank"),
    (
        dict(n_experts=4, n_experts_per_token=5),
        FeedForwardPart,
        "n_experts_per_token=5 is more than n_experts=4",
    ),
    (dict(n_experts=4, router_groups=3), FeedForwardPart, "router_groups=3 does not divide n_experts=4"),
    (
        dict(n_experts=4, moe_dense_layers=4),
        FeedForwardPart,
        "moe_dense_layers=4 leaves no mixture-of-experts",
    ),
    (dict(n_shared_experts=1), FeedForwardPart, "n_shared_experts needs n_experts"),
    (dict(swiglu_limit=7.0), FeedForwardPart, "swiglu_limit (gpt-oss's clamped SwiGLU) needs mlp='swiglu'"),
    (dict(norm_offset=True), NormPart, "norm_offset (scale by 1 + γ) is an RMSNorm variant"),
    (
        dict(parallel_residual=True, norm_position="post"),
        NormPart,
        "parallel_residual needs norm_position='pre'",
    ),
    (dict(norm_eps=0.0), NormPart, "norm_eps=0.0 must be a small positive number"),
    (dict(rope_scaling="linear"), PositionPart, "rope_scaling='linear' needs positions='rope'"),
    (dict(positions="rope", head_dim=15), PositionPart, "head_dim=15 must be even for rope positions"),
    (dict(positions="sinusoidal", d_model=15, head_dim=4), PositionPart, "d_model=15 must be even"),
    (dict(positions="rope", rope_local_base=10_000.0), PositionPart, "rope_local_base needs local layers"),
]


@pytest.mark.parametrize(("fields", "kind", "start"), PROBLEMS, ids=[p[2][:40] for p in PROBLEMS])
def test_a_problem_is_found_by_the_part_it_belongs_to(fields, kind, start):
    cfg = GPTConfig(**fields)
    found = {type(part): part.problems(cfg) for part in cfg.parts}
    assert [p for p in found[kind] if p.startswith(start)], found
    others = [p for k, lines in found.items() if k is not kind for p in lines]
    assert not [p for p in others if p.startswith(start)], others
    assert config_problems(cfg) == [p for part in cfg.parts for p in part.problems(cfg)] == cfg.problems()


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_each_choice_is_checked_by_its_owner(name):
    cfg = GPTConfig(**{name: "nonsense"})
    for part in cfg.parts:
        expected = 1 if type(part) is owner(name) else 0
        assert len(part.problems(cfg)) == expected, (type(part).__name__, part.problems(cfg))


#: What a real-number field needs beside it to be checked (the field's own problem is what is tested).
_CONTEXT = {"router_scale": dict(n_experts=4)}


@pytest.mark.parametrize("name", sorted(FLOAT_RANGES))
def test_each_real_number_range_is_checked_by_its_owner(name):
    cfg = GPTConfig(**{**_CONTEXT.get(name, {}), name: math.nan})
    found = {type(part): part.problems(cfg) for part in cfg.parts}
    assert any(p.startswith(f"{name}=nan must be") for p in found[owner(name)]), found
    assert not any(
        p.startswith(f"{name}=") for k, lines in found.items() if k is not owner(name) for p in lines
    )


# ---- the parameters --------------------------------------------------------------------------------

#: Which part each of the built model's parameters belongs to, by where it sits.
_WHERE = [
    (r"(tok_emb|lm_head)\..*", "core"),
    (r"pos_emb\..*", "positions"),
    (r"blocks\.\d+\.attn\..*", "attention"),
    (r"blocks\.\d+\.mlp\..*", "feed-forward"),
    (r"(blocks\.\d+\.(post_)?norm\d|norm_f)\..*", "norms"),
]

VARIANTS = {
    "MHA, learned positions": dict(),
    "GQA, RoPE, RMSNorm, SwiGLU, QK-norm, tied": dict(
        n_heads=4,
        n_kv_heads=2,
        positions="rope",
        norm="rmsnorm",
        mlp="swiglu",
        bias="none",
        qk_rmsnorm=True,
        tie_embeddings=True,
    ),
    "MQA, qkv biases, learned scale, sandwich norms": dict(
        n_heads=4, n_kv_heads=1, bias="qkv", attn_scale="learned", norm_position="sandwich"
    ),
    "MoE with shared experts and a dense first layer": dict(
        n_layers=3,
        n_experts=4,
        n_experts_per_token=2,
        n_shared_experts=1,
        expert_d_ff=24,
        moe_dense_layers=1,
        router_choice_bias=True,
        mlp="geglu",
    ),
    "MLA with a latent Q, sinks, post-norm, untied": dict(
        positions="rope",
        kv_lora_rank=16,
        q_lora_rank=12,
        qk_rope_head_dim=4,
        qk_nope_head_dim=8,
        v_head_dim=8,
        attn_sinks=True,
        norm_position="post",
    ),
    "OLMo 2's QK-norm over all heads, GPT-NeoX's partial rotary": dict(
        positions="rope", rotary_pct=0.5, qk_rmsnorm=True, qk_norm_scope="all", norm="rmsnorm"
    ),
}


def _config(changes: dict) -> GPTConfig:
    base = dict(vocab_size=37, context_length=16, n_layers=2, d_model=32, n_heads=4)
    return GPTConfig(**{**base, **changes}).validate()


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_parts_count_what_the_built_model_holds(name):
    cfg = _config(VARIANTS[name])
    model = GPT(cfg)
    held: dict[str, int] = {}
    for pname, p in model.named_parameters():  # a tied head appears once, as tok_emb.weight
        (part,) = [part for pattern, part in _WHERE if re.fullmatch(pattern, pname)]
        held[part] = held.get(part, 0) + p.numel()
    by_part = {title: sum(c.count for c in rows) for title, rows in parameters_by_part(cfg).items()}
    assert {k: v for k, v in by_part.items() if v} == held
    assert sum(by_part.values()) == parameters(cfg).total == model.num_params()


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_the_breakdown_is_the_parts_rows_in_table_order(name):
    cfg = _config(VARIANTS[name])
    rows = [c for part_rows in parameters_by_part(cfg).values() for c in part_rows]
    b = parameters(cfg)
    assert sorted(b.components, key=lambda c: c.name) == sorted(rows, key=lambda c: c.name)
    assert len({c.name for c in rows}) == len(rows)  # no row counted by two parts
    by_part = parameters_by_part(cfg)
    assert list(by_part) == [kind.title for kind in PARTS]
    assert {c.name for c in by_part["attention"]} >= {"attention Q", "attention O", "qk norms"}
    assert {c.name for c in by_part["norms"]} == {"norms", "final norm"}


def test_only_a_mixture_of_experts_has_the_expert_rows_and_only_latent_attention_the_latent_ones():
    moe = parameters_by_part(_config(VARIANTS["MoE with shared experts and a dense first layer"]))
    assert {"router", "router choice bias", "experts", "shared experts", "expert biases"} <= {
        c.name for c in moe["feed-forward"]
    }
    mla = parameters_by_part(_config(VARIANTS["MLA with a latent Q, sinks, post-norm, untied"]))
    latent = {"latent Q down", "latent Q up", "latent KV down", "latent KV up", "latent norms"}
    assert latent <= {c.name for c in mla["attention"]}
    dense = parameters_by_part(_config({}))
    assert not latent & {c.name for rows in dense.values() for c in rows}
    assert "router" not in {c.name for c in dense["feed-forward"]}
