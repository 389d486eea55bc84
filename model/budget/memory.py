"""Memory: the KV cache, the activations a training step keeps, and the bytes to train and to run a
config in each precision mode.

Part of the budget calculator; :mod:`model.budget.arithmetic` is what callers import. Estimates:
framework workspaces, temporary buffers and fragmentation are not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from model.budget.checks import PRECISIONS, check, symbols
from model.budget.parameters import parameters
from model.budget.units import as_whole
from model.config import GPTConfig


@dataclass(frozen=True)
class KVCacheSize:
    """``bytes = 2·L·h_kv·d_k·T·B·bytes_per_value`` (keys and values, every layer and KV head).

    ``mha_bytes`` is the same model with ``h_kv = h``; ``saving_factor = h / h_kv`` (1 for MHA, ``h``
    for MQA).
    """

    seq_len: int
    batch: int
    bytes_per_value: float
    bytes: int
    per_token_bytes: float
    mha_bytes: int
    saving_factor: float

    @property
    def saved_bytes(self) -> int:
        return self.mha_bytes - self.bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq_len": self.seq_len,
            "batch": self.batch,
            "bytes_per_value": self.bytes_per_value,
            "bytes": self.bytes,
            "per_token_bytes": self.per_token_bytes,
            "mha_bytes": self.mha_bytes,
            "saved_bytes": self.saved_bytes,
            "saving_factor": self.saving_factor,
        }


def kv_cache(
    cfg: GPTConfig, seq_len: int | None = None, batch: int = 1, bytes_per_value: float = 2
) -> KVCacheSize:
    """KV-cache size for ``batch`` sequences of ``seq_len`` tokens (default ``context_length``)."""
    seq_len = cfg.context_length if seq_len is None else seq_len
    check(cfg, seq_len=seq_len, batch=batch, bytes_per_value=bytes_per_value)
    s = symbols(cfg)
    per_token_values = 2 * s["L"] * s["h_kv"] * s["d_k"]
    mha_values = 2 * s["L"] * s["h"] * s["d_k"]
    return KVCacheSize(
        seq_len=seq_len,
        batch=batch,
        bytes_per_value=bytes_per_value,
        bytes=math.ceil(per_token_values * seq_len * batch * bytes_per_value),
        per_token_bytes=as_whole(per_token_values * bytes_per_value),
        mha_bytes=math.ceil(mha_values * seq_len * batch * bytes_per_value),
        saving_factor=as_whole(s["h"] / s["h_kv"]),
    )


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------
def activation_values_per_layer(
    cfg: GPTConfig, seq_len: int, batch: int, fused_attention: bool = True
) -> int:
    """Activation values one block keeps for its backward pass (Korthikanti et al. 2022, generalised).

    Per token: both norm inputs ``2d``; attention input ``d``, Q ``h·d_k``, K and V ``2·h_kv·d_k``,
    the O-projection input ``h·d_k``; MLP input ``d`` and hidden ``2·d_ff`` (gelu: pre- and
    post-activation), ``d_ff`` (relu: its output alone gives its gradient) or ``4·d_ff`` (swiglu/geglu:
    gate, φ(gate), up, product). A parallel block (GPT-NeoX) has one norm input ``d`` instead of two.
    Without a fused kernel the softmax output ``h·T`` per token is kept too (twice with attention
    dropout). For GPT-2 shapes in 16 bit with dropout this is their ``34·s·b·d + 5·a·s²·b`` bytes.

    Norms, RoPE and the attention scalings are taken as fused (they keep their input only); the
    app's plain-PyTorch GPT keeps a little more for RMSNorm, RoPE and qk_norm (checked in the tests).
    """
    s = symbols(cfg)
    d, h, h_kv, d_k, d_ff = s["d"], s["h"], s["h_kv"], s["d_k"], s["d_ff"]
    per_token = (
        (1 if cfg.parallel_residual else 2) * d
        + d
        + d_k * (h + 2 * h_kv)
        + h * d_k
        + d
        + {"gelu": 2, "relu": 1, "swiglu": 4, "geglu": 4}[cfg.mlp] * d_ff
    )
    n = per_token * seq_len * batch
    if not fused_attention:
        n += (2 if cfg.dropout else 1) * batch * h * seq_len * seq_len
    return n


def activation_bytes(
    cfg: GPTConfig,
    seq_len: int,
    batch: int,
    bytes_per_value: float = 2,
    recompute: bool = False,
    fused_attention: bool = True,
) -> int:
    """Bytes of activations a training step holds at its peak (an estimate, see ``memory``).

    Without recomputation: ``L ×`` :func:`activation_values_per_layer` ``× bytes`` (+ 1-byte dropout
    masks when dropout > 0: ``2·T·B·d`` per layer, and ``h·T²·B`` without fused attention).
    With full recomputation (activation checkpointing per block): only each block's input
    ``L·T·B·d`` values are kept, plus one block's activations rebuilt during its backward.
    Both add the model-level tensors: the output head's input ``T·B·d`` (and the final norm's input,
    another ``T·B·d``, with Pre-LN) and the loss's log-softmax ``T·B·V`` in fp32.
    """
    s = symbols(cfg)
    L, d, V, h = s["L"], s["d"], s["V"], s["h"]
    values = activation_values_per_layer(cfg, seq_len, batch, fused_attention)
    masks = 0
    if cfg.dropout:
        masks = 2 * seq_len * batch * d + (0 if fused_attention else h * seq_len * seq_len * batch)
    layer = values * bytes_per_value + masks
    blocks = L * layer if not recompute else L * seq_len * batch * d * bytes_per_value + layer
    top_d = 2 if cfg.norm_position == "pre" else 1
    top = top_d * seq_len * batch * d * bytes_per_value + seq_len * batch * V * 4
    return math.ceil(blocks + top)


@dataclass(frozen=True)
class MemoryEstimate:
    """Training and inference memory in bytes (see :func:`memory`)."""

    precision: str
    bytes_per_param: dict[str, int]
    seq_len: int
    batch: int
    recompute: bool
    fused_attention: bool
    weights: int
    gradients: int
    master_weights: int
    optimizer: int
    activations: int
    activations_no_recompute: int
    activations_recompute: int
    inference_weights: int
    kv_cache: int

    @property
    def training_states(self) -> int:
        """Weights + gradients + master weights + optimizer states."""
        return self.weights + self.gradients + self.master_weights + self.optimizer

    @property
    def training_total(self) -> int:
        return self.training_states + self.activations

    @property
    def inference_total(self) -> int:
        return self.inference_weights + self.kv_cache

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "bytes_per_param": dict(self.bytes_per_param),
            "seq_len": self.seq_len,
            "batch": self.batch,
            "recompute": self.recompute,
            "fused_attention": self.fused_attention,
            "training": {
                "weights": self.weights,
                "gradients": self.gradients,
                "master_weights": self.master_weights,
                "optimizer": self.optimizer,
                "activations": self.activations,
                "activations_no_recompute": self.activations_no_recompute,
                "activations_recompute": self.activations_recompute,
                "total": self.training_total,
            },
            "inference": {
                "weights": self.inference_weights,
                "kv_cache": self.kv_cache,
                "total": self.inference_total,
            },
        }


def memory(
    cfg: GPTConfig,
    precision: str = "bf16-mixed",
    seq_len: int | None = None,
    batch: int = 1,
    recompute: bool = False,
    *,
    fused_attention: bool = True,
) -> MemoryEstimate:
    """Memory to train with AdamW (one device, no sharding) and to run inference.

    Training: ``N ×`` bytes per parameter of ``precision`` (:data:`PRECISIONS`: fp32 4+4+8 = 16,
    bf16-mixed 2+2+4+8 = 16, bf16 2+2+4 = 8) + activations (:func:`activation_bytes`, in the mode's
    activation precision). Inference: weights in the mode's inference precision + the KV cache at
    ``seq_len`` × ``batch`` in the same precision. Estimates: framework workspaces, temporary
    buffers and fragmentation are not counted.
    """
    seq_len = cfg.context_length if seq_len is None else seq_len
    check(cfg, seq_len=seq_len, batch=batch, precision=precision)
    pr = PRECISIONS[precision]
    n = parameters(cfg).total
    act = {
        r: activation_bytes(cfg, seq_len, batch, pr.activations, recompute=r, fused_attention=fused_attention)
        for r in (False, True)
    }
    return MemoryEstimate(
        precision=precision,
        bytes_per_param=pr.per_param(),
        seq_len=seq_len,
        batch=batch,
        recompute=recompute,
        fused_attention=fused_attention,
        weights=n * pr.weights,
        gradients=n * pr.gradients,
        master_weights=n * pr.master_weights,
        optimizer=n * pr.optimizer,
        activations=act[recompute],
        activations_no_recompute=act[False],
        activations_recompute=act[True],
        inference_weights=n * pr.inference_weights,
        kv_cache=kv_cache(cfg, seq_len, batch, pr.inference_weights).bytes,
    )


__all__ = [
    "KVCacheSize",
    "MemoryEstimate",
    "activation_bytes",
    "activation_values_per_layer",
    "kv_cache",
    "memory",
]
