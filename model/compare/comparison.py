"""Comparisons of several runs: what each run is, its attention on one prompt, and the comparison file.

A *comparison* is two or more runs of one question ("what does this choice change?"): variants of
one config trained together on the same batches (:class:`model.train.multitrain.TrainerGroup`), the
current model of a session, or checkpoints. This module holds what the Compare tab draws, as plain
Python and numpy, and the file that saves it.

A run's variant of the base config is :mod:`model.compare.variants`'; what the tab tabulates of
runs (summary rows, aligned tables, loss curves, difference levels) is :mod:`model.compare.tables`'.
A run's attention on the comparison's prompt is an :class:`~model.interp.frame.AttentionFrame`
(:func:`prompt_attention`: the prompt read by the probe's rule, the last tokens that fit, BOS kept).

The comparison file (``*.comparison.json``) is JSON, never a pickle::

    {"format": "attention-lab-comparison", "version": 1, "title": ..., "created": ISO time,
     "source": data source spec, "settings": TrainSettings dict, "prompt": ..., "base_config": {...},
     "runs": [{"name", "kind": "variant" | "session" | "checkpoint", "config": {...},
               "changes": {...}, "path": checkpoint dir (relative to the file) or null,
               "history": [{"step", "train_loss", "val_loss", "tokens_per_s"}, ...],
               "summary": {...}, "attention": {"prompt", "tokens": [...],
               "weights": {"dtype": "float16", "shape": [L, H, T, T], "data": base64}} or null}]}

Arrays are stored as base64 of their little-endian bytes with dtype and shape, so a reopened
comparison redraws exactly what was saved. Writes go to a temporary file, then an atomic rename.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from model.atomic import write_atomic
from model.compare.tables import history_points
from model.config import ConfigError, GPTConfig
from model.errors import AttentionLabError
from model.files import read_json
from model.interp.analysis.heads import HeadMetrics, causal_mask_np, head_metrics
from model.interp.frame import AttentionFrame
from model.interp.probes import frame_of, trace_probe

FORMAT = "attention-lab-comparison"
FORMAT_VERSION = 1
#: The suffix the app gives comparison files.
SUFFIX = ".comparison.json"
#: Run kinds.
KINDS = ("variant", "session", "checkpoint")


class ComparisonError(AttentionLabError, ValueError):
    """A comparison file cannot be read or written; the message says which part and why."""


# ---------------------------------------------------------------------------------------------
# one prompt through a model
# ---------------------------------------------------------------------------------------------
def prompt_attention(model: Any, tokenizer: Any, prompt: str) -> tuple[AttentionFrame, HeadMetrics]:
    """``prompt`` through ``model`` as every probe reads it (:func:`model.interp.probes.trace_probe`:
    the last tokens that fit the context, BOS kept, characters the vocabulary lacks replaced): its
    :class:`~model.interp.frame.AttentionFrame` (float16 weights [L, H, T, T]) and the per-head
    metrics (:func:`model.interp.analysis.heads.head_metrics` with the trace's mask). The caller
    holds the compute lock it shares with training.
    """
    read, trace = trace_probe(model, tokenizer, prompt)
    frame = frame_of(trace, read)
    return frame, head_metrics(frame.weights.astype(np.float64), trace.mask)


def frame_metrics(frame: AttentionFrame, causal: bool = True) -> HeadMetrics:
    """Per-head metrics of saved weights (a reopened comparison): causal mask, or all-visible when
    the model was not causal."""
    T = frame.weights.shape[-1]
    mask = causal_mask_np(T) if causal else np.ones((T, T), dtype=bool)
    return head_metrics(frame.weights.astype(np.float64), mask)


# ---------------------------------------------------------------------------------------------
# the comparison file
# ---------------------------------------------------------------------------------------------
_DTYPES = {"float16": np.float16, "float32": np.float32, "float64": np.float64}


def encode_array(a: np.ndarray) -> dict[str, Any]:
    """``{"dtype", "shape", "data"}`` with the little-endian bytes in base64 (float16/32/64)."""
    a = np.asarray(a)
    name = a.dtype.name
    if name not in _DTYPES:
        a, name = a.astype(np.float32), "float32"
    data = np.ascontiguousarray(a, dtype=np.dtype(_DTYPES[name]).newbyteorder("<")).tobytes()
    return {"dtype": name, "shape": [int(s) for s in a.shape], "data": base64.b64encode(data).decode("ascii")}


def decode_array(d: Any, where: str = "array") -> np.ndarray:
    """The array :func:`encode_array` wrote; :class:`ComparisonError` when dtype, shape or size are off."""
    if not isinstance(d, dict) or not {"dtype", "shape", "data"} <= set(d):
        raise ComparisonError(f"{where}: expected an object with dtype, shape and data")
    if d["dtype"] not in _DTYPES:
        raise ComparisonError(f"{where}: dtype {d['dtype']!r} is not one of {', '.join(_DTYPES)}")
    shape = d["shape"]
    if not isinstance(shape, list) or not all(isinstance(s, int) and s >= 0 for s in shape):
        raise ComparisonError(f"{where}: shape must be a list of sizes, got {shape!r}")
    try:
        raw = base64.b64decode(d["data"], validate=True)
    except (ValueError, TypeError):
        raise ComparisonError(f"{where}: data is not base64") from None
    dt = np.dtype(_DTYPES[d["dtype"]]).newbyteorder("<")
    n = int(np.prod(shape)) if shape else 1
    if len(raw) != n * dt.itemsize:
        raise ComparisonError(f"{where}: {len(raw)} bytes of data for shape {shape} of {d['dtype']}")
    return np.frombuffer(raw, dtype=dt).astype(_DTYPES[d["dtype"]]).reshape(shape)


def attention_to_dict(frame: AttentionFrame) -> dict[str, Any]:
    """A run's attention in the comparison file: ``{"prompt", "tokens" (the labels), "weights"}``."""
    return {"prompt": frame.prompt, "tokens": list(frame.labels), "weights": encode_array(frame.weights)}


def attention_from_dict(d: Any, where: str = "attention") -> AttentionFrame:
    """The frame :func:`attention_to_dict` wrote; :class:`ComparisonError` naming ``where`` when it is off."""
    if not isinstance(d, dict):
        raise ComparisonError(f"{where}: expected an object")
    w = decode_array(d.get("weights"), f"{where}.weights")
    tokens = d.get("tokens")
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        raise ComparisonError(f"{where}.tokens: expected a list of strings")
    if w.ndim != 4 or w.shape[2] != w.shape[3] or w.shape[3] != len(tokens):
        raise ComparisonError(
            f"{where}: weights of shape {list(w.shape)} do not fit {len(tokens)} tokens "
            f"(expected [layers, heads, {len(tokens)}, {len(tokens)}])"
        )
    return AttentionFrame(prompt=str(d.get("prompt", "")), labels=tokens, weights=w)


@dataclass
class RunRecord:
    """One run of a comparison (what is saved; models and trainers live in the app)."""

    name: str
    kind: str
    config: dict[str, Any]
    changes: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    attention: AttentionFrame | None = None

    def gpt_config(self) -> GPTConfig:
        return GPTConfig.from_dict(dict(self.config), validate=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "config": dict(self.config),
            "changes": dict(self.changes),
            "path": self.path,
            "history": history_points(self.history),
            "summary": dict(self.summary),
            "attention": None if self.attention is None else attention_to_dict(self.attention),
        }

    @classmethod
    def from_dict(cls, d: Any, where: str) -> RunRecord:
        if not isinstance(d, dict):
            raise ComparisonError(f"{where}: expected an object")
        name = d.get("name")
        if not isinstance(name, str) or not name:
            raise ComparisonError(f"{where}: a run needs a name")
        kind = d.get("kind")
        if kind not in KINDS:
            raise ComparisonError(f"{where} ({name}): kind {kind!r} is not one of {', '.join(KINDS)}")
        config = d.get("config")
        if not isinstance(config, dict):
            raise ComparisonError(f"{where} ({name}): config: expected an object")
        try:
            GPTConfig.from_dict(config, validate=False)
        except (ConfigError, TypeError) as exc:
            raise ComparisonError(f"{where} ({name}): config: {exc}") from None
        history = d.get("history") or []
        if not isinstance(history, list) or not all(isinstance(h, dict) and "step" in h for h in history):
            raise ComparisonError(f"{where} ({name}): history must be a list of events with a step")
        changes = d.get("changes") or {}
        if not isinstance(changes, dict):
            raise ComparisonError(f"{where} ({name}): changes must be an object")
        att = d.get("attention")
        path = d.get("path")
        if path is not None and not isinstance(path, str):
            raise ComparisonError(f"{where} ({name}): path must be a string or null")
        return cls(
            name=name,
            kind=kind,
            config=dict(config),
            changes=dict(changes),
            path=path,
            history=history_points(history),
            summary=dict(d.get("summary") or {}),
            attention=None if att is None else attention_from_dict(att, f"{where} ({name}).attention"),
        )


@dataclass
class Comparison:
    """Everything a comparison file holds (see the module docstring)."""

    runs: list[RunRecord] = field(default_factory=list)
    title: str = ""
    source: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    prompt: str = ""
    base_config: dict[str, Any] | None = None
    created: str = ""

    def names(self) -> list[str]:
        return [r.name for r in self.runs]

    def __getitem__(self, name: str) -> RunRecord:
        for r in self.runs:
            if r.name == name:
                return r
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "title": self.title,
            "created": self.created or _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "source": self.source,
            "settings": dict(self.settings),
            "prompt": self.prompt,
            "base_config": None if self.base_config is None else dict(self.base_config),
            "runs": [r.to_dict() for r in self.runs],
        }

    @classmethod
    def from_dict(cls, d: Any) -> Comparison:
        if not isinstance(d, dict):
            raise ComparisonError("a comparison file must hold a JSON object")
        if d.get("format") != FORMAT:
            raise ComparisonError(
                f"not a comparison file: format is {d.get('format')!r}, expected {FORMAT!r}"
            )
        version = d.get("version")
        if not isinstance(version, int) or version < 1:
            raise ComparisonError(f"version {version!r} is not a format version")
        if version > FORMAT_VERSION:
            raise ComparisonError(
                f"comparison format version {version} is newer than this program reads ({FORMAT_VERSION}); "
                "update attention-lab"
            )
        runs = d.get("runs")
        if not isinstance(runs, list):
            raise ComparisonError("runs must be a list")
        records = [RunRecord.from_dict(r, f"run {i + 1}") for i, r in enumerate(runs)]
        names = [r.name for r in records]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ComparisonError(f"run names must be unique; repeated: {', '.join(dup)}")
        base = d.get("base_config")
        if base is not None and not isinstance(base, dict):
            raise ComparisonError("base_config must be an object or null")
        settings = d.get("settings") or {}
        if not isinstance(settings, dict):
            raise ComparisonError("settings must be an object")
        return cls(
            runs=records,
            title=str(d.get("title") or ""),
            source=str(d.get("source") or ""),
            settings=dict(settings),
            prompt=str(d.get("prompt") or ""),
            base_config=None if base is None else dict(base),
            created=str(d.get("created") or ""),
        )


def save_comparison(path: str | Path, comparison: Comparison) -> Path:
    """Write ``comparison`` as JSON at ``path`` atomically (temporary file, then rename)."""
    path = Path(path)
    text = json.dumps(comparison.to_dict(), indent=1, allow_nan=False, default=_json_default)
    try:
        write_atomic(path, text, fsync=True)
    except OSError as exc:
        raise ComparisonError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    return path


def _json_default(o: Any) -> Any:
    if isinstance(o, np.generic):
        return o.item()
    raise TypeError(f"{type(o).__name__} is not JSON-able")


def load_comparison(path: str | Path) -> Comparison:
    """Read a comparison file; :class:`ComparisonError` with one clear line when it cannot."""
    path = Path(path)
    if not path.exists():
        raise ComparisonError(f"comparison file {str(path)!r} does not exist")
    return Comparison.from_dict(read_json(path, error=ComparisonError))


def resolve_run_path(comparison_path: str | Path, run_path: str | None) -> Path | None:
    """A run's checkpoint directory: relative paths are relative to the comparison file's folder."""
    if not run_path:
        return None
    p = Path(run_path)
    return p if p.is_absolute() else Path(comparison_path).parent / p


def safe_dir_name(name: str) -> str:
    """A run name as a folder name: letters, digits, ``-_.=``; everything else becomes ``_``."""
    s = re.sub(r"[^A-Za-z0-9._=-]+", "_", name).strip("._") or "run"
    return s[:80]


__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "KINDS",
    "SUFFIX",
    "Comparison",
    "ComparisonError",
    "RunRecord",
    "attention_from_dict",
    "attention_to_dict",
    "decode_array",
    "encode_array",
    "frame_metrics",
    "load_comparison",
    "prompt_attention",
    "resolve_run_path",
    "safe_dir_name",
    "save_comparison",
]
