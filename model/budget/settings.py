"""The settings a budget is computed at (:class:`BudgetSettings`: tokens, batch, sequence length,
precision, the cost's basis) and how a number of tokens is read from text (:func:`parse_quantity`);
:mod:`model.budget.table` re-exports both.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from model.budget import arithmetic as budget
from model.config import GPTConfig

_SUFFIXES = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}


def parse_quantity(text: str) -> float:
    """``"2T"`` → 2e12, ``"300B"`` → 3e11, ``"1.5e12"``, ``"15,000,000"``; ``ValueError`` otherwise."""
    s = str(text).strip().replace(",", "").replace("_", "").replace(" ", "")
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)([kKmMbBgGtTpP]?)", s)
    if not m:
        raise ValueError(f"{text!r} is not a number of tokens (write e.g. 2T, 300B, 1.5e12)")
    value = float(m.group(1)) * (_SUFFIXES[m.group(2).lower()] if m.group(2) else 1.0)
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{text!r} must be a positive number of tokens")
    return value


@dataclass
class BudgetSettings:
    """What the budget is computed at, besides the config (see :func:`model.budget.arithmetic.report`).

    ``seq_len`` None → the config's context length. ``tokens`` None → no training cost.
    ``peak_tflops`` is per device, dense 16-bit.
    """

    seq_len: int | None = None
    batch: int = 1
    kv_bytes: float = 2.0
    precision: str = "bf16-mixed"
    recompute: bool = False
    causal_halving: bool = False
    tokens: float | None = 2e12
    peak_tflops: float | None = 312.0
    mfu: float = 0.4
    gpus: int = 1
    cost_basis: str = "6N"
    extra: dict[str, Any] = field(default_factory=dict)

    def seq_len_for(self, cfg: GPTConfig) -> int:
        return cfg.core.context_length if self.seq_len is None else self.seq_len

    def kwargs(self, cfg: GPTConfig) -> dict[str, Any]:
        return dict(
            seq_len=self.seq_len_for(cfg),
            batch=self.batch,
            bytes_per_value=self.kv_bytes,
            tokens=self.tokens,
            peak_flops=None if self.peak_tflops is None else self.peak_tflops * 1e12,
            mfu=self.mfu,
            gpus=self.gpus,
            precision=self.precision,
            recompute=self.recompute,
            causal_halving=self.causal_halving,
            cost_basis=self.cost_basis,
        )

    def problems(self, cfg: GPTConfig) -> list[str]:
        kw = self.kwargs(cfg)
        return budget.problems(
            cfg,
            seq_len=kw["seq_len"],
            batch=kw["batch"],
            bytes_per_value=kw["bytes_per_value"],
            tokens=kw["tokens"],
            peak_flops=kw["peak_flops"],
            mfu=kw["mfu"],
            gpus=kw["gpus"],
            precision=kw["precision"],
            cost_basis=kw["cost_basis"],
        )

    def report(self, cfg: GPTConfig, title: str | None = None) -> dict[str, Any]:
        """:func:`model.budget.arithmetic.report` at these settings (raises ConfigError listing problems)."""
        return budget.report(cfg, title=title, **self.kwargs(cfg))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("extra", None)
        return d
