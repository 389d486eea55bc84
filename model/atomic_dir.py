"""Directories written whole, as :mod:`model.atomic` writes single files: every file goes into a
sibling temporary directory (:func:`temp_dir_for`, each file fsynced by :func:`write_synced`), which
then replaces the target in one step (:func:`replace_dir`).

The step is ``renameat2(RENAME_EXCHANGE)`` on Linux; elsewhere, rename aside then rename, and a
reader falls back to the set-aside copy (:func:`set_aside`) if a crash came between the two. A save
killed at any moment leaves either the old directory or the new one; the temporary directories of
saves whose process is gone are removed by :func:`clean_stale_temps`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import uuid
from pathlib import Path

from model.atomic import pid_alive

TMP_TAG = ".tmp-"
OLD_TAG = ".old"


def fsync_dir(path: Path) -> None:
    """fsync a directory (its entries), where the platform allows it."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_synced(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` and fsync it."""
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux ``renameat2(RENAME_EXCHANGE)``); False where unsupported."""
    if not hasattr(os, "sched_getaffinity"):  # not Linux
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    rc = renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
    return rc == 0


def temp_dir_for(target: Path) -> Path:
    """A new empty directory beside ``target`` for its next version, ``.NAME.tmp-PID-<random>``
    (OSError if it cannot be made)."""
    tmp = target.parent / f".{target.name}{TMP_TAG}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    return tmp


def set_aside(target: Path) -> Path:
    """Where :func:`replace_dir` sets the previous ``target`` aside when it cannot exchange the two."""
    return target.parent / f".{target.name}{OLD_TAG}"


def replace_dir(tmp: Path, target: Path) -> None:
    """Make ``tmp`` appear at ``target`` in one step; the previous ``target`` (if any) is removed."""
    if not target.exists():
        os.rename(tmp, target)
        fsync_dir(target.parent)
        return
    if exchange(tmp, target):  # tmp now holds the old directory
        fsync_dir(target.parent)
        shutil.rmtree(tmp, ignore_errors=True)
        return
    old = set_aside(target)
    if old.exists():
        shutil.rmtree(old)
    os.rename(target, old)  # a crash here leaves `old`, which a reader falls back to
    os.rename(tmp, target)
    fsync_dir(target.parent)
    shutil.rmtree(old, ignore_errors=True)


def clean_stale_temps(target: str | Path) -> None:
    """Remove the temporary directories of earlier saves to ``target`` whose process is gone."""
    target = Path(target)
    prefix = f".{target.name}{TMP_TAG}"
    try:
        siblings = list(target.parent.iterdir())
    except OSError:
        return
    for p in siblings:
        if not p.name.startswith(prefix) or not p.is_dir():
            continue
        try:
            pid = int(p.name[len(prefix) :].split("-")[0])
        except ValueError:
            continue
        if pid != os.getpid() and not pid_alive(pid):
            shutil.rmtree(p, ignore_errors=True)


__all__ = [
    "OLD_TAG",
    "TMP_TAG",
    "clean_stale_temps",
    "exchange",
    "fsync_dir",
    "replace_dir",
    "set_aside",
    "temp_dir_for",
    "write_synced",
]
