"""How long from a prompt edit to every head redrawn in the Attention tab, and does the GUI freeze?

Runs the real tab (offscreen) on a fresh model and, for each case, edits the prompt ``--repeats``
times and measures:

* ``forward`` the model's own fast path on the same prompt and threads (no recording): the floor
* ``trace``  the inspection job in the worker thread (``GPT.trace`` of every head's weights, the
  next-token ranking and the pooled overview),
* ``wait``   from submitting the job to its result reaching the GUI thread (trace + queue + hand-over),
* ``draw``   updating the grid (one array copy + ``setImage``),
* ``paint``  a synchronous repaint of the tab (pyqtgraph renders the image here),
* ``total``  submit → painted, and ``edit`` keystroke → painted (adds the 40 ms typing debounce),
* ``stall``  the longest the GUI thread went without running a 5 ms timer during the whole run:
  what a user would feel as a freeze;

and, once per case, the inspection job against a plain forward in back-to-back pairs on one thread
(the recording's own cost, goal ≤ 1.2, free of the GUI thread and of the queue).

``--table`` prints instead what recording costs without the tab around it, each figure measured in
a process of its own on one thread (median of ``--repeats``): a plain forward, the weights-only
trace (``run_with_trace`` of every head's pattern, in the plan's precision) and the tab's inspection
(``inspect_prompt``), at 64, 256 and 1024 tokens, for a GPT-2-architecture model of 4 layers × 8
heads, d 256 and a 49,152-token vocabulary and for one of 12 × 12, d 768; the ratios to the plain
forward and of the inspection to the trace (goals ≤ 1.5 and ≤ 1.2 at 256 and 1024 tokens), and the
peak memory each adds over the loaded model (the inspection's within 10 % of the trace's).

Cases (``--cases``): ``default`` = the default config (4 layers × 4 heads, d=128) at 128 tokens
(target ≤ 100 ms); ``gpt2`` = 12 layers × 12 heads, d=768 at 256 tokens (target ≤ 500 ms);
``long`` = the same 12 × 12 model at 1024 tokens (usable: pooled overview, no freeze).

    python bench/inspect_latency.py                       # all cases
    python bench/inspect_latency.py --cases default --repeats 20
    python bench/inspect_latency.py --table --repeats 5   # plain / trace / inspection, own processes
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

CASES = {
    "default": dict(n_layers=None, tokens=128, target_ms=100),
    "gpt2": dict(n_layers=12, n_heads=12, d_model=768, tokens=256, target_ms=500),
    "long": dict(n_layers=12, n_heads=12, d_model=768, tokens=1024, target_ms=None),
}

SENTENCE = "the attention head of a query looks back at the keys of earlier tokens and copies what follows"


def _text(n_chars: int, seed: int) -> str:
    words = SENTENCE.split()
    out, i = [], seed
    while sum(len(w) + 1 for w in out) < n_chars + 1:
        out.append(words[i % len(words)])
        i = i * 7 + 3
    return " ".join(out)[:n_chars]


def paint_now(widget) -> None:
    """Paint ``widget`` now, including its graphics views (``QWidget.repaint`` skips their viewports;
    pyqtgraph turns a new image into pixels only there)."""
    from PySide6.QtWidgets import QGraphicsView

    widget.repaint()
    for view in widget.findChildren(QGraphicsView):
        if view.isVisible():
            view.viewport().repaint()


def plain_forward_ms(model, ids, threads, repeats: int = 3) -> float:
    """Median time of the model's own fast path (no recording) on the same prompt and threads."""
    import torch

    from model.runtime import compute_lock
    from model.runtime import threads as use_threads

    idx = torch.tensor([ids], device=model.device)
    times = []
    with compute_lock, use_threads(threads), torch.no_grad():
        model.eval()
        for _ in range(repeats):
            t = time.perf_counter()
            model(idx)
            if model.device.type == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def inspect_vs_forward(model, tokenizer, ids, threads, pairs: int = 7) -> list[float]:
    """(the inspection job) / (a plain forward) for ``pairs`` back-to-back pairs on this thread, the
    order alternating: the recording's own cost, free of the GUI thread and of the queue."""
    import torch

    from model.interp.inspection import inspect_prompt
    from model.interp.plan import plan_prompt
    from model.interp.prompt import prompt_of_ids
    from model.runtime import compute_lock
    from model.runtime import threads as use_threads

    idx = torch.tensor([ids], device=model.device)
    plan = plan_prompt(model.config, tokenizer, prompt_of_ids(tokenizer, ids))  # the GUI thread's part

    def plain():
        with torch.no_grad():
            model(idx)

    def inspected():
        inspect_prompt(model, tokenizer, plan)

    ratios = []
    with compute_lock, use_threads(threads):
        model.eval()
        inspected()  # warm-up
        for i in range(pairs):
            spent = {}
            for name, fn in (("plain", plain), ("inspect", inspected))[:: 1 if i % 2 == 0 else -1]:
                t = time.perf_counter()
                fn()
                spent[name] = time.perf_counter() - t
            ratios.append(spent["inspect"] / spent["plain"])
    return ratios


#: ``--table``: the shapes (GPT-2 architecture, 49,152-token vocabulary) and prompt lengths
TABLE_SHAPES = {
    "4 × 8, d 256": dict(n_layers=4, n_heads=8, d_model=256),
    "12 × 12, d 768": dict(n_layers=12, n_heads=12, d_model=768),
}
TABLE_TOKENS = (64, 256, 1024)
TABLE_RUNS = ("plain", "trace", "inspect")


def one_figure(shape: str, T: int, run: str, repeats: int) -> dict:
    """One figure of the table, in this process (a fresh one): the median seconds of ``run`` on one
    thread, and the most memory the first run held at once beyond the loaded model (the live bytes of
    ``model.machine.allocated_bytes``, sampled every millisecond)."""
    import threading

    import torch

    from model.config import GPTConfig
    from model.interp.inspection import inspect_prompt
    from model.interp.plan import plan_prompt
    from model.interp.prompt import prompt_of_ids
    from model.interp.trace import run_with_trace
    from model.machine import allocated_bytes
    from model.nn.gpt import init_model
    from model.text.tokens import ByteTokenizer

    torch.set_num_threads(1)
    cfg = GPTConfig(**TABLE_SHAPES[shape], vocab_size=49152, context_length=1024)
    model = init_model(cfg, seed=0).eval()
    tok = ByteTokenizer()
    ids = [int(i) for i in torch.randint(0, 256, (T,), generator=torch.Generator().manual_seed(T))]
    plan = plan_prompt(cfg, tok, prompt_of_ids(tok, ids))
    dtype = torch.float16 if plan.float16 else torch.float32
    idx = torch.tensor([ids])
    fns = {
        "plain": lambda: model(idx),
        "trace": lambda: run_with_trace(model, ids, kinds=("pattern",), dtype=dtype, sized=True),
        "inspect": lambda: inspect_prompt(model, tok, plan),
    }
    fn = fns[run]
    peak = {"live": 0, "on": True}

    def sample():
        while peak["on"]:
            peak["live"] = max(peak["live"], allocated_bytes())
            time.sleep(0.001)

    with torch.no_grad():
        base = allocated_bytes()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        out = fn()
        peak["on"] = False
        sampler.join()
        del out
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
    return {"seconds": statistics.median(times), "peak": max(0, peak["live"] - base)}


def ratio_table(repeats: int) -> None:
    """Print the ``--table`` figures, each from :func:`one_figure` in a process of its own."""
    import json
    import subprocess

    for shape in TABLE_SHAPES:
        print(f"{shape}, vocabulary 49,152, 1 thread, median of {repeats}")
        print(
            f"  {'T':>5} {'plain':>8} {'trace':>8} {'inspect':>8}   {'trace/plain':>11} "
            f"{'inspect/plain':>13} {'inspect/trace':>13}   {'peak trace':>10} {'peak inspect':>12}"
        )
        for T in TABLE_TOKENS:
            fig = {}
            for run in TABLE_RUNS:
                out = subprocess.run(
                    [sys.executable, __file__, "--one", f"{shape}|{T}|{run}", "--repeats", str(repeats)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                fig[run] = json.loads(out.stdout.strip().splitlines()[-1])
            s = {run: fig[run]["seconds"] for run in TABLE_RUNS}
            mb = {run: fig[run]["peak"] / 2**20 for run in TABLE_RUNS}
            print(
                f"  {T:>5} {s['plain']:>7.3f}s {s['trace']:>7.3f}s {s['inspect']:>7.3f}s   "
                f"{s['trace'] / s['plain']:>11.2f} {s['inspect'] / s['plain']:>13.2f} "
                f"{s['inspect'] / s['trace']:>13.2f}   {mb['trace']:>8.0f}MB {mb['inspect']:>10.0f}MB",
                flush=True,
            )


def run_case(name: str, spec: dict, repeats: int, device: str) -> dict:
    from PySide6.QtCore import QTimer
    from PySide6.QtGui import QTextCursor
    from PySide6.QtTest import QTest

    from app.session.event_wait import wait_until
    from app.session.garbage import settle_garbage
    from app.session.session import Session
    from app.shell.gui import make_app
    from app.views.attention.tab import AttentionTab
    from model.config import GPTConfig, default_config
    from model.train.settings import TrainSettings

    app = make_app()  # the app's own settings (pyqtgraph options, GIL switch interval)
    s = Session()
    s.set_device(device)
    s.set_source("builtin:primer")
    s.train_settings = TrainSettings()
    if spec.get("n_layers"):
        cfg = GPTConfig(
            n_layers=spec["n_layers"],
            n_heads=spec["n_heads"],
            d_model=spec["d_model"],
            context_length=max(1024, spec["tokens"]),
        )
    else:
        cfg = default_config()
    T = spec["tokens"]
    s.set_config(cfg)
    s.build_model(seed=0)
    tab = AttentionTab(s)
    tab.resize(1120, 800)
    tab.set_prompt(_text(T, 0), run=False)
    tab.show()
    assert tab.wait_ready(600), "the first inspection did not finish"
    settle_garbage()  # as the window does once it stands

    # the GUI heartbeat: the longest gap between two 5 ms timer ticks
    gaps = {"last": time.perf_counter(), "max": 0.0}

    def tick():
        now = time.perf_counter()
        gaps["max"] = max(gaps["max"], now - gaps["last"])
        gaps["last"] = now

    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(tick)

    rows = []
    for i in range(repeats):
        text = _text(T, i + 1)
        typed = i % 2 == 1  # every other edit goes through a real keystroke (and the debounce)
        done = {}

        def on_inspected(_res, done=done):
            done.setdefault("t", time.perf_counter())

        tab.inspected.connect(on_inspected)
        gaps["last"], gaps["max"] = time.perf_counter(), 0.0
        timer.start()
        if typed:
            tab.set_prompt(text[:-1], run=False)
            tab.prompt_edit.moveCursor(QTextCursor.MoveOperation.End)
            t0 = time.perf_counter()
            QTest.keyClicks(tab.prompt_edit, text[-1])
        else:
            tab.set_prompt(text, run=False)
            t0 = time.perf_counter()
            tab.run_inspection()
        ok = wait_until(lambda done=done: "t" in done, 600)
        tab.inspected.disconnect(on_inspected)
        if not (ok and tab.inspection.prompt == text):
            raise RuntimeError(f"the edit was not inspected: {ok}, {tab.inspection.prompt[-20:]!r}")
        t_drawn = done["t"]  # when the grid was updated (inspected is emitted right after the draw)
        t_p0 = time.perf_counter()
        paint_now(tab)  # what the screen shows next, painted synchronously
        paint = time.perf_counter() - t_p0
        t_painted = t_drawn + paint
        wait_until(lambda: s.compute.idle, 600)  # follow-up jobs (metrics) must not overlap the next edit
        timer.stop()
        tm = tab.timings
        fwd = plain_forward_ms(s.model, tab.inspection.ids, tab._threads, 1 if T > 512 else 3)
        rows.append(
            {
                "forward": fwd,
                "trace": tm["trace_ms"],
                "draw": tm["draw_ms"],
                "paint": paint * 1e3,
                "wait": tm["total_ms"] - tm["draw_ms"],
                "total": tm["total_ms"] + paint * 1e3,
                "edit": (t_painted - t0) * 1e3 if typed else float("nan"),
                "stall": gaps["max"] * 1e3,
            }
        )
    insp = tab.inspection
    info = {
        "case": name,
        "L": insp.n_layers,
        "H": insp.n_heads,
        "T": insp.T,
        "d": insp.config.core.d_model,
        "block": insp.block,
        "dtype": str(insp.weights.dtype),
        "threads": tab._threads or "all",
        "rows": rows,
        "target": spec["target_ms"],
        "pairs": inspect_vs_forward(s.model, s.tokenizer, insp.ids, tab._threads) if T <= 512 else [],
    }
    s.shutdown(timeout=60)
    tab.close()
    app.processEvents()
    return info


def summarise(info: dict) -> str:
    rows = info["rows"]

    def med(k):
        vals = [r[k] for r in rows if r[k] == r[k]]
        return statistics.median(vals) if vals else float("nan")

    def worst(k):
        vals = [r[k] for r in rows if r[k] == r[k]]
        return max(vals) if vals else float("nan")

    head = (
        f"{info['case']}: {info['L']} layers × {info['H']} heads, d={info['d']}, T={info['T']} "
        f"(weights {info['dtype']}, overview block {info['block']}, threads {info['threads']}, "
        f"{len(rows)} edits)"
    )
    parts = [
        f"  {k:>6}: median {med(k):7.1f} ms   worst {worst(k):7.1f} ms"
        for k in ("forward", "trace", "wait", "draw", "paint", "total", "edit", "stall")
    ]
    parts.append(
        f"  trace / plain forward: {med('trace') / med('forward'):.2f} "
        f"(what recording every head costs over the model's own forward pass)"
    )
    if info["pairs"]:
        pr = info["pairs"]
        parts.append(
            f"  inspection job / plain forward, {len(pr)} back-to-back pairs: "
            f"median {statistics.median(pr):.2f} (from {min(pr):.2f} to {max(pr):.2f}; goal ≤ 1.2)"
        )
    parts.append(f"  GUI thread per edit (draw + paint): median {med('draw') + med('paint'):.1f} ms")
    verdict = ""
    if info["target"]:
        ok = med("total") <= info["target"]
        verdict = (
            f"  target submit→painted ≤ {info['target']} ms: {'met' if ok else 'MISSED'} "
            f"(median {med('total'):.0f} ms; {med('total') / info['target']:.2f} of the budget)"
        )
    return "\n".join([head, *parts, verdict])


def main(argv=None) -> int:
    from model.machine import keep_freed_memory

    keep_freed_memory()  # as the app does first (app/main.py)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default="default,gpt2,long", help="comma-separated: " + ", ".join(CASES))
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--device", default="cpu", help="cpu, cuda or auto")
    p.add_argument(
        "--custom", metavar="LxHxDxT", help="add a case: layers x heads x width x tokens, e.g. 2x2x64x300"
    )
    p.add_argument("--table", action="store_true", help="plain / trace / inspection, each in its own process")
    p.add_argument("--one", help=argparse.SUPPRESS)  # "shape|T|run": one figure of --table, here
    args = p.parse_args(argv)
    if args.one:
        import json

        shape, T, run = args.one.split("|")
        print(json.dumps(one_figure(shape, int(T), run, args.repeats)))
        return 0
    if args.table:
        print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
        ratio_table(args.repeats)
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
        return 0
    if args.custom:
        L, H, D, T = (int(v) for v in args.custom.lower().split("x"))
        CASES["custom"] = dict(n_layers=L, n_heads=H, d_model=D, tokens=T, target_ms=None)
        args.cases = "custom" if args.cases == p.get_default("cases") else args.cases + ",custom"
    import torch

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device}, "
        f"load average {os.getloadavg()[0]:.1f}"
        if hasattr(os, "getloadavg")
        else ""
    )
    for name in args.cases.split(","):
        spec = CASES[name.strip()]
        reps = args.repeats if name != "long" else max(2, args.repeats // 4)
        print(summarise(run_case(name.strip(), spec, reps, args.device)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
