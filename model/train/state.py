"""A trainer's state in a checkpoint, and resuming from one exactly where it stopped.

What a checkpoint's ``train_state`` holds (:func:`state_dict`): the step, settings, history, elapsed
time, tokens seen, the data source's identity, the sequence length, the optimizer's parameter groups
by name, the GradScaler's state and the world size, plus ``"tensors"``: the AdamW moments by
parameter name (``optim/NAME/exp_avg``, ...) and the RNG states (batches, dropout on CPU and CUDA).
So N steps, save, resume, M steps equals N + M steps straight; at any world size, since every rank
draws the same global batch.

:func:`from_checkpoint` rebuilds the run: the saved settings (with overrides), the saved model, and
the data source, re-found by its saved name with the saved tokenizer unless one is given (a warning
when its content changed). The trainer's own methods (``Trainer.state_dict``, ``load_state``,
``save``, ``from_checkpoint``) are the way to call these.

:func:`check_state` reads a saved state as untrusted input: every field's type and range is checked
(a whole step of 0 or more, a history of log rows, ...) and the first wrong one named in a
:class:`~model.io.checkpoint.saved.CheckpointError`, before a trainer is built or any file is written.
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import torch

from model.config import ConfigError
from model.io.checkpoint.saved import CheckpointError, load_checkpoint, save_checkpoint
from model.runtime import compute_lock
from model.text.sources import resolve_source
from model.train.settings import TrainSettings

if TYPE_CHECKING:
    from model.nn.gpt import GPT
    from model.text.datasource import DataSource
    from model.text.tokens import Tokenizer
    from model.train.engine import Engine

__all__ = ["check_state", "from_checkpoint", "load_state", "save", "state_dict"]


class Trainer(Protocol):
    """What a checkpoint saves and restores of a :class:`~model.train.trainer.Trainer` (which imports
    this module, so it is named here by what it has)."""

    model: GPT
    tokenizer: Tokenizer
    source: DataSource
    settings: TrainSettings
    engine: Engine
    optimizer: torch.optim.AdamW
    param_names: list[list[str]]
    params: list[torch.nn.Parameter]
    batch_gen: torch.Generator
    step: int
    history: list[dict[str, Any]]
    elapsed: float
    tokens_seen: int
    seq_len: int
    world_size: int

    def load_state(self, state: dict[str, Any]) -> None: ...


TrainerT = TypeVar("TrainerT", bound=Trainer)


def state_dict(trainer: Trainer) -> dict[str, Any]:
    """The training state a checkpoint stores: JSON-able fields plus ``"tensors"`` (optimizer
    moments by parameter name, RNG states)."""
    tensors: dict[str, torch.Tensor] = {}
    names = [n for group in trainer.param_names for n in group]
    by_param: dict[torch.Tensor, str] = dict(zip(trainer.params, names))  # optimizer.state's keys
    for p, st in trainer.optimizer.state.items():
        name = by_param[p]
        for key, value in st.items():
            if isinstance(value, torch.Tensor):
                tensors[f"optim/{name}/{key}"] = value.detach().cpu().clone()
    engine = trainer.engine
    tensors["rng/batch"] = trainer.batch_gen.get_state()
    tensors["rng/cpu"] = engine.rng_cpu.clone()
    if engine.rng_cuda is not None:
        tensors["rng/cuda"] = engine.rng_cuda.cpu().clone()
    try:
        source_identity = trainer.source.identity()
    except Exception:
        source_identity = {"name": getattr(trainer.source, "name", "")}
    return {
        "step": trainer.step,
        "settings": trainer.settings.to_dict(),
        "history": list(trainer.history),
        "elapsed": trainer.elapsed,
        "tokens_seen": trainer.tokens_seen,
        "source": source_identity,
        "seq_len": trainer.seq_len,
        "param_groups": [list(g) for g in trainer.param_names],
        "scaler": engine.scaler.state_dict() if engine.scaler is not None else None,
        "world_size": trainer.world_size,
        "grad_accum": engine.grad_accum,
        "tensors": tensors,
    }


def _whole(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


#: A log row's numeric fields (TrainEvent.to_dict): a finite number each, or null where it may be.
_ROW_NUMBERS = ("train_loss", "val_loss", "lr", "grad_norm", "tokens_per_s", "elapsed", "tokens_seen")


def _row_problem(row: Any) -> str | None:
    if not isinstance(row, dict):
        return f"is {type(row).__name__}, not a JSON object"
    if not _whole(row.get("step"), 0):
        return f"has step {row.get('step')!r}, not a whole number of 0 or more"
    if not _number(row.get("train_loss")):
        return f"has train_loss {row.get('train_loss')!r}, not a finite number"
    for key in _ROW_NUMBERS:
        if row.get(key) is not None and not _number(row[key]):
            return f"has {key} {row[key]!r}, not a finite number"
    return None


def check_state(state: Any, where: str = "train_state.json") -> None:
    """Raise :class:`~model.io.checkpoint.saved.CheckpointError` naming the first field of a saved training
    state (``where``: its file) whose type or range is wrong; missing optional fields are fine."""

    def bad(field: str, value: Any, should: str) -> CheckpointError:
        text = json.dumps(value) if isinstance(value, (str, int, float, bool, type(None))) else ""
        shown = text if text and len(text) <= 40 else f"a {type(value).__name__}"
        return CheckpointError(
            f"{where} is damaged: {field} is {shown}, not {should}; the run cannot be resumed"
        )

    if not isinstance(state, dict):
        raise CheckpointError(f"{where} is damaged: it must hold a JSON object, not {type(state).__name__}")
    if "step" not in state:
        raise CheckpointError(f"{where} is damaged: it has no step; the run cannot be resumed")
    if not _whole(state["step"], 0):
        raise bad("step", state["step"], "a whole number of 0 or more")
    wanted: dict[str, tuple[Callable[[Any], bool], str]] = {
        "settings": (lambda v: isinstance(v, dict), "a JSON object of settings"),
        "history": (lambda v: isinstance(v, list), "a list of log rows"),
        "elapsed": (lambda v: _number(v) and v >= 0, "a number of seconds, 0 or more"),
        "tokens_seen": (lambda v: _whole(v, 0), "a whole number of 0 or more"),
        "source": (lambda v: isinstance(v, dict), "a JSON object naming the data source"),
        "seq_len": (lambda v: v is None or _whole(v, 1), "a whole number of 1 or more"),
        "param_groups": (
            lambda v: (
                isinstance(v, list)
                and all(isinstance(g, list) and all(isinstance(n, str) for n in g) for g in v)
            ),
            "a list of lists of parameter names",
        ),
        "scaler": (lambda v: v is None or isinstance(v, dict), "a JSON object or null"),
        "world_size": (lambda v: _whole(v, 1), "a whole number of 1 or more"),
        "grad_accum": (lambda v: _whole(v, 1), "a whole number of 1 or more"),
    }
    for field, (ok, should) in wanted.items():
        if field in state and not ok(state[field]):
            raise bad(field, state[field], should)
    source = state.get("source") or {}
    for key in ("name", "sha256"):
        if source.get(key) is not None and not isinstance(source[key], str):
            raise bad(f"source.{key}", source[key], "text")
    for i, row in enumerate(state.get("history") or []):
        problem = _row_problem(row)
        if problem is not None:
            raise CheckpointError(
                f"{where} is damaged: history row {i + 1} {problem}; the run cannot be resumed"
            )


def load_state(trainer: Trainer, state: dict[str, Any]) -> None:
    """Restore what :func:`state_dict` saved (raises ValueError naming any mismatch)."""
    tensors: dict[str, torch.Tensor] = state.get("tensors") or {}
    groups = state.get("param_groups")
    if groups is not None and [list(g) for g in groups] != trainer.param_names:
        raise ValueError("the saved optimizer state belongs to differently named or grouped parameters")
    opt_state: dict[int, dict[str, Any]] = {}
    names = [n for group in trainer.param_names for n in group]
    shapes = {n: tuple(p.shape) for n, p in trainer.model.named_parameters()}
    wrong: list[str] = []
    for i, name in enumerate(names):
        entry = {key.rsplit("/", 1)[1]: t for key, t in tensors.items() if key.startswith(f"optim/{name}/")}
        for moment, t in entry.items():  # exp_avg, exp_avg_sq: the parameter's shape; step: a scalar
            if t.dim() and tuple(t.shape) != shapes[name]:
                wrong.append(f"{name}/{moment} is {list(t.shape)}, not {list(shapes[name])}")
        if entry:
            opt_state[i] = entry
    if wrong:
        more = f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""
        raise ValueError("optimizer state shapes do not match the model: " + ", ".join(wrong[:3]) + more)
    sd = trainer.optimizer.state_dict()
    sd["state"] = opt_state
    trainer.optimizer.load_state_dict(sd)
    trainer.step = int(state.get("step", 0))
    trainer.history = list(state.get("history", []))
    trainer.elapsed = float(state.get("elapsed", 0.0))
    trainer.tokens_seen = int(state.get("tokens_seen", 0))
    engine = trainer.engine
    if "rng/batch" in tensors:
        trainer.batch_gen.set_state(tensors["rng/batch"].to(torch.uint8))
    if "rng/cpu" in tensors:
        engine.rng_cpu = tensors["rng/cpu"].to(torch.uint8)
    if "rng/cuda" in tensors:
        engine.rng_cuda = tensors["rng/cuda"].to(torch.uint8)
    if engine.scaler is not None and state.get("scaler"):
        engine.scaler.load_state_dict(state["scaler"])


def save(trainer: Trainer, path: str | Path, *, meta: dict[str, Any] | None = None) -> Path:
    """Write a full checkpoint (weights, tokenizer, training state) atomically to ``path``."""
    with compute_lock:
        state = state_dict(trainer)
        full_meta = {
            "source": state["source"],
            "step": trainer.step,
            "name": Path(path).name,
            "seq_len": trainer.seq_len,
        }
        if trainer.history:
            last_val = next(
                (h["val_loss"] for h in reversed(trainer.history) if h.get("val_loss") is not None), None
            )
            full_meta.update(train_loss=trainer.history[-1]["train_loss"], val_loss=last_val)
        full_meta.update(meta or {})
        return save_checkpoint(path, trainer.model, trainer.tokenizer, train_state=state, meta=full_meta)


def from_checkpoint(
    cls: Callable[..., TrainerT],
    path: str | Path,
    settings: TrainSettings | None = None,
    *,
    source: DataSource | None = None,
    device: str | None = None,
    overrides: dict[str, Any] | None = None,
    **options: Any,
) -> TrainerT:
    """A ``cls`` (the :class:`~model.train.trainer.Trainer`) that continues the checkpoint at ``path``
    exactly where it stopped.

    ``settings`` None → the saved settings; ``overrides`` (TrainSettings fields, e.g. more ``steps``)
    and ``device`` are applied on top. ``source`` None → rebuilt from the saved source name with the
    saved tokenizer; a warning is raised if its identity (SHA-256) differs from the saved one. A
    checkpoint without training state (no ``train_state.json``) starts a fresh optimizer from its
    weights when ``settings`` are given, and is refused otherwise: its settings are unknown. A
    damaged state is refused (:func:`check_state`) before the trainer is built. ``options``
    (``callbacks``, ``control``, ``dist``, ``grad_accum``, ``dtype``, ``compile``) go to the
    constructor: a run saved at one world size resumes at any other (the batch generator is the
    same on every rank, so only the split of each global batch changes).
    """
    ckpt = load_checkpoint(path, device="cpu")
    state = ckpt.train_state
    if state is not None:
        check_state({k: v for k, v in state.items() if k != "tensors"})
    elif settings is None:
        raise CheckpointError(
            f"{str(ckpt.path)!r} has no training state (train_state.json is missing), so it cannot be "
            "resumed: its weights still open with generate and inspect"
        )
    settings = _settings(settings, state, overrides, device)
    saved_source = (state or {}).get("source") or ckpt.meta.get("source") or {}
    if not isinstance(saved_source, dict):
        raise CheckpointError(
            f"meta.json is damaged: its source is {type(saved_source).__name__}, not a JSON object"
        )
    if source is None:
        name = saved_source.get("name")
        if not name:
            raise CheckpointError("the checkpoint does not record its data source: pass one")
        source = resolve_source(name, tokenizer=ckpt.tokenizer)
    _warn_if_changed(source, saved_source)
    trainer = cls(ckpt.config, source, settings, model=ckpt.model, state=None, **options)
    if state is not None:
        try:
            trainer.load_state(state)
        except (ValueError, KeyError, RuntimeError) as exc:
            raise CheckpointError(f"the training state does not fit the model: {exc}") from None
    return trainer


def _settings(
    settings: TrainSettings | None,
    state: dict[str, Any] | None,
    overrides: dict[str, Any] | None,
    device: str | None,
) -> TrainSettings:
    """The settings a resumed run trains with: ``settings`` or the saved ones, ``overrides``, ``device``."""
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
    return settings


def _warn_if_changed(source: DataSource, saved_source: dict[str, Any]) -> None:
    """Warn when ``source``'s content (SHA-256) is not what the checkpoint was trained on."""
    try:
        now = source.identity()
    except Exception:
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
        warnings.warn(message, stacklevel=4)
