"""Comparisons of several runs: variant specs, summary rows, aligned tables and the comparison file.

A *comparison* is two or more runs of one question ("what does this choice change?"): variants of
one config trained together on the same batches (:class:`model.train.multitrain.TrainerGroup`), the
current model of a session, or checkpoints. This module holds what the Compare tab draws, as plain
Python and numpy, and the file that saves it.

Variants. ``parse_changes("n_kv_heads=1, norm_position=post")`` → ``{"n_kv_heads": 1,
"norm_position": "post"}``, typed by :class:`~model.config.GPTConfig`'s fields ("auto"/"none" is
``None`` for the derived sizes). Unknown names and values that are not of the field's type raise
:class:`~model.config.ConfigError` with one line per problem.

Summary row of a run (the same keys as :meth:`TrainerGroup.summary`): final ``train_loss``, last
measured ``val_loss``, latest ``tokens_per_s``, ``params`` (all parameters, tied head once),
``flops_per_token`` = forward ``2·N_mm + 4·L·T·h·d_k`` at the training context ``T``, and
``kv_cache_bytes_per_token`` = ``2·L·h_kv·d_k`` values × 4 bytes (fp32, as the app computes).

Differences. The A − B heatmap of two runs of the same shape is ``weights_A − weights_B`` per head
[L, H, T, T] (:func:`model.interp.analysis.compare.weights_difference`); :func:`diff_levels` gives the
symmetric colour levels ``(−m, m)``, ``m = max |A − B|`` (at least ``floor``, so a zero difference
is drawn as zero and not as noise blown up to full scale).

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
import dataclasses
import datetime as _dt
import difflib
import json
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from model.atomic import write_atomic
from model.config import CHOICES, ConfigError, GPTConfig
from model.errors import AttentionLabError

FORMAT = "attention-lab-comparison"
FORMAT_VERSION = 1
#: The suffix the app gives comparison files.
SUFFIX = ".comparison.json"
#: Run kinds.
KINDS = ("variant", "session", "checkpoint")
#: The history fields a comparison keeps per step (what the loss curves and the table need).
HISTORY_KEYS = ("step", "train_loss", "val_loss", "tokens_per_s")
#: Columns of :func:`summary_row`, in table order.
SUMMARY_KEYS = (
    "steps",
    "train_loss",
    "val_loss",
    "tokens_per_s",
    "params",
    "flops_per_token",
    "kv_cache_bytes_per_token",
)


class ComparisonError(AttentionLabError, ValueError):
    """A comparison file cannot be read or written; the message says which part and why."""


# ---------------------------------------------------------------------------------------------
# variants: "the same but n_kv_heads = 1"
# ---------------------------------------------------------------------------------------------
def _field_kinds() -> dict[str, str]:
    hints = typing.get_type_hints(GPTConfig)
    out: dict[str, str] = {}
    for f in dataclasses.fields(GPTConfig):
        t = hints[f.name]
        args = typing.get_args(t)
        if f.name in CHOICES:
            out[f.name] = "choice"
        elif t is bool:
            out[f.name] = "bool"
        elif t is int:
            out[f.name] = "int"
        elif int in args and type(None) in args:
            out[f.name] = "opt_int"
        else:
            out[f.name] = "float"
    return out


FIELD_KINDS: dict[str, str] = _field_kinds()

_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


def parse_value(name: str, text: str) -> Any:
    """The value of field ``name`` written as ``text`` ("1", "post", "true", "auto", "1e-6").

    Raises :class:`ConfigError` for an unknown field or a value of the wrong type (choices are
    checked too, naming the options).
    """
    if name not in FIELD_KINDS:
        near = difflib.get_close_matches(name, list(FIELD_KINDS), n=1, cutoff=0.6)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise ConfigError([f"unknown option {name!r}{hint}"])
    kind = FIELD_KINDS[name]
    s = str(text).strip()
    low = s.lower()
    if kind == "choice":
        if s not in CHOICES[name]:
            raise ConfigError([f"{name}={s!r} is not one of {', '.join(CHOICES[name])}"])
        return s
    if kind == "bool":
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ConfigError([f"{name}={s!r} must be true or false"])
    if kind in ("int", "opt_int"):
        if kind == "opt_int" and low in ("auto", "none", "null", ""):
            return None
        try:
            return int(s.replace("_", "").replace(",", ""))
        except ValueError:
            extra = " or auto" if kind == "opt_int" else ""
            raise ConfigError([f"{name}={s!r} must be a whole number{extra}"]) from None
    try:
        return float(s)
    except ValueError:
        raise ConfigError([f"{name}={s!r} must be a number"]) from None


def parse_changes(text: str) -> dict[str, Any]:
    """``"n_kv_heads=1, norm_position = post"`` → ``{"n_kv_heads": 1, "norm_position": "post"}``.

    Separators: commas, semicolons or new lines. An empty text is no change (the base config).
    Every problem is collected into one :class:`ConfigError`.
    """
    out: dict[str, Any] = {}
    problems: list[str] = []
    for item in filter(None, (p.strip() for p in re.split(r"[,;\n]", text or ""))):
        name, eq, value = item.partition("=")
        if not eq:
            problems.append(f"write each change as field=value, got {item!r}")
            continue
        try:
            out[name.strip()] = parse_value(name.strip(), value)
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError(problems)
    return out


def format_value(value: Any) -> str:
    """A field value as a user writes it: ``None`` → "auto", booleans lower case, floats short."""
    if value is None:
        return "auto"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def describe_changes(changes: dict[str, Any]) -> str:
    """``{"n_kv_heads": 1}`` → ``"n_kv_heads=1"``; no change → ``"base"``."""
    if not changes:
        return "base"
    return ", ".join(f"{k}={format_value(v)}" for k, v in changes.items())


def unique_name(name: str, taken: typing.Iterable[str]) -> str:
    """``name``, or ``name (2)``, ``name (3)`` ... when it is taken."""
    taken = set(taken)
    if name not in taken:
        return name
    i = 2
    while f"{name} ({i})" in taken:
        i += 1
    return f"{name} ({i})"


# ---------------------------------------------------------------------------------------------
# summary rows and tables
# ---------------------------------------------------------------------------------------------
def history_points(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fields of :data:`HISTORY_KEYS` of each training event (what a comparison keeps)."""
    return [{k: ev.get(k) for k in HISTORY_KEYS} for ev in history]


def loss_curves(history: list[dict[str, Any]]) -> dict[str, np.ndarray]:
    """``{"step", "train_loss", "val_step", "val_loss"}`` float64 arrays for plotting (val: measured
    steps only)."""
    steps = np.array([float(h["step"]) for h in history], dtype=np.float64)
    train = np.array(
        [float(h["train_loss"]) if h.get("train_loss") is not None else np.nan for h in history],
        dtype=np.float64,
    )
    val = [(float(h["step"]), float(h["val_loss"])) for h in history if h.get("val_loss") is not None]
    return {
        "step": steps,
        "train_loss": train,
        "val_step": np.array([v[0] for v in val], dtype=np.float64),
        "val_loss": np.array([v[1] for v in val], dtype=np.float64),
    }


def summary_row(
    config: GPTConfig | dict[str, Any], history: list[dict[str, Any]], *, context: int | None = None
) -> dict[str, Any]:
    """One table row for a run (see the module docstring for each key); ``context`` is the T of the
    FLOPs figure (default: the config's context length), kept in the row as ``context``."""
    from model.budget import arithmetic as budget

    cfg = config if isinstance(config, GPTConfig) else GPTConfig.from_dict(dict(config), validate=False)
    last_val = next((h["val_loss"] for h in reversed(history) if h.get("val_loss") is not None), None)
    T = context or cfg.context_length
    row: dict[str, Any] = {
        "steps": int(history[-1]["step"]) if history else 0,
        "train_loss": history[-1].get("train_loss") if history else None,
        "val_loss": last_val,
        "tokens_per_s": history[-1].get("tokens_per_s") if history else None,
        "params": None,
        "flops_per_token": None,
        "kv_cache_bytes_per_token": None,
        "context": min(T, cfg.context_length) if isinstance(cfg.context_length, int) else T,
    }
    if not budget.problems(cfg, seq_len=min(T, cfg.context_length)):
        row["params"] = budget.parameters(cfg).total
        row["flops_per_token"] = budget.flops(cfg, min(T, cfg.context_length)).forward_total_per_token
        row["kv_cache_bytes_per_token"] = budget.kv_cache(cfg, 1, 1, 4).bytes
    return row


def config_table(configs: dict[str, GPTConfig | dict[str, Any]]) -> list[tuple[str, list[Any]]]:
    """Only the fields that differ across the runs: ``[(field, [value of each run]), ...]`` in
    GPTConfig field order. One run, or runs with equal configs, give ``[]``."""
    dicts = [c.to_dict() if hasattr(c, "to_dict") else dict(c) for c in configs.values()]
    out = []
    for name in GPTConfig.field_names():
        values = [d.get(name) for d in dicts]
        if any(v != values[0] for v in values[1:]):
            out.append((name, values))
    return out


def metric_table(metrics: dict[str, Any], metric: str) -> list[dict[str, Any]]:
    """Per-head ``metric`` of every run aligned by (layer, head): one dict per head with ``layer``,
    ``head``, one entry per run name (None where that run has no such head), and ``delta`` = last
    run − first run when there are exactly two runs and both have the head.

    ``metrics`` maps run names to :class:`~model.interp.analysis.heads.HeadMetrics` of shape [L, H] (or
    ``None`` for a run not measured).
    """
    arrays = {}
    for name, m in metrics.items():
        arr = None if m is None else getattr(m, metric, None)
        arrays[name] = None if arr is None else np.asarray(arr, dtype=np.float64)
    shapes = [a.shape for a in arrays.values() if a is not None]
    if not shapes:
        return []
    L = max(s[0] for s in shapes)
    H = max(s[1] for s in shapes)
    names = list(arrays)
    rows = []
    for layer in range(L):
        for head in range(H):
            row: dict[str, Any] = {"layer": layer, "head": head}
            for name in names:
                a = arrays[name]
                ok = a is not None and layer < a.shape[0] and head < a.shape[1]
                row[name] = float(a[layer, head]) if ok else None
            if len(names) == 2:
                a, b = row[names[0]], row[names[1]]
                row["delta"] = None if a is None or b is None else b - a
            rows.append(row)
    return rows


def same_shape(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Whether two weight stacks [L, H, T, T] can be subtracted (same layers, heads and tokens)."""
    return a is not None and b is not None and np.shape(a) == np.shape(b)


def diff_levels(diff: np.ndarray, floor: float = 1e-3) -> tuple[float, float]:
    """Symmetric colour levels ``(−m, m)`` of a difference, ``m = max(max |diff|, floor)``, so zero
    is the middle colour and equal magnitudes of either sign look equally strong."""
    d = np.asarray(diff)
    m = float(np.nanmax(np.abs(d))) if d.size else 0.0
    if not math.isfinite(m):
        m = 0.0
    m = max(m, float(floor))
    return (-m, m)


# ---------------------------------------------------------------------------------------------
# one prompt through a model
# ---------------------------------------------------------------------------------------------
def attention_snapshot(model: Any, tokenizer: Any, prompt: str) -> tuple[AttentionSnapshot, Any]:
    """Run ``prompt`` through ``model`` on the trace path (eval mode, no grad): its attention weights
    [L, H, T, T] (float16) with visible token labels, and the per-head metrics
    (:func:`model.interp.analysis.heads.head_metrics` with the trace's mask).

    Characters the tokenizer lacks are replaced; a prompt longer than the context keeps its last
    ``context_length`` tokens. The caller holds the compute lock it shares with training.
    """
    import torch

    from model.interp.analysis.heads import head_metrics
    from model.interp.trace import run_with_trace
    from model.text.tokens import visible

    ids = tokenizer.encode(prompt, errors="replace")[-model.config.context_length :]
    if not ids:
        raise ValueError("the prompt is empty")
    trace = run_with_trace(model, ids, kinds=("pattern",), dtype=torch.float16)
    weights = np.ascontiguousarray(trace.stack("pattern"), dtype=np.float16)
    labels = [visible(t) for t in tokenizer.token_strings(ids)]
    metrics = head_metrics(weights.astype(np.float64), trace.mask)
    return AttentionSnapshot(prompt, labels, weights), metrics


def snapshot_metrics(snapshot: AttentionSnapshot, causal: bool = True) -> Any:
    """Per-head metrics of saved weights (a reopened comparison): causal mask, or all-visible when
    the model was not causal."""
    from model.interp.analysis.heads import causal_mask_np, head_metrics

    T = snapshot.weights.shape[-1]
    mask = causal_mask_np(T) if causal else np.ones((T, T), dtype=bool)
    return head_metrics(snapshot.weights.astype(np.float64), mask)


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


@dataclass
class AttentionSnapshot:
    """One run's attention on a prompt: ``tokens`` (visible labels, T) and ``weights`` [L, H, T, T]."""

    prompt: str
    tokens: list[str]
    weights: np.ndarray

    def to_dict(self) -> dict[str, Any]:
        return {"prompt": self.prompt, "tokens": list(self.tokens), "weights": encode_array(self.weights)}

    @classmethod
    def from_dict(cls, d: Any, where: str = "attention") -> AttentionSnapshot:
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
        return cls(str(d.get("prompt", "")), tokens, w)


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
    attention: AttentionSnapshot | None = None

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
            "attention": None if self.attention is None else self.attention.to_dict(),
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
            attention=None
            if att is None
            else AttentionSnapshot.from_dict(att, f"{where} ({name}).attention"),
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
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ComparisonError(f"comparison file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ComparisonError(f"comparison file {str(path)!r} cannot be read: {exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ComparisonError(f"{path.name} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    return Comparison.from_dict(data)


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
    "FIELD_KINDS",
    "FORMAT",
    "FORMAT_VERSION",
    "HISTORY_KEYS",
    "KINDS",
    "SUFFIX",
    "SUMMARY_KEYS",
    "AttentionSnapshot",
    "attention_snapshot",
    "snapshot_metrics",
    "Comparison",
    "ComparisonError",
    "RunRecord",
    "config_table",
    "decode_array",
    "describe_changes",
    "diff_levels",
    "encode_array",
    "format_value",
    "history_points",
    "load_comparison",
    "loss_curves",
    "metric_table",
    "parse_changes",
    "parse_value",
    "resolve_run_path",
    "safe_dir_name",
    "same_shape",
    "save_comparison",
    "summary_row",
    "unique_name",
]
