"""GUI responsiveness and training throughput while the app trains with live attention on.

In one process, on the default config and corpus (builtin:stdlib) with the app's default settings:

1. the headless ``Trainer`` trains ``--steps`` steps (no probes, no GUI): the baseline;
2. the window trains the same config with live attention (probe every 10 steps, the head grid and
   curves redrawn from the ~30 Hz drain) and samples every 100 steps, while a 5 ms GUI-thread
   timer measures how late each tick fires (the event-loop delay a user feels);
3. the headless baseline again (the machine's load drifts; the mean of 1 and 3 is the reference).

Throughput is wall-clock training tokens per second between step ``--warmup`` and the last step
(evaluation, probes and sampling included). Targets: p99 delay <= 20 ms; app/headless >= 0.95.

Usage: ``python bench/gui_latency.py [--steps 200] [--display]``. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TICK_MS = 5


def percentile(values, q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else float("nan")


def headless(config, source, settings, warmup: int) -> float:
    """Wall-clock tokens/s of the bare Trainer between step ``warmup`` and the end."""
    from model.train.trainer import Trainer

    trainer = Trainer(config, source, settings)
    marks: dict[int, float] = {}
    trainer.run(callback=lambda ev: marks.__setitem__(ev.step, time.perf_counter()))
    last = max(marks)
    tokens = (last - warmup) * settings.batch_size * trainer.seq_len
    return tokens / (marks[last] - marks[warmup])


def main() -> int:
    from model.machine import keep_freed_memory

    keep_freed_memory()  # as the app does first (app/main.py)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10, help="steps left out of the throughput")
    p.add_argument("--display", action="store_true", help="use the real display (default: offscreen)")
    args = p.parse_args()
    if not args.display:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    settings_dir = Path(tempfile.mkdtemp(prefix="attention-lab-bench-"))
    os.environ["ATTENTION_LAB_SETTINGS"] = str(settings_dir / "s.ini")

    from PySide6.QtCore import Qt, QTimer

    from app.session.event_wait import wait_until
    from app.shell.gui import make_app
    from app.shell.window import MainWindow

    make_app()
    win = MainWindow(confirm_close=False, restore=False)
    win.resize(1600, 1000)
    win.show()
    s = win.session
    s.init_default()
    panel = win.train_settings_panel
    panel.set_settings(s.train_settings.replace(steps=args.steps, seed=0))
    settings = s.train_settings
    config = s.config
    print(
        f"config: {config.core.n_layers} layers x {config.attention.n_heads} heads, d_model "
        f"{config.core.d_model}, "
        f"{s.model.num_params():,} parameters; batch {settings.batch_size} x seq {settings.seq_len}; "
        f"live attention every {settings.probe_every} steps, samples every {s.sample_every} steps",
        flush=True,
    )
    base = settings.replace(probe_every=0, device=str(s.device))

    print("headless trainer (1/2)…", flush=True)
    h1 = headless(config, s.source, base, args.warmup)
    print(f"  {h1:,.0f} tokens/s", flush=True)

    # the app: a fast GUI-thread timer records when it actually fires
    ticks: list[float] = []
    timer = QTimer()
    timer.setTimerType(Qt.TimerType.PreciseTimer)
    timer.setInterval(TICK_MS)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    step_marks: dict[int, float] = {}

    def mark(events):
        for e in events:
            step_marks[e["step"]] = time.perf_counter()

    s.eventsAppended.connect(mark)
    tab = win.tabs["train"]
    draw_times: list[float] = []
    original = tab.live._on_frame

    def timed_on_frame(frame):
        t = time.perf_counter()
        original(frame)
        draw_times.append(time.perf_counter() - t)

    s.traceUpdated.disconnect(tab.live._on_frame)
    s.traceUpdated.connect(timed_on_frame)

    print("app training with live attention…", flush=True)
    s.build_model(seed=0)
    timer.start()
    t_start = time.perf_counter()
    tab.start_button.click()
    wait_until(lambda: not s.is_training, timeout=3600)
    timer.stop()
    t_end = time.perf_counter()
    worker_posted = len(s.frames)
    last = max(step_marks)
    app_tps = (
        (last - args.warmup)
        * settings.batch_size
        * s.trainer.seq_len
        / (step_marks[last] - step_marks[args.warmup])
    )
    print(f"  {app_tps:,.0f} tokens/s over {last} steps in {t_end - t_start:.1f} s", flush=True)

    print("headless trainer (2/2)…", flush=True)
    h2 = headless(config, s.source, base, args.warmup)
    print(f"  {h2:,.0f} tokens/s", flush=True)

    delays = [max(0.0, (b - a) * 1000 - TICK_MS) for a, b in itertools.pairwise(ticks)]
    ref = (h1 + h2) / 2
    print()
    print(f"GUI event-loop delay while training ({len(delays)} ticks of a {TICK_MS} ms timer):")
    print(
        f"  p50 {percentile(delays, 50):.1f} ms   p99 {percentile(delays, 99):.1f} ms   "
        f"max {max(delays):.1f} ms   (target p99 <= 20 ms)"
    )
    print(
        f"head grid redraws: {len(draw_times)} frames drawn, "
        f"median {percentile(draw_times, 50) * 1000:.1f} ms, max {max(draw_times) * 1000:.1f} ms; "
        f"{worker_posted} frames kept for the scrubber"
    )
    print(
        f"training throughput: app {app_tps:,.0f} tokens/s vs headless {h1:,.0f} / {h2:,.0f} "
        f"(mean {ref:,.0f}): ratio {app_tps / ref:.2f} (target >= 0.95)"
    )
    win.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
