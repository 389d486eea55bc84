"""Two costs of scaling out, measured on this machine: DistributedDataParallel itself, and torch.compile.

1. ``ddp``: the same global batch trained by ``attention-lab train`` as 1 process × 1 thread (the
   baseline), 2 processes × 1 thread under ``torchrun`` (gloo), and 1 process × 2 threads (what the
   two cores give without DDP). Tokens/s is wall-clock training time between logged steps
   ``--skip`` and the last but one (log.jsonl's ``elapsed``: steps, callbacks and the collectives;
   process start, evaluation at the end and saving excluded). Runs alternate; each figure is the
   median of ``--repeats``.
2. ``compile``: ``Trainer(compile=True)`` against eager on the bench/train_throughput.py model
   (d_model 384, 6 layers, 6 heads, seq 256: 10.8M parameters with the default corpus), in this
   process, timed chunks interleaved; the compile time is the first compiled step's time minus an
   eager step's.

Usage: ``python bench/ddp_compile.py [ddp|compile|all] [--repeats 3]``. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_rate(procs: int, threads: int, args, out: Path) -> float:
    """Tokens/s of one ``attention-lab train`` run (see the module docstring)."""
    train = ["train", "--corpus", args.corpus, "--steps", str(args.steps), "--batch-size", str(args.batch)]
    train += ["--seq-len", str(args.seq_len), "--threads", str(threads), "--log-every", "1"]
    train += ["--eval-every", str(10**6), "--eval-batches", "1", "--out", str(out)]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(threads))
    if procs == 1:
        cmd = [sys.executable, "-m", "app.main", *train]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={procs}"]
        cmd += ["--master_addr=127.0.0.1", f"--master_port={free_port()}", "-m", "app.main", *train]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    rows = {r["step"]: r for r in map(json.loads, (out / "log.jsonl").read_text().splitlines())}
    a, b = rows[args.skip], rows[args.steps - 1]
    return (b["tokens_seen"] - a["tokens_seen"]) / (b["elapsed"] - a["elapsed"])


def bench_ddp(args) -> None:
    layouts = [(1, 1), (2, 1), (1, 2)]
    rates: dict[tuple[int, int], list[float]] = {k: [] for k in layouts}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            order = layouts if r % 2 == 0 else layouts[::-1]
            for procs, threads in order:
                out = Path(tmp) / f"run-{procs}x{threads}-{r}"
                rates[(procs, threads)].append(train_rate(procs, threads, args, out))
    base = statistics.median(rates[(1, 1)])
    print(
        f"DDP on the CPU: default GPT on {args.corpus}, global batch {args.batch}×{args.seq_len}, "
        f"steps {args.skip}..{args.steps - 1}, median of {args.repeats}; load {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    for (procs, threads), values in rates.items():
        med = statistics.median(values)
        runs = ", ".join(f"{v:,.0f}" for v in values)
        ratio = f"({med / base:.2f}× baseline)"
        print(f"  {procs} process × {threads} thread: {med:>9,.0f} tokens/s  {ratio}  [{runs}]", flush=True)


def bench_compile(args) -> None:
    import torch

    from model.config import GPTConfig
    from model.runtime import set_threads
    from model.text.sources import resolve_source
    from model.train.settings import TrainSettings
    from model.train.trainer import Trainer

    set_threads(0)
    source = resolve_source(args.corpus)
    config = GPTConfig(vocab_size=source.vocab_size, context_length=256, n_layers=6, d_model=384, n_heads=6)
    settings = TrainSettings(
        steps=10**9, batch_size=8, seq_len=256, lr=3e-4, warmup=10, eval_every=10**9, device="cpu"
    )
    eager = Trainer(config, source, settings)
    t0 = time.perf_counter()
    compiled = Trainer(config, source, settings, compile=True)
    if not compiled.engine.compiled:
        print(f"--compile is off here: {compiled.engine.notes[-1]}")
        return
    eager.train_step()
    t_eager = time.perf_counter()
    eager.train_step()
    t_eager = time.perf_counter() - t_eager
    t0 = time.perf_counter()
    compiled.train_step()
    first = time.perf_counter() - t0
    compiled.train_step()  # a second graph for anything the first step left out
    tokens = 8 * 256
    rates: dict[str, list[float]] = {"eager": [], "compiled": []}
    for r in range(args.repeats):
        pair = [("eager", eager), ("compiled", compiled)]
        for name, trainer in pair if r % 2 == 0 else pair[::-1]:
            t = time.perf_counter()
            for _ in range(args.chunk):
                trainer.train_step()
            rates[name].append(args.chunk * tokens / (time.perf_counter() - t))
    e, c = statistics.median(rates["eager"]), statistics.median(rates["compiled"])
    print(
        f"torch.compile on the CPU ({torch.get_num_threads()} threads), "
        f"{eager.model.num_params() / 1e6:.1f}M parameters, batch 8×256, "
        f"median of {args.repeats} chunks of {args.chunk} steps; load {os.getloadavg()[0]:.2f}"
    )
    print(f"  eager    {e:>8,.0f} tokens/s  {[round(v) for v in rates['eager']]}")
    print(f"  compiled {c:>8,.0f} tokens/s  ({c / e:.2f}× eager)  {[round(v) for v in rates['compiled']]}")
    print(
        f"  compile time: {first - t_eager:.1f} s "
        f"(first compiled step {first:.1f} s, eager step {t_eager:.2f} s)"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("what", nargs="?", choices=("ddp", "compile", "all"), default="all")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--corpus", default="builtin:stdlib")
    p.add_argument("--steps", type=int, default=60, help="ddp: steps per run")
    p.add_argument("--skip", type=int, default=10, help="ddp: untimed steps at the start")
    p.add_argument("--batch", type=int, default=32, help="ddp: the global batch")
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--chunk", type=int, default=5, help="compile: timed steps per chunk")
    args = p.parse_args(argv)
    if args.what in ("ddp", "all"):
        bench_ddp(args)
    if args.what in ("compile", "all"):
        bench_compile(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
