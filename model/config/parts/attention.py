"""Multi-head attention and its variants: grouped-query and multi-query attention (``n_kv_heads``), a
free head size, the score's scale, QK-norm, sliding windows on some layers, soft-capped scores,
attention sinks, and DeepSeek's multi-head latent attention (``kv_lora_rank`` and its head sizes)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from model.config.parts.base import Part, Term, declare
from model.config.rules import is_positive_int, kind_problems, positive, softcap, whole

if TYPE_CHECKING:
    from model.config import GPTConfig

_LATENT_SIZES = ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim")


@dataclass(frozen=True)
class AttentionPart(Part):
    """The attention sublayer of every block. Its parameters per block, with d the model's width, h
    query heads, h_kv key/value heads and d_k = d_v a head's size:

    * Q ``d·h·d_k``, K and V ``d·h_kv·d_k`` each, O ``h·d_k·d``; so d·(h + 2·h_kv)·d_k + h·d_k·d;
    * biases (``bias="all"``: ``h·d_k + 2·h_kv·d_k + d``; ``"qkv"``: ``h·d_k + 2·h_kv·d_k``);
    * a per-head scale or gain ``h`` (``attn_scale`` learned or qk_norm); sinks ``h`` (``attn_sinks``,
      gpt-oss);
    * QK-norm (``qk_rmsnorm``, Qwen3) ``2·d_k`` (one [d_k] weight for all query heads, one for all key
      heads), or over all heads at once (``qk_norm_scope="all"``, OLMo 2) ``(h + h_kv)·d_k``.

    Multi-head latent attention (``kv_lora_rank`` = r; DeepSeek-V2/V3), heads of ``d_N + d_R`` (q·k) and
    ``d_v`` (values): latent Q down ``d·r_q`` and up ``r_q·h·(d_N + d_R)`` with ``q_lora_rank`` = r_q
    (else Q ``d·h·(d_N + d_R)``), latent KV down ``d·(r + d_R)`` (the latent and the one shared rotary
    key), latent KV up ``r·h·(d_N + d_v)``, O ``h·d_v·d``; latent norms ``r_q + r`` (RMSNorm weights);
    biases, with qkv biases, on every projection but O, and on O with ``bias="all"``.

    The score's scale (other than learned), sliding windows and soft-capping add no parameters.
    """

    title = "attention"
    #: its name in the config: ``cfg.attention``
    key = "attention"

    n_heads: int = declare(4, "h, query heads per layer; each attends independently.")
    n_kv_heads: int | None = declare(
        None,
        "Key/value heads. = n_heads: MHA; 1: MQA; in between: GQA (K/V shared by query groups).",
    )
    head_dim: int | None = declare(None, "d_k = d_v, the size of one head; default d_model / n_heads.")
    attn_scale: str = declare(
        "sqrt_dk",
        "sqrt_dk: QKᵀ/√d_k; none: unscaled (saturates); learned: per-head temperature; qk_norm: cosine "
        "attention with a learned gain.",
        choices=("sqrt_dk", "none", "learned", "qk_norm"),
    )
    sliding_window: int | None = declare(
        None,
        "W: a query sees only the last W keys, itself included (Mistral); empty: all of them.",
    )
    qk_rmsnorm: bool = declare(
        False,
        "RMSNorm on each query and key head vector before RoPE (Qwen3's QK-norm); weights [d_k].",
    )
    qk_norm_scope: str = declare(
        "head",
        "head: qk_rmsnorm over each head's d_k (Qwen3, Gemma 3); all: over all heads' q and k at once, "
        "weights [H·d_k] and [H_kv·d_k] (OLMo 2).",
        choices=("head", "all"),
    )
    attn_scale_dim: float | None = declare(
        None,
        "Scores are scaled by 1/√(this) instead of 1/√d_k (Gemma 2/3's query_pre_attn_scalar); empty: d_k.",
        bounds=(1.0, 1_000_000.0),  # 144, 256 (Gemma 2/3's query_pre_attn_scalar)
    )
    window_pattern: str = declare(
        "",
        "Which layers use sliding_window, repeated over the layers: L local, G global ('LG' Gemma 2, "
        "'LLLLLG' Gemma 3); empty: every layer.",
    )
    attn_softcap: float | None = declare(
        None,
        "c: attention scores become c·tanh(score/c) before the mask (Gemma 2: 50); empty: off.",
        bounds=(0.01, 10_000.0),  # 50 (Gemma 2)
    )
    attn_sinks: bool = declare(
        False,
        "A learned logit per head joins the softmax's denominator: weight that goes to no key (gpt-oss).",
    )
    kv_lora_rank: int | None = declare(
        None,
        "r: multi-head latent attention; keys and values come from a latent of r values per token, which "
        "is what the KV cache stores (DeepSeek); empty: ordinary attention.",
    )
    q_lora_rank: int | None = declare(
        None,
        "MLA: queries through a low-rank bottleneck of this width; empty: a full projection.",
    )
    qk_rope_head_dim: int | None = declare(
        None,
        "MLA: the part of each query/key head that RoPE rotates; the key part is shared by the heads and "
        "cached; default head_dim / 2.",
    )
    qk_nope_head_dim: int | None = declare(
        None,
        "MLA: the part of each query/key head without RoPE; default head_dim.",
    )
    v_head_dim: int | None = declare(None, "MLA: the size of each value head; default head_dim.")

    # ---- checks ----------------------------------------------------------------------------------
    def problems(self, cfg: GPTConfig) -> list[str]:
        out = kind_problems(
            self,
            sizes=("n_heads",),
            optional_sizes=("n_kv_heads", "head_dim", "sliding_window"),
            choices=("attn_scale", "qk_norm_scope"),
            flags=("qk_rmsnorm", "attn_sinks"),
        )
        out += self._head_problems(cfg) + self._score_problems() + self._window_problems(cfg)
        return out + self._latent_problems(cfg)

    def _head_problems(self, cfg: GPTConfig) -> list[str]:
        """The heads against the width: d divisible by h (unless d_k is set), h_kv dividing h."""
        out: list[str] = []
        d, h, h_kv = cfg.core.d_model, self.n_heads, self.n_kv_heads
        if is_positive_int(d) and is_positive_int(h) and self.head_dim is None and d % h:
            out.append(
                f"d_model={d} is not divisible by n_heads={h}: change one of them or set head_dim explicitly"
            )
        if is_positive_int(h) and is_positive_int(h_kv):
            if h_kv > h:
                out.append(
                    f"n_kv_heads={h_kv} is larger than n_heads={h}: use at most n_heads key/value heads"
                )
            elif h % h_kv:
                out.append(
                    f"n_heads={h} is not a multiple of n_kv_heads={h_kv}: pick n_kv_heads dividing n_heads"
                )
        return out

    def _score_problems(self) -> list[str]:
        """The scores: QK-norm and its scope, the scale's dimension, the soft cap."""
        out: list[str] = []
        if self.qk_rmsnorm and self.attn_scale == "qk_norm":
            out.append("qk_rmsnorm and attn_scale='qk_norm' both normalise q and k: choose one")
        if self.qk_norm_scope == "all" and not self.qk_rmsnorm:
            out.append("qk_norm_scope='all' needs qk_rmsnorm (it says what the QK-norm spans)")
        if positive(out, self, "attn_scale_dim", optional=True) and self.attn_scale != "sqrt_dk":
            out.append(
                f"attn_scale_dim replaces √d_k: it needs attn_scale='sqrt_dk', not {self.attn_scale!r}"
            )
        softcap(out, self, "attn_softcap")
        return out

    def _window_problems(self, cfg: GPTConfig) -> list[str]:
        """The sliding window and which layers use it."""
        out: list[str] = []
        if self.sliding_window is not None and not cfg.core.causal:
            out.append("sliding_window needs causal=True (the window looks back from each query)")
        p = self.window_pattern
        if not isinstance(p, str) or (p and set(p) - {"L", "G"}):
            out.append(f"window_pattern={p!r} must be letters L (local) and G (global), e.g. 'LG'")
        elif p and self.sliding_window is None:
            out.append("window_pattern needs sliding_window (how far a local layer looks back)")
        elif p and "L" not in p:
            out.append(
                f"window_pattern={p!r} has no local layer (L): leave it empty and unset sliding_window"
            )
        return out

    def _latent_problems(self, cfg: GPTConfig) -> list[str]:
        """Multi-head latent attention: its sizes, and what it does not combine with."""
        out: list[str] = []
        if not whole(out, self, "kv_lora_rank", optional=True):
            out += [
                f"{name} needs kv_lora_rank (multi-head latent attention)"
                for name in _LATENT_SIZES
                if getattr(self, name) is not None
            ]
            return out
        for name in _LATENT_SIZES:
            whole(out, self, name, optional=True)
        if cfg.positional.positions != "rope":
            out.append(
                "kv_lora_rank (latent attention) needs positions='rope' (its keys carry a rotary part)"
            )
        if isinstance(cfg.qk_rope_dim, int) and (cfg.qk_rope_dim < 2 or cfg.qk_rope_dim % 2):
            out.append(f"qk_rope_head_dim={cfg.qk_rope_dim} must be even, at least 2 (pairs are rotated)")
        if self.n_kv_heads not in (None, self.n_heads):
            out.append(
                "kv_lora_rank (latent attention) shares one latent by all heads: leave n_kv_heads empty"
            )
        if self.qk_rmsnorm or self.attn_scale not in ("sqrt_dk", "none"):
            out.append("kv_lora_rank (latent attention) takes attn_scale sqrt_dk or none, and no qk_rmsnorm")
        if cfg.positional.rotary_pct != 1.0:
            out.append("kv_lora_rank (latent attention) rotates qk_rope_head_dim, not rotary_pct")
        return out

    # ---- parameters ------------------------------------------------------------------------------
    def parameters(self, cfg: GPTConfig, s: Mapping[str, int]) -> list[Term]:
        latent = self.kv_lora_rank is not None
        terms = self._latent_terms(cfg, s) if latent else self._projection_terms(cfg, s)
        h, h_kv, d_k = s["h"], s["h_kv"], s["d_k"]
        scale = h if self.attn_scale in ("learned", "qk_norm") else 0
        terms.append(Term("attention scale", scale, "h", zero_note=f"attn_scale={self.attn_scale}"))
        if self.attn_sinks:
            terms.append(Term("attention sinks", h, "h"))
        if self.qk_rmsnorm and self.qk_norm_scope == "all":  # OLMo 2: over all heads' q and k
            terms.append(Term("qk norms", (h + h_kv) * d_k, "(h + h_kv)·d_k"))
        else:
            terms.append(
                Term("qk norms", 2 * d_k if self.qk_rmsnorm else 0, "2·d_k", zero_note="qk_rmsnorm off")
            )
        if latent:
            r_q = self.q_lora_rank
            terms.append(Term("latent norms", (r_q or 0) + s["r"], "r_q + r" if r_q is not None else "r"))
        return terms

    def _projection_terms(self, cfg: GPTConfig, s: Mapping[str, int]) -> list[Term]:
        """Q, K, V, O and their biases (multi-head, grouped-query or multi-query attention)."""
        d, h, h_kv, d_k = s["d"], s["h"], s["h_kv"], s["d_k"]
        bias, bias_f = 0, "bias=none"
        if cfg.core.bias == "all":
            bias, bias_f = h * d_k + 2 * h_kv * d_k + d, "h·d_k + 2·h_kv·d_k + d"
        elif cfg.core.bias == "qkv":
            bias, bias_f = h * d_k + 2 * h_kv * d_k, "h·d_k + 2·h_kv·d_k"
        return [
            Term("attention Q", d * h * d_k, "d·h·d_k", matmul=True),
            Term("attention K", d * h_kv * d_k, "d·h_kv·d_k", matmul=True),
            Term("attention V", d * h_kv * d_k, "d·h_kv·d_k", matmul=True),
            Term("attention O", h * d_k * d, "h·d_k·d", matmul=True),
            Term("attention biases", bias, bias_f, zero_note=bias_f),
        ]

    def _latent_terms(self, cfg: GPTConfig, s: Mapping[str, int]) -> list[Term]:
        """Multi-head latent attention's projections and their biases."""
        d, h, r, d_N, d_R, d_v = s["d"], s["h"], s["r"], s["d_N"], s["d_R"], s["d_v"]
        r_q, qk = self.q_lora_rank, d_N + d_R
        from_latent = "MLA: from the latent (latent KV up)"
        if r_q is None:
            terms = [Term("attention Q", d * h * qk, "d·h·(d_N + d_R)", matmul=True)]
        else:
            terms = [
                Term("attention Q", 0, "", zero_note="MLA: latent Q down and up"),
                Term("latent Q down", d * r_q, "d·r_q", matmul=True),
                Term("latent Q up", r_q * h * qk, "r_q·h·(d_N + d_R)", matmul=True),
            ]
        terms += [
            Term("attention K", 0, "", zero_note=from_latent),
            Term("attention V", 0, "", zero_note=from_latent),
            Term("latent KV down", d * (r + d_R), "d·(r + d_R)", matmul=True),
            Term("latent KV up", r * h * (d_N + d_v), "r·h·(d_N + d_v)", matmul=True),
            Term("attention O", h * d_v * d, "h·d_v·d", matmul=True),
        ]
        biases: list[tuple[int, str]] = []
        if cfg.core.bias in ("all", "qkv"):
            if r_q is not None:
                biases.append((r_q, "r_q"))
            biases += [(h * qk, "h·(d_N + d_R)"), (r + d_R, "r + d_R"), (h * (d_N + d_v), "h·(d_N + d_v)")]
        if cfg.core.bias == "all":
            biases.append((d, "d"))
        count, formula = sum(n for n, _ in biases), " + ".join(f for _, f in biases)
        return [*terms, Term("attention biases", count, formula, zero_note=f"bias={cfg.core.bias}")]


__all__ = ["AttentionPart"]
