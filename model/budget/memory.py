"""Memory: the KV cache (and what it would be under MHA, GQA, MQA and latent attention), the
activations a training step keeps, and the bytes to train and to run a config in each precision mode.

Part of the budget calculator; :mod:`model.budget.arithmetic` is what callers import. Estimates:
framework workspaces, temporary buffers and fragmentation are not counted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from model.budget.checks import PRECISIONS, check, local_layers, moe_layers, symbols
from model.budget.parameters import parameters
from model.budget.units import as_whole
from model.config import GPTConfig

#: The attention kinds :func:`kv_per_token_by_kind` compares.
KV_KINDS = ("MHA", "GQA", "MQA", "MLA")


def attention_kind(cfg: GPTConfig) -> str:
    """``"MLA"`` (latent attention), ``"MHA"`` (a K/V head per query head), ``"MQA"`` (one K/V head
    for all) or ``"GQA"`` (groups of query heads share one)."""
    if cfg.mla:
        return "MLA"
    if cfg.kv_heads == cfg.attention.n_heads:
        return "MHA"
    return "MQA" if cfg.kv_heads == 1 else "GQA"


def _kv_values_per_layer(cfg: GPTConfig) -> int:
    """Values one token adds to one layer's cache: ``2·h_kv·d_k`` (a key and a value per K/V head), or
    latent attention's ``r + d_R`` (the latent and the one rotary key shared by the heads)."""
    if cfg.mla:
        return int(cfg.attention.kv_lora_rank or 0) + cfg.qk_rope_dim
    return 2 * cfg.kv_heads * cfg.d_head


def kv_per_token_by_kind(cfg: GPTConfig, bytes_per_value: float = 2) -> dict[str, int | float]:
    """KV-cache bytes per token (all ``L`` layers) of this config's heads under each attention kind of
    :data:`KV_KINDS`, side by side: MHA ``L·h·(d_qk + d_v)`` (every query head has its key and value),
    GQA ``L·h_kv·(d_qk + d_v)`` (the config's K/V heads), MQA ``L·(d_qk + d_v)`` (one K/V head), MLA
    ``L·(r + d_R)`` (the latent and the shared rotary key; a config without latent attention gets
    DeepSeek-V2's choice ``r = 4·d_k`` and its ``d_R``, half a head). ``d_qk = d_v = d_k`` except in
    latent attention (``d_N + d_R`` and ``d_v``), times ``bytes_per_value``."""
    L, h, h_kv = cfg.core.n_layers, cfg.attention.n_heads, cfg.kv_heads
    head = cfg.qk_dim + cfg.v_dim
    r = cfg.attention.kv_lora_rank if cfg.attention.kv_lora_rank is not None else 4 * cfg.d_head
    values = {"MHA": L * h * head, "GQA": L * h_kv * head, "MQA": L * head, "MLA": L * (r + cfg.qk_rope_dim)}
    return {k: as_whole(v * bytes_per_value) for k, v in values.items()}


@dataclass(frozen=True)
class KVCacheSize:
    """``bytes = 2·L·h_kv·d_k·T·B·bytes_per_value`` (keys and values, every layer and KV head); latent
    attention caches ``L·(r + d_R)·T·B·bytes`` (the latent and the one rotary key per layer).

    ``mha_bytes`` is the same model with a key and a value per query head (``h_kv = h``; latent
    attention: heads of ``d_N + d_R`` and ``d_v``); ``saving_factor = mha_bytes / bytes`` (``h / h_kv``:
    1 for MHA, ``h`` for MQA). ``kind`` is MHA, GQA, MQA or MLA; ``per_token_by_kind`` is
    :func:`kv_per_token_by_kind`. ``windowed_bytes`` is the cache when every local layer keeps only its
    last ``W`` tokens (a rolling buffer; ``bytes`` keeps ``T`` in every layer, as the model's cache does).
    """

    seq_len: int
    batch: int
    bytes_per_value: float
    bytes: int
    per_token_bytes: float
    mha_bytes: int
    saving_factor: float
    kind: str = "MHA"
    per_token_by_kind: dict[str, int | float] = field(default_factory=dict)
    windowed_bytes: int | None = None

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
            "kind": self.kind,
            "per_token_by_kind": dict(self.per_token_by_kind),
            "windowed_bytes": self.bytes if self.windowed_bytes is None else self.windowed_bytes,
        }


def kv_cache(
    cfg: GPTConfig, seq_len: int | None = None, batch: int = 1, bytes_per_value: float = 2
) -> KVCacheSize:
    """KV-cache size for ``batch`` sequences of ``seq_len`` tokens (default ``context_length``)."""
    seq_len = cfg.core.context_length if seq_len is None else seq_len
    check(cfg, seq_len=seq_len, batch=batch, bytes_per_value=bytes_per_value)
    s = symbols(cfg)
    per_layer = _kv_values_per_layer(cfg)
    per_token_values = s["L"] * per_layer
    mha_values = s["L"] * s["h"] * (cfg.qk_dim + cfg.v_dim)
    n_local = local_layers(cfg)
    kept = (s["L"] - n_local) * seq_len + n_local * min(seq_len, cfg.attention.sliding_window or seq_len)
    saving = s["h"] / s["h_kv"] if not cfg.mla else mha_values / per_token_values
    return KVCacheSize(
        seq_len=seq_len,
        batch=batch,
        bytes_per_value=bytes_per_value,
        bytes=math.ceil(per_token_values * seq_len * batch * bytes_per_value),
        per_token_bytes=as_whole(per_token_values * bytes_per_value),
        mha_bytes=math.ceil(mha_values * seq_len * batch * bytes_per_value),
        saving_factor=as_whole(saving),
        kind=attention_kind(cfg),
        per_token_by_kind=kv_per_token_by_kind(cfg, bytes_per_value),
        windowed_bytes=math.ceil(per_layer * kept * batch * bytes_per_value),
    )


# ---------------------------------------------------------------------------------------------
# memory
# ---------------------------------------------------------------------------------------------
def activation_values_per_layer(
    cfg: GPTConfig, seq_len: int, batch: int, fused_attention: bool = True, *, moe: bool | None = None
) -> int:
    """Activation values one block keeps for its backward pass (Korthikanti et al. 2022, generalised).

    Per token: the norm inputs ``2d`` (four norms, sandwich: ``4d``); attention input ``d``, Q
    ``h·d_k``, K and V ``2·h_kv·d_k``, the O-projection input ``h·d_k``; MLP input ``d`` and hidden
    ``2·d_ff`` (gelu: pre- and post-activation), ``d_ff`` (relu: its output alone gives its gradient) or
    ``4·d_ff`` (swiglu/geglu: gate, φ(gate), up, product). A parallel block (GPT-NeoX) has one norm
    input ``d`` instead of two. Without a fused kernel the softmax output ``h·T`` per token is kept
    too (twice with attention dropout). For GPT-2 shapes in 16 bit with dropout this is their
    ``34·s·b·d + 5·a·s²·b`` bytes.

    Latent attention keeps, beside the input, the query latent ``r_q`` (when set), Q and K
    ``h·(d_N + d_R)`` each, the KV latent and rotary key ``r + d_R``, V ``h·d_v`` and the O input
    ``h·d_v``. A mixture-of-experts block (``moe``; default: whether the config has any) keeps the
    router logits ``E`` and the hidden values of the ``k`` experts and the shared ones a token goes
    through, in place of the dense MLP's.

    Norms, RoPE and the attention scalings are taken as fused (they keep their input only); the
    app's plain-PyTorch GPT keeps a little more for RMSNorm, RoPE and qk_norm (checked in the tests).
    """
    s = symbols(cfg)
    d, h, h_kv, d_k, d_ff = s["d"], s["h"], s["h_kv"], s["d_k"], s["d_ff"]
    hidden = {"gelu": 2, "relu": 1, "swiglu": 4, "geglu": 4}[cfg.feed_forward.mlp]
    n_norms = (
        1
        if cfg.normalization.parallel_residual
        else 4
        if cfg.normalization.norm_position == "sandwich"
        else 2
    )
    if cfg.mla:
        qk, r_q = cfg.qk_dim, cfg.attention.q_lora_rank or 0
        attention = (
            d + r_q + 2 * h * qk + int(cfg.attention.kv_lora_rank or 0) + cfg.qk_rope_dim + 2 * h * cfg.v_dim
        )
    else:
        attention = d + d_k * (h + 2 * h_kv) + h * d_k
    moe = cfg.feed_forward.n_experts is not None if moe is None else moe
    if moe and cfg.feed_forward.n_experts is not None:
        widths = cfg.feed_forward.n_experts_per_token * cfg.expert_hidden + cfg.shared_hidden
        feed_forward = d + cfg.feed_forward.n_experts + hidden * widths
    else:
        feed_forward = d + hidden * d_ff
    n = (n_norms * d + attention + feed_forward) * seq_len * batch
    if not fused_attention:
        n += (2 if cfg.core.dropout else 1) * batch * h * seq_len * seq_len
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

    Without recomputation: the sum over the ``L`` blocks of :func:`activation_values_per_layer`
    ``× bytes`` (+ 1-byte dropout masks when dropout > 0: ``2·T·B·d`` per layer, and ``h·T²·B``
    without fused attention). With full recomputation (activation checkpointing per block): only each
    block's input ``L·T·B·d`` values are kept, plus the largest block's activations rebuilt during its
    backward. Both add the model-level tensors: the output head's input ``T·B·d`` (and the final
    norm's input, another ``T·B·d``, unless the blocks end in a norm) and the loss's log-softmax
    ``T·B·V`` in fp32.
    """
    s = symbols(cfg)
    L, d, V, h = s["L"], s["d"], s["V"], s["h"]
    masks = 0
    if cfg.core.dropout:
        masks = 2 * seq_len * batch * d + (0 if fused_attention else h * seq_len * seq_len * batch)
    n_moe = moe_layers(cfg)
    kinds = [(L - n_moe, False), (n_moe, True)]
    layer = {
        moe: activation_values_per_layer(cfg, seq_len, batch, fused_attention, moe=moe) * bytes_per_value
        + masks
        for count, moe in kinds
        if count
    }
    if not recompute:
        blocks = sum(count * layer[moe] for count, moe in kinds if count)
    else:
        blocks = L * seq_len * batch * d * bytes_per_value + max(layer.values())
    top_d = 1 if cfg.normalization.norm_position == "post" else 2
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
    bf16-mixed 2+2+4+8 = 16, bf16 2+2+4 = 8; ``N`` every parameter: a mixture of experts stores and
    trains all its experts, though a token uses ``k`` of them) + activations (:func:`activation_bytes`,
    in the mode's activation precision). Inference: weights in the mode's inference precision + the
    KV cache at ``seq_len`` × ``batch`` in the same precision. Estimates: framework workspaces,
    temporary buffers and fragmentation are not counted.
    """
    seq_len = cfg.core.context_length if seq_len is None else seq_len
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
    "KV_KINDS",
    "KVCacheSize",
    "MemoryEstimate",
    "activation_bytes",
    "activation_values_per_layer",
    "attention_kind",
    "kv_cache",
    "kv_per_token_by_kind",
    "memory",
]
