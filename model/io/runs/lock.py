"""The lock of a run folder (:mod:`model.io.runs.folder`): one run writes a folder at a time.

A run holds an OS file lock (``flock``) on ``DIR/.run.lock`` while it writes ``DIR``, the file holding
its PID. The kernel drops the lock with the process, so a run killed by ``kill -9`` leaves no stale
lock: its file may stay, unlocked, and the next run takes it. A second run into the same folder is
refused (:class:`RunFolderBusy`) in one line naming the folder and the first one's PID, before it
builds anything. On release the file is removed, and so are the folders the lock made for a run that
then wrote nothing (a refused run leaves nothing behind).

Where the platform has no ``fcntl`` (Windows), or the file system refuses locks, runs are not kept
apart: the lock is a no-op there, never an error.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from types import ModuleType

from model.atomic import writing
from model.errors import AttentionLabError

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None

__all__ = ["LOCK_FILE", "RunFolderBusy", "RunLock", "refuse_if_busy"]

#: The lock file inside a run folder (a run's own file for :func:`model.io.runs.folder.check_run_folder`).
LOCK_FILE = ".run.lock"


class RunFolderBusy(AttentionLabError, ValueError):
    """Another process is writing the run folder (one line naming it and that process's PID)."""


class RunLock:
    """``with RunLock(path):`` holds the lock of the run folder ``path`` (made, with any missing folder
    above it, when missing; with ``create`` False a missing folder is left missing and unlocked: the
    folder a resume reads, whose absence the reader reports); :class:`RunFolderBusy` when another
    process holds it."""

    def __init__(self, path: str | Path, *, create: bool = True):
        self.path = Path(path)
        self.create = create
        self._fd: int | None = None
        self._made: list[Path] = []  # the folders made for the lock, deepest first

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> RunLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        if fcntl is None or self._fd is not None or not (self.create or self.path.is_dir()):
            return
        here = self.path
        while not os.path.lexists(here) and here != here.parent:
            self._made.append(here)
            here = here.parent
        with writing(self.path, what=f"the run folder {str(self.path)!r}"):
            self.path.mkdir(parents=True, exist_ok=True)
            lock = self.path / LOCK_FILE
            while self._fd is None:
                fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    pid = _holder(fd)
                    os.close(fd)
                    self._remove_made()
                    raise RunFolderBusy(_busy(self.path, pid)) from None
                except OSError:  # a file system without locks: run unlocked, as without fcntl
                    os.close(fd)
                    return
                if _same_file(fd, lock):
                    self._fd = fd
                else:  # its holder removed the file as we opened it: lock the one there now
                    os.close(fd)
            os.ftruncate(self._fd, 0)
            os.write(self._fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        """Remove the lock file (while still held: a process that opened it meanwhile sees it gone and
        tries again) and drop the lock; then remove the folders made for it if they are still empty."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            (self.path / LOCK_FILE).unlink()
        os.close(self._fd)
        self._fd = None
        self._remove_made()

    def _remove_made(self) -> None:
        for folder in self._made:
            try:
                folder.rmdir()
            except OSError:  # not empty: the run wrote into it
                break
        self._made = []


def _busy(path: Path, pid: str) -> str:
    return (
        f"the run folder {str(path)!r} is being written by another run (PID {pid}): "
        "wait for it to end, or choose another --out"
    )


def refuse_if_busy(path: str | Path) -> None:
    """:class:`RunFolderBusy` when another process holds the lock of the run folder ``path`` (a probe
    that takes nothing). Checked before the folder's files are read: a run writing there has
    temporary files of its own, which a check of a folder at rest would name as foreign."""
    if fcntl is None:
        return
    try:
        fd = os.open(Path(path) / LOCK_FILE, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:  # no lock file: nobody is writing it
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunFolderBusy(_busy(Path(path), _holder(fd))) from None
        except OSError:  # a file system without locks
            return
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _holder(fd: int) -> str:
    """The PID the lock file ``fd`` holds (``unknown`` while its holder has not written it yet)."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return text if text.isdigit() else "unknown"


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)
