"""The kinds of value a Hugging Face ``config.json``'s fields must hold (:mod:`model.io.hf.families`).

Each field read as a number or a flag is checked before any arithmetic on it, so that a zero, a
negative, NaN, a string or a boolean is one line naming the field (:func:`_number_problems`), never a
division by zero deeper in.
"""

from __future__ import annotations

import math
from typing import Any

from model.budget.bounds import CONFIG_BOUNDS, Bound

#: config.json fields read as numbers, by what each must be: a positive whole number, a whole number
#: 0 or more, a finite number; and fields read as true/false. Checked before any arithmetic, so that a
#: zero, a negative, NaN, a string or a boolean is one line naming the field, never a division by zero.
_WHOLE = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
    "sliding_window",
    "sliding_window_pattern",
    "decoder_sparse_step",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "kv_lora_rank",
    "q_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "v_head_dim",
    "n_group",
    "topk_group",
)
_COUNT = ("max_window_layers", "first_k_dense_replace", "n_shared_experts")
#: The sizes held to the bound of the field of ours each becomes (:data:`model.budget.bounds.CONFIG_BOUNDS`)
#: before a layer, an expert or a row is listed for them: ``num_hidden_layers`` = 10⁹ is one line here, not
#: a pattern of 10⁹ letters, and 10⁹ experts or a latent rank of 10⁹ not billions of rows.
_BOUNDED: dict[str, Bound] = {
    key: CONFIG_BOUNDS[ours]
    for key, ours in {
        "vocab_size": "vocab_size",
        "hidden_size": "d_model",
        "num_hidden_layers": "n_layers",
        "num_attention_heads": "n_heads",
        "num_key_value_heads": "n_kv_heads",
        "head_dim": "head_dim",
        "intermediate_size": "d_ff",
        "moe_intermediate_size": "expert_d_ff",
        "shared_expert_intermediate_size": "shared_expert_d_ff",
        "sliding_window": "sliding_window",
        "num_local_experts": "n_experts",
        "num_experts": "n_experts",
        "n_routed_experts": "n_experts",
        "num_experts_per_tok": "n_experts_per_token",
        "n_shared_experts": "n_shared_experts",
        "first_k_dense_replace": "moe_dense_layers",
        "n_group": "router_groups",
        "topk_group": "router_topk_groups",
        "kv_lora_rank": "kv_lora_rank",
        "q_lora_rank": "q_lora_rank",
        "qk_rope_head_dim": "qk_rope_head_dim",
        "qk_nope_head_dim": "qk_nope_head_dim",
        "v_head_dim": "v_head_dim",
    }.items()
}
_REAL = (
    "rope_theta",
    "rotary_emb_base",
    "rotary_pct",
    "partial_rotary_factor",
    "rope_local_base_freq",
    "rms_norm_eps",
    "layer_norm_eps",
    "query_pre_attn_scalar",
    "routed_scaling_factor",
    "swiglu_alpha",
    "swiglu_limit",
    "router_jitter_noise",
    "router_aux_loss_coef",
    "final_logit_softcapping",
    "attn_logit_softcapping",
)
_FLAGS = (
    "tie_word_embeddings",
    "use_parallel_residual",
    "attention_bias",
    "mlp_bias",
    "use_sliding_window",
    "norm_topk_prob",
    "rope_interleave",
    "use_bidirectional_attention",
)
#: RoPE parameters read as numbers (in rope_parameters / rope_scaling, per layer type for Gemma 3).
_ROPE_REAL = (
    "rope_theta",
    "partial_rotary_factor",
    "factor",
    "low_freq_factor",
    "high_freq_factor",
    "original_max_position_embeddings",
    "beta_fast",
    "beta_slow",
    "attention_factor",
    "mscale",
    "mscale_all_dim",
)


def _is_real(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _number_problems(hf: dict[str, Any]) -> list[str]:
    """One line per field of :data:`_WHOLE`, :data:`_COUNT`, :data:`_REAL`, :data:`_FLAGS` (and the
    RoPE parameters) that is set but not what it must be, or past its bound (:data:`_BOUNDED`); empty
    (null) fields are left to defaults."""
    out: list[str] = []
    for key in (*_WHOLE, *_COUNT):
        v = hf.get(key)
        least = 1 if key in _WHOLE else 0
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < least):
            kind = "a positive whole number" if least else "a whole number, 0 or more"
            out.append(f"{key}={v!r} must be {kind}")
        elif v is not None and key in _BOUNDED and (too_large := _BOUNDED[key].problem(key, v)):
            out.append(too_large)
    out += [
        f"{k}={hf[k]!r} must be a finite number"
        for k in _REAL
        if hf.get(k) is not None and not _is_real(hf[k])
    ]
    out += [
        f"{k}={hf[k]!r} must be true or false"
        for k in _FLAGS
        if hf.get(k) is not None and not isinstance(hf[k], bool)
    ]
    only = hf.get("mlp_only_layers")
    if only is not None and not (
        isinstance(only, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in only)
    ):
        out.append(f"mlp_only_layers={only!r} must be a list of layer numbers")
    for name in ("rope_parameters", "rope_scaling"):
        params = hf.get(name)
        if params is None:
            continue
        if not isinstance(params, dict):
            out.append(f"{name} must be an object of RoPE settings, not {params!r}")
            continue
        groups = [params] + [v for v in params.values() if isinstance(v, dict)]  # per layer type
        out += [
            f"{name} {k}={g[k]!r} must be a finite number"
            for g in groups
            for k in _ROPE_REAL
            if g.get(k) is not None and not _is_real(g[k])
        ]
    return out
