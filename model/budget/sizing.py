"""Sizing a model before it exists: bytes to load, train or inspect it, against what the machine has.

Every entry point that builds a :class:`~model.nn.gpt.GPT` (the command line's flags and ``--config``,
a checkpoint's ``config.json``, the GPT-2 and nanoGPT loaders, the app) calls :func:`check` on a
:class:`Need` first, so a config that cannot fit is refused in one line, in milliseconds, instead of
dying in the allocator minutes later. The figures come from the budget calculator
(:mod:`model.budget.arithmetic`), with ``N`` the parameter count:

* **load** (inference): ``N · s`` weights (``s`` bytes per value, 4 for float32) plus the file's
  copy of them while they are read (``N · s`` again), the fixed position tables (``T_max · d``) and
  the Python side of every block (:data:`BLOCK_OVERHEAD` bytes per layer).
* **load as stored** (a quantized file's matrices kept as its bytes, decoded one layer at a time):
  the stored bytes, the float32 tensors beside them and one decoded matrix (:func:`stored_load_need`).
* **train**: weights, gradients and AdamW's two moments, ``N ×`` 16 bytes in float32 (the
  precision modes of :data:`model.budget.arithmetic.PRECISIONS`), plus the activations of one batch
  (:func:`model.budget.arithmetic.activation_bytes`, ``B × T`` tokens).
* **inspect**: :func:`model.interp.plan.inspection_need` and
:func:`model.interp.plan.plan_file_export` (the
  trace, ``L·H·T²·s`` per square kind, the forward pass's own scores of one layer and the logits), checked
  here like the others.

What the machine has (:func:`available_memory`): ``MemAvailable`` of ``/proc/meminfo`` (or psutil
where installed), lowered by a cgroup memory limit or an address-space rlimit when one is set, plus
the memory this process's heap holds free for reuse (:func:`model.machine.held_free_bytes`); on a
CUDA device, the free device memory. A refusal names what the work would need, what the machine has
and which value to lower; ``override=True`` (``--no-size-check``, or the environment variable
:data:`OVERRIDE_ENV`) skips the refusal for people who know better.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model.budget.arithmetic import PRECISIONS, activation_bytes, human_bytes, parameters
from model.config import GPTConfig
from model.errors import AttentionLabError
from model.machine import held_free_bytes

__all__ = [
    "BLOCK_OVERHEAD",
    "OVERRIDE_ENV",
    "Available",
    "Fix",
    "ModelTooLarge",
    "Need",
    "available_memory",
    "check",
    "generation_need",
    "largest_knob",
    "load_need",
    "size_or_zero",
    "skip_init_on_meta",
    "stored_load_need",
    "training_need",
]

#: Set to 1 to skip every size refusal (the environment's form of ``--no-size-check``).
OVERRIDE_ENV = "ATTENTION_LAB_NO_SIZE_CHECK"

#: Bytes of Python objects, module bookkeeping and small tensors per Transformer block (measured:
#: about 70 KB per block of a tiny model); a config of 10**7 layers is refused on this alone.
BLOCK_OVERHEAD = 80 * 1024

#: Share of the available memory a plan may use (the rest is for the process, the GUI, the OS).
USABLE_SHARE = 0.8


class ModelTooLarge(AttentionLabError, ValueError):
    """The work would need more memory than the machine has; the message is one line with the numbers.

    ``fixes``: the values of the work (a batch size, a sequence length) each of which, lowered alone
    to its ``to``, makes it fit; empty when only a smaller model would (``need.lower`` names it). The
    message says them in the command line's words; the app words them its own way from these fields."""

    def __init__(self, need: Need, available: Available, usable: int):
        self.need = need
        self.available = available
        self.usable = usable
        self.fixes = need.fixes(usable)
        share = f", of which {human_bytes(usable)} may be used" if need.total <= available.bytes else ""
        super().__init__(
            f"{need.what} needs about {human_bytes(need.total)} ({need.describe_parts()}) but this machine "
            f"has {human_bytes(available.bytes)} available ({available.source}{share}): lower "
            f"{need.to_lower(usable)}, or pass --no-size-check if you know better"
        )


@dataclass(frozen=True)
class Fix:
    """A value of the work to lower: ``field`` (the setting's name, e.g. ``seq_len``), its ``value``
    now, and ``to``, the largest value that fits with everything else as it is."""

    field: str
    value: int
    to: int

    def flag(self) -> str:
        """In the command line's words: ``--seq-len 8192 to 512 or less``."""
        return f"--{self.field.replace('_', '-')} {self.value} to {self.to:,} or less"


@dataclass(frozen=True)
class Need:
    """Bytes some work needs, by part, and the value to lower when it does not fit."""

    what: str
    parts: dict[str, int]
    lower: str
    #: ``usable bytes -> the work's own values that would each make it fit alone`` (training: the
    #: sequence length and the batch), most effective first; None: only ``lower`` (the model) helps
    fit: Callable[[int], list[Fix]] | None = None

    @property
    def total(self) -> int:
        return int(sum(self.parts.values()))

    def fixes(self, usable: int) -> list[Fix]:
        return self.fit(usable) if self.fit is not None else []

    def to_lower(self, usable: int) -> str:
        """The value(s) to name in a refusal, given ``usable`` bytes."""
        fixes = self.fixes(usable)[:2]
        if not fixes:
            return self.lower
        return fixes[0].flag() + (f" (or {fixes[1].flag()})" if len(fixes) > 1 else "")

    def describe_parts(self) -> str:
        shown = [(k, v) for k, v in self.parts.items() if v > 0]
        shown.sort(key=lambda kv: -kv[1])
        return ", ".join(f"{k} {human_bytes(v)}" for k, v in shown[:3])


@dataclass(frozen=True)
class Available:
    """Bytes the machine can give this process now, and where the figure came from."""

    bytes: int
    source: str


# ---------------------------------------------------------------------------------------------
# what the machine has
# ---------------------------------------------------------------------------------------------
def _meminfo_available() -> int | None:
    try:
        import psutil  # optional: used where installed

        return int(psutil.virtual_memory().available)
    except Exception:  # not installed, or no answer: read /proc
        pass
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def _cgroup_room() -> int | None:
    """Bytes left under this process's cgroup memory limit (v2, then v1), None without a limit."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        rel = parts[2].lstrip("/")
        if parts[1] == "":  # v2
            base = Path("/sys/fs/cgroup") / rel
            limit, used = _read_int(str(base / "memory.max")), _read_int(str(base / "memory.current"))
        elif "memory" in parts[1].split(","):
            base = Path("/sys/fs/cgroup/memory") / rel
            limit = _read_int(str(base / "memory.limit_in_bytes"))
            used = _read_int(str(base / "memory.usage_in_bytes"))
        else:
            continue
        if limit is not None and used is not None and limit < 1 << 60:
            return max(0, limit - used)
    return None


def _rlimit_room() -> int | None:
    """Bytes left under an address-space limit (``ulimit -v``), None without one."""
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError):
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmSize:"):
                return max(0, soft - int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    return soft


def available_memory(device: Any = "cpu") -> Available:
    """What this process can still allocate on ``device`` (see the module docstring)."""
    dev = str(device)
    if dev.startswith("cuda"):
        try:
            import torch  # here only: sizing answers before torch is imported (budget, a refused inspect)

            free, _total = torch.cuda.mem_get_info(torch.device(dev))
            return Available(int(free), f"free memory of {dev}")
        except Exception:  # no CUDA after all: fall back to host memory
            pass
    candidates = []
    mem = _meminfo_available()
    if mem is not None:
        candidates.append((mem, "MemAvailable"))
    room = _cgroup_room()
    if room is not None:
        candidates.append((room, "left under the cgroup memory limit"))
    room = _rlimit_room()
    if room is not None:
        candidates.append((room, "left under the address-space limit"))
    if not candidates:
        return Available(1 << 62, "unknown")
    amount, source = min(candidates)
    kept = held_free_bytes()  # freed memory this process keeps for reuse (machine.keep_freed_memory)
    if kept >= 1 << 20:
        return Available(int(amount) + kept, f"{source}, and {human_bytes(kept)} this process holds free")
    return Available(int(amount), source)


def _overridden(override: bool) -> bool:
    return override or os.environ.get(OVERRIDE_ENV, "").strip() not in ("", "0")


def usable_bytes(device: Any = "cpu") -> int:
    """:data:`USABLE_SHARE` of the memory left on ``device``: the budget of work sized to fit (no limit
    when the size check is off)."""
    return 1 << 62 if _overridden(False) else int(available_memory(device).bytes * USABLE_SHARE)


def check(
    need: Need, *, device: Any = "cpu", available: Available | None = None, override: bool = False
) -> None:
    """Raise :class:`ModelTooLarge` unless ``need`` fits in :data:`USABLE_SHARE` of the memory left."""
    if _overridden(override):
        return
    have = available if available is not None else available_memory(device)
    usable = int(have.bytes * USABLE_SHARE)
    if need.total > usable:
        raise ModelTooLarge(need, have, usable)


# ---------------------------------------------------------------------------------------------
# what the work needs
# ---------------------------------------------------------------------------------------------
def size_or_zero(v: Any) -> int:
    """``v`` when it is a whole number above 0, else 0: a size of a config read before it is validated."""
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else 0


def largest_knob(cfg: GPTConfig) -> str:
    """The config value whose lowering shrinks the parameters most, e.g. ``"d_model=8192"``."""
    L, d, C, V = (
        size_or_zero(v)
        for v in (cfg.core.n_layers, cfg.core.d_model, cfg.core.context_length, cfg.core.vocab_size)
    )
    dff, dk, h = (size_or_zero(v) for v in (cfg.hidden, cfg.d_head, cfg.attention.n_heads))
    shares = {
        "context_length": C * d if cfg.positional.positions == "learned" else C * max(d, dk),
        "vocab_size": V * d * (1 if cfg.core.tie_embeddings else 2),
        "d_ff": L * 3 * d * dff if cfg.feed_forward.d_ff is not None else 0,
        "head_dim": L * 4 * h * dk * d if cfg.attention.head_dim is not None else 0,
        "n_layers": L * BLOCK_OVERHEAD // 4 if L > 64 else 0,
    }
    per_layer = L * (4 * d * d + 3 * d * (dff if cfg.feed_forward.d_ff is None else 0))
    shares["d_model"] = per_layer + (V * d if not shares["vocab_size"] else 0)
    name = max(shares, key=lambda k: shares[k])
    if name == "d_model" and (L > 256 or (L > 48 and d <= 1024)):  # deeper than any published model
        name = "n_layers"
    return f"{name}={cfg.get(name)}"


def _param_count(cfg: GPTConfig) -> int:
    return int(parameters(cfg).total) if cfg.core.vocab_size is not None else 0


def _fixed_tables(cfg: GPTConfig) -> int:
    """Float32 bytes of the non-parameter position tables (sinusoidal [T_max, d], rope cos+sin)."""
    if cfg.positional.positions == "sinusoidal":
        return 4 * size_or_zero(cfg.core.context_length) * size_or_zero(cfg.core.d_model)
    if cfg.positional.positions == "rope":
        return 4 * size_or_zero(cfg.core.context_length) * size_or_zero(cfg.d_head)
    return 0


def load_need(
    cfg: GPTConfig,
    *,
    bytes_per_value: int = 4,
    copies: int = 2,
    what: str = "",
    held: tuple[int, int] | None = None,
) -> Need:
    """Bytes to hold the model for inference: weights (``copies``: the file's and the model's) of
    ``cfg``'s parameters and blocks, or of ``held`` = (values, blocks) when given, what a file of
    exactly the model's parameters holds: a config that lies about its size then sizes nothing the file
    does not hold, and is named by the checks that follow."""
    n, blocks = (_param_count(cfg), size_or_zero(cfg.core.n_layers)) if held is None else held
    parts = {
        "weights": n * bytes_per_value,
        "their copy being read": n * bytes_per_value * (copies - 1),
        "position tables": _fixed_tables(cfg),
        "blocks' bookkeeping": blocks * BLOCK_OVERHEAD,
    }
    return Need(what or f"a model of {n:,} parameters", parts, largest_knob(cfg))


def stored_load_need(
    cfg: GPTConfig, *, stored_bytes: int, float_values: int, working_bytes: int, what: str = ""
) -> Need:
    """Bytes to hold a model whose matrices stay as its file stores them (quantized, mapped: they
    count once touched): ``stored_bytes``, the float32 tensors beside them (``4 · float_values``),
    ``working_bytes`` (one matrix decoded to float32 while a layer uses it), the position tables and
    the blocks' bookkeeping. A refusal asks for a smaller or more quantized file."""
    parts = {
        "weights as stored": stored_bytes,
        "float32 tensors": 4 * float_values,
        "one layer decoded": working_bytes,
        "position tables": _fixed_tables(cfg),
        "blocks' bookkeeping": size_or_zero(cfg.core.n_layers) * BLOCK_OVERHEAD,
    }
    n = _param_count(cfg)
    return Need(what or f"a model of {n:,} parameters", parts, "the model (a smaller or more quantized file)")


def training_need(
    cfg: GPTConfig, *, batch: int, seq_len: int, precision: str = "fp32", what: str = ""
) -> Need:
    """Bytes to train ``cfg`` with AdamW on batches of ``batch × seq_len`` tokens (one device).

    When it does not fit, the refusal names the sequence length and the batch each lowered alone to
    the largest value that fits (the sequence length to a power of two), the one that shrinks least
    first; when even one token a step does not fit, the model's own largest value."""
    pr = PRECISIONS[precision]
    n = _param_count(cfg)
    b, t = max(1, size_or_zero(batch)), max(1, size_or_zero(seq_len))
    act = activation_bytes(cfg, t, b, pr.activations) if n else 0
    parts = {
        "weights": n * (pr.weights + pr.master_weights),
        "gradients": n * pr.gradients,
        "AdamW state": n * pr.optimizer,
        f"activations of {b} × {t} tokens": act,
        "position tables": _fixed_tables(cfg),
        "blocks' bookkeeping": size_or_zero(cfg.core.n_layers) * BLOCK_OVERHEAD,
    }
    fixed = sum(parts.values()) - act

    def fit(usable: int) -> list[Fix]:
        def fits(batch_: int, seq_: int) -> bool:
            return fixed + activation_bytes(cfg, seq_, batch_, pr.activations) <= usable

        if not n or not fits(1, 1):
            return []
        found = []
        seq_to = 1 << (t.bit_length() - 1)  # the largest power of two that fits, from t down
        while seq_to > 1 and (seq_to >= t or not fits(b, seq_to)):
            seq_to //= 2
        if seq_to < t and fits(b, seq_to):
            found.append(Fix("seq_len", t, seq_to))
        lo, hi = 0, b - 1  # the largest batch below b that fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid, t) else (lo, mid - 1)
        if lo >= 1:
            found.append(Fix("batch_size", b, lo))
        return sorted(found, key=lambda f: f.value / f.to)

    return Need(what or f"training {n:,} parameters", parts, largest_knob(cfg), fit)


def generation_need(cfg: GPTConfig, context: int, *, batch: int = 1, bytes_per_value: int = 4) -> Need:
    """Bytes of the key/value cache generation allocates: ``2·L·B·h_kv·T·d_k`` values for ``context``
    positions (:func:`model.budget.arithmetic.kv_cache`), and the logits of one step."""
    T, B = max(1, size_or_zero(context)), max(1, size_or_zero(batch))
    values = (
        2 * size_or_zero(cfg.core.n_layers) * size_or_zero(cfg.kv_heads) * size_or_zero(cfg.d_head) * T * B
    )
    parts = {"key/value cache": values * bytes_per_value, "logits": 4 * B * size_or_zero(cfg.core.vocab_size)}
    return Need(
        f"generating with a key/value cache of {T:,} positions",
        parts,
        f"context_length={cfg.core.context_length} (or pass --no-cache)",
    )


def skip_init_on_meta():
    """A context in which ``torch.nn.init`` functions do nothing to meta tensors (they would be
    overwritten anyway), because ``normal_``'s meta kernel imports ``torch._dynamo``: ~1.5 s on the first
    model a process builds on the meta device (to learn its shapes, or to assign loaded tensors)."""
    from torch.overrides import TorchFunctionMode  # here only: this module must not import torch

    class _SkipInitOnMeta(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if getattr(func, "__module__", None) == "torch.nn.init":
                tensor = args[0] if args else kwargs.get("tensor")
                if getattr(tensor, "is_meta", False):
                    return tensor
            return func(*args, **kwargs)

    return _SkipInitOnMeta()
