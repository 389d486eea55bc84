"""What a training run is given and what it reports: :class:`TrainSettings` and :class:`TrainEvent`.

:class:`TrainSettings` says how to train (not what): the optimiser, the schedule (:func:`lr_at`),
batches, evaluation and device; :meth:`TrainSettings.problems_for` is the one check of whether a run
of a model on some data may start. :class:`TrainEvent` is what one step reports; :func:`eta_seconds`
reads the pace from a run's events. Plain Python: nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from model.config import ConfigError, GPTConfig

if TYPE_CHECKING:
    from model.interp.trace import Trace
    from model.text.datasource import DataSource

__all__ = [
    "ON_CONTINUE",
    "TrainEvent",
    "TrainSettings",
    "continued",
    "data_seq_limit",
    "eta_seconds",
    "fit_vocab",
    "lr_at",
]

#: What the learning rate does when a run is continued past the end its schedule was made for:
#: ``continue`` goes on from the rate it has, down the cosine to the floor over the new steps;
#: ``stretch`` recomputes the one schedule over the new total (the rate jumps to the value the longer
#: cosine has at this step); ``restart`` warms up to the peak again and decays over the new steps.
ON_CONTINUE = ("continue", "stretch", "restart")


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
    #: what the schedule does when a run is continued with more steps (:data:`ON_CONTINUE`)
    on_continue: str = "continue"
    #: the step where the schedule's current stretch began (0: the run's first; set by :func:`continued`)
    schedule_from: int = 0
    #: the rate that stretch starts from, without warm-up (None: warm up to ``lr`` from ``schedule_from``)
    schedule_peak: float | None = None

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
        whole("schedule_from", 0)
        if self.schedule_peak is not None:
            number("schedule_peak", 0.0, 10.0)
        if self.on_continue not in ON_CONTINUE:
            out.append(f"on_continue={self.on_continue!r} must be one of {', '.join(ON_CONTINUE)}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or not 0 <= self.threads:
            out.append(f"threads={self.threads!r} must be a whole number (0 = every core)")
        elif self.threads > MAX_THREADS:
            out.append(
                f"threads={self.threads} is more than any machine's cores: use at most {MAX_THREADS} "
                f"(this one has {os.cpu_count() or 1}; 0 = every core)"
            )
        if not isinstance(self.device, str):
            out.append(f"device={self.device!r} must be auto, cpu, cuda or cuda:N")
        out += [
            f"{name}={getattr(self, name)!r} must be true or false"
            for name in ("amp", "loss_mask")
            if not isinstance(getattr(self, name), bool)
        ]
        return out

    def validate(self) -> TrainSettings:
        problems = self.problems()
        if problems:
            raise ConfigError(problems)
        return self

    def problems_for(self, config: GPTConfig, source: DataSource | None = None) -> list[str]:
        """:meth:`problems`, then what these settings cannot do with this model and data: a
        ``seq_len`` longer than ``config.core.context_length``, or than the longest sequence ``source``
        yields (a synthetic task's fixed length). The one check of whether a run may start: the
        Training panel shows it inline, Start waits on it, and :class:`Trainer` raises it."""
        out = self.problems()
        T = self.seq_len
        if out:
            return out
        if T is None:
            return _too_short(config, source, None)
        if T > config.core.context_length:
            out.append(
                f"seq_len={T} is longer than the model's context_length={config.core.context_length}: "
                "lower seq_len or raise context_length"
            )
        limit = data_seq_limit(source)
        if limit is not None and T > limit:
            out.append(f"seq_len={T} is longer than the data allows ({limit} tokens); lower seq_len")
        return out + _too_short(config, source, T)

    def seq_len_for(self, config: GPTConfig, source: DataSource | None) -> int:
        """The sequence length a run of ``config`` on ``source`` trains: ``seq_len``, or (None) the
        context length, shortened to what the data yields. Raises :meth:`problems_for`'s problems."""
        problems = self.problems_for(config, source)
        if problems:
            raise ConfigError(problems)
        if self.seq_len is not None:
            return self.seq_len
        limit = data_seq_limit(source)
        return config.core.context_length if limit is None else min(config.core.context_length, limit)

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


def fit_vocab(config: GPTConfig, vocab: int) -> GPTConfig:
    """``config`` for a tokenizer of ``vocab`` tokens: its ``vocab_size`` when unset, validated; a
    :class:`~model.config.ConfigError` when it is below the tokenizer's (a larger one is a padded head)."""
    if config.core.vocab_size is None:
        config = config.with_vocab(vocab)
    config.validate()
    assert config.core.vocab_size is not None  # given, or the tokenizer's just above
    if config.core.vocab_size < vocab:
        raise ConfigError(
            [f"vocab_size={config.core.vocab_size} is below the tokenizer's {vocab} tokens: raise or omit it"]
        )
    return config


def _too_short(config: GPTConfig, source: DataSource | None, seq_len: int | None) -> list[str]:
    """The problem of windows (``seq_len``, or None: the context) too short for ``source``'s first
    scored target (:meth:`~model.text.datasource.DataSource.min_seq_len`): no batch could be scored."""
    need = getattr(source, "min_seq_len", lambda: 1)()
    T = seq_len if seq_len is not None else config.core.context_length
    if not isinstance(T, int) or not isinstance(need, int) or T >= need:
        return []
    name = getattr(source, "name", "the data")
    what = f"seq_len={T}" if seq_len is not None else f"context_length={T}"
    return [
        f"{what} is too short for {name}, whose first scored target is token {need}: raise seq_len "
        f"(and context_length) to at least {need}, or shorten its episodes"
    ]


def data_seq_limit(source: DataSource | None) -> int | None:
    """The longest sequence ``source`` yields for training and validation (None: no limit, or no
    source): a synthetic task's fixed length; a corpus has none."""
    if source is None:
        return None
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
    #: a mixture of experts' router load per MoE layer [E] (``model.nn.moe.router_loads``), or None
    router_load: list[list[float]] | None = None
    trace: Trace | None = field(default=None, repr=False, compare=False)

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
            **({"router_load": self.router_load} if self.router_load is not None else {}),
        }


def lr_at(step: int, settings: TrainSettings) -> float:
    """Learning rate for step index ``step`` (0-based): linear warmup, cosine to ``floor_lr``, then flat.

    From ``schedule_from`` = s₀ to ``steps`` = S (s₀ = 0 for a run as it was first made): warm-up over
    ``warmup`` = W steps, ``lr·(s − s₀ + 1)/W``, then ``floor + ½(peak − floor)(1 + cos(π·p))`` with
    ``p = (s − s₀ − W)/(S − s₀ − W)``, then ``floor``. A continued run's stretch (``schedule_peak`` set)
    has no warm-up and starts from that rate: the rate the run had reached."""
    peak, floor, warm, total = settings.lr, settings.floor_lr, settings.warmup, settings.steps
    start = settings.schedule_from
    if settings.schedule_peak is not None:
        peak, warm = settings.schedule_peak, 0
    local = step - start
    if local < warm:
        return peak * (local + 1) / warm
    if step >= total:
        return floor
    progress = (local - warm) / max(1, total - start - warm)
    return floor + 0.5 * (peak - floor) * (1.0 + math.cos(math.pi * progress))


def continued(old: TrainSettings, new: TrainSettings, step: int) -> TrainSettings:
    """The settings a run at ``step`` trains with when it is continued with ``new`` (the Training
    panel's) after training with ``old``: ``new``'s values, but the run's own seed, sequence length,
    device and threads; up to ``new.steps``, or ``new.steps`` more when the run is already there.
    When that moves the schedule's end, ``new.on_continue`` says what the rate does
    (:data:`ON_CONTINUE`); a run continued to the end it already had, or still warming up, keeps its
    schedule."""
    target = new.steps if step < new.steps else step + new.steps
    out = new.replace(
        seed=old.seed,
        seq_len=old.seq_len,
        device=old.device,
        threads=old.threads,
        steps=target,
        schedule_from=old.schedule_from,
        schedule_peak=old.schedule_peak,
    )
    if target == old.steps or new.on_continue == "stretch":
        return out
    if new.on_continue == "restart":
        return out.replace(schedule_from=step, schedule_peak=None)
    if old.schedule_peak is None and step - old.schedule_from < old.warmup:
        return out  # still warming up: a warm-up does not depend on the end, it goes on as it was
    return out.replace(schedule_from=step, schedule_peak=lr_at(step, old))


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
