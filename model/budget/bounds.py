"""The bounds of every count and setting a budget is computed from: one table that the Budget tab and
``attention-lab budget`` both check, so a value is refused in the same words in both.

The bounds are generous (405B-class models, ten-million-token contexts, a million devices) and only
keep out what no model is: a negative or zero count, text where a number belongs, or a thirty-digit
layer count printed as a figure. :func:`out_of_bounds` checks given values against the table, one
line per value outside it (``n_layers=-5 must be a whole number from 1 to 10,000``); :func:`merged`
puts those lines before the calculator's own problems (:func:`model.budget.checks.problems`),
dropping the calculator's line about a value already named.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from model.config import MAX_ROPE_CONTEXT, GPTConfig

#: The longest context or sequence a budget takes (Llama 4 Scout reads 10M tokens).
MAX_CONTEXT = 10_485_760


@dataclass(frozen=True)
class Bound:
    """``least`` ≤ value ≤ ``most``; ``whole``: a whole number (a count); ``unit`` follows the upper
    limit in a message."""

    least: float
    most: float
    whole: bool = True
    unit: str = ""

    def rule(self, *, scale: float = 1.0, unit: str | None = None) -> str:
        """``a whole number from 1 to 10,000`` (limits times ``scale``, for a field shown in %)."""
        unit = self.unit if unit is None else unit
        kind = "a whole number" if self.whole else "a number"
        most = _limit(self.most * scale) + (f" {unit}" if unit else "")
        return f"{kind} from {_limit(self.least * scale)} to {most}"

    def holds(self, value: Any, *, scale: float = 1.0) -> bool:
        """Whether ``value`` (in the units of the limits times ``scale``) lies within the bound."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if self.whole and not isinstance(value, int):
            return False
        return math.isfinite(value) and self.least * scale <= value <= self.most * scale

    def problem(self, name: str, value: Any, *, scale: float = 1.0, unit: str | None = None) -> str | None:
        """``name=value must be …`` when ``value`` is out of bounds; None when it holds."""
        if self.holds(value, scale=scale):
            return None
        return f"{name}={short(value)} must be {self.rule(scale=scale, unit=unit)}"


#: Every whole-number field of :class:`~model.config.GPTConfig` (a field left None is not checked:
#: it means "auto", "off" or "dense", as the config says).
CONFIG_BOUNDS: dict[str, Bound] = {
    "vocab_size": Bound(1, 10_000_000),
    "context_length": Bound(1, MAX_CONTEXT),
    "n_layers": Bound(1, 10_000),
    "d_model": Bound(1, 1_000_000),
    "n_heads": Bound(1, 100_000),
    "n_kv_heads": Bound(1, 100_000),
    "head_dim": Bound(1, 100_000),
    "d_ff": Bound(1, 10_000_000),
    "rope_original_context": Bound(1, MAX_ROPE_CONTEXT),
    "sliding_window": Bound(1, MAX_CONTEXT),
    "n_experts": Bound(1, 100_000),
    "n_experts_per_token": Bound(1, 100_000),
    "n_shared_experts": Bound(0, 100_000),
    "expert_d_ff": Bound(1, 10_000_000),
    "shared_expert_d_ff": Bound(1, 10_000_000),
    "moe_dense_layers": Bound(0, 10_000),
    "router_groups": Bound(1, 100_000),
    "router_topk_groups": Bound(1, 100_000),
    "kv_lora_rank": Bound(1, 1_000_000),
    "q_lora_rank": Bound(1, 1_000_000),
    "qk_rope_head_dim": Bound(1, 100_000),
    "qk_nope_head_dim": Bound(1, 100_000),
    "v_head_dim": Bound(1, 100_000),
}

#: The settings a budget is computed at, in the units the user types (TFLOP/s, a fraction for MFU).
SETTING_BOUNDS: dict[str, Bound] = {
    "seq_len": Bound(1, MAX_CONTEXT),
    "batch": Bound(1, 1_000_000),
    "gpus": Bound(1, 1_000_000),
    "tokens": Bound(1, 1e18, whole=False),
    "peak_tflops": Bound(0.001, 100_000, whole=False, unit="TFLOP/s"),
    "mfu": Bound(0.001, 1, whole=False),
    "bytes_per_value": Bound(0.1, 16, whole=False),
}

BOUNDS: dict[str, Bound] = {**CONFIG_BOUNDS, **SETTING_BOUNDS}

#: The calculator's name of a setting that the table bounds under another name.
ALIASES = {"peak_flops": "peak_tflops"}


def config_counts(cfg: GPTConfig) -> dict[str, Any]:
    """The bounded fields of ``cfg`` that are set (a None field is "auto" and is not checked)."""
    return {name: cfg.get(name) for name in CONFIG_BOUNDS if cfg.get(name) is not None}


def out_of_bounds(values: Mapping[str, Any]) -> dict[str, str]:
    """name → its one-line problem, for each value of ``values`` outside its bound in :data:`BOUNDS`
    (a None value is "not given" and passes; a name without a bound is not checked)."""
    out = {}
    for name, value in values.items():
        bound = BOUNDS.get(name)
        if bound is not None and value is not None and (p := bound.problem(name, value)):
            out[name] = p
    return out


def named_field(problem: str) -> str:
    """The field a problem line begins with (``n_layers=-5 …`` → ``n_layers``), aliases resolved."""
    m = re.match(r"[a-z_][a-z0-9_]*", problem)
    name = m.group(0) if m else ""
    return ALIASES.get(name, name)


def merged(bounded: Mapping[str, str], problems: Iterable[str]) -> list[str]:
    """The lines of ``bounded`` first, then each of ``problems`` that does not begin with a field
    already named there (one line per field: ``n_layers=-5`` is not also "at least 1")."""
    return [*bounded.values(), *(p for p in problems if named_field(p) not in bounded)]


def config_problems(cfg: GPTConfig) -> list[str]:
    """``cfg.problems()`` with every count checked against its bound first."""
    return merged(out_of_bounds(config_counts(cfg)), cfg.problems())


def short(value: Any) -> str:
    """``value`` as a message shows it: a number as itself, anything else as its ``repr``, cut to 40
    characters (a value comes from the user's text)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        text = _float(value) if isinstance(value, float) else str(value)
    else:
        text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _float(x: float) -> str:
    """``1e30``, ``2.5``, ``1e-05`` → ``1e-5`` (``:g`` without its exponent's sign and zeros)."""
    text = f"{x:g}"
    if "e" not in text:
        return text
    mantissa, exp = text.split("e")
    return f"{mantissa}e{int(exp)}"


def _limit(x: float) -> str:
    """A limit as read: ``10,000``, ``0.001``, ``1e18``."""
    if x < 1e9 and float(x).is_integer():
        return f"{int(x):,}"
    return _float(x)


__all__ = [
    "ALIASES",
    "BOUNDS",
    "CONFIG_BOUNDS",
    "MAX_CONTEXT",
    "SETTING_BOUNDS",
    "Bound",
    "config_counts",
    "config_problems",
    "merged",
    "named_field",
    "out_of_bounds",
    "short",
]
