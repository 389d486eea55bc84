"""The budget calculator: exact parameters, FLOPs, KV cache, memory and training cost of a config.

Pure Python arithmetic on a :class:`~model.config.GPTConfig` (no torch, no numpy), so the command
line and the GUI panel answer instantly for anything from a toy to a 405B model.

Symbols (``symbols(cfg)`` gives their values): ``L`` layers, ``d`` d_model, ``h`` query heads,
``h_kv`` key/value heads, ``d_k`` head_dim, ``d_ff`` MLP hidden width, ``V`` vocabulary,
``T_max`` context_length, ``T`` the context a token attends to (``seq_len``), ``B`` batch; where the
config has them: ``W`` sliding window and ``L_local`` blocks using it; ``E`` experts, ``k`` per token,
``d_e`` an expert's hidden width, ``s`` shared experts (``d_s`` wide when set), ``L_moe`` blocks with
experts and ``L_dense`` dense first blocks; latent attention's ``r`` (KV latent), ``r_q`` (query
latent), ``d_N`` and ``d_R`` (a query/key head's unrotated and rotated parts), ``d_v`` (a value head).

Conventions, stated once:

* **Parameters** are counted exactly as :class:`model.nn.gpt.GPT` creates them (its ``numel`` per
  component is checked against this module by the tests). Buffers (RoPE and sinusoid tables) are
  not parameters. A tied output head is the token embedding and is counted once.
* **Active parameters** are those one token uses: all of them, but a mixture of experts sends a
  token to ``k`` of its ``E`` routed experts, so ``active = total − L_moe·(E − k)·(one expert)``.
  Memory for weights, gradients and optimizer states counts every parameter; FLOPs, and the ``6N``
  cost, count the active ones.
* **Non-embedding parameters** follow Kaplan et al. (2020): every vocabulary and position matrix is
  left out — token embedding, learned position table *and* an untied output head (the
  "unembedding"; Pythia reports its untied models this way). What remains is the ``L`` blocks plus
  the final norm.
* **FLOPs** count 2 per multiply–add of a matrix product and nothing else (norms, softmax,
  activations, RoPE, residual adds and bias adds are ignored: they are O(d) per token, not O(d²)).
  ``N_mm`` is the number of weights that multiply every token's vector: Q, K, V, O and the MLP
  matrices of every layer, plus the output head (``V·d``, once, tied or not). The token-embedding
  lookup and the position table cost no FLOPs. Forward = ``2·N_mm`` per token, plus the
  attention-score matmuls ``Q·Kᵀ`` and ``A·V``: ``4·L·T·h·d_k`` per token at context ``T``
  (``2·L·T·h·d_k`` with ``causal_halving``, since a causal token sees on average half the context);
  latent attention's heads give ``2·L·T·h·(d_N + d_R + d_v)``, and a local layer attends to
  ``min(T, W)`` keys. ``N_mm`` of a mixture of experts counts the router, the ``k`` experts a token
  goes to and the shared ones.
* **KV cache**: ``2·h_kv·d_k`` values per token and layer, latent attention's ``r + d_R``.
  Training = 3 × forward (the backward pass costs two forwards). The textbook estimates ``2N``/``6N``
  with ``N`` = all parameters are reported beside them.

The calculator is this module's face: callers write ``from model.budget import arithmetic as budget``
and ``budget.parameters(cfg)``, ``budget.report(cfg, ...)``, ``budget.human_bytes(n)``. Its parts, each
importing only those before it: :mod:`~model.budget.units` (numbers for people),
:mod:`~model.budget.checks` (the symbols, precision modes, cost bases and :func:`problems`),
:mod:`~model.budget.parameters`, :mod:`~model.budget.flops`, :mod:`~model.budget.memory` (KV cache,
activations, memory) and :mod:`~model.budget.cost`; :func:`report`, everything at once, is here.
"""

from __future__ import annotations

from typing import Any

from model.budget.checks import (
    COST_BASES,
    PRECISIONS,
    Precision,
    check,
    local_layers,
    moe_layers,
    problems,
    symbols,
)
from model.budget.cost import TrainingCost, training_cost
from model.budget.flops import (
    FLOP_PARTS,
    FlopBreakdown,
    attention_crossover,
    attention_flops_per_token,
    flop_shares,
    flops,
)
from model.budget.memory import (
    KV_KINDS,
    KVCacheSize,
    MemoryEstimate,
    activation_bytes,
    activation_values_per_layer,
    attention_kind,
    kv_cache,
    kv_per_token_by_kind,
    memory,
)
from model.budget.parameters import BLOCK_KINDS, COMPONENTS, Component, ParamBreakdown, parameters
from model.budget.units import human_bytes, human_count, human_duration, human_flops
from model.config import GPTConfig


def report(
    cfg: GPTConfig,
    *,
    seq_len: int | None = None,
    batch: int = 1,
    bytes_per_value: float = 2,
    tokens: float | None = None,
    peak_flops: float | None = None,
    mfu: float = 0.4,
    gpus: int = 1,
    precision: str = "bf16-mixed",
    recompute: bool = False,
    causal_halving: bool = False,
    cost_basis: str = "6N",
    fused_attention: bool = True,
    title: str | None = None,
) -> dict[str, Any]:
    """Everything at once as a JSON-ready dict (what ``attention-lab budget --json`` prints).

    Keys: ``title``, ``config``, ``symbols``, ``params`` (``total``, ``active``, ``non_embedding``,
    ``components`` name → count, ``rows`` with formulas, ``summary``, ...), ``flops``
    (``forward_per_token``, ``train_per_token``, ``attention_forward_per_token``, ``parts``,
    ``shares``, ``attention_crossover_seq_len`` (None: never), ``scores_formula``, ...), ``kv_cache``
    (``bytes``, ``mha_bytes``, ``saving_factor``, ``kind``, ``per_token_by_kind``, ...), ``memory``
    (``training``, ``inference``) and, when ``tokens`` is given, ``training`` (``flops`` and, with
    ``peak_flops``, ``gpu_hours``, ``days``, ...).
    Raises :class:`ConfigError` listing every problem in the config and the settings.
    """
    seq_len = cfg.core.context_length if seq_len is None else seq_len
    check(
        cfg,
        seq_len=seq_len,
        batch=batch,
        bytes_per_value=bytes_per_value,
        tokens=tokens,
        peak_flops=peak_flops,
        mfu=mfu,
        gpus=gpus,
        precision=precision,
        cost_basis=cost_basis,
    )
    out: dict[str, Any] = {
        "title": title,
        "config": cfg.to_dict(),
        "symbols": symbols(cfg),
        "params": parameters(cfg).to_dict(),
        "flops": flops(cfg, seq_len, causal_halving).to_dict(),
        "kv_cache": kv_cache(cfg, seq_len, batch, bytes_per_value).to_dict(),
        "memory": memory(
            cfg, precision, seq_len, batch, recompute, fused_attention=fused_attention
        ).to_dict(),
    }
    out["memory"]["description"] = PRECISIONS[precision].description
    if tokens is not None:
        cost = training_cost(
            cfg,
            tokens,
            peak_flops,
            mfu,
            gpus,
            basis=cost_basis,
            seq_len=seq_len,
            causal_halving=causal_halving,
        )
        out["training"] = cost.to_dict()
    return out


__all__ = [
    "BLOCK_KINDS",
    "COMPONENTS",
    "COST_BASES",
    "FLOP_PARTS",
    "KV_KINDS",
    "PRECISIONS",
    "Component",
    "FlopBreakdown",
    "KVCacheSize",
    "MemoryEstimate",
    "ParamBreakdown",
    "Precision",
    "TrainingCost",
    "activation_bytes",
    "activation_values_per_layer",
    "attention_crossover",
    "attention_flops_per_token",
    "attention_kind",
    "check",
    "flop_shares",
    "flops",
    "human_bytes",
    "human_count",
    "human_duration",
    "human_flops",
    "kv_cache",
    "kv_per_token_by_kind",
    "local_layers",
    "memory",
    "moe_layers",
    "parameters",
    "problems",
    "report",
    "symbols",
    "training_cost",
]
