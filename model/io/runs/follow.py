"""Following a run folder (:mod:`model.io.runs.folder`) while a run writes it: :class:`RunFollower`.

It reads what is new since its last :meth:`~RunFollower.poll`: whole log lines only (a line still
being written waits for the next poll; a complete line that is not JSON is skipped), probes that load
completely (one that does not is retried later and never shown half), the newest checkpoint's step,
and the status. It never writes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model.interp.frame import AttentionFrame
from model.io.runs.folder import CHECKPOINT_DIR, DONE_STATES, LOG_FILE, PROBES_DIR, STATUS_FILE, read_probe

__all__ = ["FollowUpdate", "RunFollower"]


@dataclass
class FollowUpdate:
    """What appeared in a run folder since the previous poll.

    ``rows``: new log rows in order; ``frames``: new probe frames by step; ``checkpoint_step``: the
    newest checkpoint's step when it changed (else None); ``status``: the run's status (``"gone"``
    once the folder has disappeared); ``done``: nothing more will come.
    """

    rows: list[dict[str, Any]] = field(default_factory=list)
    frames: list[AttentionFrame] = field(default_factory=list)
    checkpoint_step: int | None = None
    status: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    done: bool = False
    restarted: bool = False

    def __bool__(self) -> bool:
        news = self.rows or self.frames or self.checkpoint_step is not None
        return bool(news or self.done or self.restarted)


class RunFollower:
    """Reads what is new in a run folder at each :meth:`poll` (never writes; see the module docstring)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._offset = 0
        self._inode: int | None = None
        self._head = b""  # the log's first line: tells a copy of the same log from a new run's
        self._seen_probes: set[str] = set()
        self._ckpt_key: tuple[Any, ...] | None = None
        self.status: str | None = None
        self.info: dict[str, Any] = {}

    @property
    def checkpoint(self) -> Path:
        return self.path / CHECKPOINT_DIR

    def poll(self) -> FollowUpdate:
        up = FollowUpdate()
        if not self.path.is_dir():
            up.status, up.done = "gone", True
            return up
        self._read_status(up)
        self._read_log(up)
        self._read_probes(up)
        self._read_checkpoint(up)
        up.status, up.info = self.status, dict(self.info)
        # done only once the status says so AND everything written before it has been read
        up.done = self.status in DONE_STATES and not up.rows and not up.frames
        return up

    def _read_status(self, up: FollowUpdate) -> None:
        try:
            info = json.loads((self.path / STATUS_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(info, dict):
            self.info = info
            self.status = str(info.get("status")) if info.get("status") else None

    def _read_log(self, up: FollowUpdate) -> None:
        path = self.path / LOG_FILE
        try:
            st = path.stat()
        except OSError:
            return
        # a new file: a sync tool's fresh copy of the same log (same first line, no shorter)
        # continues; anything else is a fresh run's log: start over
        moved = self._inode is not None and (st.st_ino != self._inode or st.st_size < self._offset)
        if moved and (st.st_size < self._offset or self._first_line(path) != self._head):
            self._offset, self._head = 0, b""
            self._seen_probes.clear()
            up.restarted = True
        self._inode = st.st_ino
        if st.st_size <= self._offset:
            return
        try:
            with open(path, "rb") as f:
                f.seek(self._offset)
                data = f.read(st.st_size - self._offset)
        except OSError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return  # only part of a line so far
        if not self._head:
            self._head = data[: data.find(b"\n") + 1]
        self._offset += end + 1
        for line in data[: end + 1].splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                up.rows.append(row)

    @staticmethod
    def _first_line(path: Path) -> bytes:
        try:
            with open(path, "rb") as f:
                return f.readline()
        except OSError:
            return b""

    def _read_probes(self, up: FollowUpdate) -> None:
        folder = self.path / PROBES_DIR
        try:
            names = sorted(p.name for p in folder.iterdir() if p.name.startswith("step-"))
            names = [n for n in names if n.endswith(".npz")]
        except OSError:
            return
        for name in names:
            if name in self._seen_probes:
                continue
            try:
                frame = read_probe(folder / name)
            except ValueError:
                continue  # incomplete (a copy still arriving): try again next poll
            self._seen_probes.add(name)
            up.frames.append(frame)

    def _read_checkpoint(self, up: FollowUpdate) -> None:
        meta = self.checkpoint / "meta.json"
        try:
            st = meta.stat()
            key = (st.st_ino, st.st_mtime_ns, st.st_size)
            if key == self._ckpt_key:
                return
            step = json.loads(meta.read_text(encoding="utf-8")).get("step")
        except (OSError, ValueError, AttributeError):
            return
        if isinstance(step, int):
            self._ckpt_key = key
            up.checkpoint_step = step
