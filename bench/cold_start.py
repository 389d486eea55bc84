"""Cold start of the desktop app: process launch → first painted window (target < 3 s).

Each run starts a fresh Python process that calls ``app.shell.gui.launch`` exactly as ``attention-lab``
does (no arguments), with a throw-away settings file. The child reports the wall-clock time of the
window's first paint and of the moment the default model and corpus are ready (built right after
the first paint), then quits. Times are measured from just before the parent spawns the child, so
interpreter start-up and every import count.

Usage: ``python bench/cold_start.py [--runs 5] [--display]`` (offscreen by default). Figures, not
pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time
from app.shell.gui import launch

def first_paint(_since_import):
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    painted = time.time()
    win = next(w for w in QApplication.topLevelWidgets() if w.objectName() == "MainWindow")

    def poll():
        if win.session.model is not None:
            print(json.dumps({"painted": painted, "ready": time.time()}), flush=True)
            win.close()
        else:
            QTimer.singleShot(10, poll)

    poll()

sys.exit(launch(on_first_paint=first_paint))
"""


def one_run(display: bool) -> tuple[float, float]:
    env = dict(os.environ)
    if not display:
        env["QT_QPA_PLATFORM"] = "offscreen"
    env["ATTENTION_LAB_SETTINGS"] = str(Path(tempfile.mkdtemp(prefix="attention-lab-bench-")) / "s.ini")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.time()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"the app did not start (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    times = json.loads(lines[-1])
    return times["painted"] - t0, times["ready"] - t0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--display", action="store_true", help="use the real display (default: offscreen)")
    args = p.parse_args()
    painted, ready = [], []
    for i in range(args.runs):
        a, b = one_run(args.display)
        painted.append(a)
        ready.append(b)
        print(f"run {i + 1}: first paint {a:.2f} s, default model ready {b:.2f} s", flush=True)
    print(
        f"cold start over {args.runs} runs: first paint median {statistics.median(painted):.2f} s "
        f"(min {min(painted):.2f}, max {max(painted):.2f}); default model and corpus ready median "
        f"{statistics.median(ready):.2f} s; target first paint < 3 s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
