"""Training: a :class:`Trainer` that a script, the command line or a GUI worker thread can drive.

One step (``Trainer.train_step``), with ``s`` the number of steps already taken::

    lr_s   = lr · (s+1)/warmup                                       (s < warmup: linear warmup)
           = min_lr + ½ (lr − min_lr) (1 + cos(π (s − warmup)/(steps − warmup)))   (cosine decay)
    x, y   = source batch [B, T] (targets the task does not determine are ignored: −100)
    loss   = mean cross-entropy of model(x) against y      (bf16/fp16 autocast on CUDA, fp32 on CPU)
    g      = ∇loss;  ‖g‖ clipped to grad_clip;  AdamW(β₁, β₂, weight_decay on matrices only)

Weight decay applies to every parameter with two or more dimensions (projection matrices and the
embedding tables, as GPT-2 and nanoGPT do), never to biases, norm gains or per-head scales: the
model's own :meth:`~model.nn.gpt.GPT.optimizer_groups`.

Events. Each step returns a :class:`~model.train.settings.TrainEvent` (losses, lr, grad norm,
tokens/s, ...); ``run`` loops steps and calls ``callback(event)`` after each. Validation loss is
measured every ``eval_every`` steps and at the last step, on the same ``eval_batches`` held-out
batches every time, so successive values are comparable.

Callbacks (minGPT style). ``Trainer(..., callbacks={"on_step_end": [fn, ...]})`` or
``add_callback("on_step_end", fn)``: ``fn(trainer, event)`` after every step, in the order given, in
the training thread, before ``train_step`` returns (their time counts in ``elapsed``, not in
``tokens_per_s``). A :class:`~model.train.probes.Prober`, given first, is how a run watches its
heads: with ``probe_every`` the event of every k-th step carries a :class:`~model.interp.trace.Trace`
of the probe prompt (attention weights in float16).

Threads. ``trainer.control`` (a :class:`~model.train.control.RunControl`) pauses, resumes and stops
``run`` from any thread, between steps (a paused ``run`` blocks on a condition variable, not a busy
loop); a loop that calls ``train_step`` itself gives the trainer its control (``control=``). A stop
also cuts a validation in progress short between two of its batches (one process only): that step's
event then has no ``val_loss``, so closing the window never waits for a whole validation of a large
model. Every step holds :data:`model.runtime.compute_lock` so inspection never competes with
training for the CPU.

Determinism. On the CPU, the same config, source, settings and seed give bit-identical weights.
Batches come from the trainer's own ``torch.Generator``; dropout uses the trainer's own copy of the
global RNG state. All of this is in the checkpoint (:mod:`model.train.state`), so N steps, save,
resume, M steps equals N + M steps straight.

Divergence. A non-finite loss or gradient norm raises :class:`TrainingDiverged` before the optimizer
touches the weights, so the model (and any checkpoint saved earlier) stays at the last good step.

How the steps run on the device (precision, ``torch.compile``, data parallel, micro-batches) is
:mod:`model.train.engine`; the settings and events are :mod:`model.train.settings`, the recipes per
data source :mod:`model.train.recipes`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from model.config import ConfigError, GPTConfig
from model.errors import AttentionLabError
from model.nn.generate import stream
from model.nn.gpt import GPT, init_model
from model.nn.moe import router_loads
from model.nn.quantized import dequantize_stored
from model.runtime import compute_lock, pick_device, set_threads
from model.text.datasource import DataSource
from model.train import state as train_state
from model.train.control import RunControl
from model.train.distributed import DistContext, all_reduce_sum
from model.train.engine import Engine, check_memory, check_options, make_optimizer
from model.train.settings import TrainEvent, TrainSettings, fit_vocab, lr_at

__all__ = ["CALLBACK_EVENTS", "EvaluationStopped", "Trainer", "TrainingDiverged"]

#: The moments a trainer calls its callbacks: ``on_step_end(trainer, event)`` after every step.
CALLBACK_EVENTS = ("on_step_end",)


class EvaluationStopped(RuntimeError):
    """A validation cut short by a stop of the trainer's ``control`` (between two of its batches)."""


class TrainingDiverged(AttentionLabError, RuntimeError):
    """The loss (or gradient) became NaN or infinite; the weights are those of the last good step."""

    def __init__(self, message: str, step: int, value: float):
        super().__init__(message)
        self.step = step
        self.value = value

    @classmethod
    def after(cls, done: int, what: str, value: float, lr: float) -> TrainingDiverged:
        """Step ``done`` + 1 diverged: its ``what`` became ``value`` at learning rate ``lr``."""
        return cls(
            f"training diverged at step {done + 1}: the {what} became {value} with learning rate {lr:.3g}; "
            f"the weights are those of step {done}. Lower the learning rate (e.g. lr={lr / 3:.2g}) "
            "or lengthen the warmup, then train again",
            step=done + 1,
            value=value,
        )


class Trainer:
    """Trains a :class:`~model.nn.gpt.GPT` on a data source (see the module docstring).

    ``config``: the model's shape; its ``vocab_size`` is taken from ``source.tokenizer`` when unset
    (a larger one is allowed: a padded head). ``model``: continue from these weights instead of a fresh
    seeded init. ``state``: a ``train_state`` dict from a checkpoint (optimizer moments, step, RNG
    states, history) to continue exactly. ``callbacks``: ``{moment: [fn, ...]}`` (moments:
    :data:`CALLBACK_EVENTS`). ``control``: the :class:`~model.train.control.RunControl` that pauses
    and stops :meth:`run` and cuts a validation short (default: a fresh one).

    How to run, not what to learn (the :class:`~model.train.engine.Engine` ``engine``): ``dist`` a
    :class:`~model.train.distributed.DistContext` (``batch_size`` is then the global batch);
    ``grad_accum`` K micro-batches per step (``batch_size`` a multiple of world_size·K); ``dtype``
    ``"auto"`` (the ``amp`` setting), ``"bf16"``, ``"fp16"`` or ``"fp32"``; ``compile``:
    ``torch.compile`` for the training steps. On CUDA AdamW is fused; ``engine.notes`` names what is off.
    """

    def __init__(
        self,
        config: GPTConfig,
        source: DataSource,
        settings: TrainSettings | None = None,
        *,
        model: GPT | None = None,
        state: dict[str, Any] | None = None,
        callbacks: dict[str, list[Callable[..., Any]]] | None = None,
        control: RunControl | None = None,
        dist: DistContext | None = None,
        grad_accum: int = 1,
        dtype: str = "auto",
        compile: bool = False,
    ):
        settings = (settings or TrainSettings()).validate()
        self._settings = settings
        self.source = source
        self.tokenizer = source.tokenizer
        self.config = config = fit_vocab(config, self.tokenizer.vocab_size)
        self.seq_len = settings.seq_len_for(config, source)
        self.dist = dist if dist is not None else DistContext()
        self.world_size = self.dist.world_size if self.dist.active else 1
        self.rank = self.dist.rank if self.dist.active else 0
        check_options(settings.batch_size, self.world_size, grad_accum, dtype)
        device = self.dist.device if self.dist.active else pick_device(settings.device)
        assert device is not None, "an active DistContext holds its rank's device (distributed.init sets it)"
        self.device: torch.device = device
        # before anything is built: one line naming what to lower
        check_memory(config, settings, self.seq_len, self.world_size * grad_accum, dtype, self.device)

        if model is None:
            with compute_lock:  # init_model seeds the global RNG: no other torch work may draw from it
                model = init_model(config, seed=settings.seed)
        elif model.config.to_dict() != config.to_dict():
            raise ConfigError(["the model given does not have the config given"])
        else:  # training updates float weights: matrices kept as stored (a GGUF's) are decoded once, in place
            dequantize_stored(model)
        self.model = model.to(self.device)
        self.model.train()
        groups = self.model.optimizer_groups(settings.weight_decay)
        #: the parameters' names by optimizer group (decayed, not decayed), and the parameters in that order
        self.param_names: list[list[str]] = [group["names"] for group in groups]
        self.params: list[torch.nn.Parameter] = [p for group in groups for p in group["params"]]
        self.optimizer = make_optimizer(groups, settings, self.device)
        self.engine = Engine(
            self.model,
            self.device,
            self.dist,
            amp=settings.amp,
            seed=settings.seed,
            grad_accum=grad_accum,
            dtype=dtype,
            compile=compile,
        )

        self.step = 0
        self.history: list[dict[str, Any]] = []
        self.elapsed = 0.0
        self.tokens_seen = 0
        self.batch_gen = torch.Generator().manual_seed(settings.seed)
        self._recent: deque[tuple[int, float]] = deque(maxlen=20)
        self._threads_for: int | None = None
        self.control = control if control is not None else RunControl()
        self._callbacks: dict[str, list[Callable[..., Any]]] = {on: [] for on in CALLBACK_EVENTS}
        for onevent, fns in (callbacks or {}).items():
            self._callbacks[onevent].extend(fns)  # an unknown moment: KeyError, as in add_callback
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
        seq_len = value.seq_len_for(self.config, self.source)
        with compute_lock:
            self._settings = value
            self.seq_len = seq_len
            self._threads_for = None
            for i, group in enumerate(self.optimizer.param_groups):  # group 0 decays (optimizer_groups)
                group["betas"] = (value.beta1, value.beta2)
                group["weight_decay"] = value.weight_decay if i == 0 else 0.0

    def apply_threads(self) -> None:
        """Set the CPU thread count (``settings.threads``) in the calling thread, once per thread:
        every computation on the trainer's model calls it first."""
        ident = threading.get_ident()
        if self._threads_for != ident:
            if self.device.type == "cpu":
                set_threads(self.settings.threads)
            self._threads_for = ident

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

    # ---- training ----------------------------------------------------------------------------
    def _batch(self, split: str, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
        B, T = self.settings.batch_size, self.seq_len
        if self.settings.loss_mask and hasattr(self.source, "get_masked_batch"):
            x, y, mask = self.source.get_masked_batch(split, B, T, generator)
            if not bool(mask.all()):
                y = y.masked_fill(~mask, -100)
        else:
            x, y = self.source.get_batch(split, B, T, generator)
        non_blocking = self.device.type == "cuda"
        return x.to(self.device, non_blocking=non_blocking), y.to(self.device, non_blocking=non_blocking)

    def train_step(self) -> TrainEvent:
        """One optimizer step (plus validation when due, then the callbacks); returns its event."""
        t_start = time.perf_counter()
        s, engine = self.settings, self.engine
        with compute_lock:
            self.apply_threads()
            lr = lr_at(self.step, s)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            x, y = self._batch("train", self.batch_gen)  # the global batch; this rank trains its shard
            self.model.train()
            loss_value = engine.forward_backward(x, y)
            if not math.isfinite(loss_value):
                self.optimizer.zero_grad(set_to_none=True)
                raise TrainingDiverged.after(self.step, "loss", loss_value, lr)
            grad_norm = engine.optimizer_step(self.optimizer, self.params, s.grad_clip)
            if engine.scaler is None and not math.isfinite(grad_norm):  # nothing was stepped
                raise TrainingDiverged.after(self.step, "gradient norm", grad_norm, lr)
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
            router_load=router_loads(self.model),
        )
        self.trigger_callbacks("on_step_end", event)  # a prober first: it may attach event.trace
        self.elapsed += time.perf_counter() - t_start
        event.elapsed = self.elapsed
        self.history.append(event.to_dict())
        return event

    @torch.no_grad()
    def evaluate(self, batches: int | None = None) -> float:
        """Mean loss over ``batches`` (default ``eval_batches``) held-out batches: the same batches
        every call (their generator is re-seeded), so successive values are comparable.

        Raises :class:`EvaluationStopped` when ``control`` is stopped meanwhile (checked between two
        batches; with several processes the validation always completes, as every rank must reduce).
        """
        n = batches or self.settings.eval_batches
        gen = torch.Generator().manual_seed(self.settings.seed + 1_000_003)
        total = 0.0
        with compute_lock:
            self.apply_threads()
            was_training = self.model.training
            self.model.eval()
            try:
                for _ in range(n):
                    if self.world_size == 1 and self.control.stopped:
                        raise EvaluationStopped(f"validation stopped at step {self.step}")
                    x, y = self._batch("val", gen)  # every rank draws the batch, measures its shard
                    total += self.engine.eval_loss(x, y)
            finally:
                self.model.train(was_training)
        return all_reduce_sum([total], self.dist)[0] / n

    def run(
        self, steps: int | None = None, callback: Callable[[TrainEvent], Any] | None = None
    ) -> list[TrainEvent]:
        """Train ``steps`` more steps (default: until ``settings.steps``), calling ``callback(event)``
        after each. Returns early, between steps, once ``control`` is stopped; blocks while paused."""
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

    # ---- the model's text ----------------------------------------------------------------------
    @property
    def probe_prompt(self) -> str:
        """The prompt probes and samples default to: ``settings.probe_prompt`` or the source's default."""
        return self.settings.probe_prompt or getattr(self.source, "default_prompt", "") or "\n"

    def sample(
        self,
        prompt: str | None = None,
        max_new_tokens: int = 80,
        temperature: float = 0.8,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> str:
        """The continuation of ``prompt`` (default: :attr:`probe_prompt`) as text, prompt not included."""
        prompt = self.probe_prompt if prompt is None else prompt
        pieces = stream(
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
        return "".join(pieces)

    # ---- checkpoints (model/train/state.py) ------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The training state a checkpoint stores (:func:`model.train.state.state_dict`)."""
        return train_state.state_dict(self)

    def load_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`state_dict` saved (raises ValueError naming any mismatch)."""
        train_state.load_state(self, state)

    def save(self, path: str | Path, *, meta: dict[str, Any] | None = None) -> Path:
        """Write a full checkpoint (weights, tokenizer, training state) atomically to ``path``."""
        return train_state.save(self, path, meta=meta)

    @classmethod
    def from_checkpoint(
        cls,
        path: str | Path,
        settings: TrainSettings | None = None,
        *,
        source: DataSource | None = None,
        device: str | None = None,
        overrides: dict[str, Any] | None = None,
        **options: Any,
    ) -> Trainer:
        """Continue training from a checkpoint exactly where it stopped: the saved settings (or
        ``settings``) with ``overrides`` and ``device`` on top, the saved data source unless ``source``
        is given; ``options`` go to the constructor (:func:`model.train.state.from_checkpoint`)."""
        return train_state.from_checkpoint(
            cls, path, settings, source=source, device=device, overrides=overrides, **options
        )
