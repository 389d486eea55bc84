"""How many torch threads an inspection runs on (:func:`pick_threads`): arithmetic on a config and the
machine's load, no torch."""

from __future__ import annotations

import os

from model.budget.arithmetic import parameters
from model.config import GPTConfig
from model.machine import available_cores

#: Below this many FLOPs a forward pass runs on one thread: thread start-up and barriers would cost
#: more than they save, and far more when other processes keep the cores busy.
SMALL_FLOPS = 1e9


def pick_threads(cfg: GPTConfig, T: int, *, training: bool = False) -> int | None:
    """Torch threads for an inspection: ``None`` (every core) only for big work on an idle CPU.

    One thread while training runs (the trainer's threads still hold the cores between steps), for
    small work (below :data:`SMALL_FLOPS`; work ≈ ``2 · params · T`` for the linear layers ``+ 4 · L
    · T² · d`` for scores and pattern × V), and when other processes already keep every core busy
    (1-minute load average ≥ cores − ½): there, threads wait on each other at every operation.
    Measured on 2 shared cores at load 12, a 12×12-head d=768 model at 256 tokens traced in 2.0 s
    on 1 thread and 8 s on 2.
    """
    if training:
        return 1
    flops = 2 * parameters(cfg).total * T + 4 * cfg.core.n_layers * T * T * cfg.core.d_model
    if flops < SMALL_FLOPS:
        return 1
    try:
        busy = os.getloadavg()[0] >= available_cores() - 0.5
    except (AttributeError, OSError):  # no load average on this platform
        busy = False
    return 1 if busy else None


__all__ = ["SMALL_FLOPS", "pick_threads"]
