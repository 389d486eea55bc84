"""Where a token is: a learned position table, fixed sinusoids, rotary position embeddings (RoPE: its
base, partial rotary, the local layers' base, and the rescalings that stretch the context: linear,
Llama 3's, YaRN), or none at all."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from model.config.fields import MAX_ROPE_BASE, MAX_ROPE_CONTEXT
from model.config.parts.base import Part, Term, declare
from model.config.rules import (
    bounds,
    fmt,
    is_number,
    is_positive_int,
    kind_problems,
    out_of_range,
    positive,
    rope_base_ok,
)

if TYPE_CHECKING:
    from model.config import GPTConfig


@dataclass(frozen=True)
class PositionPart(Part):
    """The positional encoding. Its only parameters are the learned position table ``T_max·d`` (a
    model-level row; ``positions="learned"``): sinusoids and RoPE are fixed tables, not weights."""

    title = "positions"
    #: its name in the config: ``cfg.positional``
    key = "positional"

    positions: str = declare(
        "learned",
        "learned table, fixed sinusoids, rotary (RoPE) on q and k, or none at all.",
        choices=("learned", "sinusoidal", "rope", "none"),
    )
    rope_base: float = declare(10000.0, "θ base of the rotary frequencies θ_i = base^(-2i/d_k).")
    rope_scaling: str = declare(
        "none",
        "none; linear: every θ_i / factor; llama3: low frequencies / factor, high ones kept; yarn: YaRN's"
        " ramp between the two, and cos, sin × rope_attn_factor (gpt-oss, DeepSeek-V3).",
        choices=("none", "linear", "llama3", "yarn"),
    )
    rope_factor: float = declare(
        1.0,
        "The factor of rope_scaling (the context is stretched this many times).",
        bounds=(1.0, 10_000.0),  # 8 (Llama 3.1), 32 (gpt-oss), 40 (DeepSeek-V3); 1: unscaled
    )
    rope_low_freq_factor: float = declare(
        1.0,
        "llama3: wavelengths above original_context / this are divided by the factor.",
        bounds=(0.001, 10_000.0),  # 1 (Llama 3.1)
    )
    rope_high_freq_factor: float = declare(
        4.0,
        "llama3 scaling: wavelengths below original_context / this are kept.",
        bounds=(0.001, 10_000.0),  # 4 (Llama 3.1)
    )
    rope_original_context: int = declare(
        8192,
        "llama3 and yarn scaling: the context length the model was first trained with.",
    )
    rope_beta_fast: float = declare(
        32.0,
        "yarn: dimensions turning more than this many times in the original context keep θ_i.",
        bounds=(0.001, 10_000.0),  # 32 (YaRN)
    )
    rope_beta_slow: float = declare(
        1.0,
        "yarn: dimensions turning fewer than this many times are divided by the factor.",
        bounds=(0.001, 10_000.0),  # 1 (YaRN)
    )
    rope_truncate: bool = declare(True, "yarn: round the ramp's ends to whole dimensions (false in gpt-oss).")
    rope_attn_factor: float | None = declare(
        None,
        "yarn: cos and sin are multiplied by this; empty: 0.1·ln(factor) + 1.",
        bounds=(0.01, 100.0),  # 1 (DeepSeek-V3) to about 1.4 (gpt-oss)
    )
    rope_local_base: float | None = declare(
        None,
        "θ base of the local (sliding-window) layers' RoPE, unscaled (Gemma 3: 10 000); empty: rope_base.",
    )
    rotary_pct: float = declare(
        1.0,
        "Fraction of each head's d_k that RoPE rotates (GPT-NeoX: 0.25); the rest is not rotated.",
    )

    # ---- checks ----------------------------------------------------------------------------------
    def problems(self, cfg: GPTConfig) -> list[str]:
        out = kind_problems(self, choices=("positions", "rope_scaling"), flags=("rope_truncate",))
        if not rope_base_ok(self.rope_base):
            out.append(
                f"rope_base={self.rope_base!r} must be greater than 1 and at most {fmt(MAX_ROPE_BASE)} "
                "(10000 is usual)"
            )
        return out + self._scaling_problems() + self._rotary_problems(cfg)

    def _scaling_problems(self) -> list[str]:
        """RoPE's rescaling: the factors, the original context, YaRN's fields."""
        out: list[str] = []
        for name in ("rope_factor", "rope_low_freq_factor", "rope_high_freq_factor"):
            lo, hi = bounds(self, name)
            if out_of_range(self, name):
                out.append(f"{name}={getattr(self, name)!r} must be a number from {fmt(lo)} to {fmt(hi)}")
        v = self.rope_original_context
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_ROPE_CONTEXT:
            out.append(
                f"rope_original_context={v!r} must be a whole number from 1 to {fmt(MAX_ROPE_CONTEXT)}"
            )
        low, high = self.rope_low_freq_factor, self.rope_high_freq_factor
        if self.rope_scaling == "llama3" and is_number(low) and is_number(high) and high <= low:
            out.append(
                f"rope_high_freq_factor={high} must be larger than "
                f"rope_low_freq_factor={low} for llama3 scaling"
            )
        positive(out, self, "rope_beta_fast")
        positive(out, self, "rope_beta_slow")
        positive(out, self, "rope_attn_factor", optional=True)
        return out

    def _rotary_problems(self, cfg: GPTConfig) -> list[str]:
        """What RoPE rotates (partial rotary, the head's size), the local layers' base, and the fields
        that need RoPE; sinusoids' even width."""
        out: list[str] = []
        pct = self.rotary_pct
        if not is_number(pct) or not (0.0 < pct <= 1.0):
            out.append(f"rotary_pct={pct!r} must be a fraction in (0, 1]")
        for name, default in (("rope_scaling", "none"), ("rotary_pct", 1.0)):
            value = getattr(self, name)
            valid = (
                value in self.declared("rope_scaling")["choices"]
                if name == "rope_scaling"
                else is_number(value)
            )
            if self.positions != "rope" and valid and value != default:
                out.append(f"{name}={value!r} needs positions='rope'")
        local = self.rope_local_base
        if local is not None and not rope_base_ok(local):
            out.append(
                f"rope_local_base={local!r} must be greater than 1 and at most "
                f"{fmt(MAX_ROPE_BASE)} (or empty)"
            )
        elif local is not None:
            if self.positions != "rope":
                out.append("rope_local_base needs positions='rope'")
            elif cfg.attention.sliding_window is None:
                out.append("rope_local_base needs local layers (sliding_window): it is their RoPE base")
        if self.positions == "rope":
            out += self._head_problems(cfg)
        if self.positions == "sinusoidal" and is_positive_int(cfg.core.d_model) and cfg.core.d_model % 2:
            out.append(f"d_model={cfg.core.d_model} must be even for sinusoidal positions")
        return out

    def _head_problems(self, cfg: GPTConfig) -> list[str]:
        """RoPE rotates pairs: an even d_k, or an even part of it (partial rotary)."""
        out: list[str] = []
        pct, d_k = self.rotary_pct, cfg.d_head
        even = pct == 1.0 and not cfg.mla  # latent attention rotates qk_rope_head_dim
        if is_positive_int(d_k) and d_k % 2 and even:
            out.append(f"head_dim={d_k} must be even for rope positions (pairs are rotated)")
        if (
            is_positive_int(d_k)
            and pct != 1.0
            and isinstance(pct, (int, float))
            and (cfg.rotary_dim % 2 or cfg.rotary_dim == 0)
        ):
            out.append(
                f"rotary_pct={pct} rotates {cfg.rotary_dim} of head_dim={d_k} "
                f"dimensions: that must be an even number, at least 2"
            )
        return out

    # ---- parameters ------------------------------------------------------------------------------
    def parameters(self, cfg: GPTConfig, s: Mapping[str, int]) -> list[Term]:
        """The learned position table ``T_max·d`` (``positions="learned"``; else 0)."""
        learned = self.positions == "learned"
        return [
            Term(
                "position embedding",
                s["T_max"] * s["d"] if learned else 0,
                "T_max·d" if learned else f"{self.positions}: no learned table",
                blocks=None,
            )
        ]


__all__ = ["PositionPart"]
