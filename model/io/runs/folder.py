"""The run folder: what a headless ``attention-lab train --out DIR`` writes and the app follows.

Layout (every file appears in one step -- written aside, then renamed -- except the log, which only
ever grows by whole lines)::

    DIR/run.json               format: attention-lab-run; status: running | finished | stopped | failed,
                               steps, world_size
    DIR/log.jsonl              one JSON object per logged step (TrainEvent.to_dict(), world_size included)
    DIR/checkpoint/            the newest checkpoint, in the ordinary format (load_checkpoint(DIR) opens it)
    DIR/probes/step-00000050.npz   the probe prompt's attention at that step: ``weights`` float16
                               [L, H, T, T], ``tokens`` (str [T]), ``prompt``, ``step`` (no pickles)

:class:`RunWriter` writes it (rank 0 of a run only); :class:`model.io.runs.follow.RunFollower` reads
what is new in it, and never writes.

A folder is a run's to write (:func:`check_run_folder`) only when it is missing, empty, or a run folder
of ours: ``run.json`` says so, and everything in it has the layout above (plus ``checkpoints/`` of
``--keep-checkpoints``, the temporary names of unfinished writes and ``.run.lock``, the lock a run
holds while it writes the folder: :mod:`model.io.runs.lock`). Anything else -- a user's own
``log.jsonl``, a ``README.md`` in ``checkpoint/``, a file of theirs in ``probes/`` -- is refused in one
line naming it, so a run never replaces or deletes what it did not write. ``--log-json`` gets the same
care (:func:`check_extra_log`): a file that exists must be a log of ours, never an input of the run.
A run folder that holds a checkpoint is a trained model: :func:`model.io.runs.leftovers.saved_run`
names it (its status, step and date) for the command's refusal to replace it unasked.

A run resumed from its checkpoint of step ``S`` continues its log from ``S``: rows a killed run logged
after its last save (steps past ``S``, which the resumed run logs again) are cut first
(:meth:`RunWriter.__init__`), so each step has one row. The temporary names of writes a killed run
left are removed by :func:`model.io.runs.leftovers.clean_run_temps` when the next run takes the folder.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import socket
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from model.atomic import OutputError, check_output, write_atomic, writing
from model.errors import AttentionLabError
from model.interp.frame import AttentionFrame
from model.io.checkpoint.saved import (
    CONFIG_FILE,
    META_FILE,
    MODEL_FILE,
    STATE_FILE,
    TENSORS_FILE,
    TOKENIZER_FILE,
)
from model.io.runs.lock import LOCK_FILE

__all__ = [
    "CHECKPOINT_DIR",
    "DONE_STATES",
    "KEPT_DIR",
    "LOG_FILE",
    "PROBES_DIR",
    "STATUS_FILE",
    "TEMP_NAME",
    "RunFolderError",
    "RunWriter",
    "check_extra_log",
    "check_run_folder",
    "cut_log_after",
    "is_run_folder",
    "read_probe",
    "write_probe",
]

LOG_FILE = "log.jsonl"
STATUS_FILE = "run.json"
PROBES_DIR = "probes"
CHECKPOINT_DIR = "checkpoint"
#: Statuses after which a run folder no longer changes.
DONE_STATES = ("finished", "stopped", "failed")
#: ``run.json``'s ``format``: the mark of a run folder this program wrote.
RUN_FORMAT = "attention-lab-run"
#: ``--keep-checkpoints``' kept saves (:data:`model.io.history.revisions.HISTORY_DIR`, which imports this
#: module).
KEPT_DIR = "checkpoints"
_CHECKPOINT_FILES = {CONFIG_FILE, MODEL_FILE, TOKENIZER_FILE, META_FILE, STATE_FILE, TENSORS_FILE}
_STEP_DIR = re.compile(r"step-\d{8}")
_PROBE_FILE = re.compile(r"step-\d{8}\.npz")
#: Temporary names of this program's unfinished writes: ``.NAME.PID.<random>.tmp`` (model.atomic),
#: ``.NAME.tmp-PID-<random>`` (model.atomic_dir), ``.NAME.tmp-PID`` (a kept save).
TEMP_NAME = re.compile(r"\.(?P<name>.+?)(\.(?P<pid>\d+)\.[^.]+\.tmp|\.tmp-(?P<pid2>\d+)(-[0-9a-f]+)?)")


class RunFolderError(AttentionLabError, ValueError):
    """A path that cannot be a run folder (one line saying why)."""


def is_run_folder(path: str | Path) -> bool:
    """True for a directory holding a run's ``run.json``, ``log.jsonl`` or ``checkpoint/``."""
    path = Path(path)
    return path.is_dir() and any((path / name).exists() for name in (STATUS_FILE, LOG_FILE, CHECKPOINT_DIR))


def check_run_folder(path: str | Path) -> Path:
    """Raise :class:`RunFolderError` unless a run may write ``path``: missing, empty, or a run folder
    of ours (see the module docstring); call it before a long run so a bad ``--out`` fails at once,
    before anything is written. A path that is no folder to write (a file, ``/dev/null``, a name too
    long) is refused by :func:`model.atomic.check_output`."""
    try:
        path = check_output(path, what="run folder", folder=True)
    except OutputError as exc:
        raise RunFolderError(str(exc)) from None
    entries = sorted(p.name for p in path.iterdir()) if path.is_dir() else []
    entries = [name for name in entries if not _is_lock(path / name)]  # a run's while it writes
    if not entries:
        return path
    if STATUS_FILE not in entries:
        if CONFIG_FILE in entries:
            raise RunFolderError(
                f"{str(path)!r} is a bare checkpoint, not a run folder: pass --out NEWDIR for the run "
                "(--resume reads the checkpoint from here)"
            )
        raise RunFolderError(
            f"refusing to write into {str(path)!r}: it is a non-empty folder that is not a checkpoint or "
            f"run folder (it holds {_listed(entries)}): choose another --out"
        )
    if not _our_status(path / STATUS_FILE):
        raise RunFolderError(
            f"refusing to write into {str(path)!r}: its {STATUS_FILE} is not one this program wrote, so "
            "the folder is not a run folder of ours: choose another --out"
        )
    foreign = _foreign_entries(path)
    if foreign:
        raise RunFolderError(
            f"refusing to write into the run folder {str(path)!r}: {_listed(foreign)} "
            f"{'is' if len(foreign) == 1 else 'are'} not the run's own (a run replaces and removes its "
            "files): move them out, or choose another --out"
        )
    return path


def _listed(names: list[str], most: int = 3) -> str:
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def _our_status(path: Path) -> bool:
    """Whether ``run.json`` is a run's status written by :class:`RunWriter` (``format`` says so; a
    folder written before the mark was added has a ``status`` of ours and no ``format``)."""
    try:
        if not path.is_file() or path.stat().st_size > 1 << 20:
            return False
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(info, dict):
        return False
    if "format" in info:
        return info["format"] == RUN_FORMAT
    return info.get("status") in ("running", *DONE_STATES)


def _is_lock(entry: Path) -> bool:
    """Whether ``entry`` is a run's lock file (:mod:`model.io.runs.lock`; a killed run's stays)."""
    return entry.name == LOCK_FILE and entry.is_file() and not entry.is_symlink()


def _is_temp(name: str, of: str | None = None) -> bool:
    m = TEMP_NAME.fullmatch(name)
    return m is not None and (of is None or m.group("name") == of or bool(re.fullmatch(of, m.group("name"))))


def _foreign_entries(path: Path) -> list[str]:
    """What in the run folder ``path`` a run did not write (paths relative to it), in order."""
    foreign: list[str] = []

    def only(folder: Path, ok) -> None:
        if folder.is_symlink() or not folder.is_dir():
            foreign.append(str(folder.relative_to(path)))
            return
        children = sorted(folder.iterdir(), key=lambda c: c.name)
        foreign.extend(str(c.relative_to(path)) for c in children if not ok(c))

    def checkpoint_file(p: Path) -> bool:
        return p.name in _CHECKPOINT_FILES and p.is_file() and not p.is_symlink()

    def checkpoint_dir(p: Path) -> bool:
        if p.is_symlink() or not p.is_dir():
            return False
        only(p, checkpoint_file)
        return True

    for entry in sorted(path.iterdir(), key=lambda c: c.name):
        name = entry.name
        if (name in (STATUS_FILE, LOG_FILE) and entry.is_file() and not entry.is_symlink()) or _is_lock(
            entry
        ):
            continue
        if name in (CHECKPOINT_DIR, f".{CHECKPOINT_DIR}.old") or _is_temp(name, CHECKPOINT_DIR):
            if checkpoint_dir(entry):
                continue
        elif name == PROBES_DIR:
            only(entry, lambda p: p.is_file() and bool(_PROBE_FILE.fullmatch(p.name) or _is_temp(p.name)))
            continue
        elif name == KEPT_DIR:
            only(
                entry,
                lambda p: (
                    (bool(_STEP_DIR.fullmatch(p.name)) or _is_temp(p.name, _STEP_DIR.pattern))
                    and checkpoint_dir(p)
                ),
            )
            continue
        elif _is_temp(name, STATUS_FILE) and entry.is_file():
            continue
        foreign.append(name if not entry.is_dir() else name + "/")
    return foreign


def check_extra_log(path: str | Path, *, run: str | Path, inputs: tuple[str | Path | None, ...] = ()) -> Path:
    """Raise :class:`RunFolderError` (or :class:`model.atomic.OutputError`) unless ``path`` may get a
    copy of the log rows (the train command's ``--log-json``): a regular file or a new one in an
    existing folder, outside the run folder ``run`` (which holds only the run's own files), none of
    the run's ``inputs`` (corpus, config, checkpoint), and, when it exists and is not empty, a log of
    ours (JSON lines, each an object with a whole-number ``step``: an earlier run's ``--log-json``).
    Nothing is written."""
    path = check_output(path, what="--log-json", room=0)
    shown = f"--log-json {str(path)!r}"
    parent = path.absolute().parent
    if not parent.is_dir():
        raise RunFolderError(f"{shown}: the folder {str(parent)!r} does not exist")
    for folder in (run, *inputs):
        if folder is None or not Path(folder).exists():
            continue
        here = Path(folder).resolve()
        target = path.resolve()
        if target == here:
            raise RunFolderError(f"{shown} is an input of this run: name a new file for the log")
        if here.is_dir() and here in target.parents:
            what = "the run folder" if folder == run else "an input of this run"
            raise RunFolderError(f"{shown} is inside {what} {str(folder)!r}: name a file outside it")
    if path.exists() and path.stat().st_size and not _is_log(path):
        raise RunFolderError(
            f"{shown} exists and is not a training log (JSON lines with a step each): name a new file, "
            "or one an earlier run's --log-json wrote"
        )
    return path


def _is_log(path: Path, sample: int = 1 << 18) -> bool:
    """Whether the first and last ``sample`` bytes of ``path`` are whole JSON lines of log rows."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            chunks = [f.read(sample)]
            if size > 2 * sample:
                f.seek(size - sample)
                chunks.append(f.read(sample))
    except OSError:
        return False
    lines: list[bytes] = []
    for i, chunk in enumerate(chunks):
        parts = chunk.split(b"\n")
        if len(chunks) > 1 and i == 1:
            parts = parts[1:]  # the tail starts mid-line
        if size > len(chunk) and i == 0:
            parts = parts[:-1]  # the head ends mid-line
        lines.extend(p for p in parts if p.strip())
    if not lines:
        return False
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            return False
        if (
            not isinstance(row, dict)
            or isinstance(row.get("step"), bool)
            or not isinstance(row.get("step"), int)
        ):
            return False
    return True


def probe_name(step: int) -> str:
    return f"step-{int(step):08d}.npz"


def write_probe(folder: str | Path, frame: AttentionFrame) -> Path:
    """Write ``frame`` as ``folder/step-NNNNNNNN.npz`` in one step: the frame's one packing
    (:meth:`~model.interp.frame.AttentionFrame.to_arrays`, float16 weights), no pickles."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    # Any: numpy's stubs would match a dict of arrays to savez's allow_pickle (numpy ≥ 2.1)
    arrays: dict[str, Any] = frame.to_arrays()
    arrays["weights"] = arrays["weights"].astype(np.float16, copy=False)
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    path = folder / probe_name(frame.step or 0)
    write_atomic(path, buf.getvalue(), fsync=True)
    return path


def read_probe(path: str | Path) -> AttentionFrame:
    """A probe written by :func:`write_probe` (or before its weights were packed); raises ValueError
    when it is incomplete or malformed, before unpacking anything."""
    name = Path(path).name
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        frame = AttentionFrame.from_arrays(arrays, "its frame")
    except (OSError, KeyError, EOFError, zipfile.BadZipFile, ValueError) as exc:
        raise ValueError(f"probe {name} is incomplete or malformed: {exc}") from None
    if frame.weights.dtype != np.float16 or frame.step is None:
        raise ValueError(f"probe {name} does not hold float16 weights [L, H, T, T] of a step")
    return frame


def cut_log_after(path: str | Path, step: int) -> int:
    """Cut the log ``path`` before its first row past ``step``: a run resumed from its save of
    ``step`` logs the later steps again, so the rows a killed run logged after that save go (so does
    a line that is not a whole JSON object with a step, and all after it). The file is replaced
    in one step (a new file: a follower reads it again from the start); untouched when nothing is
    past ``step``. Returns how many lines were cut."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return 0
    lines = data.splitlines(keepends=True)
    keep = 0  # lines up to and including the last row of a step <= `step`
    for i, line in enumerate(lines):
        try:
            row = json.loads(line)
        except ValueError:
            if not line.strip():
                continue
            break
        at = row.get("step") if isinstance(row, dict) else None
        if not line.endswith(b"\n") or isinstance(at, bool) or not isinstance(at, int) or at > step:
            break
        keep = i + 1
    if keep == len(lines):
        return 0
    write_atomic(path, b"".join(lines[:keep]), fsync=True)
    return len(lines) - keep


def _open_log(path: str | Path, mode: str, what: str | None = None) -> Any:
    """A log file open for whole-line writes (unbuffered bytes: nothing is left to flush at close)."""
    with writing(path, what):
        return open(path, mode + "b", buffering=0)


# ---------------------------------------------------------------------------------------------
class RunWriter:
    """Writes a run folder (see the module docstring); used by rank 0 only.

    ``resume_step``: the run continues an earlier one from its checkpoint of that step -- the log (and
    ``extra_log``) are appended to, once cut before their first row past it
    (:func:`cut_log_after`); None: they start empty and old probes are removed. ``extra_log``: a
    second file that gets every log row (the command's ``--log-json``; :func:`check_extra_log` says
    whether it may).

    The folder is checked first (:func:`check_run_folder`) and ``run.json`` (status ``running``, our
    ``format``) is its first file; a failure to open ``extra_log`` leaves the folder as it was.
    """

    def __init__(
        self, path: str | Path, *, resume_step: int | None = None, extra_log: str | Path | None = None
    ):
        self.path = check_run_folder(path)
        self.probes = self.path / PROBES_DIR
        self.info: dict[str, Any] = {"format": RUN_FORMAT}
        self._logs: list[Any] = []
        resume = resume_step is not None
        mode = "a" if resume else "w"
        created = not self.path.exists()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RunFolderError(
                f"cannot create the run folder {str(self.path)!r}: {exc.strerror or exc}"
            ) from None
        if extra_log is not None:
            try:
                if resume_step is not None:
                    cut_log_after(extra_log, resume_step)
                self._logs.append(_open_log(extra_log, mode, f"--log-json {extra_log}"))
            except OSError as exc:
                if created:
                    self.path.rmdir()
                raise RunFolderError(str(exc)) from None
        self.status("running")  # the mark that the folder is a run's, before any other file
        if not resume:  # a fresh log file (a new inode tells a follower to start over) and no old probes
            (self.path / LOG_FILE).unlink(missing_ok=True)
            for old in self.probes.glob("step-*.npz") if self.probes.is_dir() else ():
                old.unlink()
        elif resume_step is not None:
            cut_log_after(self.path / LOG_FILE, resume_step)
        self._logs.insert(0, _open_log(self.path / LOG_FILE, mode))

    @property
    def checkpoint(self) -> Path:
        return self.path / CHECKPOINT_DIR

    def status(self, status: str, **info: Any) -> None:
        """Record the run's status (and any details) in ``run.json``, in one step."""
        self.info.update(info)
        self.info.update(status=status, updated=time.time())
        self.info.setdefault("host", socket.gethostname())
        self.info.setdefault("pid", os.getpid())
        write_atomic(self.path / STATUS_FILE, json.dumps(self.info, indent=1) + "\n", fsync=True)

    def log(self, row: dict[str, Any]) -> None:
        """Append one row as one whole line, at once (a follower sees it); a line that cannot be written
        whole (a full disk, a file-size limit) is cut off again, and :class:`model.atomic.WriteError`
        says so: the lines before it stay as they were."""
        line = (json.dumps(row) + "\n").encode("utf-8")
        for f in self._logs:
            with writing(f.name):
                end = os.fstat(f.fileno()).st_size
                try:
                    done = 0
                    while done < len(line):
                        done += f.write(line[done:]) or 0
                except OSError:
                    with contextlib.suppress(OSError):
                        os.ftruncate(f.fileno(), end)
                    raise

    def probe(self, frame: AttentionFrame) -> Path:
        return write_probe(self.probes, frame)

    def close(self) -> None:
        for f in self._logs:
            f.close()
        self._logs = []
