"""A model's training history: its checkpoints in step order, each traced on the probe prompt when needed.

Three sources of revisions (:func:`open_source`):

* :class:`HubSource` -- a Hub repo and some of its revisions (branches, tags, commits). Pythia's
  checkpoints are the branches ``step0``, ``step1``, ``step2``, ``step4`` … ``step512``, then
  ``step1000`` … ``step143000`` every 1000 (:data:`PYTHIA_STEPS`); :func:`log_spaced_steps` picks 16
  of them, log-spaced from 0 to 143000 and snapped to ones that exist.
* :class:`FolderSource` -- a folder whose sub-folders are checkpoints (any kind
  :func:`model.io.pretrained.open_model` opens); the step is the number in the name (``step-00000020``,
  ``step1000``, ``ckpt_300``) or ``meta.json``'s ``step``.
* a run folder of ``attention-lab train --save-every N --keep-checkpoints``: its
  ``checkpoints/step-NNNNNNNN/`` (:data:`HISTORY_DIR`, written by :func:`keep_checkpoint`) plus the
  newest ``checkpoint/`` when it is a later step.

:class:`History` is lazy. A revision is fetched (through :func:`model.io.hub.fetch`, with progress and
cancel) and opened only when its :class:`Snapshot` is first asked for. The snapshot holds the probe
prompt's attention (float16 ``weights`` [L, H, T, T]) and every head's metrics [L, H] (entropy,
previous-token, sink, self, induction on a repeated random sequence). It is written to the trace
cache as one ``.npz`` (no pickles), keyed by the revision's identity (a commit, or the weights'
SHA-256 / size and time), the prompt and the tokenizer files. A second visit therefore loads no model.
At most ``max_models`` opened models stay in memory (least recently used goes first).

:meth:`History.table` is the metric-vs-step table: one row per traced revision, per head and for the
best head of each kind (:data:`BEST`), exportable as CSV (:meth:`History.write_csv`).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import shutil
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from model.atomic import write_atomic
from model.io.checkpoint import CheckpointError

__all__ = [
    "BEST",
    "HISTORY_DIR",
    "METRICS",
    "PYTHIA_STEPS",
    "FolderSource",
    "History",
    "HistoryError",
    "HubSource",
    "Revision",
    "Snapshot",
    "default_cache_dir",
    "drop_kept_after",
    "keep_checkpoint",
    "log_spaced_steps",
    "open_source",
    "snap_steps",
    "suggested_prompt",
]

#: Pythia's published checkpoints: step0, 1, 2, 4 … 512 (powers of two), then every 1000 to 143000.
PYTHIA_STEPS: tuple[int, ...] = (0, *(2**k for k in range(10)), *range(1000, 143001, 1000))
#: A run folder's kept periodic checkpoints (``DIR/checkpoints/step-00000020/``).
HISTORY_DIR = "checkpoints"
#: Per-head metrics a snapshot holds, each [L, H] (see :func:`model.interp.analysis.heads.head_metrics`).
METRICS = ("induction", "prev_token", "sink", "entropy_norm", "entropy", "self_score")
#: The "best head" of each kind: (metric, pick) with pick ``max`` or ``min`` (a focused head has low entropy).
BEST: dict[str, tuple[str, str]] = {
    "induction": ("induction", "max"),
    "prev_token": ("prev_token", "max"),
    "sink": ("sink", "max"),
    "entropy": ("entropy_norm", "min"),
}
#: Version of the cached snapshot format (part of the key: a new format never reads an old file).
CACHE_VERSION = 1
_STEP_IN_NAME = re.compile(r"(\d+)(?!.*\d)")


class HistoryError(CheckpointError):
    """A history that cannot be opened or a revision that cannot be read (one line for a person)."""


# ---------------------------------------------------------------------------------------------
# which steps
# ---------------------------------------------------------------------------------------------
def snap_steps(wanted: Sequence[float], available: Sequence[int]) -> list[int]:
    """Each of ``wanted`` replaced by the nearest of ``available`` on a log scale (0 only by 0).

    Sorted and unique, so two wanted steps that snap to one give one step."""
    avail = sorted({int(a) for a in available})
    if not avail:
        return []
    out = set()
    for w in wanted:
        if w <= 0:
            out.add(avail[0] if avail[0] <= 0 else min(avail))
            continue
        pos = [a for a in avail if a > 0] or avail
        out.add(min(pos, key=lambda a: abs(math.log(a) - math.log(w))))
    return sorted(out)


def log_spaced_steps(
    n: int = 16, last: int = PYTHIA_STEPS[-1], available: Sequence[int] = PYTHIA_STEPS
) -> list[int]:
    """``n`` steps from 0 to ``last``: 0, then ``n - 1`` log-spaced from 1 to ``last``, snapped to
    ``available`` (:func:`snap_steps`).

    For Pythia (the defaults): 0 1 2 4 16 32 64 128 512 1000 2000 5000 11000 26000 61000 143000.
    """
    if n < 1:
        raise HistoryError(f"a history needs at least one step, not {n}")
    if n == 1:
        return snap_steps([last], available)
    wanted = [0.0, *np.geomspace(1, max(1, last), n - 1).tolist()]
    return snap_steps(wanted, [a for a in available if a <= last])


def step_of_name(name: str) -> int | None:
    """The last number in a revision or folder name (``step1000`` → 1000, ``step-00000020`` → 20)."""
    m = _STEP_IN_NAME.search(name)
    return int(m.group(1)) if m else None


# ---------------------------------------------------------------------------------------------
# sources
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Revision:
    """One checkpoint of a history: its training ``step``, a ``label`` and where it is (``ref``)."""

    step: int
    label: str
    ref: str  # a Hub revision name, or a local folder


Progress = Callable[[Any], Any] | None
Stop = Callable[[], bool] | None


class HubSource:
    """Revisions of one Hub repo, fetched into the ``huggingface_hub`` cache by :func:`model.io.hub.fetch`."""

    def __init__(self, repo_id: str, revisions: Sequence[str]):
        from model.io.hub import parse_ref

        self.repo_id = parse_ref(repo_id).repo_id
        if not revisions:
            raise HistoryError(f"no revisions of {self.repo_id} were chosen")
        revs = []
        for i, name in enumerate(dict.fromkeys(str(r).strip() for r in revisions)):
            if not name:
                continue
            step = step_of_name(name)
            revs.append(Revision(i if step is None else step, name, name))
        self.revisions = sorted(revs, key=lambda r: (r.step, r.label))
        self.name = f"{self.repo_id} ({len(self.revisions)} revisions)"

    @property
    def spec(self) -> str:
        return "hf:" + self.repo_id

    def located(self, rev: Revision) -> Path | None:
        """The complete cached snapshot folder of ``rev`` (no network), else None."""
        from model.io.hub import HubRef, cached_folder, check_complete

        folder = cached_folder(HubRef(self.repo_id, rev.ref))
        return folder if folder is not None and not check_complete(folder) else None

    def locate(self, rev: Revision, on_progress: Progress = None, should_stop: Stop = None) -> Path:
        """The folder of ``rev``: the cached one, else fetched now (``DownloadCancelled`` on cancel)."""
        from model.io.hub import HubRef, fetch

        return self.located(rev) or fetch(
            HubRef(self.repo_id, rev.ref), on_progress=on_progress, should_stop=should_stop
        )

    def identity(self, rev: Revision, folder: Path) -> str:
        """The commit (a snapshot folder is named by its commit)."""
        return f"hub:{self.repo_id}@{folder.name}"


class FolderSource:
    """Checkpoints as sub-folders of one folder, or a run folder's kept checkpoints (see module docstring)."""

    def __init__(self, path: str | Path):
        from model.io.pretrained import detect

        path = Path(path)
        if not path.is_dir():
            raise HistoryError(f"{str(path)!r} is not a folder of checkpoints")
        self.path = path
        folders: list[Path] = []
        if (path / HISTORY_DIR).is_dir():  # a run folder
            folders = sorted(
                p for p in (path / HISTORY_DIR).iterdir() if p.is_dir() and not p.name.startswith(".")
            )
            newest = path / "checkpoint"
            if newest.is_dir():
                folders.append(newest)
        else:
            folders = sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
        revs: dict[int, Revision] = {}
        for p in folders:
            try:
                detect(p)
            except CheckpointError:
                continue
            step = _meta_step(p)
            if step is None:
                step = step_of_name(p.name)
            if step is None or step in revs:
                continue
            revs[step] = Revision(step, p.name if p.name != "checkpoint" else f"step {step}", str(p))
        if not revs:
            what = (
                "kept checkpoints (train with --save-every N --keep-checkpoints)"
                if (path / "run.json").is_file()
                else "sub-folders that are checkpoints, named by their step (step-00000020, step1000)"
            )
            raise HistoryError(f"{str(path)!r} holds no {what}")
        self.revisions = [revs[s] for s in sorted(revs)]
        self.name = f"{path.name} ({len(self.revisions)} checkpoints)"
        self.spec = str(path)

    def located(self, rev: Revision) -> Path | None:
        return Path(rev.ref)

    def locate(self, rev: Revision, on_progress: Progress = None, should_stop: Stop = None) -> Path:
        return Path(rev.ref)

    def identity(self, rev: Revision, folder: Path) -> str:
        """The weights' SHA-256 from ``meta.json`` (our checkpoints), else their names, sizes and times."""
        meta = _read_json(folder / "meta.json")
        files = meta.get("files") if isinstance(meta, dict) else None
        if isinstance(files, dict) and isinstance(files.get("model.safetensors"), dict):
            sha = files["model.safetensors"].get("sha256")
            if sha:
                return f"sha256:{sha}"
        parts = []
        for p in sorted(folder.iterdir()):
            if p.is_file() and p.suffix in (".safetensors", ".pt", ".bin", ".ckpt", ".json"):
                st = p.stat()
                parts.append(f"{p.name}:{st.st_size}:{st.st_mtime_ns}")
        return "files:" + hashlib.sha256(f"{folder.resolve()}|{'|'.join(parts)}".encode()).hexdigest()


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _meta_step(folder: Path) -> int | None:
    meta = _read_json(folder / "meta.json")
    step = meta.get("step") if isinstance(meta, dict) else None
    return step if isinstance(step, int) else None


def open_source(spec: str | Path, revisions: Sequence[str | int] | None = None) -> HubSource | FolderSource:
    """``hf:REPO`` (with ``revisions``: names, or step numbers meaning ``stepN``; default the 16
    log-spaced Pythia steps) or a local folder (checkpoints, or a run folder)."""
    from model.io.hub import is_hub_spec, resolve_name

    if is_hub_spec(str(spec)):
        ref = resolve_name(str(spec))
        if revisions is None:
            revisions = [ref.revision] if ref.revision else log_spaced_steps()
        names = [f"step{r}" if isinstance(r, int) or str(r).isdigit() else str(r) for r in revisions]
        return HubSource(ref.repo_id, names)
    if revisions is not None:
        raise HistoryError("revisions are chosen only for a Hub repo; a folder's history is its checkpoints")
    return FolderSource(spec)


def suggested_prompt(source: HubSource | FolderSource) -> str:
    """The prompt a run folder probed (its newest ``probes/`` file), else ``""``."""
    from model.io.runfolder import PROBES_DIR, read_probe

    path = getattr(source, "path", None)
    probes = sorted((path / PROBES_DIR).glob("step-*.npz")) if path is not None else []
    for p in reversed(probes):
        try:
            return read_probe(p).prompt
        except ValueError:
            continue
    return ""


def keep_checkpoint(run_dir: str | Path, checkpoint: str | Path, step: int) -> Path:
    """Keep a copy of the run's newest ``checkpoint`` as ``run_dir/checkpoints/step-NNNNNNNN/`` (weights,
    config, tokenizer and meta; not the optimizer state), written aside and renamed in one step. Files
    are hard-linked when the file system allows (the newest checkpoint is replaced, never rewritten)."""
    src = Path(checkpoint)
    dest_root = Path(run_dir) / HISTORY_DIR
    dest_root.mkdir(parents=True, exist_ok=True)
    dest = dest_root / f"step-{int(step):08d}"
    tmp = dest_root / f".{dest.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        for name in ("config.json", "model.safetensors", "tokenizer.json", "meta.json"):
            if not (src / name).is_file():
                continue
            try:
                os.link(src / name, tmp / name)
            except OSError:
                shutil.copy2(src / name, tmp / name)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


def drop_kept_after(run_dir: str | Path, step: int) -> list[int]:
    """Remove a run folder's kept checkpoints after ``step`` (a fresh run, or a resume from ``step``,
    starts a new future: later saves of the old one would mix into its history); the steps removed."""
    root = Path(run_dir) / HISTORY_DIR
    gone = []
    for p in sorted(root.glob("step-*")) if root.is_dir() else ():
        s = step_of_name(p.name)
        if p.is_dir() and s is not None and s > step:
            shutil.rmtree(p, ignore_errors=True)
            gone.append(s)
    return gone


# ---------------------------------------------------------------------------------------------
# snapshots: one revision traced on the probe prompt
# ---------------------------------------------------------------------------------------------
@dataclass
class Snapshot:
    """The probe prompt at one revision: ``weights`` float16 [L, H, T, T], token labels, metrics [L, H]."""

    step: int
    label: str
    key: str
    prompt: str
    tokens: list[str]
    weights: np.ndarray
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    from_cache: bool = False

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.weights.shape[0]), int(self.weights.shape[1])

    def frame(self):
        """As a :class:`model.interp.probes.ProbeFrame` (what the head grid draws)."""
        from model.interp.probes import ProbeFrame

        return ProbeFrame(step=self.step, prompt=self.prompt, tokens=list(self.tokens), weights=self.weights)

    def best(self, kind: str) -> tuple[float, int, int]:
        """``(value, layer, head)`` of the best head of ``kind`` (a key of :data:`BEST`)."""
        metric, pick = BEST[kind]
        a = self.metrics[metric]
        flat = int(np.nanargmax(a) if pick == "max" else np.nanargmin(a))
        layer, head = divmod(flat, a.shape[1])
        return float(a[layer, head]), layer, head

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        arrays = {f"metric_{k}": np.asarray(v, dtype=np.float32) for k, v in self.metrics.items()}
        np.savez(
            buf,
            weights=np.ascontiguousarray(self.weights, dtype=np.float16),
            tokens=np.array(self.tokens, dtype=np.str_),
            prompt=np.array(self.prompt, dtype=np.str_),
            key=np.array(self.key, dtype=np.str_),
            step=np.array(int(self.step), dtype=np.int64),
            label=np.array(self.label, dtype=np.str_),
            **arrays,
        )
        return buf.getvalue()

    @classmethod
    def from_file(cls, path: Path, key: str) -> Snapshot | None:
        """The snapshot cached at ``path`` if complete and for ``key``; None otherwise (never unpickles)."""
        try:
            with np.load(path, allow_pickle=False) as z:
                if str(z["key"]) != key:
                    return None
                metrics = {n[len("metric_") :]: np.asarray(z[n]) for n in z.files if n.startswith("metric_")}
                snap = cls(
                    step=int(z["step"]),
                    label=str(z["label"]),
                    key=key,
                    prompt=str(z["prompt"]),
                    tokens=[str(t) for t in z["tokens"].tolist()],
                    weights=np.asarray(z["weights"]),
                    metrics=metrics,
                    from_cache=True,
                )
        except (OSError, KeyError, EOFError, zipfile.BadZipFile, ValueError):
            return None
        w = snap.weights
        if w.dtype != np.float16 or w.ndim != 4 or w.shape[-1] != len(snap.tokens):
            return None
        if any(m.shape != w.shape[:2] for m in snap.metrics.values()):
            return None
        return snap


def default_cache_dir() -> Path:
    """Where traces are cached: ``$ATTENTION_LAB_CACHE/history``, else
    ``$XDG_CACHE_HOME/attention-lab/history`` (``XDG_CACHE_HOME`` defaults to ``~/.cache``)."""
    if os.environ.get("ATTENTION_LAB_CACHE"):
        return Path(os.environ["ATTENTION_LAB_CACHE"]).expanduser() / "history"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "attention-lab" / "history"


def _tokenizer_digest(folder: Path) -> str:
    """SHA-256 over the tokenizer files beside a model (the labels and ids a trace depends on)."""
    h = hashlib.sha256()
    names = ("tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "tokenizer.model")
    for name in names:
        p = folder / name
        if p.is_file():
            h.update(name.encode() + b"\0")
            h.update(p.read_bytes())
    return h.hexdigest()


def trace_snapshot(model: Any, tokenizer: Any, prompt: str, step: int, label: str, key: str) -> Snapshot:
    """Trace ``prompt`` (:func:`model.interp.probes.trace_prompt`) and measure every head: the snapshot.

    Metrics as the Attention tab's Metrics page computes them
    (:func:`model.interp.measures.head_metrics_of`):
    entropy, previous-token, sink and self on the prompt, induction on a repeated random sequence.
    """
    from model.interp.measures import head_metrics_of
    from model.interp.probes import make_probe_frame, trace_prompt

    trace = trace_prompt(model, tokenizer, prompt)
    frame = make_probe_frame(trace, tokenizer, step, prompt)
    mask = trace.mask.numpy()
    metrics = head_metrics_of(model, frame.weights, mask).metrics.as_dict()
    return Snapshot(
        step=int(step),
        label=label,
        key=key,
        prompt=prompt,
        tokens=frame.tokens,
        weights=frame.weights,
        metrics={k: np.asarray(v, dtype=np.float32) for k, v in metrics.items()},
    )


# ---------------------------------------------------------------------------------------------
# the history
# ---------------------------------------------------------------------------------------------
class History:
    """A source's revisions in step order, traced on ``prompt`` lazily (see the module docstring).

    Thread-safe: the app calls :meth:`snapshot` from its compute worker. ``loads`` counts models
    opened, ``traces`` counts revisions traced (a cached visit adds to neither).
    """

    def __init__(
        self,
        source: HubSource | FolderSource,
        prompt: str,
        *,
        cache_dir: str | Path | None = None,
        max_models: int = 2,
        device: str = "cpu",
    ):
        if not prompt:
            raise HistoryError("the probe prompt is empty")
        self.source = source
        self.revisions: list[Revision] = list(source.revisions)
        self.prompt = prompt
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.max_models = max(1, int(max_models))
        self.device = device
        self.loads = 0
        self.traces = 0
        self._models: OrderedDict[int, Any] = OrderedDict()
        self._snapshots: dict[int, Snapshot] = {}
        self._keys: dict[int, str] = {}
        self._tok_digest: dict[Path, str] = {}
        self._lock = threading.RLock()

    # ---- the revisions -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.revisions)

    @property
    def steps(self) -> list[int]:
        return [r.step for r in self.revisions]

    @property
    def name(self) -> str:
        return self.source.name

    def index_of(self, step: int) -> int:
        """The index of the revision nearest ``step``."""
        return min(range(len(self.revisions)), key=lambda i: abs(self.revisions[i].step - step))

    # ---- keys and the disk cache ---------------------------------------------------------------
    def key(self, i: int, folder: Path | None = None) -> str | None:
        """The cache key of revision ``i`` (None while its files are not here: a Hub revision not fetched)."""
        with self._lock:
            if i in self._keys:
                return self._keys[i]
            rev = self.revisions[i]
            folder = folder or self.source.located(rev)
            if folder is None:
                return None
            tok = self._tok_digest.get(folder)
            if tok is None:
                tok = self._tok_digest[folder] = _tokenizer_digest(folder)
            ident = self.source.identity(rev, folder)
            raw = json.dumps([CACHE_VERSION, ident, self.prompt, tok])
            key = hashlib.sha256(raw.encode()).hexdigest()
            self._keys[i] = key
            return key

    def _cache_path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / f"{key}.npz"

    def cached(self, i: int) -> bool:
        """Whether revision ``i``'s snapshot is in memory or on disk (then showing it loads no model)."""
        with self._lock:
            if i in self._snapshots:
                return True
        key = self.key(i)
        return key is not None and self._cache_path(key).is_file()

    def peek(self, i: int) -> Snapshot | None:
        """Revision ``i``'s snapshot if in memory or the disk cache; never fetches nor traces."""
        with self._lock:
            snap = self._snapshots.get(i)
        if snap is not None:
            return snap
        key = self.key(i)
        if key is None:
            return None
        snap = Snapshot.from_file(self._cache_path(key), key)
        if snap is not None:
            snap.step, snap.label = self.revisions[i].step, self.revisions[i].label
            with self._lock:
                self._snapshots[i] = snap
        return snap

    # ---- models --------------------------------------------------------------------------------
    def model(self, i: int, on_progress: Progress = None, should_stop: Stop = None):
        """Revision ``i`` opened (:func:`model.io.pretrained.open_model`), fetched first if needed; kept in
        an LRU of ``max_models``. Raises :class:`~model.io.hub.HubError` (``DownloadCancelled`` on cancel)
        or :class:`CheckpointError`."""
        from model.io.pretrained import open_model

        with self._lock:
            if i in self._models:
                self._models.move_to_end(i)
                return self._models[i]
        folder = self.source.locate(self.revisions[i], on_progress, should_stop)
        ckpt = open_model(folder, self.device)
        with self._lock:
            self.loads += 1
            self.key(i, folder)
            self._models[i] = ckpt
            while len(self._models) > self.max_models:
                self._models.popitem(last=False)
        return ckpt

    def models_in_memory(self) -> list[int]:
        with self._lock:
            return list(self._models)

    def snapshot(self, i: int, on_progress: Progress = None, should_stop: Stop = None) -> Snapshot:
        """Revision ``i`` traced on the prompt: from memory, the disk cache, or fetched, opened and traced."""
        snap = self.peek(i)
        if snap is not None:
            return snap
        rev = self.revisions[i]
        ckpt = self.model(i, on_progress, should_stop)
        key = self.key(i)
        assert key is not None
        snap = trace_snapshot(ckpt.model, ckpt.tokenizer, self.prompt, rev.step, rev.label, key)
        with self._lock:
            self.traces += 1
            self._snapshots[i] = snap
        self._write_cache(snap)
        return snap

    def _write_cache(self, snap: Snapshot) -> None:
        path = self._cache_path(snap.key)
        try:
            write_atomic(path, snap.to_bytes())
        except OSError:
            pass  # an unwritable cache only costs a trace next time

    def forget_memory(self) -> None:
        """Drop the snapshots and models held in memory (the disk cache stays)."""
        with self._lock:
            self._snapshots.clear()
            self._models.clear()

    # ---- the metric-vs-step table --------------------------------------------------------------
    def in_memory(self) -> list[Snapshot]:
        """The snapshots held in memory, in step order (no disk access: what a GUI thread may call)."""
        with self._lock:
            return [self._snapshots[i] for i in sorted(self._snapshots)]

    def is_in_memory(self, i: int) -> bool:
        with self._lock:
            return i in self._snapshots

    def snapshots(self) -> list[Snapshot]:
        """The snapshots traced so far (or found in the cache), in step order."""
        return [s for s in (self.peek(i) for i in range(len(self))) if s is not None]

    def table(self) -> tuple[list[str], list[list[Any]]]:
        """(columns, rows): one row per traced revision -- ``step``, ``revision``, for each kind of
        :data:`BEST` the best head's value and ``L.H``, then every metric of every head (``induction
        L0H1``)."""
        snaps = self.snapshots()
        columns = ["step", "revision"]
        for kind in BEST:
            columns += [f"best {kind}", f"best {kind} head"]
        if not snaps:
            return columns, []
        L, H = snaps[0].shape
        present = [m for m in METRICS if all(m in s.metrics for s in snaps)]
        columns += [f"{m} L{layer}H{head}" for m in present for layer in range(L) for head in range(H)]
        rows = []
        for s in snaps:
            row: list[Any] = [s.step, s.label]
            for kind in BEST:
                value, layer, head = s.best(kind)
                row += [round(value, 6), f"{layer}.{head}"]
            for m in present:
                row += [round(float(v), 6) for v in np.asarray(s.metrics[m]).reshape(-1)]
            rows.append(row)
        return columns, rows

    def series(
        self, kind: str, layer: int | None = None, head: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(steps, values) of the traced revisions: the best head of ``kind`` (a key of :data:`BEST`), or
        with ``layer``/``head`` that head's metric of ``kind``."""
        snaps = self.snapshots()
        steps = np.array([s.step for s in snaps], dtype=np.float64)
        if layer is None or head is None:
            vals = [s.best(kind)[0] for s in snaps]
        else:
            metric = BEST[kind][0] if kind in BEST else kind
            vals = [float(s.metrics[metric][layer, head]) for s in snaps]
        return steps, np.array(vals, dtype=np.float64)

    def write_csv(self, path: str | Path) -> Path:
        """The metric-vs-step table as CSV (one row per traced revision)."""
        columns, rows = self.table()
        path = Path(path)
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(columns)
            w.writerows(rows)
        return path
