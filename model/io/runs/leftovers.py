"""What an earlier run left in a run folder (:mod:`model.io.runs.folder`) that the next one must mind:
its trained model, named by :func:`saved_run` so that a fresh run does not replace it unasked, and
the temporary names of writes a kill cut short, removed by :func:`clean_run_temps`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
from pathlib import Path
from typing import Any

from model.atomic import pid_alive
from model.io.checkpoint.saved import CONFIG_FILE, META_FILE, STATE_FILE
from model.io.runs.folder import CHECKPOINT_DIR, KEPT_DIR, PROBES_DIR, STATUS_FILE, TEMP_NAME

__all__ = ["clean_run_temps", "saved_run"]


def _small_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path`` (at most 1 MiB), or {} when there is none to read."""
    try:
        if not path.is_file() or path.stat().st_size > 1 << 20:
            return {}
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


#: How :func:`saved_run` names a run by its ``run.json`` status (``running``: its process is gone,
#: since a live one holds the folder's lock).
_RUN_WORDS = {
    "finished": "a finished run",
    "stopped": "a run stopped early",
    "failed": "a failed run",
    "running": "an interrupted run",
}


def saved_run(path: str | Path) -> str | None:
    """One line naming the trained model in the run folder ``path``, e.g. ``a finished run (its
    checkpoint of step 60, saved 2026-12-07 17:40 UTC)``; None when it holds no checkpoint. The step
    is the checkpoint's ``train_state.json``, the date its ``meta.json``'s ``saved_at``."""
    path = Path(path)
    ckpt = path / CHECKPOINT_DIR
    if ckpt.is_symlink() or not (ckpt / CONFIG_FILE).is_file():
        return None
    status = _small_json(path / STATUS_FILE).get("status")
    what = _RUN_WORDS.get(status if isinstance(status, str) else "", "a run")
    step = _small_json(ckpt / STATE_FILE).get("step")
    details = [f"its checkpoint of step {step}" if isinstance(step, int) else "a checkpoint"]
    saved = _small_json(ckpt / META_FILE).get("saved_at")
    try:
        when = _dt.datetime.fromisoformat(saved).astimezone(_dt.timezone.utc)  # type: ignore[arg-type]
        details.append(f"saved {when:%Y-%m-%d %H:%M} UTC")
    except (TypeError, ValueError):
        pass
    return f"{what} ({', '.join(details)})"


def clean_run_temps(path: str | Path, *, held: bool) -> list[Path]:
    """Remove what killed writes left in the run folder ``path`` (in it, ``checkpoints/`` and
    ``probes/``): a save's ``.checkpoint.tmp-PID-…`` folder, a kept save's, a file's
    ``.NAME.PID.….tmp``. ``held``: this process holds the folder's lock (:mod:`model.io.runs.lock`), so
    no other run writes here and every one of them is stale, whatever its PID (a killed run's PID may
    be alive again, even as ours: a restarted container numbers its processes from 1 again);
    otherwise only those whose process is gone. Returns what was removed."""
    path = Path(path)
    removed: list[Path] = []
    for folder in (path, path / KEPT_DIR, path / PROBES_DIR):
        try:
            entries = sorted(folder.iterdir()) if folder.is_dir() and not folder.is_symlink() else []
        except OSError:
            continue
        for entry in entries:
            m = TEMP_NAME.fullmatch(entry.name)
            if m is None or entry.is_symlink():
                continue
            pid = int(m.group("pid") or m.group("pid2"))
            if not held and (pid == os.getpid() or pid_alive(pid)):
                continue
            try:
                if entry.is_dir():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            except OSError:
                continue
            removed.append(entry)
    return removed
