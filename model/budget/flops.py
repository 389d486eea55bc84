"""FLOPs per token: forward and training, the attention-score term, and each part's share.

Part of the budget calculator; :mod:`model.budget.arithmetic` states its conventions (2 FLOPs per
multiply-add of a matrix product, ``N_mm``, training = 3 × forward) and is what callers import.

A mixture of experts costs what a token uses: ``N_mm`` counts the router, the ``k`` experts a token
is sent to and the shared ones (:attr:`~model.budget.parameters.ParamBreakdown.matmul`). Attention
scores cost ``2·h·d_qk`` per key for ``Q·Kᵀ`` and ``2·h·d_v`` for ``A·V`` in every layer (``4·h·d_k``
when ``d_qk = d_v = d_k``; latent attention's heads are ``d_N + d_R`` and ``d_v``, computed as the
training forward does, keys and values expanded from the latent). A local layer of window ``W``
attends to ``min(T, W)`` keys: what a kernel that skips the masked keys costs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from model.budget.checks import check, local_layers, symbols
from model.budget.parameters import ParamBreakdown, parameters
from model.config import GPTConfig

FLOP_PARTS = ("attention scores", "attention projections", "mlp", "output head")


@dataclass(frozen=True)
class FlopBreakdown:
    """Forward and training FLOPs per token at context ``seq_len`` (see the module's conventions).

    ``parts`` splits ``forward_total_per_token`` into :data:`FLOP_PARTS`: attention scores
    ``4·L·T·h·d_k`` (halved if ``causal_halving``; ``scores_formula`` gives this config's),
    attention projections ``2·L·(2·d·h·d_k + 2·d·h_kv·d_k)`` (or latent attention's), mlp
    ``2·L·(2 or 3)·d·d_ff`` (a mixture of experts: router, ``k`` experts and shared ones), output head
    ``2·V·d``. ``attention_crossover_seq_len`` is ``inf`` when the scores never reach the MLP (every
    layer local, its window too short).
    """

    seq_len: int
    causal_halving: bool
    matmul_params: int  # N_mm, the weights a token multiplies
    total_params: int  # N
    forward_per_token: int  # 2·N_mm
    attention_forward_per_token: int
    parts: dict[str, int]
    attention_crossover_seq_len: float
    active_params: int = 0  # the parameters a token uses (= total_params for a dense model)
    scores_formula: str = "4·L·T·h·d_k"
    crossover_formula: str = "T* = mlp weights / (2·h·d_k)"

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
        """The textbook ``2N`` with N = the parameters a token uses (all of them in a dense model; a
        mixture of experts' active count, as its authors and the scaling laws count it)."""
        return 2 * (self.active_params or self.total_params)

    @property
    def train_6n(self) -> int:
        """The textbook ``6N``, N as in :attr:`forward_2n`."""
        return 6 * (self.active_params or self.total_params)

    def shares(self) -> dict[str, float]:
        """Fraction of the forward FLOPs per token in each of :data:`FLOP_PARTS` (sums to 1)."""
        total = self.forward_total_per_token
        return {k: v / total for k, v in self.parts.items()}

    def to_dict(self) -> dict[str, Any]:
        T_star = self.attention_crossover_seq_len
        return {
            "seq_len": self.seq_len,
            "causal_halving": self.causal_halving,
            "matmul_params": self.matmul_params,
            "total_params": self.total_params,
            "active_params": self.active_params or self.total_params,
            "forward_per_token": self.forward_per_token,
            "attention_forward_per_token": self.attention_forward_per_token,
            "forward_total_per_token": self.forward_total_per_token,
            "train_per_token": self.train_per_token,
            "train_total_per_token": self.train_total_per_token,
            "forward_2n": self.forward_2n,
            "train_6n": self.train_6n,
            "parts": dict(self.parts),
            "shares": self.shares(),
            "attention_crossover_seq_len": T_star if math.isfinite(T_star) else None,
            "scores_formula": self.scores_formula,
            "crossover_formula": self.crossover_formula,
        }


# ---------------------------------------------------------------------------------------------
# attention scores
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Scores:
    """Forward score FLOPs per token per key attended, summed over the global and the local layers."""

    per_layer: int  # 2·h·(d_qk + d_v)
    global_rate: int  # per_layer · (L − L_local)
    local_rate: int  # per_layer · L_local
    window: int  # W (irrelevant when local_rate is 0)

    def at(self, T: float, causal_halving: bool) -> Fraction:
        """Score FLOPs per token at context ``T``. A global layer attends to ``T`` keys (``T/2`` on
        average with ``causal_halving``), a local one to ``min(T, W)`` (halved: ``T/2`` up to ``W``,
        then ``W − W²/(2T)``, the mean of ``min(t, W)`` over ``t`` in ``(0, T]``)."""
        t, w = Fraction(T), Fraction(self.window)
        if not causal_halving:
            return self.global_rate * t + self.local_rate * (t if t < w else w)
        local = t / 2 if t <= w else w - w * w / (2 * t)
        return self.global_rate * t / 2 + self.local_rate * local

    def crossover(self, mlp: int, causal_halving: bool) -> float:
        """The ``T`` at which :meth:`at` equals ``mlp`` (``inf`` if it never does)."""
        g, lo, W = self.global_rate, self.local_rate, self.window
        half = 2 if causal_halving else 1
        if not lo or (g + lo) * W >= half * mlp:  # reached while every layer still sees all T keys
            return half * mlp / (g + lo)
        if not causal_halving:  # g·T + lo·W = mlp
            return (mlp - lo * W) / g if g else math.inf
        if not g:  # lo·(W − W²/2T) = mlp
            return lo * W * W / (2 * (lo * W - mlp)) if lo * W > mlp else math.inf
        b = 2 * (lo * W - mlp)  # g·T² + b·T − lo·W² = 0, the positive root
        return (-b + math.sqrt(b * b + 4 * g * lo * W * W)) / (2 * g)


def _scores(cfg: GPTConfig) -> _Scores:
    s = symbols(cfg)
    per_layer = 2 * s["h"] * (cfg.qk_dim + cfg.v_dim)
    n_local = local_layers(cfg)
    return _Scores(
        per_layer, per_layer * (s["L"] - n_local), per_layer * n_local, cfg.attention.sliding_window or 0
    )


def _scores_formula(cfg: GPTConfig) -> str:
    """The score FLOPs per token in the module's symbols (before causal halving)."""
    n_local = local_layers(cfg)
    if cfg.mla:
        per, head = "2·", "·h·(d_N + d_R + d_v)"
    else:
        per, head = "4·", "·h·d_k"
    if not n_local:
        return f"{per}L·T{head}"
    if n_local == cfg.core.n_layers:
        return f"{per}L·min(T, W){head}"
    return f"{per}((L − L_local)·T + L_local·min(T, W)){head}"


def _crossover_formula(cfg: GPTConfig, p: ParamBreakdown) -> str:
    mlp = "active mlp weights" if p.has_moe else "mlp weights"
    head = "h·(d_N + d_R + d_v)" if cfg.mla else "2·h·d_k"
    if local_layers(cfg):
        return f"scores = mlp: local layers stop growing at T = W (no local layer: {mlp} / ({head}))"
    return f"T* = {mlp} / ({head})"


def _matmul_parts(p: ParamBreakdown) -> tuple[int, int, int]:
    """Forward FLOPs per token of the attention projections, the feed-forward (what a token uses of it)
    and the output head: 2 per weight."""
    proj = 2 * sum(c.active_count for c in p.components_of("attention") if c.matmul)
    mlp = 2 * sum(c.active_count for c in p.components_of("mlp") if c.matmul)
    s = symbols(p.config)
    return proj, mlp, 2 * s["V"] * s["d"]


def attention_flops_per_token(cfg: GPTConfig, seq_len: int, causal_halving: bool = False) -> int:
    """Forward FLOPs per token of ``Q·Kᵀ`` and ``A·V`` at context T: ``4·L·T·h·d_k`` (``2·L·T·h·d_k``
    halved for a causal mask); latent attention's heads and local layers' windows as the module says;
    rounded to a whole FLOP."""
    check(cfg, seq_len=seq_len)
    return round(_scores(cfg).at(seq_len, causal_halving))


def attention_crossover(cfg: GPTConfig, causal_halving: bool = False) -> float:
    """The context T at which attention-score FLOPs equal the MLP's: ``4·L·T·h·d_k = 2·L·mlp_weights``,
    so ``T* = mlp_weights / (2·h·d_k)`` per layer (twice that with ``causal_halving``); ``4·d`` for a
    GPT-2-style 4d GELU MLP. A mixture of experts counts the weights a token uses; local layers stop
    growing at their window (``inf`` if the scores never catch up)."""
    p = parameters(cfg)
    _, mlp, _ = _matmul_parts(p)
    return _scores(cfg).crossover(mlp, causal_halving)


def flops(cfg: GPTConfig, seq_len: int | None = None, causal_halving: bool = False) -> FlopBreakdown:
    """FLOPs per token at context ``seq_len`` (default: ``context_length``); see the module docstring."""
    seq_len = cfg.core.context_length if seq_len is None else seq_len
    check(cfg, seq_len=seq_len)
    p = parameters(cfg)
    proj, mlp, head = _matmul_parts(p)
    sc = _scores(cfg)
    scores = round(sc.at(seq_len, causal_halving))
    assert proj + mlp + head == 2 * p.matmul
    return FlopBreakdown(
        seq_len=seq_len,
        causal_halving=causal_halving,
        matmul_params=p.matmul,
        total_params=p.total,
        forward_per_token=2 * p.matmul,
        attention_forward_per_token=scores,
        parts={"attention scores": scores, "attention projections": proj, "mlp": mlp, "output head": head},
        attention_crossover_seq_len=sc.crossover(mlp, causal_halving),
        active_params=p.active,
        scores_formula=_scores_formula(cfg),
        crossover_formula=_crossover_formula(cfg, p),
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
    proj, mlp, head = _matmul_parts(parameters(cfg))
    sc = _scores(cfg)
    out: dict[str, list[float]] = {"seq_len": [float(T) for T in seq_lens]}
    out.update({k: [] for k in FLOP_PARTS})
    for T in seq_lens:
        scores = float(sc.at(T, causal_halving))
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
