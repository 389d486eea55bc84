"""TrainerGroup: train several model variants fairly, side by side.

Every variant gets its own :class:`~model.train.trainer.Trainer` over the same data source with the same
:class:`~model.train.settings.TrainSettings` — in particular the same ``seed``, so each sees the same batches
in the same order — and the group steps them round-robin (one step each in turn). Comparisons
such as "the same model with and without the causal mask", Pre-LN vs Post-LN or MHA vs GQA then
differ only in the one field that was changed.

A variant whose loss diverges (:class:`~model.train.trainer.TrainingDiverged`) is dropped: ``iter_steps``
yields one :class:`VariantEvent` with ``diverged`` set for it, keeps it in :attr:`TrainerGroup.diverged`
(its weights stay those of its last good step) and goes on with the others.

One :class:`~model.train.control.RunControl`, ``group.control``, pauses and stops the group between
two steps; every variant's trainer shares it, so a stop also cuts a variant's validation short.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from model.budget import arithmetic as budget
from model.config import ConfigError, GPTConfig
from model.train.control import RunControl
from model.train.settings import TrainEvent, TrainSettings
from model.train.trainer import Trainer, TrainingDiverged

if TYPE_CHECKING:
    from model.text.datasource import DataSource


@dataclass
class VariantEvent:
    """One training step of one variant: its ``name`` and the trainer's event, or (``event`` None)
    the :class:`~model.train.trainer.TrainingDiverged` that dropped the variant."""

    name: str
    event: TrainEvent | None  # None when the variant diverged
    diverged: Exception | None = None


def variant_configs(base: GPTConfig, changes: dict[str, dict[str, Any]]) -> dict[str, GPTConfig]:
    """``{"name": {field: value}}`` → validated configs "the same as ``base`` but ...".

    Raises :class:`~model.config.ConfigError` naming the variant whose change is invalid.
    """
    out: dict[str, GPTConfig] = {}
    problems: list[str] = []
    for name, change in changes.items():
        unknown = sorted(set(change) - set(GPTConfig.field_names()))
        if unknown:
            problems.append(f"variant {name!r}: unknown option(s) {', '.join(unknown)}")
            continue
        cfg = base.replace(**change)
        problems += [f"variant {name!r}: {p}" for p in cfg.problems()]
        out[name] = cfg
    if problems:
        raise ConfigError(problems)
    return out


class TrainerGroup:
    """Round-robin training of ``{name: GPTConfig}`` on one source with one set of settings.

    ``control``: the group's :class:`~model.train.control.RunControl` (default: a fresh one), shared by
    every variant's trainer.
    """

    def __init__(
        self,
        variants: dict[str, GPTConfig],
        source: DataSource,
        settings: TrainSettings | None = None,
        *,
        control: RunControl | None = None,
    ):
        if not variants:
            raise ValueError("a comparison needs at least one variant")
        settings = settings or TrainSettings()
        self.settings = settings
        self.source = source
        self.control = control if control is not None else RunControl()
        self.trainers: dict[str, Trainer] = {
            name: Trainer(cfg, source, settings, control=self.control) for name, cfg in variants.items()
        }
        #: variants dropped because their loss diverged: name → TrainingDiverged
        self.diverged: dict[str, Exception] = {}

    @property
    def names(self) -> list[str]:
        return list(self.trainers)

    @property
    def active(self) -> list[str]:
        """The variants still training (not dropped for a diverged loss)."""
        return [n for n in self.trainers if n not in self.diverged]

    @property
    def step(self) -> int:
        """Steps every active variant has completed (all of them once every variant diverged)."""
        trainers = [self.trainers[n] for n in self.active] or list(self.trainers.values())
        return min(t.step for t in trainers)

    def _step(self, name: str) -> VariantEvent:
        try:
            return VariantEvent(name, self.trainers[name].train_step())
        except TrainingDiverged as exc:
            self.diverged[name] = exc
            return VariantEvent(name, None, diverged=exc)

    def iter_steps(self, steps: int | None = None) -> Iterator[VariantEvent]:
        """Yield each active variant's event, round-robin, until ``steps`` (default: settings.steps),
        stop, or every variant diverged; pause and stop take effect between two steps."""
        target = steps if steps is not None else self.settings.steps
        while self.active and self.step < target:
            for name in self.active:
                if not self.control.gate():
                    return
                if self.trainers[name].step < target:
                    yield self._step(name)

    def run(
        self, steps: int | None = None, callback: Callable[[VariantEvent], Any] | None = None
    ) -> list[VariantEvent]:
        events = []
        for ev in self.iter_steps(steps):  # a diverged variant's event included (ev.diverged)
            events.append(ev)
            if callback is not None:
                callback(ev)
        return events

    def summary(self, *, context: int | None = None) -> list[dict[str, Any]]:
        """One row per variant: final train/val loss, tokens/s, parameters, FLOPs and KV cache per token.

        FLOPs per token: the budget calculator's forward figure (2·N_mm plus attention scores) at
        ``context`` (default: the trainer's sequence length); KV cache per token:
        ``2·L·n_kv_heads·head_dim`` values in fp32.
        """
        rows = []
        for name, t in self.trainers.items():
            hist = t.history
            last_val = next((h["val_loss"] for h in reversed(hist) if h.get("val_loss") is not None), None)
            T = context or t.seq_len
            cfg = t.config
            rows.append(
                {
                    "name": name,
                    "steps": t.step,
                    "train_loss": hist[-1]["train_loss"] if hist else None,
                    "val_loss": last_val,
                    "tokens_per_s": hist[-1]["tokens_per_s"] if hist else None,
                    "params": budget.parameters(cfg).total,
                    "flops_per_token": budget.flops(cfg, T).forward_total_per_token,
                    "kv_cache_bytes_per_token": budget.kv_cache(cfg, 1, 1, 4).bytes,
                }
            )
        return rows
