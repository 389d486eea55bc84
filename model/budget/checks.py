"""What every budget formula starts from: the symbols of a config, the precision modes, the cost
bases, and :func:`problems` / :func:`check` of a config and the settings it is computed at.

Part of the budget calculator; :mod:`model.budget.arithmetic` states its conventions and is what
callers import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from model.config import ConfigError, GPTConfig


@dataclass(frozen=True)
class Precision:
    """Bytes per parameter for each training state, and per stored activation value."""

    name: str
    description: str
    weights: int
    gradients: int
    master_weights: int
    optimizer: int  # AdamW's two moments m and v together
    activations: int
    inference_weights: int

    def per_param(self) -> dict[str, int]:
        """Bytes per parameter by state (zero entries left out)."""
        out = {
            "weights": self.weights,
            "gradients": self.gradients,
            "master weights": self.master_weights,
            "AdamW m, v": self.optimizer,
        }
        return {k: v for k, v in out.items() if v}


def _mode(name: str, description: str, w: int, g: int, master: int, adam: int, act: int) -> Precision:
    """A precision mode; inference keeps the weights (and the KV cache) in the weights' precision."""
    return Precision(name, description, w, g, master, adam, act, inference_weights=w)


#: Bytes per parameter: weights + gradients + master weights + AdamW's m and v; and per activation.
PRECISIONS: dict[str, Precision] = {
    p.name: p
    for p in (
        _mode("fp32", "float32 throughout: weights 4 + gradients 4 + AdamW m, v 4+4", 4, 4, 0, 8, 4),
        _mode("bf16-mixed", "bf16 weights 2 + gradients 2 + fp32 master 4 + fp32 AdamW 4+4", 2, 2, 4, 8, 2),
        _mode("fp16-mixed", "as bf16-mixed (loss scaling keeps no per-parameter state)", 2, 2, 4, 8, 2),
        _mode("bf16", "pure bf16, optimizer too: weights 2 + gradients 2 + AdamW m, v 2+2", 2, 2, 0, 4, 2),
    )
}


COST_BASES: dict[str, str] = {
    "6N": "6·N per token, N = the parameters a token uses: all of them, or a mixture of experts' active "
    "count (the textbook and Chinchilla estimate C ≈ 6·N·D)",
    "matmul": "3·(2·N_mm + attention scores at seq_len) per token: the matmuls a training step really does",
}


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def problems(
    cfg: GPTConfig,
    *,
    seq_len: Any = None,
    batch: Any = None,
    bytes_per_value: Any = None,
    tokens: Any = None,
    peak_flops: Any = None,
    mfu: Any = None,
    gpus: Any = None,
    precision: Any = None,
    cost_basis: Any = None,
) -> list[str]:
    """Every problem with this config and these settings, each one line (empty when all is well).

    ``None`` means "not given" for every setting. Checks ``cfg.problems()`` plus: vocab_size set,
    seq_len/batch/gpus whole numbers ≥ 1, seq_len within a learned position table, bytes, tokens and
    peak FLOP/s > 0, 0 < mfu ≤ 1, a known precision mode and cost basis.
    """
    out = list(cfg.problems())
    if cfg.core.vocab_size is None:
        out.append("vocab_size is not set: give the vocabulary size V (50257 for GPT-2's tokenizer)")
    for name, value in (("seq_len", seq_len), ("batch", batch), ("gpus", gpus)):
        if value is None:
            continue
        if not _is_int(value):
            out.append(f"{name}={value!r} must be a whole number")
        elif value < 1:
            out.append(f"{name}={value} must be at least 1")
    if (
        _is_int(seq_len)
        and cfg.positional.positions == "learned"
        and _is_int(cfg.core.context_length)
        and seq_len > cfg.core.context_length > 0
    ):
        out.append(
            f"seq_len={seq_len} is longer than context_length={cfg.core.context_length}, the size of the "
            "learned "
            f"position table: lower seq_len or raise context_length"
        )
    for name, value in (("bytes_per_value", bytes_per_value), ("tokens", tokens), ("peak_flops", peak_flops)):
        if value is None:
            continue
        if not _is_num(value):
            out.append(f"{name}={value!r} must be a number")
        elif value <= 0:
            out.append(f"{name}={value!r} must be greater than 0")
    if mfu is not None:
        if not _is_num(mfu):
            out.append(f"mfu={mfu!r} must be a number")
        elif not 0 < mfu <= 1:
            out.append(f"mfu={mfu!r} is a utilisation and must lie in (0, 1], e.g. 0.4 for 40%")
    if precision is not None and precision not in PRECISIONS:
        out.append(f"precision={precision!r} is not one of {', '.join(PRECISIONS)}")
    if cost_basis is not None and cost_basis not in COST_BASES:
        out.append(f"cost_basis={cost_basis!r} is not one of {', '.join(COST_BASES)}")
    return out


def check(cfg: GPTConfig, **settings: Any) -> None:
    """Raise :class:`ConfigError` listing every problem :func:`problems` finds."""
    found = problems(cfg, **settings)
    if found:
        raise ConfigError(found)


def local_layers(cfg: GPTConfig) -> int:
    """How many of the ``L`` blocks attend through ``sliding_window`` (``window_pattern``'s ``L``)."""
    if cfg.attention.sliding_window is None:
        return 0
    p = cfg.attention.window_pattern
    if not p:
        return cfg.core.n_layers
    full, rest = divmod(cfg.core.n_layers, len(p))
    return full * p.count("L") + p[:rest].count("L")


def moe_layers(cfg: GPTConfig) -> int:
    """How many blocks have a mixture-of-experts feed-forward (all but the ``moe_dense_layers`` first)."""
    return (
        max(cfg.core.n_layers - cfg.feed_forward.moe_dense_layers, 0)
        if cfg.feed_forward.n_experts is not None
        else 0
    )


def symbols(cfg: GPTConfig) -> dict[str, int]:
    """The values of the symbols the formulas use: L, d, h, h_kv, d_k, d_ff, V, T_max, and where the
    config has them:

    * sliding windows: ``W`` (sliding_window), ``L_local`` (blocks that use it);
    * mixture of experts: ``E`` experts, ``k`` chosen per token, ``d_e`` one expert's hidden width,
      ``s`` shared experts (when any) and ``d_s`` their width (when set: shared_expert_d_ff), ``L_moe``
      blocks with experts, ``L_dense`` dense first blocks;
    * multi-head latent attention: ``r`` (kv_lora_rank), ``r_q`` (q_lora_rank, when set), ``d_N`` and
      ``d_R`` (a query/key head's unrotated and rotated parts), ``d_v`` (a value head).
    """
    out = {
        "L": cfg.core.n_layers,
        "d": cfg.core.d_model,
        "h": cfg.attention.n_heads,
        "h_kv": cfg.kv_heads,
        "d_k": cfg.d_head,
        "d_ff": cfg.hidden,
        "V": int(cfg.core.vocab_size or 0),
        "T_max": cfg.core.context_length,
    }
    if cfg.attention.sliding_window is not None:
        out.update(W=cfg.attention.sliding_window, L_local=local_layers(cfg))
    if cfg.feed_forward.n_experts is not None:
        out.update(
            E=cfg.feed_forward.n_experts, k=cfg.feed_forward.n_experts_per_token, d_e=cfg.expert_hidden
        )
        if cfg.feed_forward.n_shared_experts:
            out["s"] = cfg.feed_forward.n_shared_experts
            if cfg.feed_forward.shared_expert_d_ff is not None:
                out["d_s"] = cfg.feed_forward.shared_expert_d_ff
        out.update(L_moe=moe_layers(cfg), L_dense=cfg.core.n_layers - moe_layers(cfg))
    if cfg.mla:
        out["r"] = int(cfg.attention.kv_lora_rank or 0)
        if cfg.attention.q_lora_rank is not None:
            out["r_q"] = cfg.attention.q_lora_rank
        out.update(d_N=cfg.qk_nope_dim, d_R=cfg.qk_rope_dim, d_v=cfg.v_dim)
        out["d_k"] = cfg.qk_nope_dim + cfg.qk_rope_dim  # a query/key head, not d/h
    return out


__all__ = [
    "COST_BASES",
    "PRECISIONS",
    "Precision",
    "check",
    "local_layers",
    "moe_layers",
    "problems",
    "symbols",
]
