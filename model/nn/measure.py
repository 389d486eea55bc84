"""The budget calculator checked against the real thing on this machine.

* :func:`measured_parameters` instantiates :class:`model.nn.gpt.GPT` for a config and counts ``numel``
  per budget component (each parameter name falls in exactly one component of
  :data:`model.budget.arithmetic.COMPONENTS`). Small configs are built for real on the CPU; large ones on
  PyTorch's ``meta`` device, which creates every parameter with its shape but allocates no memory,
  so even a 405B config is counted in a moment.
* :func:`measure_kv_cache` allocates the KV cache of a config under each attention kind (MHA, GQA,
  MQA, latent attention) and reads its bytes per token off the storage, beside the calculator's
  formula (:func:`model.budget.arithmetic.kv_per_token_by_kind`).
* :func:`measure_throughput` times a few AdamW training steps (random token ids: speed does not
  depend on the data) of the config itself when it is small enough, else of a scaled-down copy
  (:func:`scaled_down`: fewer layers, narrower, shorter context, same architecture choices). It
  reports tokens/s and the model FLOP/s achieved, ``tokens/s × 3·(2·N_mm + 4·L·T·h·d_k)`` (the
  matmul FLOPs a step really does, :func:`model.budget.arithmetic.flops` at the measured T, no causal
  halving),
  and the utilisation against this device's measured matmul peak (:func:`measure_matmul_peak`).
  :meth:`ThroughputResult.estimate_tokens_per_s` turns the achieved FLOP/s into an estimate for any
  other config on the same device.

Pure torch; the caller chooses the thread (the app runs these off the GUI thread).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from model.budget import arithmetic as budget
from model.config import GPTConfig
from model.nn.attention import KVCache
from model.nn.gpt import GPT, init_model

#: Parameter name pattern → budget component (every GPT parameter matches exactly one).
PARAM_RULES: tuple[tuple[str, str], ...] = (
    (r"tok_emb\.weight", "token embedding"),
    (r"pos_emb\.weight", "position embedding"),
    (r"blocks\.\d+\.attn\.q_proj\.weight", "attention Q"),
    (r"blocks\.\d+\.attn\.k_proj\.weight", "attention K"),
    (r"blocks\.\d+\.attn\.v_proj\.weight", "attention V"),
    (r"blocks\.\d+\.attn\.o_proj\.weight", "attention O"),
    (r"blocks\.\d+\.attn\.(q_proj|k_proj|v_proj|o_proj|q_a|q_b|kv_a|kv_b)\.bias", "attention biases"),
    (r"blocks\.\d+\.attn\.(scale|qk_gain)", "attention scale"),
    (r"blocks\.\d+\.attn\.q_a\.weight", "latent Q down"),
    (r"blocks\.\d+\.attn\.q_b\.weight", "latent Q up"),
    (r"blocks\.\d+\.attn\.kv_a\.weight", "latent KV down"),
    (r"blocks\.\d+\.attn\.kv_b\.weight", "latent KV up"),
    (r"blocks\.\d+\.attn\.(q_a_norm|kv_a_norm)\.weight", "latent norms"),
    (r"blocks\.\d+\.attn\.sinks", "attention sinks"),
    (r"blocks\.\d+\.mlp\.(fc_in|fc_out|w_gate|w_up|w_down)\.weight", "mlp weights"),
    (r"blocks\.\d+\.mlp\.(fc_in|fc_out|w_gate|w_up|w_down)\.bias", "mlp biases"),
    (r"blocks\.\d+\.mlp\.gate\.weight", "router"),
    (r"blocks\.\d+\.mlp\.choice_bias", "router choice bias"),
    (r"blocks\.\d+\.mlp\.experts\.\d+\.(fc_in|fc_out|w_gate|w_up|w_down)\.weight", "experts"),
    (r"blocks\.\d+\.mlp\.shared\.(fc_in|fc_out|w_gate|w_up|w_down)\.weight", "shared experts"),
    (r"blocks\.\d+\.mlp\.(gate|experts\.\d+\.\w+|shared\.\w+)\.bias", "expert biases"),
    (r"blocks\.\d+\.(norm[12]|post_norm[12])\.(weight|bias)", "norms"),
    (r"blocks\.\d+\.attn\.[qk]_norm\.weight", "qk norms"),
    (r"norm_f\.(weight|bias)", "final norm"),
    (r"lm_head\.weight", "output head"),
)

#: Configs up to this many parameters are built for real (and timed as they are).
REAL_BUILD_MAX_PARAMS = 20_000_000


def component_of(param_name: str) -> str:
    """The budget component a GPT parameter belongs to; ``ValueError`` when none or several match."""
    hits = [comp for pattern, comp in PARAM_RULES if re.fullmatch(pattern, param_name)]
    if len(hits) != 1:
        raise ValueError(f"parameter {param_name!r} matches {hits or 'no'} budget component")
    return hits[0]


@dataclass(frozen=True)
class ParamCheck:
    """Measured ``numel`` per component beside the calculator's count."""

    device: str  # "cpu" (built for real) or "meta" (shapes only)
    measured: dict[str, int]
    calculated: dict[str, int]

    @property
    def measured_total(self) -> int:
        return sum(self.measured.values())

    @property
    def calculated_total(self) -> int:
        return sum(self.calculated.values())

    @property
    def mismatches(self) -> list[str]:
        """Components whose counts differ (empty when the calculator is right)."""
        names = list(self.calculated) + [k for k in self.measured if k not in self.calculated]
        return [k for k in names if self.measured.get(k, 0) != self.calculated.get(k, 0)]

    @property
    def ok(self) -> bool:
        return not self.mismatches and self.measured_total == self.calculated_total


def measured_parameters(cfg: GPTConfig, *, device: str | None = None) -> ParamCheck:
    """Build ``GPT(cfg)`` and count its parameters per component (a tied head counted once).

    ``device`` None: the CPU for configs of at most :data:`REAL_BUILD_MAX_PARAMS` calculated
    parameters, the ``meta`` device above that. Raises :class:`~model.config.ConfigError` for an
    invalid config.
    """
    calc = budget.parameters(cfg)
    if device is None:
        device = "cpu" if calc.total <= REAL_BUILD_MAX_PARAMS else "meta"
    with torch.device(device):
        model = GPT(cfg)
    measured = {name: 0 for name in calc.counts()}
    for name, p in model.named_parameters():  # shared (tied) tensors are listed once
        comp = component_of(name)
        measured[comp] = measured.get(comp, 0) + p.numel()
    return ParamCheck(device=device, measured=measured, calculated=calc.counts())


# ---------------------------------------------------------------------------------------------
# throughput
# ---------------------------------------------------------------------------------------------
def scaled_down(
    cfg: GPTConfig,
    max_params: int = REAL_BUILD_MAX_PARAMS,
    *,
    max_layers: int = 4,
    max_seq_len: int = 256,
    max_vocab: int = 8192,
) -> tuple[GPTConfig, list[str]]:
    """A copy of ``cfg`` small enough to time here, and a note per change (empty: unchanged).

    Keeps every architecture choice (MLP kind, norms, positions, biases, tying, ``d_k``,
    ``d_ff / d``, and the GQA ratio ``h / h_kv`` while ``h_kv ≥ 1`` allows it) and shrinks, in this
    order: layers to ``max_layers``, context to ``max_seq_len``, vocabulary to ``max_vocab``, then the
    width (halving ``d_model``, ``d_ff`` and the numbers of query and KV heads together, keeping
    ``d_k``) while there are at least 2 KV heads, then layers to 2 and vocabulary to 2048, then the
    width again, until the model has at most ``max_params`` parameters or cannot shrink further.
    """
    budget.check(cfg)
    assert cfg.core.vocab_size is not None  # budget.check refuses a config without one
    vocab = cfg.core.vocab_size  # small's, as it shrinks
    notes: list[str] = []
    small = cfg
    if budget.parameters(cfg).total <= max_params:
        return cfg, notes
    if small.core.n_layers > max_layers:
        notes.append(f"n_layers {small.core.n_layers} → {max_layers}")
        small = small.replace(n_layers=max_layers)
    if small.core.context_length > max_seq_len:
        notes.append(f"context_length {small.core.context_length} → {max_seq_len}")
        small = small.replace(context_length=max_seq_len)
    if vocab > max_vocab:
        notes.append(f"vocab_size {vocab} → {max_vocab}")
        vocab = max_vocab
        small = small.replace(vocab_size=vocab)
    d0, h0, kv0, ff0 = small.core.d_model, small.attention.n_heads, small.kv_heads, small.hidden
    d_k = small.d_head

    def narrower(c: GPTConfig, kv2: int) -> GPTConfig:
        return c.replace(
            d_model=c.core.d_model // 2,
            n_heads=c.attention.n_heads // 2,
            n_kv_heads=None if cfg.attention.n_kv_heads is None else kv2,
            head_dim=d_k,
            d_ff=max(1, c.hidden // 2),
        )

    while budget.parameters(small).total > max_params:
        if small.kv_heads >= 2 and small.attention.n_heads >= 2 and small.core.d_model >= 16:
            small = narrower(small, small.kv_heads // 2)  # keeps h / h_kv
        elif small.core.n_layers > 2:
            notes.append(f"n_layers {small.core.n_layers} → 2")
            small = small.replace(n_layers=2)
        elif vocab > 2048:
            notes.append(f"vocab_size {vocab} → 2048")
            vocab = 2048
            small = small.replace(vocab_size=vocab)
        elif small.attention.n_heads >= 2 and small.core.d_model >= 16:
            small = narrower(small, 1)
        else:
            break
    if small.core.d_model != d0:
        notes.append(
            f"width d_model {d0} → {small.core.d_model}, heads {h0} → {small.attention.n_heads} "
            f"(KV {kv0} → {small.kv_heads}), "
            f"d_ff {ff0} → {small.hidden}; head size d_k = {d_k} kept"
        )
    small.validate()
    return small, notes


def measure_matmul_peak(
    device: str = "cpu", n: int = 1024, seconds: float = 0.3, dtype: torch.dtype | None = None
) -> float:
    """FLOP/s of square ``n×n`` float32 matrix products on ``device`` (``2·n³`` FLOPs each), the best
    of repeated timings over about ``seconds``: this machine's practical matmul peak."""
    dtype = dtype or torch.float32
    dev = torch.device(device)
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    a @ b
    sync()
    best = math.inf
    deadline = time.perf_counter() + seconds
    reps = 0
    while reps < 3 or time.perf_counter() < deadline:
        t0 = time.perf_counter()
        a @ b
        sync()
        best = min(best, time.perf_counter() - t0)
        reps += 1
        if reps >= 200:
            break
    return 2 * n**3 / best


@dataclass
class ThroughputResult:
    """A timed training run: what was run, how fast, and what that means in FLOP/s."""

    config: GPTConfig  # what was timed (the asked config, or its scaled-down copy)
    scaled: bool
    notes: list[str]
    device: str
    batch: int
    seq_len: int
    steps: int
    step_seconds: list[float] = field(default_factory=list)
    train_flops_per_token: int = 0  # 3·(2·N_mm + 4·L·T·h·d_k) of ``config`` at ``seq_len``
    peak_flops: float | None = None  # measured matmul FLOP/s of this device (fp32)

    @property
    def tokens_per_step(self) -> int:
        return self.batch * self.seq_len

    @property
    def median_step_seconds(self) -> float:
        s = sorted(self.step_seconds)
        return s[len(s) // 2] if s else math.nan

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.median_step_seconds

    @property
    def achieved_flops(self) -> float:
        """Model FLOP/s: ``tokens/s × train FLOPs per token``."""
        return self.tokens_per_s * self.train_flops_per_token

    @property
    def mfu(self) -> float | None:
        """Achieved model FLOP/s as a fraction of the measured matmul peak."""
        return None if not self.peak_flops else self.achieved_flops / self.peak_flops

    def estimate_tokens_per_s(self, cfg: GPTConfig, seq_len: int | None = None) -> float:
        """Training tokens/s ``cfg`` would reach here at the FLOP/s this run achieved:
        ``achieved FLOP/s ÷ 3·(2·N_mm + 4·L·T·h·d_k)`` of ``cfg`` at ``seq_len`` (default the T timed,
        capped at cfg's context)."""
        T = min(seq_len or self.seq_len, cfg.core.context_length)
        return self.achieved_flops / budget.flops(cfg, T).train_total_per_token

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "scaled": self.scaled,
            "notes": list(self.notes),
            "device": self.device,
            "batch": self.batch,
            "seq_len": self.seq_len,
            "steps": self.steps,
            "step_seconds": list(self.step_seconds),
            "tokens_per_s": self.tokens_per_s,
            "train_flops_per_token": self.train_flops_per_token,
            "achieved_flops": self.achieved_flops,
            "peak_flops": self.peak_flops,
            "mfu": self.mfu,
        }


def measure_throughput(
    cfg: GPTConfig,
    *,
    device: str = "cpu",
    batch: int = 4,
    seq_len: int | None = None,
    steps: int = 5,
    warmup: int = 1,
    max_seconds: float = 8.0,
    max_params: int = REAL_BUILD_MAX_PARAMS,
    measure_peak: bool = True,
    should_stop: Callable[[], bool] | None = None,
    seed: int = 0,
) -> ThroughputResult:
    """Time ``steps`` AdamW training steps (after ``warmup`` untimed ones) of ``cfg`` or its
    :func:`scaled_down` copy on ``device``, on random token ids of shape [batch, seq_len].

    ``seq_len`` defaults to 128 (at most the context length). Stops early after
    ``max_seconds`` of timed steps (at least two are timed) or when ``should_stop()`` is true (at
    least one).
    """
    small, notes = scaled_down(cfg, max_params)
    assert small.core.vocab_size is not None  # scaled_down checks the config first
    T = min(seq_len if seq_len is not None else 128, small.core.context_length)
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    model = init_model(small, seed=seed, device=dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    gen = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, small.core.vocab_size, (batch, T + 1), generator=gen).to(dev)
    x, y = idx[:, :-1], idx[:, 1:]

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        opt.step()

    for _ in range(max(0, warmup)):
        step()
    sync()
    times: list[float] = []
    spent = 0.0
    while len(times) < max(1, steps):
        if should_stop is not None and times and should_stop():
            break
        if len(times) >= 2 and spent > max_seconds:  # two timings at least: one can be an outlier
            break
        t0 = time.perf_counter()
        step()
        sync()
        dt = time.perf_counter() - t0
        times.append(dt)
        spent += dt
    result = ThroughputResult(
        config=small,
        scaled=small is not cfg,
        notes=notes,
        device=str(dev),
        batch=batch,
        seq_len=T,
        steps=len(times),
        step_seconds=times,
        train_flops_per_token=budget.flops(small, T).train_total_per_token,
    )
    if measure_peak:
        result.peak_flops = measure_matmul_peak(str(dev))
    return result


@dataclass(frozen=True)
class KVCacheRow:
    """One attention kind of :func:`measure_kv_cache`: the values its cache holds per token (``holds``,
    e.g. "4 × 2 · 8 · 16: K and V per query head" for L × 2 · H · d_k), the calculator's bytes per
    token (every layer) and the bytes per token of the cache the model really allocates (None when the
    kind cannot be built with this config's head sizes: ordinary attention has d_k = d_v)."""

    kind: str
    holds: str
    formula_bytes: float
    measured_bytes: float | None


def measure_kv_cache(cfg: GPTConfig, *, positions: int = 16) -> list[KVCacheRow]:
    """The KV cache per token of ``cfg``'s heads as MHA (a key and a value per query head), GQA (the
    config's ``n_kv_heads``), MQA (one) and MLA (the latent ``r`` and the shared rotary key; ``r = 4·d_k``
    unless the config sets ``kv_lora_rank``): each allocated as :class:`~model.nn.attention.KVCache`
    for ``positions`` tokens in float32 and its storage divided by them, beside
    :func:`model.budget.arithmetic.kv_per_token_by_kind` at 4 bytes a value."""
    formula = budget.kv_per_token_by_kind(cfg, bytes_per_value=4)
    L, H = cfg.core.n_layers, cfg.attention.n_heads
    plain = dict(kv_lora_rank=None, q_lora_rank=None, qk_rope_head_dim=None, qk_nope_head_dim=None)
    qk, v = cfg.qk_dim, cfg.v_dim
    same_heads = cfg.mla is False or qk == v  # ordinary attention has d_k = d_v
    standard = cfg.replace(**plain, v_head_dim=None, head_dim=qk if cfg.mla else cfg.attention.head_dim)
    r = cfg.attention.kv_lora_rank if cfg.attention.kv_lora_rank is not None else 4 * cfg.d_head
    # what the latent cache holds depends on none of these: set them as latent attention needs them
    latent = cfg.replace(
        kv_lora_rank=r,
        n_kv_heads=None,
        positions="rope",
        rotary_pct=1.0,
        qk_rmsnorm=False,
        attn_scale="sqrt_dk",
    )

    def heads(n: int) -> str:
        return f"2 · {n} · {qk}" if qk == v else f"{n} · ({qk} + {v})"

    kinds = {
        "MHA": (
            standard.replace(n_kv_heads=None) if same_heads else None,
            f"{heads(H)}: K and V per query head",
        ),
        "GQA": (standard if same_heads else None, f"{heads(cfg.kv_heads)}: this config's K/V heads"),
        "MQA": (standard.replace(n_kv_heads=1) if same_heads else None, f"{heads(1)}: one K/V head"),
        "MLA": (latent, f"({r} + {cfg.qk_rope_dim}): the latent and one rotary key"),
    }
    rows = []
    for kind, (variant, holds) in kinds.items():
        measured = None
        if variant is not None and not variant.problems():
            cache = KVCache(variant, 1, positions)
            measured = cache.nbytes / positions
        rows.append(KVCacheRow(kind, f"{L} × {holds}", float(formula[kind]), measured))
    return rows


__all__ = [
    "PARAM_RULES",
    "REAL_BUILD_MAX_PARAMS",
    "KVCacheRow",
    "ParamCheck",
    "ThroughputResult",
    "component_of",
    "measure_kv_cache",
    "measure_matmul_peak",
    "measure_throughput",
    "measured_parameters",
    "scaled_down",
]
