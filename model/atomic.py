"""Atomic file writes: a temporary file beside the target, then one rename.

Every single-file write of the project goes through :func:`write_atomic` (inspection exports, CSV,
comparison files, run-folder status and probes), so a killed process never leaves a half-written
file under the real name, and the temporary file it may leave (``.NAME.PID.<random>.tmp``) is
removed by the next write to the same path (:func:`clean_stale_temps`) once its process is gone.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


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
    error the temporary file is removed and the exception propagates; ``path`` is untouched.
    """
    path = Path(path)
    if isinstance(content, str):
        data, text = content, True
        content = lambda fh: fh.write(data)  # noqa: E731
    elif isinstance(content, (bytes, bytearray, memoryview)):
        blob, text = content, False
        content = lambda fh: fh.write(blob)  # noqa: E731
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{_temp_prefix(path)}{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        stream: IO[Any] = os.fdopen(fd, "w", newline="", encoding="utf-8") if text else os.fdopen(fd, "wb")
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
