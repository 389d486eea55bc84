"""The vocabulary of :class:`~model.config.GPTConfig`'s fields: the choices each string field takes
(:data:`CHOICES`), a line of help for each field (:data:`FIELD_HELP`), and the limits the checks of
:mod:`model.config.checks` hold numbers to (:data:`FLOAT_RANGES`, the RoPE bases and contexts, the size of
a config file). :mod:`model.config` re-exports them all.
"""

from __future__ import annotations

CHOICES: dict[str, tuple[str, ...]] = {
    "mlp": ("gelu", "relu", "swiglu", "geglu"),
    "norm": ("layernorm", "rmsnorm"),
    "norm_position": ("pre", "post", "sandwich", "output"),
    "positions": ("learned", "sinusoidal", "rope", "none"),
    "attn_scale": ("sqrt_dk", "none", "learned", "qk_norm"),
    "bias": ("all", "qkv", "none"),
    "gelu_approx": ("none", "tanh"),
    "rope_scaling": ("none", "linear", "llama3", "yarn"),
    "qk_norm_scope": ("head", "all"),
    "router": ("topk_softmax", "softmax_topk", "softmax_topk_norm", "sigmoid_topk_norm"),
}

#: One line per field, shown as tooltips in the app and as ``--help`` text.
FIELD_HELP: dict[str, str] = {
    "vocab_size": "V, the number of distinct tokens; usually decided by the tokenizer.",
    "context_length": "T_max, the longest sequence the model reads (size of the learned position table).",
    "n_layers": "L, the number of Transformer blocks stacked on the residual stream.",
    "d_model": "d, the width of the residual stream and of every token vector.",
    "n_heads": "h, query heads per layer; each attends independently.",
    "n_kv_heads": "Key/value heads. = n_heads: MHA; 1: MQA; in between: GQA (K/V shared by query groups).",
    "head_dim": "d_k = d_v, the size of one head; default d_model / n_heads.",
    "d_ff": "Hidden width of the MLP; default 4·d_model.",
    "mlp": "gelu / relu: two matrices; swiglu / geglu: three (gate, up, down) as in Llama / Gemma.",
    "norm": "layernorm: subtract mean, divide by std, scale+shift; rmsnorm: divide by RMS, scale only.",
    "norm_position": "pre: x + f(Norm(x)) (GPT-2, modern); post: Norm(x + f(x)) (original Transformer); "
    "sandwich: x + Norm(f(Norm(x))) (Gemma 2/3); output: x + Norm(f(x)) (OLMo 2).",
    "positions": "learned table, fixed sinusoids, rotary (RoPE) on q and k, or none at all.",
    "attn_scale": "sqrt_dk: QKᵀ/√d_k; none: unscaled (saturates); learned: per-head temperature; "
    "qk_norm: cosine attention with a learned gain.",
    "causal": "True: a query sees only itself and earlier tokens (decoder); False: sees everything.",
    "bias": "all: every linear layer has a bias; qkv: only Q, K, V; none (Llama).",
    "tie_embeddings": "Share the token embedding with the output head (W_U = Eᵀ).",
    "dropout": "Dropout probability on embeddings, attention weights and residual writes.",
    "norm_eps": "ε inside the norm's square root.",
    "norm_bias": "LayerNorm with a learned shift β (GPT-2); false: scale only (nanoGPT's bias=False).",
    "gelu_approx": "GELU form: exact erf, or the tanh approximation GPT-2 used.",
    "rope_base": "θ base of the rotary frequencies θ_i = base^(-2i/d_k).",
    "rope_scaling": "none; linear: every θ_i / factor; llama3: low frequencies / factor, high ones kept; "
    "yarn: YaRN's ramp between the two, and cos, sin × rope_attn_factor (gpt-oss, DeepSeek-V3).",
    "rope_factor": "The factor of rope_scaling (the context is stretched this many times).",
    "rope_low_freq_factor": "llama3: wavelengths above original_context / this are divided by the factor.",
    "rope_high_freq_factor": "llama3 scaling: wavelengths below original_context / this are kept.",
    "rope_original_context": "llama3 and yarn scaling: the context length the model was first trained with.",
    "rope_beta_fast": "yarn: dimensions turning more than this many times in the original context keep θ_i.",
    "rope_beta_slow": "yarn: dimensions turning fewer than this many times are divided by the factor.",
    "rope_truncate": "yarn: round the ramp's ends to whole dimensions (false in gpt-oss).",
    "rope_attn_factor": "yarn: cos and sin are multiplied by this; empty: 0.1·ln(factor) + 1.",
    "rope_local_base": "θ base of the local (sliding-window) layers' RoPE, unscaled (Gemma 3: 10 000); "
    "empty: rope_base.",
    "rotary_pct": "Fraction of each head's d_k that RoPE rotates (GPT-NeoX: 0.25); the rest is not rotated.",
    "sliding_window": "W: a query sees only the last W keys, itself included (Mistral); empty: all of them.",
    "qk_rmsnorm": "RMSNorm on each query and key head vector before RoPE (Qwen3's QK-norm); weights [d_k].",
    "qk_norm_scope": "head: qk_rmsnorm over each head's d_k (Qwen3, Gemma 3); all: over all heads' q and k "
    "at once, weights [H·d_k] and [H_kv·d_k] (OLMo 2).",
    "attn_scale_dim": "Scores are scaled by 1/√(this) instead of 1/√d_k (Gemma 2/3's query_pre_attn_scalar); "
    "empty: d_k.",
    "embed_scale": "Multiply the token embeddings by √d before the first block (Gemma).",
    "norm_offset": "RMSNorm scales by (1 + γ) with γ starting at 0 (Gemma), instead of by γ.",
    "parallel_residual": "x + Attn(Norm1(x)) + MLP(Norm2(x)): attention and MLP read the same x (GPT-NeoX).",
    "window_pattern": "Which layers use sliding_window, repeated over the layers: L local, G global "
    "('LG' Gemma 2, 'LLLLLG' Gemma 3); empty: every layer.",
    "attn_softcap": "c: attention scores become c·tanh(score/c) before the mask (Gemma 2: 50); empty: off.",
    "final_softcap": "c: output logits become c·tanh(logit/c) (Gemma 2: 30); empty: off.",
    "attn_sinks": "A learned logit per head joins the softmax's denominator: weight that goes to no key "
    "(gpt-oss).",
    "n_experts": "E: mixture-of-experts feed-forward with E expert MLPs per layer; empty: one dense MLP.",
    "n_experts_per_token": "k: experts each token is sent to (top-k of the router).",
    "n_shared_experts": "Experts every token always goes through, beside the routed ones (DeepSeek).",
    "expert_d_ff": "Hidden width of one expert MLP; default d_ff.",
    "shared_expert_d_ff": "Hidden width of the shared experts' MLP (Qwen2-MoE's "
    "shared_expert_intermediate_size); default n_shared_experts · expert_d_ff.",
    "shared_expert_gate": "The shared experts' output is multiplied by σ(w·x), a scalar gate per token "
    "(Qwen2-MoE's shared_expert_gate).",
    "moe_dense_layers": "The first this many layers keep a dense MLP of width d_ff (DeepSeek-V3: 3).",
    "router": "Expert weights: topk_softmax: softmax over the k chosen logits (Mixtral, gpt-oss); "
    "softmax_topk: top-k of the softmax over all; softmax_topk_norm: those renormalised (Qwen3-MoE); "
    "sigmoid_topk_norm: sigmoid scores, renormalised (DeepSeek-V3).",
    "router_aux_loss": "Weight of the load-balancing loss E·Σ f_e·P_e added in training (0: none).",
    "router_choice_bias": "A per-expert bias added to the router's scores only to choose the experts, not "
    "to weight them (DeepSeek-V3's e_score_correction_bias; not trained by gradient).",
    "router_groups": "Experts in this many groups; a token chooses among the router_topk_groups groups whose "
    "two best scores sum highest (DeepSeek-V3: 8); empty: no groups.",
    "router_topk_groups": "Grouped routing: how many groups a token may choose its experts from "
    "(DeepSeek-V3: 4).",
    "router_scale": "The chosen experts' weights are multiplied by this (DeepSeek-V3's "
    "routed_scaling_factor: 2.5).",
    "swiglu_limit": "gpt-oss's SwiGLU (with mlp='swiglu'): gate clamped to ≤ limit, up to ±limit, "
    "output (up + 1)·gate·σ(1.702·gate); empty: the plain SwiGLU.",
    "kv_lora_rank": "r: multi-head latent attention; keys and values come from a latent of r values per "
    "token, which is what the KV cache stores (DeepSeek); empty: ordinary attention.",
    "q_lora_rank": "MLA: queries through a low-rank bottleneck of this width; empty: a full projection.",
    "qk_rope_head_dim": "MLA: the part of each query/key head that RoPE rotates; the key part is shared "
    "by the heads and cached; default head_dim / 2.",
    "qk_nope_head_dim": "MLA: the part of each query/key head without RoPE; default head_dim.",
    "v_head_dim": "MLA: the size of each value head; default head_dim.",
}


#: A config file larger than this is not a config (refused before it is read).
MAX_CONFIG_BYTES = 1024 * 1024

#: Where each real-number field must lie, both ends included: finite, and far enough from 0 and from
#: float32's limits that no infinity or NaN can come of it (a RoPE factor of 1e-300 turns the
#: frequencies into infinities, whose sine is NaN), yet wide around every real model's value (noted).
FLOAT_RANGES: dict[str, tuple[float, float]] = {
    "norm_eps": (1e-12, 0.5),  # 1e-5 (GPT-2), 1e-6 (Llama)
    "rope_factor": (1.0, 10_000.0),  # 8 (Llama 3.1), 32 (gpt-oss), 40 (DeepSeek-V3); 1: unscaled
    "rope_low_freq_factor": (0.001, 10_000.0),  # 1 (Llama 3.1)
    "rope_high_freq_factor": (0.001, 10_000.0),  # 4 (Llama 3.1)
    "rope_beta_fast": (0.001, 10_000.0),  # 32 (YaRN)
    "rope_beta_slow": (0.001, 10_000.0),  # 1 (YaRN)
    "rope_attn_factor": (0.01, 100.0),  # 1 (DeepSeek-V3) to about 1.4 (gpt-oss)
    "attn_scale_dim": (1.0, 1_000_000.0),  # 144, 256 (Gemma 2/3's query_pre_attn_scalar)
    "attn_softcap": (0.01, 10_000.0),  # 50 (Gemma 2)
    "final_softcap": (0.01, 10_000.0),  # 30 (Gemma 2)
    "router_scale": (0.001, 1000.0),  # 2.5 (DeepSeek-V3), 16 (DeepSeek-V2)
    "swiglu_limit": (0.001, 1_000_000.0),  # 7 (gpt-oss)
}
#: The largest RoPE base θ (``rope_base``, ``rope_local_base``; both must exceed 1): Llama 3 uses
#: 500 000, Qwen and Gemma 3 1 000 000.
MAX_ROPE_BASE = 1e12
#: The longest ``rope_original_context`` (the context a model was first trained with: 4096 to 8192).
MAX_ROPE_CONTEXT = 10**9

__all__ = ["CHOICES", "FIELD_HELP", "FLOAT_RANGES", "MAX_CONFIG_BYTES", "MAX_ROPE_BASE", "MAX_ROPE_CONTEXT"]
