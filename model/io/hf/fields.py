"""A family's ``config.json`` as our :class:`GPTConfig` (:func:`family_config`; :mod:`model.io.hf.families`).

Which ``model_type`` values are opened (:data:`FAMILIES`), transformers' defaults for what a config
omits (:data:`_DEFAULTS`), and the mapping of each family's fields onto ours: the activation, norms,
biases, mixtures of experts and latent attention. The RoPE and sliding-window fields are read by
:mod:`model.io.hf.rope`, the kinds of the values checked by :mod:`model.io.hf.checks`; every
unsupported feature is one line of the :class:`CheckpointError`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from model.config import ConfigError, GPTConfig
from model.io.hf.checks import _number_problems
from model.io.hf.rope import _layer_pattern, _rope_fields, _score_scale, _window
from model.io.loaded import CheckpointError

#: The families of the first Llama-era loader: their refusals stay as they were.
_LLAMA_ERA = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gpt_neox")
#: Today's block: mixtures of experts, latent attention, sinks, local/global layers, other norms.
_TODAY = (
    "mixtral",
    "qwen3_moe",
    "deepseek_v3",
    "gpt_oss",
    "gemma2",
    "gemma3_text",
    "olmo2",
    "phi3",
    "qwen2_moe",
)

#: ``model_type`` values opened here, each as kind ``"hf-" + model_type``.
FAMILIES = _LLAMA_ERA + _TODAY


#: transformers' defaults for what a ``config.json`` of today's families may omit (its config classes).
_DEFAULTS: dict[str, dict[str, Any]] = {
    "mixtral": dict(
        rms_norm_eps=1e-5,
        max_position_embeddings=131072,
        rope_theta=1e6,
        num_experts_per_tok=2,
    ),
    "qwen3_moe": dict(
        rms_norm_eps=1e-6,
        max_position_embeddings=32768,
        num_experts_per_tok=8,
        moe_intermediate_size=768,
        decoder_sparse_step=1,
        norm_topk_prob=False,
    ),
    "qwen2_moe": dict(
        rms_norm_eps=1e-6,
        max_position_embeddings=32768,
        num_experts=60,
        num_experts_per_tok=4,
        moe_intermediate_size=1408,
        shared_expert_intermediate_size=5632,
        decoder_sparse_step=1,
        norm_topk_prob=False,
    ),
    "deepseek_v3": dict(
        rms_norm_eps=1e-6,
        max_position_embeddings=4096,
        moe_intermediate_size=2048,
        num_experts_per_tok=8,
        n_shared_experts=1,
        routed_scaling_factor=2.5,
        kv_lora_rank=512,
        q_lora_rank=1536,
        qk_rope_head_dim=64,
        qk_nope_head_dim=128,
        v_head_dim=128,
        n_group=8,
        topk_group=4,
        first_k_dense_replace=3,
        norm_topk_prob=True,
        rope_interleave=True,
    ),
    "gpt_oss": dict(
        rms_norm_eps=1e-5,
        max_position_embeddings=131072,
        rope_theta=150000.0,
        num_experts_per_tok=4,
        head_dim=64,
        sliding_window=128,
        attention_bias=True,
        swiglu_alpha=1.702,
        swiglu_limit=7.0,
    ),
    "gemma2": dict(
        rms_norm_eps=1e-6,
        max_position_embeddings=8192,
        head_dim=256,
        query_pre_attn_scalar=256,
        sliding_window=4096,
        final_logit_softcapping=30.0,
        attn_logit_softcapping=50.0,
        tie_word_embeddings=True,
    ),
    "gemma3_text": dict(
        rms_norm_eps=1e-6,
        max_position_embeddings=131072,
        rope_theta=1e6,
        head_dim=256,
        query_pre_attn_scalar=256,
        sliding_window=4096,
        tie_word_embeddings=True,
    ),
    "olmo2": dict(rms_norm_eps=1e-5, max_position_embeddings=2048),
    "phi3": dict(rms_norm_eps=1e-5, max_position_embeddings=4096),
}


#: HF activation names -> our GELU form (``silu`` is SwiGLU's).
_GELU_FORMS = {"gelu": "none", "gelu_new": "tanh", "gelu_pytorch_tanh": "tanh", "gelu_fast": "tanh"}


def family_config(hf: dict[str, Any], *, source: str = "config.json") -> GPTConfig:
    """Our config for a ``config.json`` of one of :data:`FAMILIES` (transformers' defaults for what it
    omits). Raises :class:`CheckpointError` naming every missing field or unsupported feature, and
    ``source``, what ``hf`` was read from (a GGUF file's metadata is not a config.json)."""
    try:
        return _family_config(hf, source)
    except KeyError as exc:  # a field the family's code reads without a default
        raise CheckpointError(f"{source} ({hf.get('model_type')}): missing {exc}") from None
    except (TypeError, ValueError, AttributeError) as exc:  # e.g. "rope_theta": "ten thousand"
        if isinstance(exc, CheckpointError):
            raise
        raise CheckpointError(
            f"{source} ({hf.get('model_type')}): a setting has a value of the wrong kind ({exc})"
        ) from None


class _Row(NamedTuple):
    """How a Llama-shaped family (every one of :data:`FAMILIES` but ``gpt_neox``) reads what its
    code reads differently: where its activation is named (the first of ``act_keys`` set, else
    ``act_default``; ``act_aliases`` as its code reads them), ``gemma``'s parts (×√d embedding,
    RMSNorm ×(1+γ), tied by default), per-head ``qk_rmsnorm``, whether logit ``softcaps`` are
    applied, and whether its windows come from a per-layer pattern (``layer_pattern``) or slide on
    every layer (:func:`~model.io.hf.rope._window`)."""

    act_keys: tuple[str, ...] = ("hidden_activation", "hidden_act")
    act_default: str = "silu"
    act_aliases: tuple[tuple[str, str], ...] = ()
    gemma: bool = False
    qk_rmsnorm: bool = False
    softcaps: bool = False
    layer_pattern: bool = False


_GEMMA2 = _Row(("hidden_activation",), "gelu_pytorch_tanh", gemma=True, softcaps=True, layer_pattern=True)

#: The Llama-shaped families' rows (module docstring of :mod:`model.io.hf.families`).
_ROWS: dict[str, _Row] = {
    "llama": _Row(),
    "mistral": _Row(),
    "qwen2": _Row(),
    "qwen3": _Row(qk_rmsnorm=True),
    # transformers reads Gemma's legacy "gelu" as tanh
    "gemma": _Row(act_default="gelu_pytorch_tanh", act_aliases=(("gelu", "gelu_pytorch_tanh"),), gemma=True),
    "mixtral": _Row(),
    "qwen3_moe": _Row(qk_rmsnorm=True),
    "qwen2_moe": _Row(),
    "deepseek_v3": _Row(),
    # its experts' own clamped SwiGLU, whatever hidden_act says
    "gpt_oss": _Row(act_keys=(), layer_pattern=True),
    "gemma2": _GEMMA2,  # their code reads hidden_activation only
    "gemma3_text": _GEMMA2._replace(qk_rmsnorm=True),
    "olmo2": _Row(qk_rmsnorm=True),
    "phi3": _Row(),
}


def _family_config(hf: dict[str, Any], source: str) -> GPTConfig:
    model_type, hf = _with_defaults(hf, source)
    problems = _refused(hf, model_type)
    fields = _shape_fields(hf, model_type, problems)
    if model_type == "gpt_neox":
        fields.update(_neox_fields(hf, problems))
    else:
        _llama_fields(hf, model_type, fields, problems)
    if problems:
        raise CheckpointError(f"{source} ({model_type}): " + "; ".join(problems))
    try:
        return GPTConfig(**fields).validate()
    except (ConfigError, TypeError) as exc:
        raise CheckpointError(f"{source} ({model_type}): {exc}") from None


def _with_defaults(hf: dict[str, Any], source: str) -> tuple[str, dict[str, Any]]:
    """``(model_type, hf)`` with transformers' defaults for what it omits, once it is a family opened
    here whose sizes are all given, and numbers (before any arithmetic on them: a division by
    num_attention_heads=0)."""
    model_type = hf.get("model_type")
    if model_type not in FAMILIES:
        raise CheckpointError(f"{source}: model_type {model_type!r} is not one of {', '.join(FAMILIES)}")
    hf = {**_DEFAULTS.get(model_type, {}), **hf}
    if model_type == "qwen2_moe" and not hf.get("use_sliding_window") and hf.get("sliding_window") == 0:
        hf["sliding_window"] = None  # transformers writes 0 for "no window" here
    required = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")
    missing = [f for f in required if f not in hf]
    if missing:
        raise CheckpointError(f"{source} ({model_type}): missing {', '.join(missing)}")
    wrong = _number_problems(hf)
    if wrong:
        raise CheckpointError(f"{source} ({model_type}): " + "; ".join(wrong))
    return model_type, hf


def _refused(hf: dict[str, Any], model_type: str) -> list[str]:
    """The first problems: quantized weights, and logit soft-capping where the family's code has none."""
    problems: list[str] = []
    quant = hf.get("quantization_config")
    if quant:
        method = quant.get("quant_method", "?") if isinstance(quant, dict) else quant
        problems.append(f"quantized weights (quantization_config {method!r}) are not implemented")
    row = _ROWS.get(model_type)
    if not (row and row.softcaps):
        problems += [
            f"{cap}={hf[cap]} (logit soft-capping) is not implemented"
            for cap in ("final_logit_softcapping", "attn_logit_softcapping")
            if hf.get(cap) is not None
        ]
    return problems


def _shape_fields(hf: dict[str, Any], model_type: str, problems: list[str]) -> dict[str, Any]:
    """The sizes, RoPE (:func:`~model.io.hf.rope._rope_fields`) and, but for GPT-NeoX (whose code
    has neither), the key/value heads and an explicit head width."""
    fields: dict[str, Any] = dict(
        vocab_size=hf["vocab_size"],
        context_length=hf.get("max_position_embeddings", 2048),
        n_layers=hf["num_hidden_layers"],
        d_model=hf["hidden_size"],
        n_heads=hf["num_attention_heads"],
        d_ff=hf["intermediate_size"],
        positions="rope",
        attn_scale="sqrt_dk",
        causal=True,
        dropout=0.0,
        **_rope_fields(hf, model_type, problems),
    )
    if model_type != "gpt_neox":
        fields["n_kv_heads"] = hf.get("num_key_value_heads") or hf["num_attention_heads"]
        head_dim = hf.get("head_dim")
        d, H = hf["hidden_size"], hf["num_attention_heads"]
        if head_dim is not None and (head_dim != d // H or d % H):  # not the d / H the config implies
            fields["head_dim"] = head_dim
    return fields


def _neox_fields(hf: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """GPT-NeoX: a GELU MLP, LayerNorm with biases, every linear layer biased, a parallel residual."""
    act = hf.get("hidden_act", "gelu")
    if act not in _GELU_FORMS:
        problems.append(f"hidden_act {act!r} is not one of {', '.join(_GELU_FORMS)}")
    if not hf.get("attention_bias", True):
        problems.append("attention_bias=false (an unbiased attention beside a biased MLP) is not implemented")
    return dict(
        mlp="gelu",
        gelu_approx=_GELU_FORMS.get(act, "none"),
        norm="layernorm",
        norm_bias=True,
        norm_eps=float(hf.get("layer_norm_eps", 1e-5)),
        bias="all",
        parallel_residual=bool(hf.get("use_parallel_residual", True)),
        tie_embeddings=bool(hf.get("tie_word_embeddings", False)),
    )


def _llama_fields(hf: dict[str, Any], model_type: str, fields: dict[str, Any], problems: list[str]) -> None:
    """A Llama-shaped family's MLP, RMSNorm, biases and windows (its :data:`_ROWS` row), and the parts
    of today's block it uses (:func:`_today`), into ``fields``."""
    row = _ROWS[model_type]
    act = next((hf[k] for k in row.act_keys if hf.get(k)), row.act_default)
    act = dict(row.act_aliases).get(act, act)
    if act == "silu":
        fields.update(mlp="swiglu")
    elif act in _GELU_FORMS:
        fields.update(mlp="geglu", gelu_approx=_GELU_FORMS[act])
    else:
        problems.append(f"hidden_act {act!r} is not silu or a GELU")
    fields.update(
        norm="rmsnorm",
        norm_eps=float(hf.get("rms_norm_eps", 1e-6)),
        bias=_bias(hf, model_type, problems),
        tie_embeddings=bool(hf.get("tie_word_embeddings", row.gemma)),
        qk_rmsnorm=row.qk_rmsnorm,
        embed_scale=row.gemma,
        norm_offset=row.gemma,
    )
    if row.layer_pattern:
        fields["sliding_window"], fields["window_pattern"] = _layer_pattern(hf, model_type, problems)
        if model_type == "gemma3_text" and fields["sliding_window"] is None:
            fields["rope_local_base"] = None  # no local layer to use it
    else:  # OLMo 2 and DeepSeek-V3 too: their code has no window, a layer_types saying so is refused
        n_layers = hf["num_hidden_layers"]
        fields["sliding_window"], fields["window_pattern"] = _window(hf, model_type, n_layers, problems)
    if model_type in _TODAY:
        _today(hf, model_type, fields, problems)


def _bias(hf: dict[str, Any], model_type: str, problems: list[str]) -> str:
    """``bias`` of a Llama-shaped family: ``qkv`` (Qwen2), ``all`` (attention and MLP biased alike;
    gpt-oss's attention, router and experts), else ``none``; a mix is refused."""
    if model_type == "qwen2":
        return "qkv"
    if model_type == "qwen2_moe":  # its code: Q, K and V biased by qkv_bias, never O or the MLPs
        return "qkv" if hf.get("qkv_bias", True) else "none"
    attn_bias = bool(hf.get("attention_bias", False))
    if model_type == "gpt_oss":
        if not attn_bias:
            problems.append("attention_bias=false beside gpt-oss's biased experts is not implemented")
        return "all"
    if model_type in ("mixtral", "phi3"):  # their code has no biases at all
        return "none"
    mlp_bias = bool(hf.get("mlp_bias", False)) if model_type in _LLAMA_ERA else False
    if attn_bias and mlp_bias:
        return "all"
    if attn_bias or mlp_bias:
        problems.append(
            f"attention_bias={attn_bias} with mlp_bias={mlp_bias} is not implemented (biases on "
            f"attention and MLP alike, or on neither)"
        )
    return "none"


def _experts(hf: dict[str, Any], default: int, *names: str) -> int:
    """The number of routed experts, under whichever name the family's config.json uses (transformers
    writes its own name, the Hub's files the original one), else the family's default."""
    for name in names:
        if hf.get(name) is not None:
            return int(hf[name])
    return default


def _today(hf: dict[str, Any], model_type: str, fields: dict[str, Any], problems: list[str]) -> None:
    """The parts of today's block each of :data:`_TODAY` uses (module docstring), into ``fields``."""
    if model_type in ("gemma2", "gemma3_text"):
        if hf.get("use_bidirectional_attention"):
            problems.append("use_bidirectional_attention (no causal mask) is not implemented")
        scalar = hf.get("query_pre_attn_scalar")
        head = fields.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]
        fields.update(
            norm_position="sandwich",
            attn_softcap=hf.get("attn_logit_softcapping"),
            final_softcap=hf.get("final_logit_softcapping"),
            attn_scale_dim=None if scalar is None or float(scalar) == head else float(scalar),
        )
    elif model_type == "olmo2":
        fields.update(norm_position="output", qk_norm_scope="all")
    elif model_type == "mixtral":
        fields.update(
            n_experts=_experts(hf, 8, "num_local_experts", "num_experts"),
            n_experts_per_token=hf["num_experts_per_tok"],
            router="softmax_topk_norm",
        )
    elif model_type in ("qwen3_moe", "qwen2_moe"):
        _qwen_moe(hf, model_type, fields, problems)
    elif model_type == "gpt_oss":
        alpha, limit = hf.get("swiglu_alpha", 1.702), hf.get("swiglu_limit", 7.0)
        if float(alpha) != 1.702:
            problems.append(f"swiglu_alpha={alpha} is not implemented (gpt-oss's 1.702 is)")
        fields.update(
            attn_sinks=True,
            swiglu_limit=float(limit),
            n_experts=_experts(hf, 128, "num_local_experts", "num_experts"),
            n_experts_per_token=hf["num_experts_per_tok"],
            router="topk_softmax",
        )
    elif model_type == "deepseek_v3":
        _deepseek(hf, fields, problems)


def _qwen_moe(hf: dict[str, Any], model_type: str, fields: dict[str, Any], problems: list[str]) -> None:
    """Qwen3-MoE and Qwen2-MoE: dense first layers (``mlp_only_layers``, ``decoder_sparse_step``), the
    router; Qwen2-MoE's shared expert (``shared_expert_intermediate_size`` wide) behind its σ gate."""
    E, n = _experts(hf, 128, "num_experts", "num_local_experts"), hf["num_hidden_layers"]
    step, only = int(hf.get("decoder_sparse_step") or 1), set(hf.get("mlp_only_layers") or [])
    dense = [i for i in range(n) if i in only or E <= 0 or (i + 1) % step]
    if dense != list(range(len(dense))) or len(dense) >= n:
        problems.append(
            f"dense MLPs on layers {dense} (mlp_only_layers, decoder_sparse_step) are not implemented "
            f"(the first few layers dense, the rest mixtures of experts, are)"
        )
    fields.update(
        n_experts=E,
        n_experts_per_token=hf["num_experts_per_tok"],
        expert_d_ff=hf["moe_intermediate_size"],
        moe_dense_layers=len(dense) if len(dense) < n else 0,
        router="softmax_topk_norm" if hf.get("norm_topk_prob") else "softmax_topk",
    )
    if model_type == "qwen2_moe":
        if hf.get("use_sliding_window"):  # its code slides the odd layers below max_window_layers
            problems.append("use_sliding_window (Qwen2-MoE's windows on some layers) is not implemented")
        fields.update(
            n_shared_experts=1,
            shared_expert_d_ff=hf["shared_expert_intermediate_size"],
            shared_expert_gate=True,
        )


def _deepseek(hf: dict[str, Any], fields: dict[str, Any], problems: list[str]) -> None:
    """DeepSeek-V3: latent attention, dense first layers, shared experts, its router."""
    if float(hf.get("rms_norm_eps", 1e-6)) != 1e-6:  # its latent norms use 1e-6 whatever it says
        problems.append(f"rms_norm_eps={hf['rms_norm_eps']} is not implemented (DeepSeek-V3's 1e-06 is)")
    if not hf.get("norm_topk_prob", True):
        problems.append("norm_topk_prob=false (sigmoid weights not renormalised) is not implemented")
    groups, topk_groups = hf.get("n_group") or 1, hf.get("topk_group") or 1
    if topk_groups > groups:  # transformers' router takes the top topk_group of n_group groups: it cannot
        problems.append(
            f"topk_group={topk_groups} is more than n_group={hf.get('n_group')}: a token cannot choose its "
            f"experts from {topk_groups} of {groups} group{'s' * (groups > 1)}"
        )
    fields.update(
        n_kv_heads=None,
        head_dim=None,  # config.json's head_dim is the rotary part: qk_rope_head_dim
        kv_lora_rank=hf["kv_lora_rank"],
        q_lora_rank=hf.get("q_lora_rank"),
        qk_rope_head_dim=hf["qk_rope_head_dim"],
        qk_nope_head_dim=hf["qk_nope_head_dim"],
        v_head_dim=hf["v_head_dim"],
        n_experts=_experts(hf, 256, "n_routed_experts", "num_local_experts"),
        n_experts_per_token=hf["num_experts_per_tok"],
        n_shared_experts=hf.get("n_shared_experts") or 0,
        expert_d_ff=hf["moe_intermediate_size"],
        moe_dense_layers=hf.get("first_k_dense_replace") or 0,
        router="sigmoid_topk_norm",
        router_choice_bias=True,
        router_groups=groups if groups > 1 else None,
        router_topk_groups=topk_groups,
        router_scale=float(hf.get("routed_scaling_factor", 1.0)),
        attn_scale_dim=_score_scale(hf),
    )
