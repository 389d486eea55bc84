"""Normalisation: LayerNorm or RMSNorm (with Gemma's 1 + γ), its ε and shift, where it sits in the
block (pre-, post-, sandwich or output norm), and GPT-NeoX's parallel residual that reads one norm's
input into both sublayers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from model.config.parts.base import Part, Term, declare
from model.config.rules import bounds, fmt, kind_problems, out_of_range

if TYPE_CHECKING:
    from model.config import GPTConfig


@dataclass(frozen=True)
class NormPart(Part):
    """The block's norms and the final one. Their parameters, with d the model's width and n = 1 weight
    vector per norm (RMSNorm, with or without 1 + γ; LayerNorm without a bias) or 2 (LayerNorm's γ and β):

    * per block: two norms ``2·n·d`` (pre, post, output) or four ``4·n·d`` (sandwich, Gemma 2/3);
    * the final norm ``n·d`` before the output head (none with post-norm: the blocks end in one).

    Where the norms sit otherwise, ε and the parallel residual add no parameters. The norms inside
    attention (QK-norm, latent attention's) are :class:`~model.config.parts.attention.AttentionPart`'s.
    """

    title = "norms"
    #: its name in the config: ``cfg.normalization``
    key = "normalization"

    norm: str = declare(
        "layernorm",
        "layernorm: subtract mean, divide by std, scale+shift; rmsnorm: divide by RMS, scale only.",
        choices=("layernorm", "rmsnorm"),
    )
    norm_position: str = declare(
        "pre",
        "pre: x + f(Norm(x)) (GPT-2, modern); post: Norm(x + f(x)) (original Transformer); sandwich: x + "
        "Norm(f(Norm(x))) (Gemma 2/3); output: x + Norm(f(x)) (OLMo 2).",
        choices=("pre", "post", "sandwich", "output"),
    )
    norm_eps: float = declare(
        1e-5,
        "ε inside the norm's square root.",
        bounds=(1e-12, 0.5),  # 1e-5 (GPT-2), 1e-6 (Llama)
    )
    norm_bias: bool = declare(
        True,
        "LayerNorm with a learned shift β (GPT-2); false: scale only (nanoGPT's bias=False).",
    )
    norm_offset: bool = declare(
        False,
        "RMSNorm scales by (1 + γ) with γ starting at 0 (Gemma), instead of by γ.",
    )
    parallel_residual: bool = declare(
        False,
        "x + Attn(Norm1(x)) + MLP(Norm2(x)): attention and MLP read the same x (GPT-NeoX).",
    )

    def problems(self, cfg: GPTConfig) -> list[str]:
        out = kind_problems(
            self,
            choices=("norm", "norm_position"),
            flags=("norm_bias", "norm_offset", "parallel_residual"),
        )
        if out_of_range(self, "norm_eps"):
            lo, hi = bounds(self, "norm_eps")
            out.append(
                f"norm_eps={self.norm_eps!r} must be a small positive number from {fmt(lo)} to {fmt(hi)}, "
                "such as 1e-5"
            )
        if self.norm_offset and self.norm != "rmsnorm":
            out.append("norm_offset (scale by 1 + γ) is an RMSNorm variant: set norm='rmsnorm'")
        if self.parallel_residual and self.norm_position != "pre":
            out.append("parallel_residual needs norm_position='pre' (both branches read Norm(x))")
        return out

    def parameters(self, cfg: GPTConfig, s: Mapping[str, int]) -> list[Term]:
        d = s["d"]
        shift = self.norm == "layernorm" and self.norm_bias  # a shift β as well as a scale γ
        n_norms = 4 if self.norm_position == "sandwich" else 2
        per_norm = 2 if shift else 1
        final = self.norm_position != "post"
        return [
            Term("norms", n_norms * per_norm * d, f"{n_norms * per_norm}·d"),
            Term(
                "final norm",
                per_norm * d if final else 0,
                ("2·d" if shift else "d") if final else "post-LN: blocks end in a norm",
                blocks=None,
            ),
        ]


__all__ = ["NormPart"]
