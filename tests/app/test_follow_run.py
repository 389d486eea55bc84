"""File → Follow a run folder: a headless run in a subprocess writes a folder while the Train tab
follows it -- curves, live heads, the scrubber and the newest checkpoint arrive; the GUI stays
responsive; following ends when the run ends, when the folder disappears, or on Stop."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from PySide6.QtCore import QTimer

from model.interp.frame import AttentionFrame
from model.io.checkpoint.saved import load_checkpoint
from model.io.runs.folder import RunWriter, read_probe

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 90_000
#: how long the headless run itself may take (a process at its own pace, not the window's)
RUN_TIMEOUT = 600_000
#: A window that reads the run folder on the GUI thread freezes for whole files (hundreds of ms);
#: this bound catches that, not the latency goal, which bench/gui_latency.py measures (a timed test
#: on two shared cores would fail by chance).
FREEZE_MS = 150.0


def p99_limit() -> float:
    """:data:`FREEZE_MS`, scaled by how oversubscribed the shared cores are right now (1x when idle)."""
    return FREEZE_MS * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


@pytest.fixture
def tiny_window_tabs():
    return ["train"]


#: steps of the followed run: enough for rows and probes to arrive while it runs, short for the suite
STEPS = 150


def headless_run(out: Path, steps: int = STEPS) -> subprocess.Popen:
    argv = ["train", "--corpus", "task:copy", "--n-layers", "2", "--d-model", "16", "--n-heads", "2"]
    argv += ["--context-length", "32", "--seq-len", "16", "--batch-size", "4", "--threads", "1"]
    argv += ["--steps", str(steps), "--probe-every", "10", "--save-every", "50", "--log-every", "2"]
    argv += ["--eval-every", "50", "--eval-batches", "1", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.Popen(
        [sys.executable, "-m", "app.main", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.nice(10),  # like the app's own training thread: the GUI wins a core first
    )


class Lateness:
    """How late a 5 ms GUI-thread timer fires: the event-loop delay a user feels (ms)."""

    def __init__(self):
        self.delays: list[float] = []
        self.timer = QTimer()
        self.timer.setInterval(5)
        self.timer.timeout.connect(self._tick)
        self._last = time.perf_counter()
        self.timer.start()

    def _tick(self):
        now = time.perf_counter()
        self.delays.append(max(0.0, (now - self._last) * 1000 - 5))
        self._last = now

    def p99(self) -> float:
        self.timer.stop()
        return float(np.percentile(self.delays, 99))


@pytest.mark.slow
def test_the_train_tab_follows_a_headless_run_live(qtbot, tiny_window, tmp_path):
    win, s = tiny_window, tiny_window.session
    tab = win.tabs["train"]
    run = tmp_path / "run"
    proc = headless_run(run)
    try:
        qtbot.waitUntil(lambda: (run / "run.json").exists(), timeout=TIMEOUT)
        seen_running = []
        s.eventsAppended.connect(
            lambda ev: seen_running.append(json.loads((run / "run.json").read_text())["status"])
        )
        lateness = Lateness()
        assert win.files.follow_run(str(run))
        assert s.state == "following" and tab.follow_bar.isVisible() and not tab.start_button.isEnabled()
        ended: list[tuple[str, str]] = []
        s.trainingFinished.connect(lambda reason, message: ended.append((reason, message)))
        # the other process ends at its own pace (slow on a loaded machine): wait for that event, then
        # for the window to read its last rows (polled every few hundred ms, whatever the load)
        qtbot.waitUntil(lambda: proc.poll() is not None, timeout=RUN_TIMEOUT)
        assert proc.wait() == 0, proc.stderr.read()
        qtbot.waitUntil(lambda: bool(ended), timeout=TIMEOUT)
        p99, limit = lateness.p99(), p99_limit()
        print(f"event-loop delay p99 {p99:.1f} ms over {len(lateness.delays)} ticks")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reason, message = ended[0]
    assert reason == "done" and f"finished at step {STEPS}" in message
    assert "running" in seen_running  # rows arrived while the other process was still writing
    assert s.state == "idle" and not tab.follow_bar.isVisible()

    rows = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in s.history] == [r["step"] for r in rows]
    assert tab.plots.n_points == len(rows)
    probes = sorted((run / "probes").iterdir())
    assert [f.step for f in s.frames] == [read_probe(p).step for p in probes]
    assert tab.live.scrubber.maximum() == len(s.frames) - 1
    np.testing.assert_array_equal(tab.live.head_grid.weights, read_probe(probes[-1]).weights)
    assert s.latest_frame.step == STEPS

    # the newest checkpoint became the session's model (what the Attention tab shows)
    qtbot.waitUntil(lambda: s.checkpoint_path == str(run) and s.model is not None, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: s.checkpoint_meta.get("step") == STEPS, timeout=TIMEOUT)
    saved = load_checkpoint(run).model.state_dict()
    assert all(torch.equal(saved[k], v) for k, v in s.model.state_dict().items())
    assert p99 <= limit, f"event-loop p99 {p99:.1f} ms (limit {limit:.0f} ms at this load)"


def _fake_run(path: Path, steps: int = 3) -> RunWriter:
    w = RunWriter(path)
    w.status("running", steps=10, world_size=2)
    for step in range(1, steps + 1):
        w.log({"step": step, "train_loss": 3.0 - step / 10, "val_loss": None, "lr": 1e-3, "elapsed": step})
    weights = np.full((1, 2, 2, 2), 0.5, dtype=np.float16)
    w.probe(AttentionFrame(step=steps, prompt="ab", labels=["a", "b"], weights=weights))
    return w


def test_following_stops_cleanly_when_the_folder_disappears(qtbot, tiny_window, tmp_path):
    s = tiny_window.session
    w = _fake_run(tmp_path / "run")
    tiny_window.files.follow_run(str(tmp_path / "run"))
    qtbot.waitUntil(lambda: len(s.history) == 3 and len(s.frames) == 1, timeout=TIMEOUT)
    assert "2 processes" in tiny_window.tabs["train"].follow_bar.label.text()
    w.close()
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        shutil.rmtree(tmp_path / "run")
    assert done.args[0] == "done" and "disappeared" in done.args[1]
    assert s.state == "idle" and len(s.history) == 3  # what was shown stays


def test_stop_following_and_what_cannot_be_followed(qtbot, tiny_window, tmp_path):
    s = tiny_window.session
    with pytest.raises(ValueError, match="not a run folder"):
        s.follow.start(tmp_path)
    w = _fake_run(tmp_path / "run")
    assert tiny_window.files.follow_run(str(tmp_path / "run"))
    qtbot.waitUntil(lambda: len(s.history) == 3, timeout=TIMEOUT)
    with pytest.raises(ValueError, match="stop following"):
        s.start_training()
    with qtbot.waitSignal(s.trainingFinished, timeout=TIMEOUT) as done:
        tiny_window.tabs["train"].follow_bar.stop_button.click()
    assert done.args == ["stopped", f"stopped following at step 3 ({tmp_path / 'run'})"]
    assert s.state == "idle" and tiny_window.tabs["train"].start_button.isEnabled()
    w.close()
