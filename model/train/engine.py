"""How a training step's arithmetic runs here: precision, ``torch.compile``, data parallel, micro-batches.

An :class:`Engine` holds what a :class:`~model.train.trainer.Trainer` decides once, when it is built,
about *how* to run (never what to learn):

* **precision**: ``dtype`` ``"auto"`` keeps the ``amp`` setting (bf16 autocast where CUDA has it,
  else fp16 with a GradScaler), an explicit ``"bf16"``, ``"fp16"`` or ``"fp32"`` wins; the CPU always
  trains in fp32. On CUDA, TF32 matmuls are on.
* **compilation**: ``compile`` wraps the model in ``torch.compile`` for the training steps, where it
  can work (:func:`compile_problem` says why not, in one line).
* **data parallel**: under a :class:`~model.train.distributed.DistContext` the steps call the model
  in DistributedDataParallel, which averages the gradients during ``backward``.
* **micro-batches**: each rank's rows ``shard(B, rank, W)`` of the global batch [B, T] are cut into
  ``grad_accum`` = K micro-batches. Micro-batch i contributes ``mean_i · n_i / N`` (n_i its target
  tokens, N those of the whole global batch, −100 ignored) times W, as DDP averages over ranks: the
  gradient is exactly that of the global mean loss. One process, one micro-batch: plain
  ``loss.backward()``, the exact arithmetic of a single-process step.
* **the optimizer step** (:meth:`Engine.optimizer_step`): gradient clipping, and fp16's GradScaler
  unscaling first and skipping a step whose gradients overflowed; :func:`make_optimizer` builds the
  AdamW over the model's parameter groups (fused: one kernel over all parameters, on the CPU as on
  CUDA, where PyTorch has it), :func:`check_memory` sizes the training
  before anything is built.
* **dropout's randomness**: the trainer's own copy of the global RNG state (:meth:`Engine.own_rng`),
  saved in checkpoints, so a resumed run draws the same masks.

Options that do not apply to the device are off, each named in :attr:`Engine.notes`.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import sys
from typing import Any, cast

import torch
import torch.distributed
from torch.nn.parallel import DistributedDataParallel

from model.budget.sizing import check, training_need
from model.config import ConfigError, GPTConfig
from model.nn.gpt import GPT, ParamGroup
from model.train.distributed import DistContext, all_reduce_sum, lost_rank, shard, wrap
from model.train.settings import TrainSettings, lr_at

__all__ = [
    "DTYPES",
    "Engine",
    "check_memory",
    "check_options",
    "compile_problem",
    "make_optimizer",
    "precision_of",
]

#: Training precisions (``Trainer(dtype=...)``, ``train --dtype``).
DTYPES = ("auto", "bf16", "fp16", "fp32")


def check_options(batch_size: int, world_size: int, grad_accum: int, dtype: str) -> None:
    """Raise :class:`~model.config.ConfigError` when ``grad_accum`` or ``dtype`` is not valid, or the
    global batch does not split into world_size × grad_accum equal micro-batches."""
    if isinstance(grad_accum, bool) or not isinstance(grad_accum, int) or grad_accum < 1:
        raise ConfigError([f"grad_accum={grad_accum!r} must be a whole number >= 1"])
    if dtype not in DTYPES:
        raise ConfigError([f"dtype={dtype!r} must be one of {', '.join(DTYPES)}"])
    per = world_size * grad_accum
    if batch_size % per:
        raise ConfigError(
            [
                f"batch_size={batch_size} (the global batch) must be a multiple of "
                f"world_size×grad_accum = {world_size}×{grad_accum} = {per}"
            ]
        )


def check_memory(
    config: GPTConfig, settings: TrainSettings, seq_len: int, parts: int, dtype: str, device: torch.device
) -> None:
    """:class:`~model.budget.sizing.ModelTooLarge` (one line naming what to lower) when training
    ``config`` cannot fit on ``device``: the weights, AdamW's moments and the activations of the
    micro-batch one rank holds at once (the global batch over ``parts`` = world_size × grad_accum)."""
    precision = precision_of(dtype, settings.amp, device)
    micro = settings.batch_size // parts
    check(training_need(config, batch=micro, seq_len=seq_len, precision=precision), device=device)


def make_optimizer(
    groups: list[ParamGroup], settings: TrainSettings, device: torch.device
) -> torch.optim.AdamW:
    """AdamW over the model's parameter groups (:meth:`~model.nn.gpt.GPT.optimizer_groups`: decayed
    matrices, the rest not), at the schedule's first learning rate.

    Fused where PyTorch has the kernel (CUDA, and the CPU since 2.4): the same update in one pass over
    all parameters. On the CPU it is ~4x faster than the per-tensor loop PyTorch picks by default
    (7 against 33 ms a step for 6 layers × 384), which a plain training loop pays."""
    param_groups = [{"params": g["params"], "weight_decay": g["weight_decay"]} for g in groups]
    kwargs: dict[str, Any] = {"lr": lr_at(0, settings), "betas": (settings.beta1, settings.beta2)}
    if device.type in ("cuda", "cpu"):
        try:
            return torch.optim.AdamW(param_groups, **kwargs, eps=1e-8, fused=True)
        except (RuntimeError, TypeError, ValueError):  # a parameter on a device or dtype it lacks
            pass
    return torch.optim.AdamW(param_groups, **kwargs, eps=1e-8)


def precision_of(dtype: str, amp: bool, device: torch.device) -> str:
    """The precision a run's memory is estimated at: ``"bf16-mixed"`` (mixed on CUDA) or ``"fp32"``."""
    mixed = dtype in ("bf16", "fp16") or (dtype == "auto" and amp)
    return "bf16-mixed" if mixed and device.type == "cuda" else "fp32"


def compile_problem(device: torch.device) -> str | None:
    """Why ``torch.compile`` cannot work here (one line), or None."""
    if not hasattr(torch, "compile"):
        return "this PyTorch has no torch.compile"
    if sys.platform == "win32":
        return "torch.compile is not supported on Windows"
    if device.type == "cpu":
        cxx = os.environ.get("CXX") or "c++"
        if shutil.which(cxx) is None and shutil.which("g++") is None:
            return "it needs a C++ compiler on the CPU and none was found (install g++ or set CXX)"
    if device.type == "mps":
        return "torch.compile does not support MPS training here"
    return None


def _is_collective_error(exc: BaseException) -> bool:
    """Whether ``exc`` came from a collective (a lost or silent peer), not from the model."""
    if isinstance(exc, getattr(torch.distributed, "DistError", ())):
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


class Engine:
    """The forward and backward passes of one trainer's ``model`` on ``device`` (module docstring).

    ``step_model``: what the training steps call (compiled, then in DDP); ``eval_model``: what a
    validation shard calls with several ranks (compiled, not in DDP). ``rng_cpu`` / ``rng_cuda``:
    dropout's RNG states between steps (checkpointed with the run). ``seed`` seeds ``rng_cpu``.
    """

    def __init__(
        self,
        model: GPT,
        device: torch.device,
        dist: DistContext,
        *,
        amp: bool,
        seed: int,
        grad_accum: int = 1,
        dtype: str = "auto",
        compile: bool = False,
    ):
        self.model = model
        self.device = device
        self.dist = dist
        self.world_size = dist.world_size if dist.active else 1
        self.rank = dist.rank if dist.active else 0
        self.grad_accum = grad_accum
        self.dtype = dtype
        #: One line per option that does not apply here and is off (for the command to print).
        self.notes: list[str] = []
        self.amp_dtype: torch.dtype | None = None
        self.scaler: torch.amp.GradScaler | None = None
        self._setup_precision(amp, dtype)
        self.compiled = False
        fwd: torch.nn.Module = model
        if compile:
            problem = compile_problem(device)
            if problem:
                self.notes.append(f"--compile is off: {problem}")
            else:
                # torch.compile of a Module returns a Module (an OptimizedModule); its stub says a callable
                fwd = cast(torch.nn.Module, torch.compile(model))
                self.compiled = True
        self.eval_model = fwd
        self.step_model = wrap(fwd, dist)
        self.dropout = model.config.core.dropout != 0.0
        self.rng_cpu = torch.Generator().manual_seed(seed + 2).get_state()
        self.rng_cuda: torch.Tensor | None = None

    def _setup_precision(self, amp: bool, dtype: str) -> None:
        """autocast dtype and GradScaler: ``auto`` keeps the ``amp`` setting (bf16 where CUDA has it,
        else fp16 + scaler); an explicit dtype wins; the CPU always trains in fp32."""
        if self.device.type != "cuda":
            if dtype in ("bf16", "fp16"):
                self.notes.append(f"dtype {dtype} is for CUDA: training in fp32 on {self.device.type}")
            self.notes.append(f"TF32 matmuls are CUDA-only: off on {self.device.type}")
            return
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        want = dtype
        if dtype == "auto":
            want = "fp32" if not amp else ("bf16" if torch.cuda.is_bf16_supported() else "fp16")
        elif dtype == "bf16" and not torch.cuda.is_bf16_supported():
            self.notes.append("dtype bf16 is not supported by this GPU: using fp16 with a gradient scaler")
            want = "fp16"
        if want == "bf16":
            self.amp_dtype = torch.bfloat16
        elif want == "fp16":
            self.amp_dtype = torch.float16
            self.scaler = torch.amp.GradScaler("cuda")

    def autocast(self):
        """The mixed-precision context of a forward pass (nothing in fp32)."""
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    @contextlib.contextmanager
    def own_rng(self):
        """Run dropout on the trainer's own RNG stream (restoring the global one afterwards)."""
        if not self.dropout:
            yield
            return
        saved = torch.get_rng_state()
        torch.set_rng_state(self.rng_cpu)
        saved_cuda = None
        if self.device.type == "cuda":
            saved_cuda = torch.cuda.get_rng_state(self.device)
            if self.rng_cuda is not None:
                torch.cuda.set_rng_state(self.rng_cuda, self.device)
        try:
            yield
        finally:
            self.rng_cpu = torch.get_rng_state()
            torch.set_rng_state(saved)
            if saved_cuda is not None:
                self.rng_cuda = torch.cuda.get_rng_state(self.device)
                torch.cuda.set_rng_state(saved_cuda, self.device)

    def _no_sync(self) -> contextlib.AbstractContextManager[None]:
        """DDP's ``no_sync``: a micro-batch before a step's last keeps its gradients local."""
        assert isinstance(self.step_model, DistributedDataParallel)  # wrap's, under an active group
        return self.step_model.no_sync()

    def micro_batches(self, rows: int) -> list[slice]:
        """This rank's rows of a global batch of ``rows``, cut into ``grad_accum`` micro-batches."""
        mine = shard(rows, self.rank, self.world_size)
        per = (mine.stop - mine.start) // self.grad_accum
        return [slice(mine.start + i * per, mine.start + (i + 1) * per) for i in range(self.grad_accum)]

    def forward_backward(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """Accumulate the gradient of the global mean loss of batch ``x``, ``y`` [B, T] from this
        rank's micro-batches; returns that global mean loss (summed over ranks). With one process a
        non-finite loss returns at once, before any backward."""
        pieces = self.micro_batches(x.shape[0])
        single = len(pieces) == 1 and self.world_size == 1
        weights = [1.0] if single else _shard_weights(y, pieces)
        local = 0.0
        try:
            for i, (rows, w) in enumerate(zip(pieces, weights)):
                sync = i == len(pieces) - 1 or not self.dist.active
                no_sync = contextlib.nullcontext() if sync else self._no_sync()
                with no_sync, self.own_rng():
                    with self.autocast():
                        _, loss = self.step_model(x if single else x[rows], y if single else y[rows])
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

    def optimizer_step(
        self, optimizer: torch.optim.Optimizer, params: list[torch.nn.Parameter], grad_clip: float
    ) -> float:
        """Clip the gradients to ``grad_clip`` (0: no clipping) and step: the gradient norm before
        clipping. fp16's GradScaler unscales first and skips the step itself when the gradients
        overflowed; without a scaler a non-finite norm steps nothing (the trainer stops there). The
        gradients are zeroed after."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)
        grad_norm = float(torch.nn.utils.clip_grad_norm_(params, grad_clip if grad_clip > 0 else math.inf))
        if self.scaler is not None:
            self.scaler.step(optimizer)
            self.scaler.update()
        elif math.isfinite(grad_norm):
            optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return grad_norm

    def eval_loss(self, x: torch.Tensor, y: torch.Tensor) -> float:
        """This rank's share of the mean loss of a held-out global batch: the whole batch's mean with
        one process, else its shard's mean times n_rank / N (the caller sums over ranks)."""
        if self.world_size == 1:
            with self.autocast():
                _, loss = self.model(x, y)
            return float(loss)
        rows = shard(x.shape[0], self.rank, self.world_size)
        with self.autocast():
            _, loss = self.eval_model(x[rows], y[rows])
        return float(loss) * _shard_weights(y, [rows])[0]
