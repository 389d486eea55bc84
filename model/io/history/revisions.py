"""Where a model's training history lives: its revisions (checkpoints) in step order, and how to fetch each.

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

Each source says where a revision's files are (``located``: None while a Hub revision is not
fetched; ``locate`` fetches it through :func:`model.io.hub.fetch`, with progress and cancel) and what
identifies its weights (``identity``: a commit, or the weights' SHA-256 / size and time), which
:class:`model.io.history.traced.History` keys its trace cache by.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from model.files import read_json
from model.io.loaded import CheckpointError

__all__ = [
    "HISTORY_DIR",
    "PYTHIA_STEPS",
    "FolderSource",
    "HistoryError",
    "HubSource",
    "Progress",
    "Revision",
    "Stop",
    "drop_kept_after",
    "keep_checkpoint",
    "log_spaced_steps",
    "open_source",
    "snap_steps",
    "step_of_name",
    "suggested_prompt",
]

#: Pythia's published checkpoints: step0, 1, 2, 4 … 512 (powers of two), then every 1000 to 143000.
PYTHIA_STEPS: tuple[int, ...] = (0, *(2**k for k in range(10)), *range(1000, 143001, 1000))
#: A run folder's kept periodic checkpoints (``DIR/checkpoints/step-00000020/``).
HISTORY_DIR = "checkpoints"
_STEP_IN_NAME = re.compile(r"(\d+)(?!.*\d)")
#: What a kept save holds (the weights; not the optimizer state), and its folder's name.
KEPT_FILES = ("config.json", "model.safetensors", "tokenizer.json", "meta.json")
_KEPT_NAME = re.compile(r"step-\d{8}")


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
    """The JSON value in ``path``, or None when it is missing or unreadable (a step read if present)."""
    try:
        return read_json(path, error=HistoryError)
    except HistoryError:
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
    from model.io.runs.folder import PROBES_DIR, read_probe

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
        for name in KEPT_FILES:
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
    starts a new future: later saves of the old one would mix into its history); the steps removed.
    Only what :func:`keep_checkpoint` writes is removed: a ``step-NNNNNNNN`` folder holding nothing but
    its files (a folder of anyone else's is left alone)."""
    root = Path(run_dir) / HISTORY_DIR
    gone = []
    for p in sorted(root.glob("step-*")) if root.is_dir() else ():
        s = step_of_name(p.name)
        if s is None or s <= step or not _KEPT_NAME.fullmatch(p.name) or p.is_symlink() or not p.is_dir():
            continue
        if all(f.name in KEPT_FILES and f.is_file() and not f.is_symlink() for f in p.iterdir()):
            shutil.rmtree(p, ignore_errors=True)
            gone.append(s)
    return gone
