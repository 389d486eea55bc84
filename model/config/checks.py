"""Every problem with a :class:`~model.config.GPTConfig`, each a line naming the field and how to fix it.

:func:`config_problems` is what :meth:`GPTConfig.problems <model.config.GPTConfig.problems>` (and so
``validate``) returns: the kinds and ranges of the fields (:mod:`model.config.fields`), then the fields
that must agree with each other, in groups: today's open models' fields (RoPE scaling, partial rotary,
sliding window, norms), the score scale and YaRN's fields, today's block (local/global layers,
soft-capping, sinks, mixture of experts and its router, latent attention).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeGuard

from model.config.fields import CHOICES, FLOAT_RANGES, MAX_ROPE_BASE, MAX_ROPE_CONTEXT

if TYPE_CHECKING:
    from model.config import GPTConfig


def _fmt(x: float) -> str:
    """A range's end as a person writes it: 0.001, 1e-12, 10,000."""
    return f"{x:,.0f}" if 1 <= x < 1e15 and x == int(x) else f"{x:g}"


def _rope_base_ok(v: object) -> bool:
    """Whether ``v`` is a RoPE base θ: a number greater than 1, at most :data:`MAX_ROPE_BASE`."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 1.0 < v <= MAX_ROPE_BASE


def config_problems(cfg: GPTConfig) -> list[str]:
    """Every problem with this config, each naming the field and how to fix it (empty if valid)."""
    out: list[str] = []
    ints = {
        "context_length": cfg.context_length,
        "n_layers": cfg.n_layers,
        "d_model": cfg.d_model,
        "n_heads": cfg.n_heads,
    }
    optional_ints = {
        "vocab_size": cfg.vocab_size,
        "n_kv_heads": cfg.n_kv_heads,
        "head_dim": cfg.head_dim,
        "d_ff": cfg.d_ff,
        "sliding_window": cfg.sliding_window,
    }
    for name, value in {**ints, **optional_ints}.items():
        if value is None and name in optional_ints:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            out.append(f"{name}={value!r} must be a whole number")
        elif value <= 0:
            out.append(f"{name}={value} must be a positive number (at least 1)")
    for name, options in CHOICES.items():
        value = getattr(cfg, name)
        if value not in options:
            out.append(f"{name}={value!r} is not one of {', '.join(options)}")
    bools = ("causal", "tie_embeddings", "norm_bias", "qk_rmsnorm", "embed_scale", "norm_offset")
    out += [
        f"{name}={getattr(cfg, name)!r} must be true or false"
        for name in (*bools, "parallel_residual", "rope_truncate", "router_choice_bias")
        if not isinstance(getattr(cfg, name), bool)
    ]
    if (
        not isinstance(cfg.dropout, (int, float))
        or isinstance(cfg.dropout, bool)
        or not (0.0 <= cfg.dropout < 1.0)
    ):
        out.append(f"dropout={cfg.dropout!r} must be a probability in [0, 1)")
    if _out_of_range(cfg, "norm_eps"):
        lo, hi = FLOAT_RANGES["norm_eps"]
        out.append(
            f"norm_eps={cfg.norm_eps!r} must be a small positive number from {_fmt(lo)} to {_fmt(hi)}, "
            "such as 1e-5"
        )
    if not _rope_base_ok(cfg.rope_base):
        out.append(
            f"rope_base={cfg.rope_base!r} must be greater than 1 and at most {_fmt(MAX_ROPE_BASE)} "
            "(10000 is usual)"
        )
    out += _newer_problems(cfg)

    def ok(v: object) -> TypeGuard[int]:
        return isinstance(v, int) and not isinstance(v, bool) and v > 0

    if ok(cfg.d_model) and ok(cfg.n_heads) and cfg.head_dim is None and cfg.d_model % cfg.n_heads:
        out.append(
            f"d_model={cfg.d_model} is not divisible by n_heads={cfg.n_heads}: "
            f"change one of them or set head_dim explicitly"
        )
    if ok(cfg.n_heads) and ok(cfg.n_kv_heads):
        if cfg.n_kv_heads > cfg.n_heads:
            out.append(
                f"n_kv_heads={cfg.n_kv_heads} is larger than n_heads={cfg.n_heads}: "
                f"use at most n_heads key/value heads"
            )
        elif cfg.n_heads % cfg.n_kv_heads:
            out.append(
                f"n_heads={cfg.n_heads} is not a multiple of n_kv_heads={cfg.n_kv_heads}: "
                f"pick n_kv_heads dividing n_heads"
            )
    even = cfg.rotary_pct == 1.0 and not cfg.mla  # latent attention rotates qk_rope_head_dim
    if cfg.positions == "rope" and ok(cfg.d_head) and cfg.d_head % 2 and even:
        out.append(f"head_dim={cfg.d_head} must be even for rope positions (pairs are rotated)")
    if (
        cfg.positions == "rope"
        and ok(cfg.d_head)
        and cfg.rotary_pct != 1.0
        and isinstance(cfg.rotary_pct, (int, float))
        and (cfg.rotary_dim % 2 or cfg.rotary_dim == 0)
    ):
        out.append(
            f"rotary_pct={cfg.rotary_pct} rotates {cfg.rotary_dim} of head_dim={cfg.d_head} "
            f"dimensions: that must be an even number, at least 2"
        )
    if cfg.positions == "sinusoidal" and ok(cfg.d_model) and cfg.d_model % 2:
        out.append(f"d_model={cfg.d_model} must be even for sinusoidal positions")
    return out


def _newer_problems(cfg: GPTConfig) -> list[str]:
    """The fields of today's open models (RoPE scaling, partial rotary, sliding window, norms)."""
    out: list[str] = []

    def number(v: object) -> TypeGuard[float]:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for name in ("rope_factor", "rope_low_freq_factor", "rope_high_freq_factor"):
        lo, hi = FLOAT_RANGES[name]
        if _out_of_range(cfg, name):
            out.append(f"{name}={getattr(cfg, name)!r} must be a number from {_fmt(lo)} to {_fmt(hi)}")
    v = cfg.rope_original_context
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_ROPE_CONTEXT:
        out.append(f"rope_original_context={v!r} must be a whole number from 1 to {_fmt(MAX_ROPE_CONTEXT)}")
    if (
        cfg.rope_scaling == "llama3"
        and number(cfg.rope_low_freq_factor)
        and number(cfg.rope_high_freq_factor)
        and cfg.rope_high_freq_factor <= cfg.rope_low_freq_factor
    ):
        out.append(
            f"rope_high_freq_factor={cfg.rope_high_freq_factor} must be larger than "
            f"rope_low_freq_factor={cfg.rope_low_freq_factor} for llama3 scaling"
        )
    if not number(cfg.rotary_pct) or not (0.0 < cfg.rotary_pct <= 1.0):
        out.append(f"rotary_pct={cfg.rotary_pct!r} must be a fraction in (0, 1]")
    for name, default in (("rope_scaling", "none"), ("rotary_pct", 1.0)):
        value = getattr(cfg, name)
        valid = value in CHOICES["rope_scaling"] if name == "rope_scaling" else number(value)
        if cfg.positions != "rope" and valid and value != default:
            out.append(f"{name}={value!r} needs positions='rope'")
    if cfg.sliding_window is not None and not cfg.causal:
        out.append("sliding_window needs causal=True (the window looks back from each query)")
    if cfg.qk_rmsnorm and cfg.attn_scale == "qk_norm":
        out.append("qk_rmsnorm and attn_scale='qk_norm' both normalise q and k: choose one")
    if cfg.norm_offset and cfg.norm != "rmsnorm":
        out.append("norm_offset (scale by 1 + γ) is an RMSNorm variant: set norm='rmsnorm'")
    if cfg.parallel_residual and cfg.norm_position != "pre":
        out.append("parallel_residual needs norm_position='pre' (both branches read Norm(x))")
    return out + _scale_problems(cfg) + _block_problems(cfg)


def _scale_problems(cfg: GPTConfig) -> list[str]:
    """YaRN's fields, the local layers' RoPE base, QK-norm over all heads, the score scale."""
    out: list[str] = []

    def positive(name: str, *, optional: bool = False) -> bool:
        """Whether ``name`` is set and in :data:`FLOAT_RANGES` (else its problem is listed)."""
        v = getattr(cfg, name)
        if v is None and optional:
            return False
        if _out_of_range(cfg, name):
            lo, hi = FLOAT_RANGES[name]
            empty = " (or empty)" if optional else ""
            out.append(f"{name}={v!r} must be a positive number from {_fmt(lo)} to {_fmt(hi)}{empty}")
            return False
        return True

    positive("rope_beta_fast")
    positive("rope_beta_slow")
    positive("rope_attn_factor", optional=True)
    local = cfg.rope_local_base
    if local is not None and not _rope_base_ok(local):
        out.append(
            f"rope_local_base={local!r} must be greater than 1 and at most {_fmt(MAX_ROPE_BASE)} (or empty)"
        )
    elif local is not None:
        if cfg.positions != "rope":
            out.append("rope_local_base needs positions='rope'")
        elif cfg.sliding_window is None:
            out.append("rope_local_base needs local layers (sliding_window): it is their RoPE base")
    if cfg.qk_norm_scope == "all" and not cfg.qk_rmsnorm:
        out.append("qk_norm_scope='all' needs qk_rmsnorm (it says what the QK-norm spans)")
    if positive("attn_scale_dim", optional=True) and cfg.attn_scale != "sqrt_dk":
        out.append(f"attn_scale_dim replaces √d_k: it needs attn_scale='sqrt_dk', not {cfg.attn_scale!r}")
    if positive("swiglu_limit", optional=True) and cfg.mlp != "swiglu":
        out.append(f"swiglu_limit (gpt-oss's clamped SwiGLU) needs mlp='swiglu', not {cfg.mlp!r}")
    return out


def _block_problems(cfg: GPTConfig) -> list[str]:
    """Today's block: local/global layers, soft-capping, sinks, mixture-of-experts, latent attention."""
    out: list[str] = []

    def whole(name: str, *, least: int = 1, optional: bool = False) -> bool:
        v = getattr(cfg, name)
        if v is None and optional:
            return False
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            kind = "a positive whole number" if least else "a whole number, 0 or more"
            out.append(f"{name}={v!r} must be {kind}")
            return False
        return True

    p = cfg.window_pattern
    if not isinstance(p, str) or (p and set(p) - {"L", "G"}):
        out.append(f"window_pattern={p!r} must be letters L (local) and G (global), e.g. 'LG'")
    elif p and cfg.sliding_window is None:
        out.append("window_pattern needs sliding_window (how far a local layer looks back)")
    elif p and "L" not in p:
        out.append(f"window_pattern={p!r} has no local layer (L): leave it empty and unset sliding_window")
    for name in ("attn_softcap", "final_softcap"):
        v = getattr(cfg, name)
        if v is not None and _out_of_range(cfg, name):
            lo, hi = FLOAT_RANGES[name]
            out.append(
                f"{name}={v!r} must be a positive number from {_fmt(lo)} to {_fmt(hi)}, such as 30 "
                "(or empty: off)"
            )
    if not isinstance(cfg.attn_sinks, bool):
        out.append(f"attn_sinks={cfg.attn_sinks!r} must be true or false")
    if whole("n_experts", optional=True):
        E = int(cfg.n_experts or 0)
        if whole("n_experts_per_token") and cfg.n_experts_per_token > E:
            out.append(f"n_experts_per_token={cfg.n_experts_per_token} is more than n_experts={E}")
        whole("n_shared_experts", least=0)
        whole("expert_d_ff", optional=True)
        dense = whole("moe_dense_layers", least=0)
        if dense and isinstance(cfg.n_layers, int) and cfg.moe_dense_layers >= cfg.n_layers:
            out.append(
                f"moe_dense_layers={cfg.moe_dense_layers} leaves no mixture-of-experts layer "
                f"of n_layers={cfg.n_layers}"
            )
        out += _router_problems(cfg, E)
    else:
        for name, default in (
            ("n_shared_experts", 0),
            ("expert_d_ff", None),
            ("moe_dense_layers", 0),
            ("router_choice_bias", False),
            ("router_groups", None),
            ("router_scale", 1.0),
        ):
            if getattr(cfg, name) != default:
                out.append(f"{name} needs n_experts (a mixture-of-experts feed-forward)")
    v = cfg.router_aux_loss
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= v < 100.0):  # NaN fails
        out.append(f"router_aux_loss={v!r} must be a number from 0 to below 100 (0.01 is usual)")
    if whole("kv_lora_rank", optional=True):
        whole("q_lora_rank", optional=True)
        for name in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            whole(name, optional=True)
        if cfg.positions != "rope":
            out.append(
                "kv_lora_rank (latent attention) needs positions='rope' (its keys carry a rotary part)"
            )
        if isinstance(cfg.qk_rope_dim, int) and (cfg.qk_rope_dim < 2 or cfg.qk_rope_dim % 2):
            out.append(f"qk_rope_head_dim={cfg.qk_rope_dim} must be even, at least 2 (pairs are rotated)")
        if cfg.n_kv_heads not in (None, cfg.n_heads):
            out.append(
                "kv_lora_rank (latent attention) shares one latent by all heads: leave n_kv_heads empty"
            )
        if cfg.qk_rmsnorm or cfg.attn_scale not in ("sqrt_dk", "none"):
            out.append("kv_lora_rank (latent attention) takes attn_scale sqrt_dk or none, and no qk_rmsnorm")
        if cfg.rotary_pct != 1.0:
            out.append("kv_lora_rank (latent attention) rotates qk_rope_head_dim, not rotary_pct")
    else:
        out += [
            f"{name} needs kv_lora_rank (multi-head latent attention)"
            for name in ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
            if getattr(cfg, name) is not None
        ]
    return out


def _router_problems(cfg: GPTConfig, E: int) -> list[str]:
    """DeepSeek-V3's router: grouped choice and the weights' scale (``n_experts`` = E is valid)."""
    out: list[str] = []
    v = cfg.router_scale
    if _out_of_range(cfg, "router_scale"):
        lo, hi = FLOAT_RANGES["router_scale"]
        out.append(
            f"router_scale={v!r} must be a positive number from {_fmt(lo)} to {_fmt(hi)} "
            "(1: the weights as routed)"
        )
    G, top = cfg.router_groups, cfg.router_topk_groups
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        out.append(f"router_topk_groups={top!r} must be a positive whole number")
        return out
    if G is None:
        return out
    if isinstance(G, bool) or not isinstance(G, int) or G < 1:
        out.append(f"router_groups={G!r} must be a positive whole number (or empty: no groups)")
    elif E % G:
        out.append(f"router_groups={G} does not divide n_experts={E} into equal groups")
    elif top > G:
        out.append(f"router_topk_groups={top} is more than router_groups={G}")
    elif isinstance(cfg.n_experts_per_token, int) and cfg.n_experts_per_token > top * (E // G):
        out.append(
            f"n_experts_per_token={cfg.n_experts_per_token} is more than the "
            f"{top * (E // G)} experts of router_topk_groups={top} groups"
        )
    return out


def _out_of_range(cfg: GPTConfig, name: str) -> bool:
    """Whether number field ``name`` is not a number in its :data:`FLOAT_RANGES` (NaN is not)."""
    v = getattr(cfg, name)
    lo, hi = FLOAT_RANGES[name]
    return isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi
