"""Cancel and progress of the window's long jobs, on the real SmolLM2-135M-Instruct the package carries.

For each case a job runs in a thread with a :class:`model.progress.Progress` (as the app's compute worker
runs it): once it is half done (its own count), or after ``--after`` seconds, the bench cancels it and
measures how long the work takes to stop. Cases: the trace of a prompt of 1,400 tokens (every pattern
held), 3,000 and 8,000 tokens (streamed), and the Patching page's 270 + 30·T patched runs on a 14-token
prompt.

Baseline in the same process: the trace of the 1,400-token prompt with no Progress at all against the
same trace reporting to one, so the ratio says what the progress points and cancel checks cost.

Goals: every Cancel lands within 1 s (the issue's bound); progress overhead ≤ 1.02×.

    python bench/cancel_latency.py                  # 3 runs of each, medians
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import torch

from model.interp.causal import patching_of
from model.interp.inspection import inspect_prompt
from model.interp.plan import plan_prompt
from model.io.gguf.load import packaged_gguf
from model.io.pretrained import open_model
from model.progress import Cancelled, Progress, reporting

CLEAN = "When Mary and John went to the store, John gave a drink to"
CORRUPT = "When John and Mary went to the store, Mary gave a drink to"


def prompt_of(tok, n: int) -> str:
    """``n`` tokens of varied English (a shuffled word list, so nothing repeats in order)."""
    import random

    with open(__file__, encoding="utf-8") as f:
        words = f.read().split()
    rng = random.Random(0)
    text = ""
    while len(tok.encode(text)) < n:
        text += " " + " ".join(rng.sample(words, len(words)))
    return tok.decode(tok.encode(text)[:n])


def cancel_after(work, after: float) -> tuple[str, float, str]:
    """Run ``work()`` in a thread under a Progress; cancel it half-way (or after ``after`` s): (how it
    ended, seconds from the cancel to the stop, the progress when cancelled)."""
    progress, out = Progress(), {}

    def run():
        torch.set_num_threads(2)
        try:
            with reporting(progress):
                work()
            out["end"] = "done"
        except Cancelled:
            out["end"] = "cancelled"
        out["t"] = time.monotonic()

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + after
    while thread.is_alive() and time.monotonic() < deadline:
        snap = progress.snapshot()
        if snap.total and 2 * snap.done >= snap.total:
            break
        time.sleep(0.005)
    snap = progress.snapshot()
    t0 = time.monotonic()
    progress.cancel()
    thread.join()
    return out["end"], out["t"] - t0, f"{snap.done} of {snap.total} {snap.unit}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--after", type=float, default=30.0, help="cancel after this long if not half done")
    args = ap.parse_args()
    torch.set_num_threads(2)
    ckpt = open_model(packaged_gguf())
    model, tok = ckpt.model, ckpt.tokenizer
    plans = {n: plan_prompt(model.config, tok, prompt_of(tok, n)) for n in (1400, 3000, 8000)}
    ids = list(tok.encode(CLEAN))
    cases = {f"trace {n:,} tokens": (lambda p=p: inspect_prompt(model, tok, p)) for n, p in plans.items()}
    cases["patching 14 tokens"] = lambda: patching_of(model, tok, ids, CORRUPT, prompt=CLEAN)
    worst = 0.0
    for name, work in cases.items():
        lat, seen = [], ""
        for _ in range(args.runs):
            end, seconds, seen = cancel_after(work, args.after)
            lat.append(seconds)
            if end != "cancelled":
                print(f"{name}: ended {end} before the cancel")
        med = statistics.median(lat)
        worst = max(worst, max(lat))
        runs = ", ".join(f"{x:.3f}" for x in lat)
        print(f"{name}: cancel lands in {med:.3f} s (median; runs {runs}) at {seen}; ratio to 1 s {med:.3f}")
    held = plans[1400]
    plain, reported = [], []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        inspect_prompt(model, tok, held)
        plain.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with reporting(Progress()):
            inspect_prompt(model, tok, held)
        reported.append(time.perf_counter() - t0)
    ratio = statistics.median(reported) / statistics.median(plain)
    print(
        f"progress overhead (1,400-token trace): {statistics.median(reported):.2f} s with a Progress, "
        f"{statistics.median(plain):.2f} s without: ratio {ratio:.3f} (goal ≤ 1.02)"
    )
    print(f"slowest cancel of all runs: {worst:.3f} s (goal ≤ 1 s)")


if __name__ == "__main__":
    main()
