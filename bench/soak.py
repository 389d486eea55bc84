"""Soak: the app trains with live attention for N minutes while a timer switches tabs, inspects new
prompts and generates; does the memory keep growing, and does the window ever freeze?

In one process, offscreen, on the default config and corpus (builtin:stdlib) with the app's default
settings (probe every 10 steps, samples every 100 steps):

* training runs the whole time (a step budget it cannot reach; Start again should it end);
* every ``--every`` seconds the next action of a cycle runs: show the next tab (Train, Attention, Labs,
  Compare, Budget), type a new prompt into the Attention tab (an inspection), generate 32 tokens in
  the Train tab's box;
* a 5 ms GUI-thread timer records how late each tick fires (the event-loop stall a user feels), kept
  as a histogram so the measurement itself does not grow;
* the resident set size (``/proc/self/statm``) is read every 2 s.

Reported: RSS at the end of the warm-up (``--warmup`` minutes, default a fifth of the run, at most 5)
and at the end, the growth between them in % (target ≤ 5 % over 30 minutes), its largest value and
the slope per 10 minutes; the event-loop delay's p50, p99 and max before and after the warm-up;
training steps and actions done.

    python bench/soak.py --minutes 30
    python bench/soak.py --minutes 1        # a quick check of the harness
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TICK_MS = 5
RSS_EVERY_S = 2.0
#: histogram bins of the event-loop delay, in ms (the last bin holds everything above)
BINS_MS = [0, 1, 2, 5, 10, 15, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 2000, 5000]


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class DelayHistogram:
    """Counts of event-loop delays per bin of :data:`BINS_MS`, and the largest one (fixed memory)."""

    def __init__(self):
        import numpy as np

        self.counts = np.zeros(len(BINS_MS), dtype=np.int64)
        self.max_ms = 0.0

    def add(self, delay_ms: float) -> None:
        import bisect

        self.counts[bisect.bisect_right(BINS_MS, delay_ms) - 1] += 1
        self.max_ms = max(self.max_ms, delay_ms)

    def percentile(self, q: float) -> str:
        """The bin holding the ``q``-th percentile, as "≤ X ms"."""
        n = int(self.counts.sum())
        if not n:
            return "–"
        seen = 0
        for i, c in enumerate(self.counts):
            seen += int(c)
            if seen >= q / 100 * n:
                return f"≤ {BINS_MS[i + 1]} ms" if i + 1 < len(BINS_MS) else f"> {BINS_MS[-1]} ms"
        return "–"

    def summary(self) -> str:
        n = int(self.counts.sum())
        return f"p50 {self.percentile(50)}, p99 {self.percentile(99)}, max {self.max_ms:.0f} ms ({n:,} ticks)"


class StallSampler:
    """A thread that looks at the GUI thread's Python stack whenever the heartbeat is ``threshold_s``
    late (a poor man's sampling profiler): what the window was doing while it froze. ``last["t"]`` is
    the heartbeat's last tick (perf_counter)."""

    def __init__(self, last: dict, threshold_s: float = 0.1, every_s: float = 0.02):
        import threading

        self.last, self.threshold_s, self.every_s = last, threshold_s, every_s
        self.gui_ident = threading.get_ident()
        self.samples: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-stall-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2.0)

    def _run(self) -> None:
        import traceback

        while not self._stop.wait(self.every_s):
            if time.perf_counter() - self.last["t"] < self.threshold_s:
                continue
            frame = sys._current_frames().get(self.gui_ident)
            if frame is None:
                continue
            stack = traceback.extract_stack(frame)
            ours = [f for f in stack if "/app/" in f.filename or "/model/" in f.filename] or stack
            where = " < ".join(f"{Path(f.filename).name}:{f.name}" for f in reversed(ours[-4:]))
            where = f"{Path(stack[-1].filename).name}:{stack[-1].name} | {where}"
            self.samples[where] = self.samples.get(where, 0) + 1

    def report(self, top: int = 5) -> str:
        if not self.samples:
            return "GUI thread during stalls over 100 ms: no sample (no stall, or not in Python code)"
        total = sum(self.samples.values())
        rows = sorted(self.samples.items(), key=lambda kv: -kv[1])[:top]
        lines = [f"GUI thread during stalls over 100 ms ({total} samples every 20 ms; innermost first):"]
        lines += [f"  {n:4d}  {where}" for where, n in rows]
        return "\n".join(lines)


def _malloc_growth(before, after, top: int = 15) -> str:
    """The ``top`` call sites whose traced memory grew most between two tracemalloc snapshots."""
    mib = 2**20
    diff = after.compare_to(before, "traceback")
    total = sum(d.size_diff for d in diff)
    lines = [
        f"traced memory (Python objects, numpy) after the warm-up: {total / mib:+.1f} MiB; grew most at:"
    ]
    for d in sorted(diff, key=lambda d: -d.size_diff)[:top]:
        ours = [f for f in d.traceback if "/app/" in f.filename or "/model/" in f.filename] or list(
            d.traceback
        )
        where = " < ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(ours[-3:]))
        lines.append(f"  {d.size_diff / mib:+7.2f} MiB {d.count_diff:+7d} blocks  {where}")
    return "\n".join(lines)


def main(argv=None) -> int:
    from model.machine import keep_freed_memory

    keep_freed_memory()  # as the app does first (app/main.py)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0, help="how long to run (default 10)")
    p.add_argument("--warmup", type=float, default=None, help="minutes left out of the growth")
    p.add_argument("--every", type=float, default=3.0, help="seconds between two actions (default 3)")
    p.add_argument("--display", action="store_true", help="use the real display (default: offscreen)")
    p.add_argument(
        "--trace-malloc",
        action="store_true",
        help="also print where Python and numpy memory grew after the warm-up (tracemalloc; slower)",
    )
    args = p.parse_args(argv)
    if args.minutes <= 0 or args.every <= 0:
        p.error("--minutes and --every must be positive")
    warmup = args.warmup if args.warmup is not None else min(5.0, args.minutes / 5)
    if not 0 <= warmup < args.minutes:
        p.error("--warmup must be below --minutes")
    if not args.display:
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    os.environ["ATTENTION_LAB_SETTINGS"] = str(Path(tempfile.mkdtemp(prefix="attention-lab-soak-")) / "s.ini")

    from PySide6.QtCore import Qt, QTimer

    from app.session.event_wait import wait_until
    from app.shell.gui import make_app
    from app.shell.window import MainWindow

    app = make_app()
    win = MainWindow(confirm_close=False, restore=False)
    win.resize(1600, 1000)
    win.show()
    s = win.session
    s.init_default()
    win.train_settings_panel.set_settings(s.train_settings.replace(steps=10**7, seed=0))
    cfg = s.config
    print(
        f"soak: {args.minutes:g} min ({warmup:g} min warm-up), an action every {args.every:g} s; "
        f"{cfg.core.n_layers} layers x {cfg.attention.n_heads} heads, d_model {cfg.core.d_model}; live "
        "attention every "
        f"{s.train_settings.probe_every} steps; load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    train = win.tab("train")
    attention = win.tab("attention")
    text = s.source.default_prompt * 4 if s.source is not None else "the head looks back " * 8
    tab_ids = list(win.tabs)
    counts = {"tab": 0, "inspect": 0, "generate": 0, "restart": 0}
    state = {"i": 0}

    slowest: dict[str, float] = {}

    def act():
        t = time.perf_counter()
        kind = _act()
        slowest[kind] = max(slowest.get(kind, 0.0), time.perf_counter() - t)

    def _act() -> str:
        i = state["i"]
        state["i"] += 1
        kind = ("tab", "inspect", "tab", "generate")[i % 4]
        if not s.is_training and train.start_button.isEnabled():
            train.start()
            counts["restart"] += 1
        if kind == "tab":
            win.tab_widget.setCurrentIndex((i // 2) % len(tab_ids))
        elif kind == "inspect":
            win.show_tab("attention")
            start = (i * 37) % max(1, len(text) - 80)
            attention.set_prompt(text[start : start + 60 + i % 20], run=True)
        else:
            box = train.generate_box
            if box.worker is None:
                box.max_tokens.setValue(32)
                box.prompt.setText(text[: 8 + i % 16])
                box.generate(seed=i)
        counts[kind] += 1
        return kind if kind != "tab" else f"tab {tab_ids[(i // 2) % len(tab_ids)]}"

    hist = {"warm": DelayHistogram(), "after": DelayHistogram()}
    rss: list[tuple[float, int]] = []
    t0 = time.perf_counter()
    last = {"t": t0}
    warm_end = t0 + warmup * 60

    def tick():
        now = time.perf_counter()
        (hist["warm"] if now < warm_end else hist["after"]).add(max(0.0, (now - last["t"]) * 1000 - TICK_MS))
        last["t"] = now

    stalls = StallSampler(last)
    heartbeat = QTimer()
    heartbeat.setTimerType(Qt.TimerType.PreciseTimer)
    heartbeat.setInterval(TICK_MS)
    heartbeat.timeout.connect(tick)
    actions = QTimer()
    actions.setInterval(int(args.every * 1000))
    actions.timeout.connect(act)
    sampler = QTimer()
    sampler.setInterval(int(RSS_EVERY_S * 1000))
    frame_bytes: dict[str, int] = {}

    def sample():
        now = time.perf_counter() - t0
        rss.append((now, rss_bytes()))
        if now >= warmup * 60:
            frame_bytes.setdefault("warm", s.frames.nbytes)

    sampler.timeout.connect(sample)

    snaps: list = []
    if args.trace_malloc:
        import tracemalloc

        tracemalloc.start(8)
        QTimer.singleShot(int(warmup * 60 * 1000), lambda: snaps.append(tracemalloc.take_snapshot()))

    train.start()
    rss.append((0.0, rss_bytes()))
    for timer in (heartbeat, actions, sampler):
        timer.start()
    last["t"] = time.perf_counter()
    stalls.start()
    wait_until(lambda: time.perf_counter() - t0 >= args.minutes * 60, timeout=args.minutes * 60 + 60)
    for timer in (heartbeat, actions, sampler):
        timer.stop()
    stalls.stop()
    rss.append((time.perf_counter() - t0, rss_bytes()))
    if args.trace_malloc:
        snaps.append(tracemalloc.take_snapshot())
    steps = s.step
    s.stop_training()
    wait_until(lambda: not s.is_training, timeout=120)

    mib = 2**20
    after = [(t, b) for t, b in rss if t >= warmup * 60]
    base = after[0][1] if after else rss[0][1]
    end = rss[-1][1]
    peak = max(b for _, b in after) if after else end
    span_min = (after[-1][0] - after[0][0]) / 60 if len(after) > 1 else 0.0
    slope = (end - base) / span_min * 10 if span_min > 0 else 0.0
    print()
    print(
        f"RSS: start {rss[0][1] / mib:,.0f} MiB, after warm-up {base / mib:,.0f} MiB, "
        f"end {end / mib:,.0f} MiB, largest after warm-up {peak / mib:,.0f} MiB"
    )
    print(
        f"RSS growth after warm-up: {100 * (end - base) / base:+.1f} % "
        f"(largest {100 * (peak - base) / base:+.1f} %) over {span_min:.1f} min, "
        f"{slope / mib:+.1f} MiB per 10 min (target <= 5 % over 30 min)"
    )
    grew = s.frames.nbytes - frame_bytes.get("warm", 0)
    print(
        f"of which the probe-frame history (bounded: {s.frames.max_frames} frames, "
        f"{s.frames.max_bytes / mib:.0f} MiB): {grew / mib:+.1f} MiB; the rest: "
        f"{100 * (end - base - grew) / base:+.1f} %"
    )
    print(f"event-loop delay, warm-up: {hist['warm'].summary()}")
    print(f"event-loop delay, after:   {hist['after'].summary()}")
    print(
        f"longest event-loop stall: {max(hist['warm'].max_ms, hist['after'].max_ms):.0f} ms; "
        f"trained {steps} steps; actions: {counts['tab']} tab switches, {counts['inspect']} inspections, "
        f"{counts['generate']} generations, {counts['restart']} restarts; "
        f"{len(s.frames)} probe frames kept "
        f"({s.frames.nbytes / mib:.1f} MiB of {s.frames.max_bytes / mib:.0f}); "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        "slowest action of each kind (GUI thread): "
        + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in slowest.items())
    )
    print(stalls.report())
    if len(snaps) == 2:
        print(_malloc_growth(*snaps))
    win.close()
    app.processEvents()
    return 0


if __name__ == "__main__":
    sys.exit(main())
