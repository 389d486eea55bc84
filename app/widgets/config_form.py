"""The form of every GPTConfig field, grouped and labelled (:func:`gpt_config_form`): the Model panel's
editor and the Budget tab's are this one form.

Each field's tooltip is the help its declaration gives and its choices the ones it declares
(:func:`model.config.parts.base.declare`, read by the form from the field's metadata); fields
that have no effect under the other choices are switched off (``norm_bias`` under RMSNorm); fields added
to GPTConfig later appear automatically in "Other".
"""

from __future__ import annotations

from typing import Any

from app.widgets.dataclass_form import DataclassForm, FieldSpec
from model.config import GPTConfig

#: Field groups, in order; fields not listed go into "Other".
GROUPS: list[tuple[str, list[str]]] = [
    ("Size", ["context_length", "n_layers", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff"]),
    (
        "Architecture",
        [
            "positions",
            "attn_scale",
            "causal",
            "norm",
            "norm_position",
            "norm_bias",
            "mlp",
            "bias",
            "tie_embeddings",
        ],
    ),
    ("Numerical details", ["dropout", "norm_eps", "gelu_approx", "rope_base"]),
    (
        "Llama-era parts",
        [
            "sliding_window",
            "qk_rmsnorm",
            "parallel_residual",
            "rotary_pct",
            "embed_scale",
            "norm_offset",
            "rope_scaling",
            "rope_factor",
            "rope_low_freq_factor",
            "rope_high_freq_factor",
            "rope_original_context",
            "rope_beta_fast",
            "rope_beta_slow",
            "rope_truncate",
            "rope_attn_factor",
        ],
    ),
    (
        "Today's block",
        [
            "window_pattern",
            "rope_local_base",
            "qk_norm_scope",
            "attn_scale_dim",
            "attn_softcap",
            "final_softcap",
            "attn_sinks",
            "n_experts",
            "n_experts_per_token",
            "n_shared_experts",
            "expert_d_ff",
            "shared_expert_d_ff",
            "shared_expert_gate",
            "moe_dense_layers",
            "router",
            "router_aux_loss",
            "router_choice_bias",
            "router_groups",
            "router_topk_groups",
            "router_scale",
            "swiglu_limit",
            "kv_lora_rank",
            "q_lora_rank",
            "qk_rope_head_dim",
            "qk_nope_head_dim",
            "v_head_dim",
        ],
    ),
]

#: Human labels (the config name follows in grey, so users learn the literature's names).
LABELS: dict[str, str] = {
    "vocab_size": "Vocabulary",
    "context_length": "Context length",
    "n_layers": "Layers",
    "d_model": "Model width",
    "n_heads": "Query heads",
    "n_kv_heads": "Key/value heads",
    "head_dim": "Head size",
    "d_ff": "MLP hidden width",
    "mlp": "MLP",
    "norm": "Normalisation",
    "norm_position": "Norm position",
    "norm_bias": "Norm bias",
    "positions": "Positions",
    "attn_scale": "Score scaling",
    "causal": "Causal mask",
    "bias": "Biases",
    "tie_embeddings": "Tie embeddings",
    "dropout": "Dropout",
    "norm_eps": "Norm ε",
    "gelu_approx": "GELU form",
    "rope_base": "RoPE base",
    "rope_scaling": "RoPE scaling",
    "rope_factor": "RoPE scaling factor",
    "rope_low_freq_factor": "Low-frequency factor",
    "rope_high_freq_factor": "High-frequency factor",
    "rope_original_context": "Original context",
    "rotary_pct": "Rotary fraction",
    "sliding_window": "Sliding window",
    "qk_rmsnorm": "QK-norm",
    "embed_scale": "Embeddings × √d",
    "norm_offset": "RMSNorm × (1 + γ)",
    "parallel_residual": "Parallel block",
    "window_pattern": "Local/global layers",
    "attn_softcap": "Score soft-cap",
    "final_softcap": "Logit soft-cap",
    "attn_sinks": "Attention sinks",
    "n_experts": "Experts",
    "n_experts_per_token": "Experts per token",
    "n_shared_experts": "Shared experts",
    "expert_d_ff": "Expert hidden width",
    "shared_expert_d_ff": "Shared experts' width",
    "shared_expert_gate": "Shared experts gated",
    "moe_dense_layers": "Dense first layers",
    "router": "Router weights",
    "router_aux_loss": "Load-balancing loss",
    "kv_lora_rank": "Latent KV rank",
    "q_lora_rank": "Latent Q rank",
    "qk_rope_head_dim": "Rotary part of a head",
    "qk_nope_head_dim": "Plain part of a head",
    "v_head_dim": "Value head size",
    "rope_beta_fast": "YaRN β fast",
    "rope_beta_slow": "YaRN β slow",
    "rope_truncate": "YaRN: whole periods",
    "rope_attn_factor": "YaRN attention factor",
    "rope_local_base": "RoPE base, local layers",
    "qk_norm_scope": "QK-norm over",
    "attn_scale_dim": "Scale by 1/√ of",
    "router_choice_bias": "Router choice bias",
    "router_groups": "Router groups",
    "router_topk_groups": "Groups chosen",
    "router_scale": "Routed weight scale",
    "swiglu_limit": "SwiGLU clamp",
}

#: Upper bounds for the integer spin boxes (generous: the Budget tab is for 7B-scale configs).
INT_MAX: dict[str, int] = {
    "context_length": 10_485_760,  # Llama 4 Scout reads 10M tokens
    "n_layers": 256,
    "d_model": 65536,
    "n_heads": 1024,
    "n_kv_heads": 1024,
    "head_dim": 4096,
    "d_ff": 262144,
    "sliding_window": 1048576,
    "rope_original_context": 1048576,
    "n_experts": 1024,
    "n_experts_per_token": 1024,
    "n_shared_experts": 64,
    "expert_d_ff": 262144,
    "shared_expert_d_ff": 262144,
    "moe_dense_layers": 256,
    "kv_lora_rank": 65536,
    "q_lora_rank": 65536,
    "qk_rope_head_dim": 4096,
    "qk_nope_head_dim": 4096,
    "v_head_dim": 4096,
}

#: Fields switched off while they have no effect on the model.
ENABLE_RULES = {
    "norm_bias": lambda v: v.get("norm") == "layernorm",  # RMSNorm has no shift β
    "gelu_approx": lambda v: v.get("mlp") in ("gelu", "geglu"),  # relu and swiglu use no GELU
    "rope_base": lambda v: v.get("positions") == "rope",  # only rotary positions have a base
    "rope_scaling": lambda v: v.get("positions") == "rope",
    "rotary_pct": lambda v: v.get("positions") == "rope",
    "rope_factor": lambda v: v.get("rope_scaling") in ("linear", "llama3", "yarn"),
    "rope_low_freq_factor": lambda v: v.get("rope_scaling") == "llama3",
    "rope_high_freq_factor": lambda v: v.get("rope_scaling") == "llama3",
    "rope_original_context": lambda v: v.get("rope_scaling") in ("llama3", "yarn"),
    **{
        name: (lambda v: v.get("rope_scaling") == "yarn")
        for name in ("rope_beta_fast", "rope_beta_slow", "rope_truncate", "rope_attn_factor")
    },
    "rope_local_base": lambda v: v.get("positions") == "rope" and bool(v.get("window_pattern")),
    "qk_norm_scope": lambda v: bool(v.get("qk_rmsnorm")),
    "attn_scale_dim": lambda v: v.get("attn_scale") == "sqrt_dk",
    "swiglu_limit": lambda v: v.get("mlp") == "swiglu",
    "norm_offset": lambda v: v.get("norm") == "rmsnorm",
    "parallel_residual": lambda v: v.get("norm_position") == "pre",
    "window_pattern": lambda v: v.get("sliding_window") is not None,
    **{
        name: (lambda v: v.get("n_experts") is not None)
        for name in (
            "n_experts_per_token",
            "n_shared_experts",
            "expert_d_ff",
            "moe_dense_layers",
            "router",
            "router_aux_loss",
            "router_choice_bias",
            "router_groups",
            "router_topk_groups",
            "router_scale",
        )
    },
    **{
        name: (lambda v: v.get("n_experts") is not None and bool(v.get("n_shared_experts")))
        for name in ("shared_expert_d_ff", "shared_expert_gate")
    },
    **{
        name: (lambda v: v.get("kv_lora_rank") is not None)
        for name in ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
    },
}

#: Problems that name no ``field=`` but belong to one.
PROBLEM_FIELDS = {"must be even for rope": "head_dim"}


def gpt_config_form(
    *,
    groups: list[tuple[str, list[str]]] = GROUPS,
    int_max: dict[str, int] = INT_MAX,
    **options: Any,
) -> DataclassForm:
    """A :class:`DataclassForm` of every GPTConfig field: grouped, labelled, each field's tooltip and
    choices from its declaration, dropout as a spin box, the enable rules above."""
    specs = {name: FieldSpec(maximum=m) for name, m in int_max.items()}
    specs["dropout"] = FieldSpec(minimum=0.0, maximum=0.95, decimals=2, step=0.05)
    specs["sliding_window"] = FieldSpec(maximum=int_max.get("sliding_window", 1048576), special="off")
    for name, special in (("n_experts", "dense"), ("kv_lora_rank", "off"), ("q_lora_rank", "full")):
        specs[name] = FieldSpec(maximum=int_max.get(name, 65536), special=special)
    for name in ("n_shared_experts", "moe_dense_layers"):  # 0 is a value here, not "unset"
        specs[name] = FieldSpec(minimum=0, maximum=int_max.get(name, 256))
    specs["router_aux_loss"] = FieldSpec(minimum=0.0, maximum=10.0, decimals=3, step=0.01)
    for name in ("attn_softcap", "final_softcap"):
        specs[name] = FieldSpec(special="off")
    specs["window_pattern"] = FieldSpec(special="every layer (e.g. LG, LLLLLG)")
    return DataclassForm(
        GPTConfig,
        groups=groups,
        labels=LABELS,
        specs=specs,
        enable_rules=ENABLE_RULES,
        problem_fields=PROBLEM_FIELDS,
        **options,
    )
