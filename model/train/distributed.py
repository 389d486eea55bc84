"""Data-parallel training with PyTorch's own engine: ``torch.distributed`` + DistributedDataParallel.

Nothing here launches processes or exchanges gradients by hand: ``torchrun`` (or any launcher that
sets ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``) starts one process
per device, :func:`init` joins them into a process group (NCCL on CUDA, gloo on the CPU) and
:func:`wrap` hands the model to :class:`~torch.nn.parallel.DistributedDataParallel`, which averages
the gradients during ``backward``.

Semantics (what :class:`~model.train.trainer.Trainer` does with a :class:`DistContext`):

* ``batch_size`` is the *global* batch B. Every rank draws the same global batch [B, T] from the
  trainer's seeded generator and keeps its own contiguous rows ``shard(B, rank, W)`` -- disjoint,
  deterministic, and the same data a single process sees, so 1 process and W processes reach the
  same weights (up to float summation order).
* With gradient accumulation K each rank splits its B/W rows into K micro-batches; B must be a
  multiple of W·K. Micro-batch i of rank r contributes ``mean_i · n_i / N`` to the loss, with n_i
  its target tokens and N those of the whole global batch, times W because DDP averages over ranks:
  the gradient is exactly that of the global mean loss.
* Collectives time out after ``timeout_s`` seconds, so a rank that dies or hangs makes the others
  raise (and the command exit non-zero) instead of waiting forever.
"""

from __future__ import annotations

import contextlib
import datetime
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from model.errors import AttentionLabError, first_line
from model.runtime import pick_device

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DistContext",
    "DistributedError",
    "all_reduce_sum",
    "close",
    "env_world",
    "init",
    "shard",
    "wrap",
]

#: Seconds a collective waits for the other ranks before raising.
DEFAULT_TIMEOUT_S = 300.0


class DistributedError(AttentionLabError, RuntimeError):
    """The process group could not be formed, or a collective failed (a rank died or timed out)."""


@dataclass(frozen=True)
class DistContext:
    """Where this process sits in a data-parallel run (one process: rank 0 of 1, no group)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None
    device: torch.device | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def active(self) -> bool:
        """True when a process group joins two or more processes."""
        return self.backend is not None and self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one process that logs, probes and writes checkpoints."""
        return self.rank == 0


def env_world() -> tuple[int, int, int] | None:
    """``(rank, world_size, local_rank)`` from a launcher's environment; None outside one."""
    if "WORLD_SIZE" not in os.environ and "RANK" not in os.environ:
        return None
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError:
        raise DistributedError("RANK, WORLD_SIZE and LOCAL_RANK must be whole numbers") from None
    if world < 1 or not 0 <= rank < world:
        raise DistributedError(f"RANK={rank} does not fit WORLD_SIZE={world}")
    return rank, world, local


def _device_for(name: str, local_rank: int) -> torch.device:
    """The device of this rank: ``auto``/``cuda`` → ``cuda:LOCAL_RANK`` when CUDA is there, else CPU."""
    if name in ("auto", "cuda") and torch.cuda.is_available():
        if local_rank >= torch.cuda.device_count():
            raise DistributedError(
                f"LOCAL_RANK={local_rank} but this machine has {torch.cuda.device_count()} CUDA device(s): "
                "start at most one process per GPU (--nproc_per_node)"
            )
        return torch.device("cuda", local_rank)
    return pick_device(name)


def init(device: str = "auto", timeout_s: float = DEFAULT_TIMEOUT_S) -> DistContext:
    """Join the process group a launcher described in the environment (a no-op outside one).

    Returns the context with this rank's device: ``cuda:LOCAL_RANK`` with NCCL on a GPU machine, the
    CPU with gloo otherwise. A world of one forms no group.
    """
    found = env_world()
    if found is None or found[1] == 1:
        return DistContext(device=pick_device(device), timeout_s=timeout_s)
    rank, world, local = found
    dev = _device_for(device, local)
    if dev.type == "mps":
        raise DistributedError("data-parallel training runs on CUDA or the CPU, not on MPS")
    backend = "nccl" if dev.type == "cuda" else "gloo"
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    try:
        dist.init_process_group(
            backend=backend,
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    except Exception as exc:  # the rendezvous failed in one of many ways
        raise DistributedError(f"could not join the process group ({backend}): {exc}") from None
    return DistContext(rank, world, local, backend, dev, timeout_s)


def close(ctx: DistContext, *, together: bool = False) -> None:
    """Leave the process group (safe to call when none was formed). ``together``: after a run that
    finished on every rank, meet at a barrier first, so that no rank tears down gloo's connections
    while another still uses them (a rank that left early could abort its peer at exit with
    "terminate called without an active exception"). Not after a failure: a dead peer would make
    the barrier wait for the whole timeout."""
    if ctx.active and dist.is_initialized():
        if together:
            with contextlib.suppress(Exception):  # a peer gone at the very end: leave anyway
                dist.barrier()
        dist.destroy_process_group()


def shard(n_rows: int, rank: int, world_size: int) -> slice:
    """Rows ``[rank·n/W, (rank+1)·n/W)`` of a global batch of ``n_rows`` (a multiple of W)."""
    per = n_rows // world_size
    return slice(rank * per, (rank + 1) * per)


def wrap(model: torch.nn.Module, ctx: DistContext) -> torch.nn.Module:
    """``model`` in DistributedDataParallel when ``ctx`` is active, unchanged otherwise."""
    if not ctx.active:
        return model
    ids = [ctx.device.index] if ctx.device is not None and ctx.device.type == "cuda" else None
    return DistributedDataParallel(model, device_ids=ids)


def all_reduce_sum(values: list[float], ctx: DistContext) -> list[float]:
    """The sum over ranks of each of ``values`` (float64; unchanged without a group)."""
    if not ctx.active:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=ctx.device)
    try:
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    except Exception as exc:  # gloo/NCCL raise several types for a lost peer
        raise lost_rank(ctx, exc) from None
    return [float(v) for v in t.cpu().tolist()]


def lost_rank(ctx: DistContext, exc: BaseException) -> DistributedError:
    """The one-line error for a collective that failed: another rank died or stopped answering."""
    first = first_line(exc)
    return DistributedError(
        f"rank {ctx.rank} of {ctx.world_size}: another rank died or did not answer within "
        f"{ctx.timeout_s:g} s ({first[:160]})"
    )
