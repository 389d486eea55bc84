"""How long work will take, and why it is slow when it is: one line for every progress readout.

On a CPU the Train tab's run and any other torch work (a lab's or Compare's training, an inspection,
a generation) take turns under one compute lock (``model.runtime.compute_lock``), so the other work
runs at a fraction of its speed while the run trains. :func:`sharing_note` says so where it happens;
:func:`eta_seconds` and :func:`format_eta` give the time left at the pace so far. No Qt.
"""

from __future__ import annotations

import math

from model.progress import eta_seconds

#: What a readout adds while the Train tab's run holds the CPU.
SHARING = "sharing the CPU with the training run (Train tab): slower until it ends or is paused"


def format_eta(seconds: float | None) -> str:
    """``m:ss`` (``h:mm:ss`` past an hour); ``–`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "–"
    s = round(seconds)
    if s >= 3600:
        return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
    return f"{s // 60}:{s % 60:02d}"


def sharing_note(session) -> str:
    """:data:`SHARING` while the session's own run trains on the CPU (running, not paused), else ''."""
    device = getattr(session, "device", None)
    on_cpu = device is None or getattr(device, "type", str(device)) == "cpu"
    return SHARING if on_cpu and getattr(session, "state", "idle") in ("starting", "running") else ""


def progress_line(head: str, done: float, total: float, elapsed: float, session=None) -> str:
    """``head · ETA m:ss`` and, while the Train tab's run shares the CPU, :data:`SHARING`."""
    parts = [head, f"ETA {format_eta(eta_seconds(done, total, elapsed))}"]
    note = sharing_note(session) if session is not None else ""
    if note:
        parts.append(note)
    return " · ".join(parts)


__all__ = ["SHARING", "eta_seconds", "format_eta", "progress_line", "sharing_note"]
