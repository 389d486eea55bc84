"""Checkpoints: a directory of JSON and safetensors, written atomically, loaded with validation.

Layout of a checkpoint directory::

    config.json            GPTConfig fields (GPTConfig.load reads it on its own)
    model.safetensors      the model's state_dict (float32 or lower; tied heads stored once)
    tokenizer.json         Tokenizer.to_dict()
    meta.json              format tag, file sizes and SHA-256 of the .safetensors files, and the
                           caller's meta (data source identity, name, ...)
    train_state.json       optional: step, settings, loss history, ... (everything JSON-able)
    optimizer.safetensors  optional, present with train_state.json: its tensors (optimizer moments,
                           RNG states)

Nothing is pickled and nothing is unpickled: tensors go through safetensors, everything else
through JSON. Files with other names in the directory (``*.pt``, ``*.bin``) are never read.

Atomic save (:mod:`model.atomic_dir`): every file is written (and fsynced) into a sibling
temporary directory, which then replaces the target in one step (``renameat2(RENAME_EXCHANGE)`` on
Linux, otherwise rename-aside then rename, with :func:`load_checkpoint` falling back to the
set-aside copy if a crash came between the two renames). A save killed at any moment leaves either
the old checkpoint or the new one.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import shutil
import tempfile
from functools import partial
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as tensors_from_bytes
from safetensors.torch import save as tensors_to_bytes

from model.atomic import writing
from model.atomic_dir import (
    clean_stale_temps,
    fsync_dir,
    replace_dir,
    set_aside,
    temp_dir_for,
    write_synced,
)
from model.budget.sizing import check_config_file_shapes, load_need
from model.config import ConfigError, GPTConfig
from model.files import check_input, read_json
from model.io.build import Weights, build_model, own_layout
from model.io.loaded import Checkpoint, CheckpointError
from model.io.weights import Layout, TensorSource
from model.nn.gpt import GPT
from model.safetensors_file import safetensors_shapes
from model.text.registry import tokenizer_from_dict
from model.text.tokens import Tokenizer, TokenizerError

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "Checkpoint",
    "CheckpointError",
    "check_save_target",
    "load_checkpoint",
    "save_checkpoint",
]

FORMAT = "attention-lab-checkpoint"
FORMAT_VERSION = 1

CONFIG_FILE = "config.json"
MODEL_FILE = "model.safetensors"
TOKENIZER_FILE = "tokenizer.json"
META_FILE = "meta.json"
STATE_FILE = "train_state.json"
TENSORS_FILE = "optimizer.safetensors"
REQUIRED_FILES = (CONFIG_FILE, MODEL_FILE, TOKENIZER_FILE)


# ---------------------------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------------------------
def _write_json(path: Path, obj: Any) -> None:
    try:
        text = json.dumps(obj, indent=2, allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{path.name}: cannot be written as JSON: {exc}") from None
    write_synced(path, (text + "\n").encode("utf-8"))


def _write_tensors(
    path: Path, tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None
) -> None:
    on_cpu = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
    write_synced(path, tensors_to_bytes(on_cpu, metadata=metadata))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _model_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The persistent state_dict with each shared storage stored once (safetensors rejects aliases)."""
    out: dict[str, torch.Tensor] = {}
    seen: dict[tuple[int, int, tuple[int, ...]], str] = {}
    for name, t in model.state_dict().items():
        key = (t.untyped_storage().data_ptr(), t.storage_offset(), tuple(t.shape))
        if key in seen:
            continue
        seen[key] = name
        out[name] = t
    return out


def _looks_like_checkpoint(path: Path) -> bool:
    return (path / CONFIG_FILE).exists() or (path / MODEL_FILE).exists() or (path / META_FILE).exists()


def check_save_target(path: str | Path) -> Path:
    """Raise :class:`CheckpointError` unless a checkpoint may be written at ``path`` (absent, empty, or
    a checkpoint already); call it before a long run so a bad ``--out`` fails at once."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise CheckpointError(f"cannot save a checkpoint to {str(path)!r}: it is a file, not a directory")
    if path.is_dir() and any(path.iterdir()) and not _looks_like_checkpoint(path):
        raise CheckpointError(
            f"refusing to overwrite {str(path)!r}: it is a non-empty folder that is not a checkpoint"
        )
    _check_writable(path.parent)
    return path


def _check_writable(folder: Path) -> None:
    """Raise :class:`CheckpointError` unless a file can be created in ``folder`` (or in the nearest
    folder above it that exists, where the missing ones would be made): the save writes a sibling."""
    here = folder.absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=here)
    except OSError as exc:
        raise CheckpointError(
            f"cannot save a checkpoint in {str(folder)!r}: {exc.strerror or exc} (read-only or no permission)"
        ) from None
    os.close(fd)
    os.unlink(probe)


def save_checkpoint(
    path: str | Path,
    model: torch.nn.Module,
    tokenizer: Tokenizer,
    *,
    train_state: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
) -> Path:
    """Write a checkpoint directory at ``path`` atomically; returns the path.

    ``train_state``: JSON-able dict; its optional ``"tensors"`` entry (dict name → tensor) goes to
    optimizer.safetensors. ``meta``: JSON-able dict kept in meta.json (data source identity, ...).
    An existing directory at ``path`` is replaced only if it is a checkpoint (or empty), so a typo in
    ``--out`` never deletes someone's folder.
    """
    path = check_save_target(path)
    shape = getattr(model, "config", None)
    config_v = shape.core.vocab_size if shape is not None else None
    if config_v is not None and tokenizer.vocab_size > config_v:
        raise CheckpointError(
            f"the tokenizer has {tokenizer.vocab_size} tokens but the model only {config_v}: "
            "they do not belong together"
        )
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CheckpointError(f"cannot create {str(parent)!r}: {exc.strerror or exc}") from None
    clean_stale_temps(path)
    try:
        tmp = temp_dir_for(path)
    except OSError as exc:
        raise CheckpointError(f"cannot write into {str(parent)!r}: {exc.strerror or exc}") from None
    with writing(path, what=f"the checkpoint {str(path)!r}"):  # a full disk: one line, the old one kept
        try:
            config: GPTConfig = model.config  # type: ignore[assignment]
            _write_json(tmp / CONFIG_FILE, config.to_dict())
            _write_tensors(tmp / MODEL_FILE, _model_tensors(model), {"format": FORMAT})
            _write_json(tmp / TOKENIZER_FILE, tokenizer.to_dict())
            files = [MODEL_FILE]
            if train_state is not None:
                state = dict(train_state)
                tensors = state.pop("tensors", None) or {}
                _write_tensors(tmp / TENSORS_FILE, tensors, {"format": FORMAT})
                _write_json(tmp / STATE_FILE, state)
                files.append(TENSORS_FILE)
            full_meta = dict(meta or {})
            full_meta.update(
                format=FORMAT,
                version=FORMAT_VERSION,
                saved_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                torch_version=torch.__version__,
                files={
                    name: {"bytes": (tmp / name).stat().st_size, "sha256": _sha256(tmp / name)}
                    for name in files
                },
            )
            _write_json(tmp / META_FILE, full_meta)
            fsync_dir(tmp)
            replace_dir(tmp, path)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return path


# ---------------------------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------------------------
def _read_json(path: Path) -> Any:
    return read_json(path, error=CheckpointError, what=f"{path.name} in {str(path.parent)!r}")


def _read_tensors(path: Path, expected: dict[str, Any] | None) -> dict[str, torch.Tensor]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"{path.name} in {str(path.parent)!r} cannot be read: {exc.strerror}") from None
    if expected is not None:
        size = expected.get("bytes")
        if isinstance(size, int) and size != len(data):
            raise CheckpointError(
                f"{path.name} is truncated or corrupt: {len(data)} bytes where {size} were saved"
            )
        digest = expected.get("sha256")
        if isinstance(digest, str) and hashlib.sha256(data).hexdigest() != digest:
            raise CheckpointError(
                f"{path.name} is corrupt: its SHA-256 differs from the one saved in {META_FILE}"
            )
    try:
        return tensors_from_bytes(data)
    except Exception as exc:  # safetensors raises its own SafetensorError (and others) on bad bytes
        raise CheckpointError(
            f"{path.name} is truncated or corrupt (not a readable safetensors file: {exc})"
        ) from None


def _resolve_dir(path: Path) -> Path:
    check_input(path, error=CheckpointError, what=f"checkpoint {str(path)!r}", kind="any")
    if path.is_dir() and not (path / CONFIG_FILE).exists() and (path / "run.json").exists():
        path = path / "checkpoint"  # a run folder (model/io/runs/folder.py): its newest checkpoint
    if path.is_dir():
        return path
    if path.exists():
        raise CheckpointError(f"checkpoint {str(path)!r} is a file; a checkpoint is a directory")
    old = set_aside(path)
    if old.is_dir() and (old / CONFIG_FILE).exists():  # a save was interrupted between its two renames
        return old
    raise CheckpointError(f"checkpoint {str(path)!r} does not exist")


def _header_shapes(weights: Path) -> dict[str, tuple[int, ...]]:
    """model.safetensors' tensor names and shapes from its header alone (nothing else is read)."""
    try:
        return safetensors_shapes(weights)
    except ValueError as exc:
        raise CheckpointError(f"{MODEL_FILE} is truncated or corrupt: {exc}") from None


def _blocks(shapes: dict[str, tuple[int, ...]]) -> int:
    """How many Transformer blocks a file of ours holds (``blocks.<i>.…``)."""
    return len({k.split(".")[1] for k in shapes if k.startswith("blocks.") and k.count(".") > 1})


def _weights(config: GPTConfig, weights: Path, shapes: dict[str, tuple[int, ...]], saved: Any) -> Weights:
    """model.safetensors (:func:`_source`) laid out as our own names for ``config`` (:func:`_layout`)."""
    return Weights(_source(weights, shapes, saved), _layout(config, shapes), MODEL_FILE)


def _layout(config: GPTConfig, shapes: dict[str, tuple[int, ...]]) -> Layout:
    """Where our file's tensors go: our own names for ``config`` (:func:`~model.io.build.own_layout`).

    A file of ours holds exactly the parameters its config implies (tied matrices once), so a count that
    differs is a config that lies; one far off (twice the file's layers and more, or more experts than
    the file has tensors: 10⁹ experts would be a module each even on the ``meta`` device) is refused by
    the count before anything is listed. Nearer, the one build step names every tensor that differs."""
    try:
        check_config_file_shapes(config, shapes, MODEL_FILE)
    except ValueError as exc:
        experts = config.core.n_layers * (
            config.feed_forward.n_experts or 0
        )  # three tensors each in the file
        if config.core.n_layers > 2 * _blocks(shapes) + 8 or experts > len(shapes):
            raise CheckpointError(f"{CONFIG_FILE} does not match {MODEL_FILE}: {exc}") from None
    return own_layout(config, CONFIG_FILE)


def _source(weights: Path, shapes: dict[str, tuple[int, ...]], saved: Any) -> TensorSource:
    """model.safetensors' tensors: named and shaped by its header; read whole on the first ``get``,
    its size and SHA-256 held against ``saved`` (from meta.json); each handed out only when it is
    floating-point and finite."""
    found: list[dict[str, torch.Tensor]] = []  # the file's tensors, once read

    def get(name: str) -> torch.Tensor:
        if not found:
            found.append(_read_tensors(weights, saved))
        t = found[0].pop(name)
        if not t.is_floating_point():
            raise CheckpointError(
                f"{MODEL_FILE}: tensor {name} has dtype {t.dtype}, expected a floating type"
            )
        if not bool(torch.isfinite(t).all()):
            raise CheckpointError(f"{MODEL_FILE}: tensor {name} holds NaN or infinite values")
        return t

    return TensorSource(shapes, shapes.__getitem__, get)


def load_checkpoint(
    path: str | Path, device: str | torch.device = "cpu", *, with_train_state: bool = True
) -> Checkpoint:
    """Read and validate a checkpoint directory; raise :class:`CheckpointError` naming what is wrong.

    Checks, in order: the directory and each required file exist; JSON files parse; config.json is a
    valid :class:`GPTConfig` with a vocab_size; tokenizer.json is a known tokenizer whose vocabulary
    fits the model; the .safetensors files are complete (size and SHA-256 from meta.json when present)
    and readable; their tensor names and shapes are exactly what the config implies; no NaN/inf.
    The model comes back in eval mode on ``device``. ``with_train_state=False`` skips the training
    state (faster, for generation and inspection).
    """
    path = _resolve_dir(Path(path))
    missing = [name for name in REQUIRED_FILES if not (path / name).is_file()]
    if missing:
        raise CheckpointError(f"checkpoint {str(path)!r} is missing {', '.join(missing)}")
    meta = _read_meta(path)
    files = meta.get("files")
    files_meta: dict[str, Any] = files if isinstance(files, dict) else {}
    config = _read_config(path)
    tokenizer = _read_tokenizer(path, config)
    model = _read_model(path, config, files_meta.get(MODEL_FILE), device)
    train_state = None
    if with_train_state and (path / STATE_FILE).is_file():
        train_state = _read_train_state(path, files_meta.get(TENSORS_FILE))
    user_meta = {k: v for k, v in meta.items() if k not in ("files",)}
    return Checkpoint(
        path=path, config=config, model=model, tokenizer=tokenizer, train_state=train_state, meta=user_meta
    )


def _read_meta(path: Path) -> dict[str, Any]:
    """meta.json (empty when there is none): ours, and of a format version this program reads."""
    if not (path / META_FILE).is_file():
        return {}
    meta = _read_json(path / META_FILE)
    if not isinstance(meta, dict):
        raise CheckpointError(f"{META_FILE} must hold a JSON object")
    if meta.get("format", FORMAT) != FORMAT:
        raise CheckpointError(f"{META_FILE}: format {meta.get('format')!r} is not {FORMAT!r}")
    version = meta.get("version", FORMAT_VERSION)
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise CheckpointError(
            f"{META_FILE}: checkpoint format version {version} is newer than this program reads "
            f"({FORMAT_VERSION}); update attention-lab"
        )
    return meta


def _read_config(path: Path) -> GPTConfig:
    """config.json: a valid :class:`GPTConfig` with a vocab_size."""
    raw_config = _read_json(path / CONFIG_FILE)
    try:
        config = GPTConfig.from_dict(raw_config)
    except ConfigError as exc:
        raise CheckpointError(f"{CONFIG_FILE} is not a valid model config: {exc}") from None
    except TypeError as exc:
        raise CheckpointError(f"{CONFIG_FILE} is not a valid model config: {exc}") from None
    if config.core.vocab_size is None:
        raise CheckpointError(f"{CONFIG_FILE} has no vocab_size")
    return config


def _read_tokenizer(path: Path, config: GPTConfig) -> Tokenizer:
    """tokenizer.json: a known tokenizer whose every id has a row of the model's embedding."""
    assert config.core.vocab_size is not None  # _read_config refused a config without one
    try:
        tokenizer = tokenizer_from_dict(_read_json(path / TOKENIZER_FILE))
    except TokenizerError as exc:
        raise CheckpointError(f"{TOKENIZER_FILE}: {exc}") from None
    if tokenizer.vocab_size > config.core.vocab_size:
        raise CheckpointError(
            f"{TOKENIZER_FILE} has {tokenizer.vocab_size} tokens but {CONFIG_FILE} has "
            f"vocab_size={config.core.vocab_size}: they do not belong together"
        )
    if tokenizer.largest_id >= config.core.vocab_size:
        raise CheckpointError(
            f"{TOKENIZER_FILE} has token id {tokenizer.largest_id} but {CONFIG_FILE} has "
            f"vocab_size={config.core.vocab_size} (ids 0 to {config.core.vocab_size - 1}): the model has no "
            "embedding for it"
        )
    return tokenizer


def _read_model(path: Path, config: GPTConfig, saved: Any, device: str | torch.device) -> GPT:
    """model.safetensors built by the one build step: sized by the values and blocks its header says it
    holds (a config that claims more is named by :func:`_layout`), checked against our names for
    ``config`` (names and shapes, from the header), then read (``saved``: its size and SHA-256 from
    meta.json; every tensor floating-point and finite)."""
    weights = path / MODEL_FILE
    shapes = _header_shapes(weights)
    held = sum(math.prod(s) for s in shapes.values()), _blocks(shapes)
    need = load_need(config, held=held, what=f"loading {str(path)!r}")
    return build_model(config, partial(_weights, config, weights, shapes, saved), need=need, device=device)


def _read_train_state(path: Path, saved: Any) -> dict[str, Any]:
    """train_state.json with optimizer.safetensors' tensors under ``"tensors"`` (``saved``: their
    size and SHA-256 from meta.json), none of them NaN or infinite."""
    train_state = _read_json(path / STATE_FILE)
    if not isinstance(train_state, dict):
        raise CheckpointError(f"{STATE_FILE} must hold a JSON object")
    if not (path / TENSORS_FILE).is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} has {STATE_FILE} but is missing {TENSORS_FILE}")
    tensors = _read_tensors(path / TENSORS_FILE, saved)
    for k, t in tensors.items():
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise CheckpointError(f"{TENSORS_FILE}: tensor {k} holds NaN or infinite values")
    train_state["tensors"] = tensors
    return train_state
