"""Where a token is: a learned position table, fixed sinusoids, rotary position embeddings (RoPE: its
base, partial rotary, the local layers' base, and the rescalings that stretch the context: linear,
Llama 3's, YaRN), or none at all."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from model.config.fields import CHOICES, FLOAT_RANGES, MAX_ROPE_BASE, MAX_ROPE_CONTEXT
from model.config.parts.base import Part, Term
from model.config.rules import (
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

    positions: str = "learned"
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
            lo, hi = FLOAT_RANGES[name]
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
            valid = value in CHOICES["rope_scaling"] if name == "rope_scaling" else is_number(value)
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
