"""Atomic file writes: a temporary file beside the target, then one rename.

Every single-file write of the project goes through :func:`write_atomic` (inspection exports, CSV,
comparison files, run-folder status and probes), so a killed process never leaves a half-written
file under the real name, and the temporary file it may leave (``.NAME.PID.<random>.tmp``) is
removed by the next write to the same path (:func:`clean_stale_temps`) once its process is gone.

:func:`check_output` is the one answer to "may this output path be written?" for every command's
``--out`` (a file or a folder): it refuses, in one line and before anything is computed, a device, a
pipe or a socket (``/dev/null``), a file where a folder is wanted or the reverse, a path under a file,
and a name longer than the file system allows (room left for the temporary name beside it).

:func:`writing` is the one answer to a write that fails on the way (a full disk, a file-size limit, a
folder made read-only): every writer of the project -- these single files, the checkpoint's folder,
the run folder's log rows, the screenshots -- raises :class:`WriteError`, one line naming what was
being written and why, which a command prints with exit status 2. What was there before stays whole
(the failed write was to a temporary name, or appended whole lines only).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from model.errors import AttentionLabError, first_line

#: Bytes a temporary name adds to the name it is written for (``.NAME.PID.<random>.tmp``).
TEMP_NAME_ROOM = 32


class OutputError(AttentionLabError, ValueError):
    """An output path that cannot or may not be written (one line naming it and why)."""


class WriteError(OutputError, OSError):
    """A write that failed on the way (see :func:`writing`): one line naming the file and why. Still an
    ``OSError``, so a caller that catches those (the window's save dialogs) goes on catching it."""


#: What to add to a reason that does not say which limit was met.
_HINTS = {errno.EFBIG: " (the file-size limit: see ulimit -f)", errno.ENOSPC: " (the disk is full)"}


@contextlib.contextmanager
def writing(path: str | Path, what: str | None = None) -> Iterator[Path]:
    """Turn an ``OSError`` of the writes inside into :class:`WriteError`: ``cannot write WHAT: REASON``
    (``what`` defaults to ``path``, quoted). A :class:`WriteError` from a writer nested inside, which
    named its file already, passes unchanged. Yields ``Path(path)``."""
    try:
        yield Path(path)
    except WriteError:
        raise
    except OSError as exc:
        reason = (exc.strerror or first_line(exc)) + _HINTS.get(exc.errno or 0, "")
        shown = repr(str(path)) if what is None else what
        raise WriteError(f"cannot write {shown}: {reason}") from None


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _stat(path: Path) -> os.stat_result | None:
    """``os.stat(path)``, or None when nothing is there (or a name on the way is too long to look up)."""
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ELOOP):
            return None
        raise


def _limit(folder: Path, name: str, default: int) -> int:
    try:
        return int(os.pathconf(folder, name))
    except (OSError, ValueError):
        return default


def check_output(
    path: str | Path, *, what: str = "", folder: bool = False, room: int = TEMP_NAME_ROOM
) -> Path:
    """Raise :class:`OutputError` unless ``path`` may be written: as a regular file (replaced whole,
    through a temporary name ``room`` bytes longer) or, with ``folder``, as a folder (made if missing).

    Refused: an empty path; a name longer than the file system allows; a path that is a device, a pipe
    or a socket (``/dev/null``: nothing would be saved), a folder where a file is wanted or a file
    where a folder is; a dangling link; a path below something that is not a folder. ``what`` (e.g.
    ``"--out"``) starts the message. Whether a folder's contents are ours to replace is the caller's
    rule (a run folder: :func:`model.io.runs.folder.check_run_folder`). Returns ``path``.
    """
    prefix = f"{what}: " if what else ""
    kind = "folder" if folder else "file"
    if not str(path).strip():
        raise OutputError(f"{prefix}the output is empty: name the {kind} to write")
    path = Path(path)
    here = path.parent
    while _stat(here) is None and here != here.parent:
        here = here.parent
    name_max = _limit(here, "PC_NAME_MAX", 255)
    parts = path.parts
    for i, part in enumerate(parts):
        size = len(os.fsencode(part))
        allowed = name_max - (room if i == len(parts) - 1 and not folder else 0)
        if size > allowed:
            short = part if len(part) <= 24 else part[:24] + "…"
            raise OutputError(
                f"{prefix}cannot write {short!r}: the name is {size} bytes and at most {allowed} fit here "
                "(the file system's limit): choose a shorter name"
            )
    size = len(os.fsencode(os.path.abspath(path))) + room
    if size > _limit(here, "PC_PATH_MAX", 4096):
        raise OutputError(
            f"{prefix}cannot write {str(path)[:40]!r}…: the path is too long for the file system"
        )
    st = _stat(path)
    shown = f"{prefix}cannot write {str(path)!r}"
    if st is None:
        if os.path.islink(path):
            raise OutputError(f"{shown}: it is a link to nothing; remove it or choose another {kind}")
        above = _stat(here)
        if above is not None and not stat.S_ISDIR(above.st_mode):
            raise OutputError(f"{shown}: {str(here)!r} is not a folder")
        return path
    if stat.S_ISDIR(st.st_mode):
        if not folder:
            raise OutputError(f"{shown}: it is a folder; name the file to write")
    elif stat.S_ISREG(st.st_mode):
        if folder:
            raise OutputError(f"{shown}: it is a file, not a folder")
    else:
        raise OutputError(
            f"{shown}: it is not a {'folder' if folder else 'regular file'} but a device, pipe or socket "
            "(nothing would be saved there)"
        )
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _temp_prefix(path: Path) -> str:
    """Temporary files of a write to ``path`` are ``.NAME.PID.<random>.tmp`` beside it."""
    return f".{path.name}."


def clean_stale_temps(path: str | Path) -> list[Path]:
    """Remove temporary files that killed writes to ``path`` left beside it (their process is gone).

    Returns what was removed. Called at the start of every write, so a killed ``inspect`` leaves its
    partial file only until the next one.
    """
    path = Path(path)
    prefix = _temp_prefix(path)
    removed: list[Path] = []
    try:
        siblings = list(path.parent.iterdir())
    except OSError:
        return removed
    for p in siblings:
        if not (p.name.startswith(prefix) and p.name.endswith(".tmp")) or not p.is_file():
            continue
        pid_text = p.name[len(prefix) :].split(".", 1)[0]
        if not pid_text.isdigit() or int(pid_text) == os.getpid() or pid_alive(int(pid_text)):
            continue
        try:
            p.unlink()
            removed.append(p)
        except OSError:
            pass
    return removed


def write_atomic(
    path: str | Path,
    content: bytes | str | Callable[[IO[Any]], Any],
    *,
    text: bool = False,
    fsync: bool = False,
) -> Path:
    """Write ``content`` to ``path`` through a temporary file beside it, then rename; returns ``path``.

    ``content``: bytes, a str (written as UTF-8 text), or a function ``write(fh)`` called with the open
    temporary file (text mode with ``text=True``, newline translation off). ``fsync``: flush to disk
    before the rename (files another process follows, or that must survive a power cut).

    The file gets the mode an ordinary ``open`` would give it (0666 less the process's umask), not the
    0600 of a temporary file; temporary files of earlier killed writes are removed first. On any
    error the temporary file is removed and the exception propagates (an ``OSError`` as
    :class:`WriteError`, :func:`writing`); ``path`` is untouched.
    """
    path = Path(path)
    if isinstance(content, str):
        data, text = content, True
        content = lambda fh: fh.write(data)  # noqa: E731
    elif isinstance(content, (bytes, bytearray, memoryview)):
        blob, text = content, False
        content = lambda fh: fh.write(blob)  # noqa: E731
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(path)
        prefix = f"{_temp_prefix(path)}{os.getpid()}."
        fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp", dir=path.parent)
        try:
            stream: IO[Any] = (
                os.fdopen(fd, "w", newline="", encoding="utf-8") if text else os.fdopen(fd, "wb")
            )
            with stream as fh:
                os.chmod(tmp, 0o666 & ~_umask())
                content(fh)
                if fsync:
                    fh.flush()
                    os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return path
