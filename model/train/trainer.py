"""Training: a :class:`Trainer` that a script, the command line or a GUI worker thread can drive.

One step (``Trainer.train_step``), with ``s`` the number of steps already taken::

    lr_s   = lr · (s+1)/warmup                                       (s < warmup: linear warmup)
           = min_lr + ½ (lr − min_lr) (1 + cos(π (s − warmup)/(steps − warmup)))   (cosine decay)
    x, y   = source batch [B, T] (targets the task does not determine are ignored: −100)
    loss   = mean cross-entropy of model(x) against y      (bf16/fp16 autocast on CUDA, fp32 on CPU)
    g      = ∇loss;  ‖g‖ clipped to grad_clip;  AdamW(β₁, β₂, weight_decay on matrices only)

Weight decay applies to every parameter with two or more dimensions (projection matrices and the
embedding tables, as GPT-2 and nanoGPT do), never to biases, norm gains or per-head scales.

Events. Each step returns a :class:`TrainEvent` (losses, lr, grad norm, tokens/s, ...); ``run``
loops steps and calls ``callback(event)`` after each. Validation loss is measured every
``eval_every`` steps and at the last step, on the same ``eval_batches`` held-out batches every time,
so successive values are comparable.

Callbacks (minGPT style). ``add_callback("on_step_end", fn)`` calls ``fn(trainer, event)`` after every
step, in the order added, in the training thread, before ``train_step`` returns (their time counts in
``elapsed``, not in ``tokens_per_s``). The first is always the trainer's :class:`~model.interp.probes.Prober`:
with ``probe_every`` the event of every k-th step carries a :class:`~model.interp.trace.Trace` of the probe
prompt (attention weights in float16), what animates the heads while the model learns.

Threads. ``pause``, ``resume`` and ``stop`` may be called from any thread; they take effect between
steps (a :class:`~model.train.control.RunControl`; a paused ``run`` blocks on a condition variable, not a
busy loop). A stop also cuts a validation in progress short between two of its batches (one process
only): that step's event then has no ``val_loss``, so closing the window never waits for a whole
validation of a large model. Every step holds :data:`model.runtime.compute_lock` so inspection
never competes with training for the CPU.

Determinism. On the CPU, the same config, source, settings and seed give bit-identical weights.
Batches come from the trainer's own ``torch.Generator``; dropout uses the trainer's own copy of the
global RNG state. All of this is in the checkpoint, so N steps, save, resume, M steps equals N + M
steps straight.

Divergence. A non-finite loss or gradient norm raises :class:`TrainingDiverged` before the optimizer
touches the weights, so the model (and any checkpoint saved earlier) stays at the last good step.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from model.config import ConfigError, GPTConfig
from model.errors import AttentionLabError
from model.runtime import compute_lock, pick_device, set_threads
from model.train.control import RunControl

__all__ = [
    "CALLBACK_EVENTS",
    "EvaluationStopped",
    "TrainEvent",
    "TrainSettings",
    "Trainer",
    "TrainingDiverged",
    "eta_seconds",
    "lr_at",
    "recommended_config",
    "recommended_settings",
]


#: The moments a trainer calls its callbacks: ``on_step_end(trainer, event)`` after every step.
CALLBACK_EVENTS = ("on_step_end",)


class EvaluationStopped(RuntimeError):
    """A validation cut short by :meth:`Trainer.stop` (between two of its batches)."""


class TrainingDiverged(AttentionLabError, RuntimeError):
    """The loss (or gradient) became NaN or infinite; the weights are those of the last good step."""

    def __init__(self, message: str, step: int, value: float):
        super().__init__(message)
        self.step = step
        self.value = value


# ---------------------------------------------------------------------------------------------
# settings and events
# ---------------------------------------------------------------------------------------------
#: The largest value a whole-number setting takes (steps, batches, ...): beyond it is a typo.
MAX_WHOLE = 10**9
#: A seed must fit torch's 64-bit generator state.
MAX_SEED = 2**63 - 1
#: More CPU threads than any machine has cores (very many crash the OpenMP runtime). Fixed, not per
#: core, so that a checkpoint's settings stay valid on a smaller machine.
MAX_THREADS = 1024


@dataclass
class TrainSettings:
    """How to train (not what): the optimiser, schedule, batches, evaluation and device.

    ``seq_len`` None → the model's context length (or less, if the data is shorter). ``min_lr`` None →
    ``lr / 10``. ``threads`` 0 → every available core (set in the thread that trains).

    The defaults train the default GPT (0.85M parameters) on ``builtin:stdlib`` in about a minute on
    2 CPU cores: 300 steps × 32 × 128 = 1.2M tokens, to a validation loss near 2.0 nats (ln V ≈ 4.6).
    Sequences of 128 tokens (half the default context) learn faster per second than 256; generation
    from such a checkpoint reads at most the trained length (see :func:`model.nn.generate.trained_window`).
    """

    steps: int = 300
    batch_size: int = 32
    seq_len: int | None = 128
    lr: float = 3e-3
    warmup: int = 30
    min_lr: float | None = None
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    beta1: float = 0.9
    beta2: float = 0.99
    eval_every: int = 50
    eval_batches: int = 8
    seed: int = 0
    device: str = "auto"
    probe_every: int = 0
    probe_prompt: str | None = None
    amp: bool = True
    threads: int = 0
    loss_mask: bool = True

    def problems(self) -> list[str]:
        """Every invalid value, each naming the field and a valid range (empty if fine)."""
        out: list[str] = []

        def whole(name: str, minimum: int, maximum: int = MAX_WHOLE) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not minimum <= v <= maximum:
                out.append(f"{name}={v!r} must be a whole number from {minimum} to {maximum:,}")

        def number(name: str, lo: float, hi: float = math.inf, lo_open: bool = False) -> None:
            v = getattr(self, name)
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            ok = ok and (v > lo if lo_open else v >= lo) and v <= hi
            if not ok:
                bound = f"> {lo:g}" if lo_open else f">= {lo:g}"
                out.append(
                    f"{name}={v!r} must be a number {bound}" + (f" and <= {hi:g}" if hi != math.inf else "")
                )

        whole("steps", 1)
        whole("batch_size", 1)
        if self.seq_len is not None:
            whole("seq_len", 1)
        number("lr", 0.0, 10.0, lo_open=True)
        whole("warmup", 0)
        if self.min_lr is not None:
            number("min_lr", 0.0)
            if not out and self.min_lr > self.lr:
                out.append(f"min_lr={self.min_lr:g} must not exceed lr={self.lr:g}")
        number("weight_decay", 0.0)
        number("grad_clip", 0.0)
        number("beta1", 0.0, 1.0)
        number("beta2", 0.0, 1.0)
        whole("eval_every", 1)
        whole("eval_batches", 1)
        whole("seed", 0, MAX_SEED)
        whole("probe_every", 0)
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or not 0 <= self.threads:
            out.append(f"threads={self.threads!r} must be a whole number (0 = every core)")
        elif self.threads > MAX_THREADS:
            out.append(
                f"threads={self.threads} is more than any machine's cores: use at most {MAX_THREADS} "
                f"(this one has {os.cpu_count() or 1}; 0 = every core)"
            )
        if not isinstance(self.device, str):
            out.append(f"device={self.device!r} must be auto, cpu, cuda or cuda:N")
        for name in ("amp", "loss_mask"):
            if not isinstance(getattr(self, name), bool):
                out.append(f"{name}={getattr(self, name)!r} must be true or false")
        return out

    def validate(self) -> TrainSettings:
        problems = self.problems()
        if problems:
            raise ConfigError(problems)
        return self

    def problems_for(self, config: GPTConfig, source: Any = None) -> list[str]:
        """:meth:`problems`, then what these settings cannot do with this model and data: a
        ``seq_len`` longer than ``config.context_length``, or than the longest sequence ``source``
        yields (a synthetic task's fixed length). The one check of whether a run may start: the
        Training panel shows it inline, Start waits on it, and :class:`Trainer` raises it."""
        out = self.problems()
        T = self.seq_len
        if out or T is None:
            return out
        if T > config.context_length:
            out.append(
                f"seq_len={T} is longer than the model's context_length={config.context_length}: "
                "lower seq_len or raise context_length"
            )
        limit = data_seq_limit(source)
        if limit is not None and T > limit:
            out.append(f"seq_len={T} is longer than the data allows ({limit} tokens); lower seq_len")
        return out

    @property
    def floor_lr(self) -> float:
        """The cosine floor actually used (``min_lr`` or ``lr / 10``)."""
        return self.min_lr if self.min_lr is not None else self.lr / 10

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainSettings:
        """Build from a mapping (omitted fields take defaults); unknown names and bad values are errors."""
        if not isinstance(data, dict):
            raise ConfigError([f"training settings must be a JSON object, not {type(data).__name__}"])
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError([f"unknown training setting {name!r}" for name in unknown])
        return cls(**data).validate()

    def replace(self, **changes: Any) -> TrainSettings:
        return dataclasses.replace(self, **changes)


def data_seq_limit(source: Any) -> int | None:
    """The longest sequence ``source`` yields for training and validation (None: no limit, or no
    source): a synthetic task's fixed length; a corpus has none."""
    try:
        limits = [m for m in (source.max_seq_len("train"), source.max_seq_len("val")) if m is not None]
    except AttributeError:
        return None
    return min(limits) if limits else None


@dataclass
class TrainEvent:
    """What one training step reports (``to_dict`` is JSON-able; ``trace`` is not part of it).

    ``tokens_per_s``: training tokens per second of step time over the last few steps (evaluation and
    probes excluded); ``elapsed``: seconds spent in training steps, evaluations and probes so far (all
    runs of this trainer, resumes included; pauses excluded).
    """

    step: int
    train_loss: float
    val_loss: float | None
    lr: float
    grad_norm: float
    tokens_per_s: float
    elapsed: float
    tokens_seen: int
    world_size: int = 1
    trace: Any = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "train_loss": self.train_loss,
            "val_loss": self.val_loss,
            "lr": self.lr,
            "grad_norm": self.grad_norm,
            "tokens_per_s": self.tokens_per_s,
            "elapsed": self.elapsed,
            "tokens_seen": self.tokens_seen,
            "world_size": self.world_size,
        }


def lr_at(step: int, settings: TrainSettings) -> float:
    """Learning rate for step index ``step`` (0-based): linear warmup, cosine to ``floor_lr``, then flat."""
    lr, floor, warm, total = settings.lr, settings.floor_lr, settings.warmup, settings.steps
    if step < warm:
        return lr * (step + 1) / warm
    if step >= total:
        return floor
    progress = (step - warm) / max(1, total - warm)
    return floor + 0.5 * (lr - floor) * (1.0 + math.cos(math.pi * progress))


def eta_seconds(history: list[dict[str, Any]], step: int, target: int) -> float | None:
    """Seconds left to reach step ``target`` from ``step`` at the pace of the last 20 events of
    ``history`` (``TrainEvent.to_dict()`` rows); None without two events or a pace."""
    if len(history) < 2 or not target:
        return None
    recent = history[-20:]
    dt = float(recent[-1].get("elapsed", 0.0)) - float(recent[0].get("elapsed", 0.0))
    dsteps = int(recent[-1]["step"]) - int(recent[0]["step"])
    if dsteps <= 0 or dt <= 0:
        return None
    return max(0.0, (target - step) * dt / dsteps)


# ---------------------------------------------------------------------------------------------
# recommended settings per data source
# ---------------------------------------------------------------------------------------------
def _source_kind(source: Any) -> tuple[str, str]:
    try:
        ident = source.identity()
    except Exception:  # noqa: BLE001 - any source without identity counts as text
        return "text", ""
    return str(ident.get("kind", "text")), str(ident.get("task", ""))


def recommended_config(source: Any, base: GPTConfig | None = None) -> GPTConfig:
    """A model shape that suits ``source`` (``vocab_size`` set from its tokenizer): ``base`` if given,
    else the default GPT for text and, for synthetic tasks, 2 layers of 4 heads, d_model 128 (64 for the
    tasks other than induction), context 64 -- the smallest shape that grows an induction head."""
    kind, task = _source_kind(source)
    if base is None:
        base = GPTConfig()
        if kind == "task":
            base = GPTConfig(
                n_layers=2, d_model=128 if task == "induction" else 64, n_heads=4, context_length=64
            )
    return base.with_vocab(source.tokenizer.vocab_size)


def recommended_settings(source: Any, config: GPTConfig | None = None) -> TrainSettings:
    """Training settings that suit ``source`` (with ``config``, ``seq_len`` is capped at its context).

    Text: the :class:`TrainSettings` defaults. Synthetic tasks: 64 sequences of 64 tokens a step at
    lr 3e-3, a probe trace every 5 steps. On ``task:induction`` with :func:`recommended_config` this
    shows the induction-head phase change: the best layer-1 head's induction score on the probe
    prompt sits near 0.1 for ~100 steps, then climbs past 0.5 within 20-40 steps (seed 0: 0.19 at
    step 100, 0.68 at step 130) while the loss on the repeated tokens falls from ~2.7 to ~2.0, and on
    to ~0.5 by step 500 -- under a minute on 2 CPU cores (``bench/induction_curve.py``). Sequences of
    128 tokens put more earlier occurrences of each symbol in view and delayed the phase change past
    step 600.
    """
    kind, task = _source_kind(source)
    if kind != "task":
        settings = TrainSettings()
    else:
        settings = TrainSettings(
            steps=500 if task == "induction" else 400,
            batch_size=64,
            seq_len=64,
            lr=3e-3,
            warmup=30,
            eval_every=25,
            eval_batches=4,
            probe_every=5,
        )
    if config is not None and settings.seq_len is not None and settings.seq_len > config.context_length:
        settings = settings.replace(seq_len=config.context_length)
    return settings


# ---------------------------------------------------------------------------------------------
# the trainer
# ---------------------------------------------------------------------------------------------
def _all_true(mask: torch.Tensor) -> bool:
    return bool(mask.all())


#: Training precisions (``Trainer(dtype=...)``, ``train --dtype``).
DTYPES = ("auto", "bf16", "fp16", "fp32")


def _compile_problem(device: torch.device) -> str | None:
    """Why ``torch.compile`` cannot work here (one line), or None."""
    import shutil
    import sys

    if not hasattr(torch, "compile"):
        return "this PyTorch has no torch.compile"
    if sys.platform == "win32":
        return "torch.compile is not supported on Windows"
    if device.type == "cpu":
        import os

        cxx = os.environ.get("CXX") or "c++"
        if shutil.which(cxx) is None and shutil.which("g++") is None:
            return "it needs a C++ compiler on the CPU and none was found (install g++ or set CXX)"
    if device.type == "mps":
        return "torch.compile does not support MPS training here"
    return None


def _is_collective_error(exc: BaseException) -> bool:
    """Whether ``exc`` came from a collective (a lost or silent peer), not from the model."""
    import torch.distributed as dist

    if isinstance(exc, getattr(dist, "DistError", ())):
        return True
    text = str(exc).lower()
    return any(k in text for k in ("gloo", "nccl", "connection", "timed out", "timeout", "peer"))


def _shard_weights(y: torch.Tensor, pieces: list[slice]) -> list[float]:
    """n_i / N for each row slice of targets ``y`` (N: target tokens of the whole batch, -100 ignored)."""
    valid = (y != -100).sum(dim=1)
    total = int(valid.sum())
    if total == 0:  # every target masked: weigh by rows
        return [(p.stop - p.start) / y.shape[0] for p in pieces]
    return [int(valid[p].sum()) / total for p in pieces]


class Trainer:
    """Trains a :class:`~model.nn.gpt.GPT` on a data source (see the module docstring).

    ``config``: the model's shape; its ``vocab_size`` is taken from ``source.tokenizer`` when unset
    (a larger one is allowed: a padded head). ``model``: continue from these weights instead of a fresh
    seeded init. ``state``: a ``train_state`` dict from a checkpoint (optimizer moments, step, RNG
    states, history) to continue exactly.

    How to run (not what to learn, so not in the settings): ``dist`` a
    :class:`~model.train.distributed.DistContext` for data-parallel training (``settings.batch_size`` is
    then the global batch; see :mod:`model.train.distributed`); ``grad_accum`` K micro-batches per step
    (``batch_size`` a multiple of world_size·K); ``dtype`` ``"auto"`` (the ``amp`` setting: bf16, or
    fp16 with a GradScaler, on CUDA), ``"bf16"``, ``"fp16"`` or ``"fp32"``; ``compile`` wraps the
    model in ``torch.compile`` for the training steps. On CUDA, TF32 matmuls are on and AdamW is
    fused. Options that do not apply to the device are off, each named in :attr:`notes`.
    """

    def __init__(
        self,
        config: GPTConfig,
        source: Any,
        settings: TrainSettings | None = None,
        *,
        model: torch.nn.Module | None = None,
        state: dict[str, Any] | None = None,
        dist: Any = None,
        grad_accum: int = 1,
        dtype: str = "auto",
        compile: bool = False,
    ):
        from model.nn.gpt import build_model
        from model.train.distributed import DistContext

        settings = (settings or TrainSettings()).validate()
        self._settings = settings
        self.source = source
        self.tokenizer = source.tokenizer
        V = self.tokenizer.vocab_size
        if config.vocab_size is None:
            config = config.with_vocab(V)
        config.validate()
        if config.vocab_size < V:
            raise ConfigError(
                [f"vocab_size={config.vocab_size} is below the tokenizer's {V} tokens: raise or omit it"]
            )
        self.config = config
        self.seq_len = self._pick_seq_len(settings, config, source)
        self.dist = dist if dist is not None else DistContext()
        self.world_size = self.dist.world_size if self.dist.active else 1
        self.rank = self.dist.rank if self.dist.active else 0
        self.grad_accum = self._check_parallel(settings, grad_accum, dtype)
        self.device = self.dist.device if self.dist.active else pick_device(settings.device)
        #: One line per option that does not apply here and is off (for the command to print).
        self.notes: list[str] = []
        from model.budget.sizing import check, training_need

        mixed = dtype in ("bf16", "fp16") or (dtype == "auto" and settings.amp)
        precision = "bf16-mixed" if mixed and self.device.type == "cuda" else "fp32"
        micro = settings.batch_size // (self.world_size * self.grad_accum)  # what one rank holds at once
        need = training_need(config, batch=micro, seq_len=self.seq_len, precision=precision)
        check(need, device=self.device)  # before anything is built: one line naming what to lower

        if model is None:
            with compute_lock:  # build_model seeds the global RNG: no other torch work may draw from it
                model = build_model(config, seed=settings.seed)
        elif model.config.to_dict() != config.to_dict():
            raise ConfigError(["the model given does not have the config given"])
        self.model = model.to(self.device)
        self.model.train()

        decay, no_decay = [], []
        self._param_names: list[list[str]] = [[], []]
        for name, p in self.model.named_parameters():
            if not p.requires_grad:
                continue
            group = 0 if p.dim() >= 2 else 1
            (decay if group == 0 else no_decay).append(p)
            self._param_names[group].append(name)
        self._params = decay + no_decay
        self.optimizer = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": settings.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=lr_at(0, settings),
            betas=(settings.beta1, settings.beta2),
            eps=1e-8,
            **({"fused": True} if self.device.type == "cuda" else {}),
        )

        self.dtype = dtype
        self.amp_dtype: torch.dtype | None = None
        self.scaler = None
        self._setup_precision(settings, dtype)
        self._setup_engine(compile)

        self.step = 0
        self.history: list[dict[str, Any]] = []
        self.elapsed = 0.0
        self.tokens_seen = 0
        self._batch_gen = torch.Generator().manual_seed(settings.seed)
        self._rng_cpu = torch.Generator().manual_seed(settings.seed + 2).get_state()
        self._rng_cuda: torch.Tensor | None = None
        self._recent: deque[tuple[int, float]] = deque(maxlen=20)
        self._threads_for: int | None = None

        self.control = RunControl()
        self._callbacks: dict[str, list[Callable[..., Any]]] = {on: [] for on in CALLBACK_EVENTS}
        from model.interp.probes import Prober

        self.prober = Prober()
        self.add_callback("on_step_end", self.prober)

        if state is not None:
            self.load_state(state)

    # ---- settings ----------------------------------------------------------------------------
    @property
    def settings(self) -> TrainSettings:
        return self._settings

    @settings.setter
    def settings(self, value: TrainSettings) -> None:
        """Replace the settings between steps (steps, lr, batch, seq_len, eval, probes, threads...).

        The schedule follows the new values from the next step; the optimizer's betas and weight
        decay are updated in place; ``seed`` and ``device`` only matter when a trainer is built.
        """
        value.validate()
        seq_len = self._pick_seq_len(value, self.config, self.source)
        with compute_lock:
            self._settings = value
            self.seq_len = seq_len
            self._threads_for = None
            for i, group in enumerate(self.optimizer.param_groups):
                group["betas"] = (value.beta1, value.beta2)
                group["weight_decay"] = value.weight_decay if i == 0 else 0.0

    # ---- how to run: data parallel, precision, compilation ------------------------------------
    def _check_parallel(self, settings: TrainSettings, grad_accum: int, dtype: str) -> int:
        if isinstance(grad_accum, bool) or not isinstance(grad_accum, int) or grad_accum < 1:
            raise ConfigError([f"grad_accum={grad_accum!r} must be a whole number >= 1"])
        if dtype not in DTYPES:
            raise ConfigError([f"dtype={dtype!r} must be one of {', '.join(DTYPES)}"])
        per = self.world_size * grad_accum
        if settings.batch_size % per:
            raise ConfigError(
                [
                    f"batch_size={settings.batch_size} (the global batch) must be a multiple of "
                    f"world_size×grad_accum = {self.world_size}×{grad_accum} = {per}"
                ]
            )
        return grad_accum

    def _setup_precision(self, settings: TrainSettings, dtype: str) -> None:
        """autocast dtype and GradScaler: ``auto`` keeps the ``amp`` setting (bf16 where CUDA has it,
        else fp16 + scaler); an explicit dtype wins; the CPU always trains in fp32."""
        cuda = self.device.type == "cuda"
        if not cuda:
            if dtype in ("bf16", "fp16"):
                self.notes.append(f"dtype {dtype} is for CUDA: training in fp32 on {self.device.type}")
            self.notes.append(f"TF32 matmuls and fused AdamW are CUDA-only: off on {self.device.type}")
            return
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        want = dtype
        if dtype == "auto":
            want = "fp32" if not settings.amp else ("bf16" if torch.cuda.is_bf16_supported() else "fp16")
        elif dtype == "bf16" and not torch.cuda.is_bf16_supported():
            self.notes.append("dtype bf16 is not supported by this GPU: using fp16 with a gradient scaler")
            want = "fp16"
        if want == "bf16":
            self.amp_dtype = torch.bfloat16
        elif want == "fp16":
            self.amp_dtype = torch.float16
            self.scaler = torch.amp.GradScaler("cuda")

    def _setup_engine(self, compile: bool) -> None:
        """``self._step_model``: the model the training steps call (compiled, then in DDP)."""
        from model.train.distributed import wrap

        fwd = self.model
        self.compiled = False
        if compile:
            problem = _compile_problem(self.device)
            if problem:
                self.notes.append(f"--compile is off: {problem}")
            else:
                fwd = torch.compile(self.model)
                self.compiled = True
        self._eval_model = fwd
        self._step_model = wrap(fwd, self.dist)

    # ---- helpers -----------------------------------------------------------------------------
    @staticmethod
    def _pick_seq_len(settings: TrainSettings, config: GPTConfig, source: Any) -> int:
        problems = settings.problems_for(config, source)
        if problems:
            raise ConfigError(problems)
        if settings.seq_len is not None:
            return settings.seq_len
        limit = data_seq_limit(source)
        return config.context_length if limit is None else min(config.context_length, limit)

    def _apply_threads(self) -> None:
        """Set the CPU thread count in the thread that computes (once per thread)."""
        ident = threading.get_ident()
        if self._threads_for != ident:
            if self.device.type == "cpu":
                set_threads(self.settings.threads)
            self._threads_for = ident

    def _autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    def _batch(self, split: str, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        B, T = self.settings.batch_size, self.seq_len
        if self.settings.loss_mask and hasattr(self.source, "get_masked_batch"):
            x, y, mask = self.source.get_masked_batch(split, B, T, generator)
            if not _all_true(mask):
                y = y.masked_fill(~mask, -100)
        else:
            x, y = self.source.get_batch(split, B, T, generator)
        non_blocking = self.device.type == "cuda"
        return x.to(self.device, non_blocking=non_blocking), y.to(self.device, non_blocking=non_blocking)

    @contextlib.contextmanager
    def _own_rng(self):
        """Run dropout on the trainer's own RNG stream (restoring the global one afterwards)."""
        if self.config.dropout == 0.0:
            yield
            return
        saved = torch.get_rng_state()
        torch.set_rng_state(self._rng_cpu)
        saved_cuda = None
        if self.device.type == "cuda":
            saved_cuda = torch.cuda.get_rng_state(self.device)
            if self._rng_cuda is not None:
                torch.cuda.set_rng_state(self._rng_cuda, self.device)
        try:
            yield
        finally:
            self._rng_cpu = torch.get_rng_state()
            torch.set_rng_state(saved)
            if saved_cuda is not None:
                self._rng_cuda = torch.cuda.get_rng_state(self.device)
                torch.cuda.set_rng_state(saved_cuda, self.device)

    def lr_at(self, step: int) -> float:
        return lr_at(step, self.settings)

    # ---- callbacks ---------------------------------------------------------------------------
    def add_callback(self, onevent: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Call ``fn`` at ``onevent`` (one of :data:`CALLBACK_EVENTS`), after those added before."""
        self._callbacks[onevent].append(fn)
        return fn

    def remove_callback(self, onevent: str, fn: Callable[..., Any]) -> None:
        callbacks = self._callbacks[onevent]
        if fn in callbacks:
            callbacks.remove(fn)

    def trigger_callbacks(self, onevent: str, *args: Any) -> None:
        for fn in self._callbacks[onevent]:
            fn(self, *args)

    # ---- thread control (a RunControl; see model/train/control.py) ---------------------------------
    def pause(self) -> None:
        """Hold ``run`` before its next step (from any thread)."""
        self.control.pause()

    def resume(self) -> None:
        """Let a paused ``run`` continue."""
        self.control.resume()

    def stop(self) -> None:
        """Make ``run`` return before its next step (also wakes a paused run) and cut a validation in
        progress short (:meth:`evaluate`). Sticky until :meth:`clear_stop`."""
        self.control.stop()

    def clear_stop(self) -> None:
        """Allow ``run`` to train again after :meth:`stop`."""
        self.control.clear_stop()

    @property
    def paused(self) -> bool:
        return self.control.paused

    @property
    def stopped(self) -> bool:
        return self.control.stopped

    @property
    def waiting(self) -> bool:
        """True while ``run`` is blocked by a pause (the step in flight, if any, has finished)."""
        return self.control.waiting

    def wait_until_paused(self, timeout: float | None = None) -> bool:
        """Block until a paused ``run`` has finished its step and is waiting; False on timeout."""
        return self.control.wait_until_paused(timeout)

    # ---- training ----------------------------------------------------------------------------
    def train_step(self) -> TrainEvent:
        """One optimizer step (plus validation and a probe when due); returns its event."""
        t_start = time.perf_counter()
        s = self.settings
        with compute_lock:
            self._apply_threads()
            lr = self.lr_at(self.step)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            x, y = self._batch("train", self._batch_gen)  # the global batch; this rank trains its shard
            self.model.train()
            loss_value = self._forward_backward(x, y)
            if not math.isfinite(loss_value):
                self.optimizer.zero_grad(set_to_none=True)
                raise self._diverged("loss", loss_value, lr)
            if self.scaler is not None:
                self.scaler.unscale_(self.optimizer)
            max_norm = s.grad_clip if s.grad_clip > 0 else math.inf
            grad_norm = float(torch.nn.utils.clip_grad_norm_(self._params, max_norm))
            if self.scaler is not None:
                self.scaler.step(self.optimizer)  # skips the step itself when the gradients overflowed
                self.scaler.update()
            else:
                if not math.isfinite(grad_norm):
                    self.optimizer.zero_grad(set_to_none=True)
                    raise self._diverged("gradient norm", grad_norm, lr)
                self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        step_time = time.perf_counter() - t_start

        self.step += 1
        n_tokens = x.numel()
        self.tokens_seen += n_tokens
        self._recent.append((n_tokens, step_time))
        tokens_per_s = sum(n for n, _ in self._recent) / max(1e-9, sum(t for _, t in self._recent))

        val_loss = None
        if self.step % s.eval_every == 0 or self.step == s.steps:
            try:
                val_loss = self.evaluate()
            except EvaluationStopped:  # a stop came during it: the step stands, its val loss is unknown
                val_loss = None
        event = TrainEvent(
            step=self.step,
            train_loss=loss_value,
            val_loss=val_loss,
            lr=lr,
            grad_norm=grad_norm,
            tokens_per_s=tokens_per_s,
            elapsed=self.elapsed,
            tokens_seen=self.tokens_seen,
            world_size=self.world_size,
        )
        self.trigger_callbacks("on_step_end", event)  # the prober first: it may attach event.trace
        self.elapsed += time.perf_counter() - t_start
        event.elapsed = self.elapsed
        self.history.append(event.to_dict())
        return event

    def _micro_batches(self, rows: int) -> list[slice]:
        """This rank's rows of a global batch of ``rows``, cut into ``grad_accum`` micro-batches."""
        from model.train.distributed import shard

        mine = shard(rows, self.rank, self.world_size)
        per = (mine.stop - mine.start) // self.grad_accum
        return [slice(mine.start + i * per, mine.start + (i + 1) * per) for i in range(self.grad_accum)]

    def _forward_backward(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """Accumulate the gradient of the global mean loss from this rank's micro-batches; returns
        that global mean loss (summed over ranks). One process, one micro-batch: plain
        ``loss.backward()``, the exact arithmetic of a single-process step."""
        from model.train.distributed import all_reduce_sum, lost_rank

        pieces = self._micro_batches(x.shape[0])
        single = len(pieces) == 1 and self.world_size == 1
        weights = [1.0] if single else _shard_weights(y, pieces)
        local = 0.0
        try:
            for i, (rows, w) in enumerate(zip(pieces, weights)):
                sync = i == len(pieces) - 1 or not self.dist.active
                no_sync = contextlib.nullcontext() if sync else self._step_model.no_sync()
                with no_sync, self._own_rng():
                    with self._autocast():
                        _, loss = self._step_model(x if single else x[rows], y if single else y[rows])
                    value = float(loss.detach())
                    if self.world_size == 1 and not math.isfinite(value):
                        return value  # diverged: no backward (with several ranks all must reduce first)
                    part = loss if single else loss * (w * self.world_size)
                    local += value if single else value * w
                    if self.scaler is not None:
                        self.scaler.scale(part).backward()
                    else:
                        part.backward()
        except RuntimeError as exc:
            if self.dist.active and _is_collective_error(exc):
                raise lost_rank(self.dist, exc) from None
            raise
        return all_reduce_sum([local], self.dist)[0]

    def _diverged(self, what: str, value: float, lr: float) -> TrainingDiverged:
        step = self.step + 1
        return TrainingDiverged(
            f"training diverged at step {step}: the {what} became {value} with learning rate {lr:.3g}; "
            f"the weights are those of step {self.step}. Lower the learning rate (e.g. lr={lr / 3:.2g}) "
            "or lengthen the warmup, then train again",
            step=step,
            value=value,
        )

    @torch.no_grad()
    def evaluate(self, batches: int | None = None) -> float:
        """Mean loss over ``batches`` (default ``eval_batches``) held-out batches: the same batches
        every call (their generator is re-seeded), so successive values are comparable.

        Raises :class:`EvaluationStopped` when :meth:`stop` is called meanwhile (checked between two
        batches; with several processes the validation always completes, as every rank must reduce).
        """
        from model.train.distributed import all_reduce_sum, shard

        n = batches or self.settings.eval_batches
        gen = torch.Generator().manual_seed(self.settings.seed + 1_000_003)
        total = 0.0
        with compute_lock:
            self._apply_threads()
            was_training = self.model.training
            self.model.eval()
            try:
                for _ in range(n):
                    if self.world_size == 1 and self.control.stopped:
                        raise EvaluationStopped(f"validation stopped at step {self.step}")
                    x, y = self._batch("val", gen)  # every rank draws the batch, measures its shard
                    if self.world_size == 1:
                        with self._autocast():
                            _, loss = self.model(x, y)
                        total += float(loss)
                        continue
                    rows = shard(x.shape[0], self.rank, self.world_size)
                    with self._autocast():
                        _, loss = self._eval_model(x[rows], y[rows])
                    total += float(loss) * _shard_weights(y, [rows])[0]
            finally:
                self.model.train(was_training)
        return all_reduce_sum([total], self.dist)[0] / n

    @property
    def probe_prompt(self) -> str:
        """The prompt probe traces use: ``settings.probe_prompt`` or the source's default prompt."""
        return self.settings.probe_prompt or getattr(self.source, "default_prompt", "") or "\n"

    def probe(self, prompt: str | None = None, *, kinds=("weights",), dtype=torch.float16, layers=None):
        """A :class:`~model.interp.trace.Trace` of ``prompt`` (default :attr:`probe_prompt`) in eval mode.

        Characters the tokenizer lacks are replaced (a probe never fails on its prompt); a prompt
        longer than the context keeps its last ``context_length`` tokens.
        """
        from model.interp.probes import trace_prompt

        prompt = self.probe_prompt if prompt is None else prompt
        with compute_lock:
            self._apply_threads()
            return trace_prompt(self.model, self.tokenizer, prompt, kinds=kinds, dtype=dtype, layers=layers)

    def run(
        self, steps: int | None = None, callback: Callable[[TrainEvent], Any] | None = None
    ) -> list[TrainEvent]:
        """Train ``steps`` more steps (default: until ``settings.steps``), calling ``callback(event)``
        after each. Returns early, between steps, when :meth:`stop` is called; blocks while paused."""
        fixed = None if steps is None else self.step + steps
        events: list[TrainEvent] = []
        while self.step < (self.settings.steps if fixed is None else fixed):  # settings may change meanwhile
            if not self.control.gate():
                break
            event = self.train_step()
            events.append(event)
            if callback is not None:
                callback(event)
        return events

    def sample(
        self,
        prompt: str | None = None,
        max_new_tokens: int = 80,
        temperature: float = 0.8,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> str:
        """The continuation of ``prompt`` (default: the source's prompt) as text, prompt not included."""
        from model.nn.generate import stream

        prompt = self.probe_prompt if prompt is None else prompt
        return "".join(
            stream(
                self.model,
                self.tokenizer,
                prompt,
                max_new_tokens,
                temperature=temperature,
                top_k=top_k,
                top_p=top_p,
                seed=seed,
                window=self.seq_len,
            )
        )

    # ---- state -------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The training state a checkpoint stores: JSON-able fields plus ``"tensors"`` (optimizer
        moments by parameter name, RNG states)."""
        tensors: dict[str, torch.Tensor] = {}
        names = [n for group in self._param_names for n in group]
        by_param = dict(zip(self._params, names))
        for p, st in self.optimizer.state.items():
            name = by_param[p]
            for key, value in st.items():
                if isinstance(value, torch.Tensor):
                    tensors[f"optim/{name}/{key}"] = value.detach().cpu().clone()
        tensors["rng/batch"] = self._batch_gen.get_state()
        tensors["rng/cpu"] = self._rng_cpu.clone()
        if self._rng_cuda is not None:
            tensors["rng/cuda"] = self._rng_cuda.cpu().clone()
        try:
            source_identity = self.source.identity()
        except Exception:  # noqa: BLE001
            source_identity = {"name": getattr(self.source, "name", "")}
        return {
            "step": self.step,
            "settings": self.settings.to_dict(),
            "history": list(self.history),
            "elapsed": self.elapsed,
            "tokens_seen": self.tokens_seen,
            "source": source_identity,
            "seq_len": self.seq_len,
            "param_groups": [list(g) for g in self._param_names],
            "scaler": self.scaler.state_dict() if self.scaler is not None else None,
            "world_size": self.world_size,
            "grad_accum": self.grad_accum,
            "tensors": tensors,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (raises ValueError naming any mismatch)."""
        tensors: dict[str, torch.Tensor] = state.get("tensors") or {}
        groups = state.get("param_groups")
        if groups is not None and [list(g) for g in groups] != self._param_names:
            raise ValueError("the saved optimizer state belongs to differently named or grouped parameters")
        opt_state: dict[int, dict[str, Any]] = {}
        names = [n for group in self._param_names for n in group]
        shapes = {n: tuple(p.shape) for n, p in self.model.named_parameters()}
        wrong: list[str] = []
        for i, name in enumerate(names):
            entry = {
                key.rsplit("/", 1)[1]: t for key, t in tensors.items() if key.startswith(f"optim/{name}/")
            }
            for moment, t in entry.items():  # exp_avg, exp_avg_sq: the parameter's shape; step: a scalar
                if t.dim() and tuple(t.shape) != shapes[name]:
                    wrong.append(f"{name}/{moment} is {list(t.shape)}, not {list(shapes[name])}")
            if entry:
                opt_state[i] = entry
        if wrong:
            more = f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""
            raise ValueError("optimizer state shapes do not match the model: " + ", ".join(wrong[:3]) + more)
        sd = self.optimizer.state_dict()
        sd["state"] = opt_state
        self.optimizer.load_state_dict(sd)
        self.step = int(state.get("step", 0))
        self.history = list(state.get("history", []))
        self.elapsed = float(state.get("elapsed", 0.0))
        self.tokens_seen = int(state.get("tokens_seen", 0))
        if "rng/batch" in tensors:
            self._batch_gen.set_state(tensors["rng/batch"].to(torch.uint8))
        if "rng/cpu" in tensors:
            self._rng_cpu = tensors["rng/cpu"].to(torch.uint8)
        if "rng/cuda" in tensors:
            self._rng_cuda = tensors["rng/cuda"].to(torch.uint8)
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])

    def save(self, path: str | Path, *, meta: dict[str, Any] | None = None) -> Path:
        """Write a full checkpoint (weights, tokenizer, training state) atomically to ``path``."""
        from model.io.checkpoint import save_checkpoint

        with compute_lock:
            state = self.state_dict()
            full_meta = {
                "source": state["source"],
                "step": self.step,
                "name": Path(path).name,
                "seq_len": self.seq_len,
            }
            if self.history:
                last_val = next(
                    (h["val_loss"] for h in reversed(self.history) if h.get("val_loss") is not None), None
                )
                full_meta.update(train_loss=self.history[-1]["train_loss"], val_loss=last_val)
            full_meta.update(meta or {})
            return save_checkpoint(path, self.model, self.tokenizer, train_state=state, meta=full_meta)

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        settings: TrainSettings | None = None,
        *,
        source: Any = None,
        device: str | None = None,
        overrides: dict[str, Any] | None = None,
        **options: Any,
    ) -> Trainer:
        """Continue training from a checkpoint exactly where it stopped.

        ``settings`` None → the saved settings; ``overrides`` (TrainSettings fields, e.g. more ``steps``)
        and ``device`` are applied on top. ``source`` None → rebuilt
        from the saved source name with the saved tokenizer; a warning is raised if its identity
        (SHA-256) differs from the saved one. A checkpoint without training state starts a fresh
        optimizer from its weights. ``options`` (``dist``, ``grad_accum``, ``dtype``, ``compile``) go
        to the constructor: a run saved at one world size resumes at any other (the batch generator
        is the same on every rank, so only the split of each global batch changes).
        """
        import warnings

        from model.io.checkpoint import CheckpointError, load_checkpoint

        ckpt = load_checkpoint(path, device="cpu")
        state = ckpt.train_state
        if settings is None:
            saved = (state or {}).get("settings") or {}
            try:
                settings = TrainSettings.from_dict(saved) if saved else TrainSettings()
            except ConfigError as exc:
                raise CheckpointError(f"train_state.json has invalid settings: {exc}") from None
        if overrides:
            unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(TrainSettings)})
            if unknown:
                raise ConfigError([f"unknown training setting {name!r}" for name in unknown])
            settings = settings.replace(**overrides).validate()
        if device is not None:
            settings = settings.replace(device=device)
        saved_source = (state or {}).get("source") or ckpt.meta.get("source") or {}
        if source is None:
            from model.text.sources import resolve_source

            name = saved_source.get("name")
            if not name:
                raise CheckpointError("the checkpoint does not record its data source: pass one")
            source = resolve_source(name, tokenizer=ckpt.tokenizer)
        try:
            now = source.identity()
        except Exception:  # noqa: BLE001
            now = {}
        if saved_source.get("sha256") and now.get("sha256") and saved_source["sha256"] != now["sha256"]:
            now_name = getattr(source, "name", None) or now.get("name")
            if now_name and now_name != saved_source.get("name"):  # another --corpus: name both
                message = (
                    f"training continues on {now_name!r}, not on {saved_source.get('name')!r} "
                    "that the checkpoint was trained on"
                )
            else:
                message = (
                    f"the data source {saved_source.get('name')!r} has changed since the checkpoint was "
                    "saved; training continues on the current data"
                )
            warnings.warn(message, stacklevel=2)
        trainer = cls(ckpt.config, source, settings, model=ckpt.model, state=None, **options)
        if state is not None:
            try:
                trainer.load_state(state)
            except (ValueError, KeyError, RuntimeError) as exc:
                raise CheckpointError(f"the training state does not fit the model: {exc}") from None
        return trainer
