"""FLOPs per token: forward and training, the attention-score term, and each part's share.

Part of the budget calculator; :mod:`model.budget.arithmetic` states its conventions (2 FLOPs per
multiply-add of a matrix product, ``N_mm``, training = 3 × forward) and is what callers import.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from model.budget.checks import check, symbols
from model.budget.parameters import ParamBreakdown, parameters
from model.config import GPTConfig

FLOP_PARTS = ("attention scores", "attention projections", "mlp", "output head")


@dataclass(frozen=True)
class FlopBreakdown:
    """Forward and training FLOPs per token at context ``seq_len`` (see the module's conventions).

    ``parts`` splits ``forward_total_per_token`` into :data:`FLOP_PARTS`:
    attention scores ``4·L·T·h·d_k`` (halved if ``causal_halving``), attention projections
    ``2·L·(2·d·h·d_k + 2·d·h_kv·d_k)``, mlp ``2·L·(2 or 3)·d·d_ff``, output head ``2·V·d``.
    """

    seq_len: int
    causal_halving: bool
    matmul_params: int  # N_mm
    total_params: int  # N
    forward_per_token: int  # 2·N_mm
    attention_forward_per_token: int
    parts: dict[str, int]
    attention_crossover_seq_len: float

    @property
    def forward_total_per_token(self) -> int:
        """``2·N_mm`` + the attention-score term: what a forward pass really multiplies."""
        return self.forward_per_token + self.attention_forward_per_token

    @property
    def train_per_token(self) -> int:
        """``3 · 2·N_mm = 6·N_mm`` (forward + a backward of two forwards), no attention term."""
        return 3 * self.forward_per_token

    @property
    def train_total_per_token(self) -> int:
        return 3 * self.forward_total_per_token

    @property
    def forward_2n(self) -> int:
        """The textbook ``2N`` with N = all parameters."""
        return 2 * self.total_params

    @property
    def train_6n(self) -> int:
        """The textbook ``6N`` with N = all parameters."""
        return 6 * self.total_params

    def shares(self) -> dict[str, float]:
        """Fraction of the forward FLOPs per token in each of :data:`FLOP_PARTS` (sums to 1)."""
        total = self.forward_total_per_token
        return {k: v / total for k, v in self.parts.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq_len": self.seq_len,
            "causal_halving": self.causal_halving,
            "matmul_params": self.matmul_params,
            "forward_per_token": self.forward_per_token,
            "attention_forward_per_token": self.attention_forward_per_token,
            "forward_total_per_token": self.forward_total_per_token,
            "train_per_token": self.train_per_token,
            "train_total_per_token": self.train_total_per_token,
            "forward_2n": self.forward_2n,
            "train_6n": self.train_6n,
            "parts": dict(self.parts),
            "shares": self.shares(),
            "attention_crossover_seq_len": self.attention_crossover_seq_len,
        }


def _flop_parts(p: ParamBreakdown) -> tuple[int, int, int, int]:
    """(per-token attention-score FLOPs per unit of T before halving, projections, mlp, head)."""
    cfg = p.config
    s = symbols(cfg)
    score_per_T = 4 * s["L"] * s["h"] * s["d_k"]
    proj = 2 * sum(p[n].count for n in ("attention Q", "attention K", "attention V", "attention O"))
    mlp = 2 * p["mlp weights"].count
    head = 2 * s["V"] * s["d"]
    return score_per_T, proj, mlp, head


def attention_flops_per_token(cfg: GPTConfig, seq_len: int, causal_halving: bool = False) -> int:
    """Forward FLOPs per token of ``Q·Kᵀ`` and ``A·V`` at context T: ``4·L·T·h·d_k`` (``2·L·T·h·d_k``
    halved for a causal mask)."""
    check(cfg, seq_len=seq_len)
    s = symbols(cfg)
    n = 4 * s["L"] * seq_len * s["h"] * s["d_k"]
    return n // 2 if causal_halving else n


def attention_crossover(cfg: GPTConfig, causal_halving: bool = False) -> float:
    """The context T at which attention-score FLOPs equal the MLP's: ``4·L·T·h·d_k = 2·L·mlp_weights``,
    so ``T* = mlp_weights / (2·h·d_k)`` per layer (twice that with ``causal_halving``); ``4·d`` for a
    GPT-2-style 4d GELU MLP."""
    score_per_T, _, mlp, _ = _flop_parts(parameters(cfg))
    return (2 if causal_halving else 1) * mlp / score_per_T


def flops(cfg: GPTConfig, seq_len: int | None = None, causal_halving: bool = False) -> FlopBreakdown:
    """FLOPs per token at context ``seq_len`` (default: ``context_length``); see the module docstring."""
    seq_len = cfg.context_length if seq_len is None else seq_len
    check(cfg, seq_len=seq_len)
    p = parameters(cfg)
    score_per_T, proj, mlp, head = _flop_parts(p)
    scores = score_per_T * seq_len // (2 if causal_halving else 1)
    assert proj + mlp + head == 2 * p.matmul
    return FlopBreakdown(
        seq_len=seq_len,
        causal_halving=causal_halving,
        matmul_params=p.matmul,
        total_params=p.total,
        forward_per_token=2 * p.matmul,
        attention_forward_per_token=scores,
        parts={"attention scores": scores, "attention projections": proj, "mlp": mlp, "output head": head},
        attention_crossover_seq_len=(2 if causal_halving else 1) * mlp / score_per_T,
    )


def flop_shares(
    cfg: GPTConfig, seq_lens: Sequence[int], causal_halving: bool = False
) -> dict[str, list[float]]:
    """Share of forward FLOPs per token in each of :data:`FLOP_PARTS` for every T in ``seq_lens``.

    Returns ``{"seq_len": [...], "attention scores": [...], "attention projections": [...],
    "mlp": [...], "output head": [...]}``, lists of equal length, each position summing to 1
    (ready for ``np.asarray`` and a stacked plot).
    """
    seq_lens = list(seq_lens)
    check(cfg)
    for T in seq_lens:
        check(cfg, seq_len=T)
    score_per_T, proj, mlp, head = _flop_parts(parameters(cfg))
    out: dict[str, list[float]] = {"seq_len": [float(T) for T in seq_lens]}
    out.update({k: [] for k in FLOP_PARTS})
    for T in seq_lens:
        scores = score_per_T * T / (2 if causal_halving else 1)
        total = scores + proj + mlp + head
        for k, v in zip(FLOP_PARTS, (scores, proj, mlp, head)):
            out[k].append(v / total)
    return out


__all__ = [
    "FLOP_PARTS",
    "FlopBreakdown",
    "attention_crossover",
    "attention_flops_per_token",
    "flop_shares",
    "flops",
]
