"""Where and how torch computes: the shared compute lock, device choice, CPU threads.

* :data:`compute_lock` -- one process-wide re-entrant lock. Every torch computation on the shared
  CPU takes it: a training step, a probe or inspection trace, one generation step. Two torch
  computations running at once on a 2-core machine each fall from hundreds to a handful of steps per
  second, so an inspection waits for the current training step instead of racing it. It is held
  for one step at a time, never for a whole training run.
* :func:`pick_device` -- ``"auto"`` is CUDA when available, else Apple's MPS, else the CPU; a named
  device that is not there raises :class:`DeviceError` with one clear line.
* :func:`set_threads` -- ``torch.set_num_threads`` with a sensible default. Called inside a worker
  thread it sets that thread's intra-op thread count (OpenMP keeps the setting per calling thread),
  so set it in the thread that computes.
* :func:`lower_thread_priority` -- a training thread yields the CPU to the GUI thread first (Linux).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Iterator

import torch

from model.errors import AttentionLabError
from model.machine import available_cores

__all__ = [
    "WORKER_NICE",
    "DeviceError",
    "available_cores",
    "compute_lock",
    "lower_thread_priority",
    "pick_device",
    "set_threads",
    "threads",
    "with_threads",
]


def _inductor_cache_dir() -> str | None:
    """torch's default compiler-cache folder (``<tmp>/torchinductor_<user>``), which merely building an
    optimizer creates, empty; None when the user chose one (``TORCHINDUCTOR_CACHE_DIR``)."""
    if os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return None
    import getpass
    import re
    import tempfile

    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        user = f"uid_{os.getuid()}" if hasattr(os, "getuid") else "unknown_user"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def remove_empty_cache_dir(path: str | None) -> None:
    """Remove ``path`` if it is an empty folder (a left-over of torch's start-up; nothing is lost)."""
    if path:
        with contextlib.suppress(OSError):
            os.rmdir(path)  # fails, harmlessly, unless the folder is empty


atexit.register(remove_empty_cache_dir, _inductor_cache_dir())

#: The process-wide lock around every torch computation on the shared CPU (re-entrant).
compute_lock = threading.RLock()


class DeviceError(AttentionLabError, ValueError):
    """A device was asked for that this machine does not have (or the name is not a device)."""


def pick_device(name: str | torch.device | None = "auto") -> torch.device:
    """``"auto"`` (or None) → ``cuda`` if available, else ``mps`` if available, else ``cpu``.

    Explicit names (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ``"mps"``) are checked: asking for a device
    that is not present raises :class:`DeviceError` saying which devices are.
    """
    if isinstance(name, torch.device):
        name = str(name)
    if name is None or name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise DeviceError(f"device {name!r} is not a device name: use auto, cpu, cuda or cuda:N") from None
    if dev.type == "cpu":
        return dev
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise DeviceError(
                f"device {name!r} was asked for but CUDA is not available here: use cpu or auto"
            )
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise DeviceError(
                f"device {name!r} does not exist: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
        return dev
    if dev.type == "mps":
        mps = getattr(torch.backends, "mps", None)
        if mps is None or not mps.is_available():
            raise DeviceError(f"device {name!r} was asked for but MPS is not available here: use cpu or auto")
        return dev
    raise DeviceError(f"device {name!r} is not supported: use auto, cpu, cuda or mps")


def with_threads(n: int | None, fn):
    """``fn`` wrapped to run at ``n`` torch threads in the calling (worker) thread (:func:`threads`)."""

    def run():
        with threads(n):
            return fn()

    return run


def set_threads(n: int | None = None) -> int:
    """Set torch's intra-op thread count for the calling thread; returns the previous count.

    ``n`` None or 0 → every core available to the process (:func:`available_cores`); negative ``n``
    → that many cores fewer (at least 1). Call it in the thread that will compute: inside a worker
    thread the setting applies to that thread.
    """
    previous = torch.get_num_threads()
    cores = available_cores()
    if n is None or n == 0:
        want = cores
    elif n < 0:
        want = max(1, cores + n)
    else:
        want = int(n)
    if want != previous:
        torch.set_num_threads(want)
    return previous


@contextlib.contextmanager
def threads(n: int | None) -> Iterator[int]:
    """``with threads(1): ...`` runs the block at ``n`` threads and restores the count afterwards."""
    previous = set_threads(n)
    try:
        yield torch.get_num_threads()
    finally:
        torch.set_num_threads(previous)


#: Niceness added to the training thread (Linux): the GUI thread then wins a core the moment it
#: wakes instead of waiting behind torch's busy threads; measured on 2 loaded cores, the p99
#: event-loop delay halved with no loss of training throughput (the GUI sleeps almost always).
WORKER_NICE = 5


def lower_thread_priority(nice: int = WORKER_NICE) -> bool:
    """Raise the calling thread's niceness by ``nice`` (threads torch starts from it inherit it)."""
    if not nice or not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return False
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + nice)
        return True
    except (OSError, AttributeError):
        return False
