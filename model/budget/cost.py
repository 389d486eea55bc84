"""Training cost: the compute for ``D`` tokens and, given a device's peak, GPU-hours and days.

Part of the budget calculator; :mod:`model.budget.arithmetic` is what callers import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from model.budget.checks import check
from model.budget.flops import flops
from model.budget.parameters import parameters
from model.budget.units import as_whole
from model.config import GPTConfig


@dataclass(frozen=True)
class TrainingCost:
    """Compute for ``tokens`` training tokens, and the time it takes when ``peak_flops`` is known.

    ``gpu_seconds = flops / (peak_flops · mfu)``; wall-clock = GPU-seconds / gpus.
    """

    tokens: float
    basis: str
    flops_per_token: int
    flops: float
    peak_flops: float | None = None
    mfu: float | None = None
    gpus: int = 1
    effective_flops_per_gpu: float | None = field(default=None)

    @property
    def gpu_seconds(self) -> float | None:
        return None if self.effective_flops_per_gpu is None else self.flops / self.effective_flops_per_gpu

    @property
    def gpu_hours(self) -> float | None:
        s = self.gpu_seconds
        return None if s is None else s / 3600

    @property
    def seconds(self) -> float | None:
        """Wall-clock seconds on ``gpus`` devices."""
        s = self.gpu_seconds
        return None if s is None else s / self.gpus

    @property
    def days(self) -> float | None:
        s = self.seconds
        return None if s is None else s / 86400

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "basis": self.basis,
            "flops_per_token": self.flops_per_token,
            "flops": self.flops,
            "peak_flops": self.peak_flops,
            "mfu": self.mfu,
            "gpus": self.gpus,
            "gpu_seconds": self.gpu_seconds,
            "gpu_hours": self.gpu_hours,
            "seconds": self.seconds,
            "days": self.days,
        }


def training_cost(
    cfg: GPTConfig,
    tokens: float,
    peak_flops: float | None = None,
    mfu: float = 0.4,
    gpus: int = 1,
    *,
    basis: str = "6N",
    seq_len: int | None = None,
    causal_halving: bool = False,
) -> TrainingCost:
    """Total training FLOPs for ``tokens`` tokens and, given ``peak_flops`` (FLOP/s per device), the
    GPU-seconds, GPU-hours and wall-clock days at utilisation ``mfu`` on ``gpus`` devices.

    ``basis`` (:data:`COST_BASES`): ``"6N"`` = ``6·N·D`` with N the parameters a token uses (default, the
    textbook estimate; all parameters of a dense model, the active ones of a mixture of experts);
    ``"matmul"`` = ``3·(2·N_mm + attention scores at seq_len)·D``. Recomputation is not
    counted (MFU counts model FLOPs, not hardware FLOPs).
    """
    check(cfg, tokens=tokens, peak_flops=peak_flops, mfu=mfu, gpus=gpus, cost_basis=basis, seq_len=seq_len)
    if basis == "6N":
        per_token = 6 * parameters(cfg).active
    else:
        per_token = flops(cfg, seq_len, causal_halving).train_total_per_token
    total = per_token * tokens
    return TrainingCost(
        tokens=as_whole(tokens),
        basis=basis,
        flops_per_token=per_token,
        flops=as_whole(total),
        peak_flops=peak_flops,
        mfu=mfu,
        gpus=gpus,
        effective_flops_per_gpu=None if peak_flops is None else peak_flops * mfu,
    )


__all__ = ["TrainingCost", "training_cost"]
