"""A model's training history traced on a probe prompt: each revision's attention and head metrics.

The revisions and where they come from (a Hub repo such as Pythia's, a folder of checkpoints, a run
folder) are :mod:`model.io.history.revisions`'. :class:`History` is lazy. A revision is fetched and opened
only when its :class:`Snapshot` is first asked for. The snapshot is the probe prompt's
:class:`~model.interp.frame.AttentionFrame` at that revision (float16 ``weights`` [L, H, T, T], the
prompt read by the probe's rule: the last tokens that fit, BOS kept) with every head's metrics
[L, H] (entropy, previous-token, sink, self, induction on a repeated random sequence). It is written
to the trace cache as one ``.npz`` of the frame's one packing (no pickles), keyed by the revision's
identity (a commit, or the weights' SHA-256 / size and time), the prompt and the tokenizer files. A
second visit therefore loads no model. At most ``max_models`` opened models stay in memory (least
recently used goes first).

:meth:`History.table` is the metric-vs-step table: one row per traced revision, per head and for the
best head of each kind (:data:`BEST`), exportable as CSV (:meth:`History.write_csv`).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import threading
import zipfile
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from model.atomic import write_atomic
from model.files import cache_root
from model.interp.frame import AttentionFrame, PackedFrame
from model.interp.measures import head_metrics_of
from model.interp.probes import frame_of, trace_probe
from model.io.history.revisions import FolderSource, HistoryError, HubSource, Progress, Revision, Stop
from model.io.pretrained import open_model

__all__ = [
    "BEST",
    "CACHE_VERSION",
    "METRICS",
    "History",
    "Snapshot",
    "default_cache_dir",
    "trace_snapshot",
]

#: Per-head metrics a snapshot holds, each [L, H] (see :func:`model.interp.analysis.heads.head_metrics`).
METRICS = ("induction", "prev_token", "sink", "entropy_norm", "entropy", "self_score")
#: The "best head" of each kind: (metric, pick) with pick ``max`` or ``min`` (a focused head has low entropy).
BEST: dict[str, tuple[str, str]] = {
    "induction": ("induction", "max"),
    "prev_token": ("prev_token", "max"),
    "sink": ("sink", "max"),
    "entropy": ("entropy_norm", "min"),
}
#: Version of the cached snapshot (part of the key: a new version never reads an old file). 2: the
#: probe's prompt rule keeps a long prompt's BOS, and the weights are packed.
CACHE_VERSION = 2


# ---------------------------------------------------------------------------------------------
# snapshots: one revision traced on the probe prompt
# ---------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class Snapshot(AttentionFrame):
    """The probe prompt's :class:`~model.interp.frame.AttentionFrame` at one revision (``weights``
    float16 [L, H, T, T], ``metrics`` [L, H]), with its cache ``key`` and whether it came from the cache."""

    key: str = ""
    from_cache: bool = False

    @property
    def shape(self) -> tuple[int, int]:
        return self.n_layers, self.n_heads

    def best(self, kind: str) -> tuple[float, int, int]:
        """``(value, layer, head)`` of the best head of ``kind`` (a key of :data:`BEST`)."""
        metric, pick = BEST[kind]
        a = self.metrics[metric]
        flat = int(np.nanargmax(a) if pick == "max" else np.nanargmin(a))
        layer, head = divmod(flat, a.shape[1])
        return float(a[layer, head]), layer, head

    def to_bytes(self) -> bytes:
        """The cache file: the frame's one packing (:meth:`AttentionFrame.to_arrays`) and the key."""
        buf = io.BytesIO()
        # Any: numpy's stubs would match a dict of arrays to savez's allow_pickle (numpy ≥ 2.1)
        arrays: dict[str, Any] = self.to_arrays()
        np.savez(buf, key=np.array(self.key, dtype=np.str_), **arrays)
        return buf.getvalue()

    @classmethod
    def from_file(cls, path: Path, key: str) -> Snapshot | None:
        """The snapshot cached at ``path`` if complete and for ``key``; None otherwise (never unpickles)."""
        try:
            with np.load(path, allow_pickle=False) as z:
                if str(z["key"]) != key:
                    return None
                arrays = {k: z[k] for k in z.files}
            snap = PackedFrame.from_arrays(arrays, path.name).unpack(cls)
        except (OSError, KeyError, EOFError, zipfile.BadZipFile, ValueError):
            return None
        if snap.weights.dtype != np.float16 or snap.step is None:
            return None
        assert isinstance(snap, Snapshot)
        snap.key, snap.from_cache = key, True
        return snap


def default_cache_dir() -> Path:
    """Where traces are cached: ``$ATTENTION_LAB_CACHE/history``, else
    ``$XDG_CACHE_HOME/attention-lab/history`` (``XDG_CACHE_HOME`` defaults to ``~/.cache``)."""
    return cache_root() / "history"


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
    """Trace ``prompt`` as every probe does (:func:`model.interp.probes.trace_probe`: the last tokens
    that fit, BOS kept) and measure every head: the snapshot.

    Metrics as the Attention tab's Metrics page computes them
    (:func:`model.interp.measures.head_metrics_of`):
    entropy, previous-token, sink and self on the prompt, induction on a repeated random sequence.
    """
    read, trace = trace_probe(model, tokenizer, prompt)
    frame = frame_of(trace, read, step=int(step), label=label)
    metrics = head_metrics_of(model, frame.weights, trace.mask.numpy()).metrics.as_dict()
    return Snapshot(
        prompt=frame.prompt,
        labels=frame.labels,
        weights=frame.weights,
        step=int(step),
        label=label,
        key=key,
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
        with contextlib.suppress(OSError):  # an unwritable cache only costs a trace next time
            write_atomic(path, snap.to_bytes())

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

        def write(f) -> None:
            w = csv.writer(f)
            w.writerow(columns)
            w.writerows(rows)

        return write_atomic(path, write, text=True)  # whole or not at all; a failure is one line
