"""GPTConfig: every architectural choice of a decoder-only Transformer, as one validated dataclass.

The JSON field names are a user-facing format (config files, checkpoints, the command line):
``vocab_size, context_length, n_layers, d_model, n_heads, n_kv_heads, head_dim, d_ff, mlp, norm,
norm_position, positions, attn_scale, causal, bias, tie_embeddings, dropout`` plus the numerical
details pretrained models need (``norm_eps``, ``norm_bias``, ``gelu_approx``, ``rope_base``) and the
parts of today's open models (Llama, Mistral, Qwen, Gemma, GPT-NeoX):

=========================  ==================================================  ===================
field                      what it does                                        used by
=========================  ==================================================  ===================
``rope_scaling``           rescaled RoPE frequencies: ``linear`` (θ_i/factor)   Llama 3.x, gpt-oss,
                           or ``llama3`` (low frequencies /factor, high ones    DeepSeek-V3 (yarn)
                           kept, smooth in between), with ``rope_factor``,
                           ``rope_low_freq_factor``, ``rope_high_freq_factor``,
                           ``rope_original_context``; or ``yarn`` (YaRN: a ramp
                           between the two over the dimensions, from
                           ``rope_beta_fast`` / ``rope_beta_slow`` rotations,
                           ``rope_truncate``; cos and sin × ``rope_attn_factor``)
``rope_local_base``        the RoPE base of the local (sliding-window) layers,  Gemma 3
                           unscaled; the global ones keep ``rope_base`` and
                           ``rope_scaling``
``rotary_pct``             fraction of each head's d_k that RoPE rotates;       GPT-NeoX (Pythia)
                           the rest passes unrotated
``sliding_window``         a query sees only the last W keys (itself included)  Mistral
``qk_rmsnorm``             RMSNorm over d_k on every query and key head         Qwen3, Gemma 3
                           (weights [d_k], shared by the heads), before RoPE
                           (not ``attn_scale="qk_norm"``: that is cosine
                           attention with a learned gain); ``qk_norm_scope``
                           ``all``: over all heads' q [H·d_k] and k [H_kv·d_k]  OLMo 2
                           at once, before they are split into heads
``attn_scale_dim``         scores scaled by 1/√(this) instead of 1/√d_k         Gemma 2/3
                           (``query_pre_attn_scalar``)
``embed_scale``            token embeddings multiplied by √d                    Gemma
``norm_offset``            RMSNorm scales by (1 + γ), γ initialised to 0        Gemma
``parallel_residual``      ``x + Attn(Norm1(x)) + MLP(Norm2(x))``: both read x  GPT-NeoX (Pythia)
``window_pattern``         which layers use ``sliding_window``: ``L`` local,    Gemma 2/3, gpt-oss
                           ``G`` global, repeated over the layers ("LG",
                           "LLLLLG"); empty: every layer
``attn_softcap``           scores ← c·tanh(scores/c) before the mask            Gemma 2
``final_softcap``          logits ← c·tanh(logits/c)                            Gemma 2
``attn_sinks``             a learned logit per head joins each softmax's         gpt-oss
                           denominator (its share goes to no key)
``n_experts`` ...          mixture-of-experts feed-forward: ``n_experts``        Mixtral, Qwen3-MoE,
                           MLPs of width ``expert_d_ff``, ``n_experts_per_token`` DeepSeek-V3, gpt-oss
                           chosen per token by a router (``router``: how its
                           weights are normalised), ``n_shared_experts`` always
                           on, the first ``moe_dense_layers`` layers dense, a
                           load-balancing loss ``router_aux_loss`` in training;
                           DeepSeek-V3's router: ``router_choice_bias`` (a
                           per-expert bias that only chooses),
                           ``router_groups`` / ``router_topk_groups`` (experts
                           chosen from the best groups), ``router_scale``
``swiglu_limit``           gpt-oss's clamped SwiGLU with biases: gate ≤ limit,  gpt-oss
                           up in ±limit, ``(up + 1)·gate·σ(1.702·gate)``
``kv_lora_rank`` ...       multi-head latent attention: keys and values from a   DeepSeek-V2/V3
                           shared latent of ``kv_lora_rank`` (the KV cache
                           holds it and one rotary key of ``qk_rope_head_dim``),
                           queries through ``q_lora_rank`` when set, heads of
                           ``qk_nope_head_dim`` + ``qk_rope_head_dim`` (q·k) and
                           ``v_head_dim`` (values)
=========================  ==================================================  ===================

Q/K/V biases without an output bias (Qwen2) are ``bias="qkv"``; GeGLU with GELU's tanh form (Gemma) is
``mlp="geglu"`` with ``gelu_approx="tanh"``; Gemma's head_dim 256 ≠ d/h is ``head_dim``.

Derived sizes (``None`` means "derive it"):

* ``n_kv_heads``: ``n_heads`` (multi-head attention). ``1 < n_kv_heads < n_heads`` is grouped-query
  attention (GQA), ``n_kv_heads = 1`` is multi-query attention (MQA).
* ``head_dim`` (d_k = d_v): ``d_model // n_heads``; it may be set freely (Gemma-style), in which case
  Q has width ``n_heads * head_dim`` and the output projection maps that back to ``d_model``.
* ``d_ff``: ``4 * d_model``.

``validate()`` collects every problem at once and raises :class:`ConfigError` whose ``problems``
list names each field and how to fix it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from model.errors import AttentionLabError
from model.files import check_input, parse_json

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


def _fmt(x: float) -> str:
    """A range's end as a person writes it: 0.001, 1e-12, 10,000."""
    return f"{x:,.0f}" if 1 <= x < 1e15 and x == int(x) else f"{x:g}"


class ConfigError(AttentionLabError, ValueError):
    """Raised by :meth:`GPTConfig.validate` with every problem found, one per line."""

    def __init__(self, problems: list[str]):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


@dataclass
class GPTConfig:
    """A decoder-only Transformer's shape and variant choices (defaults: a small GPT-2)."""

    vocab_size: int | None = None
    context_length: int = 256
    n_layers: int = 4
    d_model: int = 128
    n_heads: int = 4
    n_kv_heads: int | None = None
    head_dim: int | None = None
    d_ff: int | None = None
    mlp: str = "gelu"
    norm: str = "layernorm"
    norm_position: str = "pre"
    positions: str = "learned"
    attn_scale: str = "sqrt_dk"
    causal: bool = True
    bias: str = "all"
    tie_embeddings: bool = False
    dropout: float = 0.0
    norm_eps: float = 1e-5
    norm_bias: bool = True
    gelu_approx: str = "none"
    rope_base: float = 10000.0
    rope_scaling: str = "none"
    rope_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_context: int = 8192
    rope_beta_fast: float = 32.0
    rope_beta_slow: float = 1.0
    rope_truncate: bool = True
    rope_attn_factor: float | None = None
    rope_local_base: float | None = None
    rotary_pct: float = 1.0
    sliding_window: int | None = None
    qk_rmsnorm: bool = False
    qk_norm_scope: str = "head"
    attn_scale_dim: float | None = None
    embed_scale: bool = False
    norm_offset: bool = False
    parallel_residual: bool = False
    window_pattern: str = ""
    attn_softcap: float | None = None
    final_softcap: float | None = None
    attn_sinks: bool = False
    n_experts: int | None = None
    n_experts_per_token: int = 2
    n_shared_experts: int = 0
    expert_d_ff: int | None = None
    moe_dense_layers: int = 0
    router: str = "topk_softmax"
    router_aux_loss: float = 0.0
    router_choice_bias: bool = False
    router_groups: int | None = None
    router_topk_groups: int = 1
    router_scale: float = 1.0
    swiglu_limit: float | None = None
    kv_lora_rank: int | None = None
    q_lora_rank: int | None = None
    qk_rope_head_dim: int | None = None
    qk_nope_head_dim: int | None = None
    v_head_dim: int | None = None

    # ---- derived sizes -------------------------------------------------------------------------
    @property
    def kv_heads(self) -> int:
        """Number of key/value heads actually used (``n_kv_heads`` or ``n_heads``)."""
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def d_head(self) -> int:
        """d_k, the per-head width actually used (``head_dim`` or ``d_model // n_heads``)."""
        if self.head_dim is not None:
            return self.head_dim
        return self.d_model // self.n_heads if self.n_heads else 0

    @property
    def hidden(self) -> int:
        """The MLP hidden width actually used (``d_ff`` or ``4 * d_model``)."""
        return self.d_ff if self.d_ff is not None else 4 * self.d_model

    @property
    def rotary_dim(self) -> int:
        """How many of each head's d_k dimensions RoPE rotates: ``int(d_k · rotary_pct)`` (GPT-NeoX), or
        latent attention's rotary part (``qk_rope_dim``)."""
        if self.mla:
            return self.qk_rope_dim
        return int(self.d_head * self.rotary_pct)

    @property
    def rope_attention(self) -> float:
        """What cos and sin of the rotary angles are multiplied by: YaRN's attention factor
        (``rope_attn_factor``, or ``0.1·ln(factor) + 1`` when the factor exceeds 1), else 1."""
        if self.rope_scaling != "yarn":
            return 1.0
        if self.rope_attn_factor is not None:
            return float(self.rope_attn_factor)
        return 0.1 * math.log(self.rope_factor) + 1.0 if self.rope_factor > 1 else 1.0

    @property
    def expert_hidden(self) -> int:
        """One expert MLP's hidden width (``expert_d_ff`` or :attr:`hidden`)."""
        return self.expert_d_ff if self.expert_d_ff is not None else self.hidden

    def is_moe_layer(self, layer: int) -> bool:
        """Whether block ``layer`` has a mixture-of-experts feed-forward (not one of the dense first)."""
        return self.n_experts is not None and layer >= self.moe_dense_layers

    def is_local_layer(self, layer: int) -> bool:
        """Whether block ``layer`` attends through ``sliding_window`` (``window_pattern``'s ``L``)."""
        if self.sliding_window is None:
            return False
        return not self.window_pattern or self.window_pattern[layer % len(self.window_pattern)] == "L"

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (``kv_lora_rank`` set)."""
        return self.kv_lora_rank is not None

    @property
    def qk_rope_dim(self) -> int:
        """MLA: the rotated part of a query/key head (``qk_rope_head_dim`` or half of d_k, even)."""
        if self.qk_rope_head_dim is not None:
            return self.qk_rope_head_dim
        return (self.d_head // 2) // 2 * 2

    @property
    def qk_nope_dim(self) -> int:
        """MLA: the unrotated part of a query/key head (``qk_nope_head_dim`` or d_k)."""
        return self.qk_nope_head_dim if self.qk_nope_head_dim is not None else self.d_head

    @property
    def qk_dim(self) -> int:
        """The size of a query/key head: d_k, or MLA's nope + rope parts."""
        return self.qk_nope_dim + self.qk_rope_dim if self.mla else self.d_head

    @property
    def v_dim(self) -> int:
        """The size of a value head: d_k, or MLA's ``v_head_dim``."""
        if self.mla and self.v_head_dim is not None:
            return self.v_head_dim
        return self.d_head

    @property
    def n_rep(self) -> int:
        """Query heads per key/value head (n_heads / n_kv_heads): 1 for MHA, n_heads for MQA."""
        return self.n_heads // self.kv_heads

    # ---- validation ----------------------------------------------------------------------------
    def problems(self) -> list[str]:
        """Every problem with this config, each naming the field and how to fix it (empty if valid)."""
        out: list[str] = []
        ints = {
            "context_length": self.context_length,
            "n_layers": self.n_layers,
            "d_model": self.d_model,
            "n_heads": self.n_heads,
        }
        optional_ints = {
            "vocab_size": self.vocab_size,
            "n_kv_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "d_ff": self.d_ff,
            "sliding_window": self.sliding_window,
        }
        for name, value in {**ints, **optional_ints}.items():
            if value is None and name in optional_ints:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                out.append(f"{name}={value!r} must be a whole number")
            elif value <= 0:
                out.append(f"{name}={value} must be a positive number (at least 1)")
        for name, options in CHOICES.items():
            value = getattr(self, name)
            if value not in options:
                out.append(f"{name}={value!r} is not one of {', '.join(options)}")
        bools = ("causal", "tie_embeddings", "norm_bias", "qk_rmsnorm", "embed_scale", "norm_offset")
        out += [
            f"{name}={getattr(self, name)!r} must be true or false"
            for name in (*bools, "parallel_residual", "rope_truncate", "router_choice_bias")
            if not isinstance(getattr(self, name), bool)
        ]
        if (
            not isinstance(self.dropout, (int, float))
            or isinstance(self.dropout, bool)
            or not (0.0 <= self.dropout < 1.0)
        ):
            out.append(f"dropout={self.dropout!r} must be a probability in [0, 1)")
        if self._out_of_range("norm_eps"):
            lo, hi = FLOAT_RANGES["norm_eps"]
            out.append(
                f"norm_eps={self.norm_eps!r} must be a small positive number from {_fmt(lo)} to {_fmt(hi)}, "
                "such as 1e-5"
            )
        if not _rope_base_ok(self.rope_base):
            out.append(
                f"rope_base={self.rope_base!r} must be greater than 1 and at most {_fmt(MAX_ROPE_BASE)} "
                "(10000 is usual)"
            )
        out += self._newer_problems()

        def ok(v: object) -> TypeGuard[int]:
            return isinstance(v, int) and not isinstance(v, bool) and v > 0

        if ok(self.d_model) and ok(self.n_heads) and self.head_dim is None and self.d_model % self.n_heads:
            out.append(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}: "
                f"change one of them or set head_dim explicitly"
            )
        if ok(self.n_heads) and ok(self.n_kv_heads):
            if self.n_kv_heads > self.n_heads:
                out.append(
                    f"n_kv_heads={self.n_kv_heads} is larger than n_heads={self.n_heads}: "
                    f"use at most n_heads key/value heads"
                )
            elif self.n_heads % self.n_kv_heads:
                out.append(
                    f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}: "
                    f"pick n_kv_heads dividing n_heads"
                )
        even = self.rotary_pct == 1.0 and not self.mla  # latent attention rotates qk_rope_head_dim
        if self.positions == "rope" and ok(self.d_head) and self.d_head % 2 and even:
            out.append(f"head_dim={self.d_head} must be even for rope positions (pairs are rotated)")
        if (
            self.positions == "rope"
            and ok(self.d_head)
            and self.rotary_pct != 1.0
            and isinstance(self.rotary_pct, (int, float))
            and (self.rotary_dim % 2 or self.rotary_dim == 0)
        ):
            out.append(
                f"rotary_pct={self.rotary_pct} rotates {self.rotary_dim} of head_dim={self.d_head} "
                f"dimensions: that must be an even number, at least 2"
            )
        if self.positions == "sinusoidal" and ok(self.d_model) and self.d_model % 2:
            out.append(f"d_model={self.d_model} must be even for sinusoidal positions")
        return out

    def _newer_problems(self) -> list[str]:
        """The fields of today's open models (RoPE scaling, partial rotary, sliding window, norms)."""
        out: list[str] = []

        def number(v: object) -> TypeGuard[float]:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        for name in ("rope_factor", "rope_low_freq_factor", "rope_high_freq_factor"):
            lo, hi = FLOAT_RANGES[name]
            if self._out_of_range(name):
                out.append(f"{name}={getattr(self, name)!r} must be a number from {_fmt(lo)} to {_fmt(hi)}")
        v = self.rope_original_context
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_ROPE_CONTEXT:
            out.append(
                f"rope_original_context={v!r} must be a whole number from 1 to {_fmt(MAX_ROPE_CONTEXT)}"
            )
        if (
            self.rope_scaling == "llama3"
            and number(self.rope_low_freq_factor)
            and number(self.rope_high_freq_factor)
            and self.rope_high_freq_factor <= self.rope_low_freq_factor
        ):
            out.append(
                f"rope_high_freq_factor={self.rope_high_freq_factor} must be larger than "
                f"rope_low_freq_factor={self.rope_low_freq_factor} for llama3 scaling"
            )
        if not number(self.rotary_pct) or not (0.0 < self.rotary_pct <= 1.0):
            out.append(f"rotary_pct={self.rotary_pct!r} must be a fraction in (0, 1]")
        for name, default in (("rope_scaling", "none"), ("rotary_pct", 1.0)):
            value = getattr(self, name)
            valid = value in CHOICES["rope_scaling"] if name == "rope_scaling" else number(value)
            if self.positions != "rope" and valid and value != default:
                out.append(f"{name}={value!r} needs positions='rope'")
        if self.sliding_window is not None and not self.causal:
            out.append("sliding_window needs causal=True (the window looks back from each query)")
        if self.qk_rmsnorm and self.attn_scale == "qk_norm":
            out.append("qk_rmsnorm and attn_scale='qk_norm' both normalise q and k: choose one")
        if self.norm_offset and self.norm != "rmsnorm":
            out.append("norm_offset (scale by 1 + γ) is an RMSNorm variant: set norm='rmsnorm'")
        if self.parallel_residual and self.norm_position != "pre":
            out.append("parallel_residual needs norm_position='pre' (both branches read Norm(x))")
        return out + self._scale_problems() + self._block_problems()

    def _scale_problems(self) -> list[str]:
        """YaRN's fields, the local layers' RoPE base, QK-norm over all heads, the score scale."""
        out: list[str] = []

        def positive(name: str, *, optional: bool = False) -> bool:
            """Whether ``name`` is set and in :data:`FLOAT_RANGES` (else its problem is listed)."""
            v = getattr(self, name)
            if v is None and optional:
                return False
            if self._out_of_range(name):
                lo, hi = FLOAT_RANGES[name]
                empty = " (or empty)" if optional else ""
                out.append(f"{name}={v!r} must be a positive number from {_fmt(lo)} to {_fmt(hi)}{empty}")
                return False
            return True

        positive("rope_beta_fast")
        positive("rope_beta_slow")
        positive("rope_attn_factor", optional=True)
        local = self.rope_local_base
        if local is not None and not _rope_base_ok(local):
            out.append(
                f"rope_local_base={local!r} must be greater than 1 and at most {_fmt(MAX_ROPE_BASE)} "
                "(or empty)"
            )
        elif local is not None:
            if self.positions != "rope":
                out.append("rope_local_base needs positions='rope'")
            elif self.sliding_window is None:
                out.append("rope_local_base needs local layers (sliding_window): it is their RoPE base")
        if self.qk_norm_scope == "all" and not self.qk_rmsnorm:
            out.append("qk_norm_scope='all' needs qk_rmsnorm (it says what the QK-norm spans)")
        if positive("attn_scale_dim", optional=True) and self.attn_scale != "sqrt_dk":
            out.append(
                f"attn_scale_dim replaces √d_k: it needs attn_scale='sqrt_dk', not {self.attn_scale!r}"
            )
        if positive("swiglu_limit", optional=True) and self.mlp != "swiglu":
            out.append(f"swiglu_limit (gpt-oss's clamped SwiGLU) needs mlp='swiglu', not {self.mlp!r}")
        return out

    def _block_problems(self) -> list[str]:
        """Today's block: local/global layers, soft-capping, sinks, mixture-of-experts, latent attention."""
        out: list[str] = []

        def whole(name: str, *, least: int = 1, optional: bool = False) -> bool:
            v = getattr(self, name)
            if v is None and optional:
                return False
            if isinstance(v, bool) or not isinstance(v, int) or v < least:
                kind = "a positive whole number" if least else "a whole number, 0 or more"
                out.append(f"{name}={v!r} must be {kind}")
                return False
            return True

        p = self.window_pattern
        if not isinstance(p, str) or (p and set(p) - {"L", "G"}):
            out.append(f"window_pattern={p!r} must be letters L (local) and G (global), e.g. 'LG'")
        elif p and self.sliding_window is None:
            out.append("window_pattern needs sliding_window (how far a local layer looks back)")
        elif p and "L" not in p:
            out.append(
                f"window_pattern={p!r} has no local layer (L): leave it empty and unset sliding_window"
            )
        for name in ("attn_softcap", "final_softcap"):
            v = getattr(self, name)
            if v is not None and self._out_of_range(name):
                lo, hi = FLOAT_RANGES[name]
                out.append(
                    f"{name}={v!r} must be a positive number from {_fmt(lo)} to {_fmt(hi)}, such as 30 "
                    "(or empty: off)"
                )
        if not isinstance(self.attn_sinks, bool):
            out.append(f"attn_sinks={self.attn_sinks!r} must be true or false")
        if whole("n_experts", optional=True):
            E = int(self.n_experts or 0)
            if whole("n_experts_per_token") and self.n_experts_per_token > E:
                out.append(f"n_experts_per_token={self.n_experts_per_token} is more than n_experts={E}")
            whole("n_shared_experts", least=0)
            whole("expert_d_ff", optional=True)
            dense = whole("moe_dense_layers", least=0)
            if dense and isinstance(self.n_layers, int) and self.moe_dense_layers >= self.n_layers:
                out.append(
                    f"moe_dense_layers={self.moe_dense_layers} leaves no mixture-of-experts layer "
                    f"of n_layers={self.n_layers}"
                )
            out += self._router_problems(E)
        else:
            for name, default in (
                ("n_shared_experts", 0),
                ("expert_d_ff", None),
                ("moe_dense_layers", 0),
                ("router_choice_bias", False),
                ("router_groups", None),
                ("router_scale", 1.0),
            ):
                if getattr(self, name) != default:
                    out.append(f"{name} needs n_experts (a mixture-of-experts feed-forward)")
        v = self.router_aux_loss
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= v < 100.0):  # NaN fails
            out.append(f"router_aux_loss={v!r} must be a number from 0 to below 100 (0.01 is usual)")
        if whole("kv_lora_rank", optional=True):
            whole("q_lora_rank", optional=True)
            for name in ("qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
                whole(name, optional=True)
            if self.positions != "rope":
                out.append(
                    "kv_lora_rank (latent attention) needs positions='rope' (its keys carry a rotary part)"
                )
            if isinstance(self.qk_rope_dim, int) and (self.qk_rope_dim < 2 or self.qk_rope_dim % 2):
                out.append(
                    f"qk_rope_head_dim={self.qk_rope_dim} must be even, at least 2 (pairs are rotated)"
                )
            if self.n_kv_heads not in (None, self.n_heads):
                out.append(
                    "kv_lora_rank (latent attention) shares one latent by all heads: leave n_kv_heads empty"
                )
            if self.qk_rmsnorm or self.attn_scale not in ("sqrt_dk", "none"):
                out.append(
                    "kv_lora_rank (latent attention) takes attn_scale sqrt_dk or none, and no qk_rmsnorm"
                )
            if self.rotary_pct != 1.0:
                out.append("kv_lora_rank (latent attention) rotates qk_rope_head_dim, not rotary_pct")
        else:
            out += [
                f"{name} needs kv_lora_rank (multi-head latent attention)"
                for name in ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")
                if getattr(self, name) is not None
            ]
        return out

    def _router_problems(self, E: int) -> list[str]:
        """DeepSeek-V3's router: grouped choice and the weights' scale (``n_experts`` = E is valid)."""
        out: list[str] = []
        v = self.router_scale
        if self._out_of_range("router_scale"):
            lo, hi = FLOAT_RANGES["router_scale"]
            out.append(
                f"router_scale={v!r} must be a positive number from {_fmt(lo)} to {_fmt(hi)} "
                "(1: the weights as routed)"
            )
        G, top = self.router_groups, self.router_topk_groups
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
        elif isinstance(self.n_experts_per_token, int) and self.n_experts_per_token > top * (E // G):
            out.append(
                f"n_experts_per_token={self.n_experts_per_token} is more than the "
                f"{top * (E // G)} experts of router_topk_groups={top} groups"
            )
        return out

    def _out_of_range(self, name: str) -> bool:
        """Whether number field ``name`` is not a number in its :data:`FLOAT_RANGES` (NaN is not)."""
        v = getattr(self, name)
        lo, hi = FLOAT_RANGES[name]
        return isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi

    def validate(self) -> GPTConfig:
        """Raise :class:`ConfigError` listing every problem; return ``self`` when valid."""
        problems = self.problems()
        if problems:
            raise ConfigError(problems)
        return self

    # ---- (de)serialisation ---------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, validate: bool = True) -> GPTConfig:
        """Build from a mapping; omitted fields take defaults, unknown names are errors."""
        if not isinstance(data, dict):
            raise ConfigError([f"a config must be a JSON object of fields, not {type(data).__name__}"])
        known = set(cls.field_names())
        unknown = sorted(set(data) - known)
        if unknown:
            problems = []
            for name in unknown:
                near = _closest(name, known)
                hint = f" (did you mean {near!r}?)" if near else ""
                problems.append(f"unknown option {name!r}{hint}")
            raise ConfigError(problems)
        cfg = cls(**data)
        if validate:
            cfg.validate()
        return cfg

    @classmethod
    def from_json(cls, text: str, *, validate: bool = True) -> GPTConfig:
        data = parse_json(text, error=lambda line: ConfigError([line]), what="config")
        return cls.from_dict(data, validate=validate)

    @classmethod
    def load(cls, path: str | Path, *, validate: bool = True) -> GPTConfig:
        path = check_input(path, error=lambda line: ConfigError([line]), what=f"config file {str(path)!r}")
        try:
            if path.stat().st_size > MAX_CONFIG_BYTES:
                raise ConfigError([f"config file {str(path)!r} is too large for a config (over 1 MiB)"])
            text = path.read_text(encoding="utf-8-sig")  # a BOM from a Windows editor is fine
        except FileNotFoundError:
            raise ConfigError([f"config file {str(path)!r} does not exist"]) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError([f"config file {str(path)!r} cannot be read: {exc}"]) from None
        return cls.from_json(text, validate=validate)

    def replace(self, **changes: Any) -> GPTConfig:
        """A copy with some fields changed (not validated)."""
        return dataclasses.replace(self, **changes)

    def with_vocab(self, vocab_size: int) -> GPTConfig:
        """A copy whose vocabulary is set by a tokenizer."""
        return dataclasses.replace(self, vocab_size=vocab_size)


def _rope_base_ok(v: object) -> bool:
    """Whether ``v`` is a RoPE base θ: a number greater than 1, at most :data:`MAX_ROPE_BASE`."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and 1.0 < v <= MAX_ROPE_BASE


def _closest(name: str, options: set[str]) -> str | None:
    import difflib

    found = difflib.get_close_matches(name, sorted(options), n=1, cutoff=0.6)
    return found[0] if found else None


def default_config(vocab_size: int | None = None) -> GPTConfig:
    """The built-in default: a GPT-2-style model that trains in about a minute on 2 CPU cores."""
    return GPTConfig(vocab_size=vocab_size)


__all__ = ["CHOICES", "FIELD_HELP", "ConfigError", "GPTConfig", "default_config"]
