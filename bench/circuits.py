"""Every composition score of a GPT-2-shaped model (12 layers × 12 heads, d 768), and the GUI meanwhile.

1. **scores**: :func:`model.interp.analysis.circuits.composition_scores` of a fresh 12 × 12 × 768 model
   (vocabulary 50257, as GPT-2 small): all 9504 pairs of heads × Q, K, V with the chance level
   (its sampling included: the cache is emptied before each repeat). Goal < 5 s. Then the whole of
   what the Circuits page computes for it (:func:`~model.interp.analysis.circuits.model_circuits`: the
   scores, every head's singular values and its copying score over all 50257 tokens).
2. **gui**: the Attention tab offscreen at 1280×800 on the same shape (the byte-level tokenizer's 256
   tokens: the prompt needs a tokenizer) with the Circuits page in view: the longest the GUI thread
   went without running a 5 ms timer from the moment the circuits are asked for until the page has
   drawn them, the selected head's full circuits and the path patching (goal ≤ 50 ms).

Prints the median of ``--repeats`` and the load average (``uptime``) before and after: the machine's
two cores are shared.

    python bench/circuits.py                  # both, median of 3
    python bench/circuits.py --only scores --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

SHAPE = {"n_layers": 12, "n_heads": 12, "d_model": 768, "context_length": 1024}


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench_scores(repeats: int) -> dict:
    import model.interp.analysis.circuits as C
    from model.config import GPTConfig
    from model.nn.gpt import init_model

    model = init_model(GPTConfig(vocab_size=50257, **SHAPE), seed=0).eval()
    rows = []
    for _ in range(repeats):
        C._BASELINES.clear()  # the chance level is sampled again each time
        t0 = time.perf_counter()
        comp = C.composition_scores(model)
        t1 = time.perf_counter()
        got = C.model_circuits(model)
        t2 = time.perf_counter()
        rows.append(
            {"scores": t1 - t0, "circuits": t2 - t1, "pairs": int((comp.scores == comp.scores).sum())}
        )
        del got
    return {"rows": rows, "dtype": str(C.fast_dtype("cpu")).replace("torch.", "")}


def bench_gui(repeats: int) -> dict:
    from PySide6.QtCore import Qt, QTimer

    from app.session.event_wait import wait_until
    from app.session.session import Session
    from app.shell.gui import make_app
    from app.views.attention.tab import AttentionTab
    from model.config import GPTConfig

    app = make_app()
    rows = []
    for _ in range(repeats):
        s = Session()
        s.init_default()
        s.set_source("builtin:primer")
        s.set_config(GPTConfig(**SHAPE))
        s.build_model(seed=0)
        tab = AttentionTab(s)
        tab.resize(1280, 800)
        tab.show()
        tab.set_prompt("The attention head of a query looks back at the keys of earlier tokens.")
        assert tab.wait_ready(600)  # the grid, its metrics: before the clock starts
        gaps = {"last": time.perf_counter(), "max": 0.0}

        def tick(gaps=gaps):
            now = time.perf_counter()
            gaps["max"] = max(gaps["max"], now - gaps["last"])
            gaps["last"] = now

        timer = QTimer()
        timer.setTimerType(Qt.TimerType.PreciseTimer)
        timer.setInterval(5)
        timer.timeout.connect(tick)
        page = tab.pages["circuits"]
        page.ensure_built()
        t0 = time.perf_counter()
        gaps["last"], gaps["max"] = t0, 0.0
        timer.start()
        tab.show_page("circuits")  # asks for the circuits, then the head's and the path patching
        ok = wait_until(
            lambda tab=tab, page=page: (
                tab.state.circuits_result is not None and tab.jobs.circuits_ready() and not page.stale
            ),
            600,
        )
        if page.stale:
            page.refresh()
        t1 = time.perf_counter()
        for _ in range(3):
            app.processEvents()
        timer.stop()
        res = tab.state.circuits_result
        rows.append(
            {
                "ok": ok,
                "seconds": t1 - t0,
                "circuits_s": res.seconds if res is not None else float("nan"),
                "stall_ms": gaps["max"] * 1e3,
                "edges": len(page.graph.edges),
            }
        )
        tab.shutdown()
        s.shutdown(timeout=60)
        tab.close()
        app.processEvents()
    return {"rows": rows}


def main(argv=None) -> int:
    from model.machine import keep_freed_memory

    keep_freed_memory()  # as the app does first
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only", choices=("scores", "gui"), action="append")
    args = p.parse_args(argv)
    import torch

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; {uptime()}", flush=True)
    wanted = args.only or ["scores", "gui"]
    med = statistics.median
    if "scores" in wanted:
        r = bench_scores(args.repeats)
        rows = r["rows"]
        for row in rows:
            print(f"  scores {row['scores']:.2f} s, everything the page computes {row['circuits']:.2f} s")
        print(
            f"composition scores of 12 × 12 heads, d 768 ({rows[0]['pairs']} = 3 × 9504 pairs, big "
            f"products in {r['dtype']}): median {med(x['scores'] for x in rows):.2f} s (goal < 5 s); "
            "with every head's circuits and copying over 50257 tokens "
            f"{med(x['circuits'] for x in rows):.2f} s",
            flush=True,
        )
    if "gui" in wanted:
        rows = bench_gui(args.repeats)["rows"]
        for row in rows:
            print(
                f"  page drawn {row['seconds']:.2f} s after it was shown (circuits "
                f"{row['circuits_s']:.2f} s), longest GUI stall {row['stall_ms']:.0f} ms, ok {row['ok']}"
            )
        print(
            "Circuits page on 12 × 12 × 768: longest GUI stall median "
            f"{med(x['stall_ms'] for x in rows):.0f} ms (goal ≤ 50 ms), page complete in "
            f"{med(x['seconds'] for x in rows):.2f} s"
        )
    print(uptime())
    return 0


if __name__ == "__main__":
    sys.exit(main())
