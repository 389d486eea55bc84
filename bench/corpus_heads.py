"""What a corpus run over heads costs: its time against the plain forward pass of the same tokens, and
its peak memory at two numbers of prompts.

Time: ``corpus_run`` (every head scored on N prompts of T tokens, the second pass over repeated random
tokens included, the cache off) against the plain forward pass of the same prompts in the same
batches (``model(ids)`` under ``torch.no_grad``), in the same process, alternating, ``--repeats`` times
each; printed: the medians and their ratio (the goal is ≤ 2×).

Memory: a child process per N of ``--memory-prompts`` opens the model, then reports the peak resident
set of one plain forward pass of a batch and, afresh, of the corpus run (Linux's VmHWM, reset between
them; elsewhere ``ru_maxrss``, which the model's loading may mask). Bounded statistics mean the
run's peak hardly moves with N (the per-prompt rows, S·L·H float32 a prompt, are the only part that
grows with it).

Agreement: the five top induction heads of the Metrics page (one random block repeated) beside the
corpus run's, on the corpus's own repeats and on repeated random tokens.

    python bench/corpus_heads.py                                      # SmolLM2, 256 × 128, N = 64 vs 1024
    python bench/corpus_heads.py --checkpoint assets/starter --corpus task:induction --prompts 64 \\
        --seq-len 64 --memory-prompts 64,256
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np
import torch

from model import open_model
from model.interp.corpus import CorpusSettings, corpus_run
from model.interp.corpus.run import batch_size_for, bos_prefix, open_source, prompt_batches
from model.interp.measures import induction_scores
from model.interp.trace import eval_mode


def _peak_mb() -> float:
    """The peak resident set since the last :func:`_reset_peak` (Linux's VmHWM), else ``ru_maxrss``."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _reset_peak() -> None:
    """Start the peak afresh (Linux: 5 to clear_refs resets VmHWM); elsewhere the peak stays the process's."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def child(args) -> None:
    """Peak memory of the model with one plain pass, then after the corpus run: one JSON line."""
    lm = open_model(args.checkpoint)
    settings = CorpusSettings(args.corpus, n_prompts=args.child, seq_len=args.memory_seq_len)
    source = open_source(settings.corpus, lm.tokenizer)
    B = batch_size_for(lm.config, settings)
    _, ids = next(prompt_batches(source, settings, bos_prefix(lm.tokenizer, settings.seq_len), B))
    _reset_peak()  # the model is open: what follows is measured from here
    with torch.no_grad(), eval_mode(lm.model):
        lm.model(ids)
    before = _peak_mb()
    _reset_peak()
    corpus_run(lm.model, lm.tokenizer, settings, source=source, use_cache=False)
    print(json.dumps({"n": args.child, "forward_mb": before, "run_mb": _peak_mb()}))


def _heads(pairs) -> str:
    return ", ".join(f"L{layer}H{head}" for layer, head in pairs)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", default="package:SmolLM2-135M-Instruct")
    p.add_argument("--corpus", default="builtin:tales")
    p.add_argument("--prompts", type=int, default=256)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument(
        "--random-prompts",
        type=int,
        default=64,
        help="prompts that also measure induction on random tokens (the run's default: 64; a bench of "
        "fewer prompts keeps the share of 256 with N/4)",
    )
    p.add_argument("--memory-prompts", default="64,1024", help="N of each memory child (comma-separated)")
    p.add_argument("--memory-seq-len", type=int, default=32, help="T of the memory children")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = every core)")
    p.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.child:
        child(args)
        return 0
    load, cores, threads = os.getloadavg()[0], os.cpu_count(), torch.get_num_threads()
    print(f"load average {load:.2f} on {cores} cores; torch threads {threads}")
    lm = open_model(args.checkpoint)
    settings = CorpusSettings(
        args.corpus, n_prompts=args.prompts, seq_len=args.seq_len, random_prompts=args.random_prompts
    )
    source = open_source(settings.corpus, lm.tokenizer)
    B = batch_size_for(lm.config, settings)
    batches = [ids for _, ids in prompt_batches(source, settings, bos_prefix(lm.tokenizer, args.seq_len), B)]
    cfg = lm.config
    print(
        f"{args.checkpoint}: {cfg.core.n_layers} layers × {cfg.attention.n_heads} heads; "
        f"{args.prompts} prompts × "
        f"{args.seq_len} tokens of {args.corpus} in batches of {B}; induction on random tokens measured "
        f"on {min(args.prompts, args.random_prompts)} of them"
    )

    def plain() -> float:
        t0 = time.perf_counter()
        with torch.no_grad(), eval_mode(lm.model):
            for ids in batches:
                lm.model(ids)
        return time.perf_counter() - t0

    last = []

    def scored() -> float:
        t0 = time.perf_counter()
        last[:] = [corpus_run(lm.model, lm.tokenizer, settings, source=source, use_cache=False)]
        return time.perf_counter() - t0

    times: dict[str, list[float]] = {"plain": [], "corpus": []}
    for r in range(args.repeats):
        order = [("plain", plain), ("corpus", scored)]
        for name, fn in order if r % 2 == 0 else order[::-1]:
            times[name].append(fn())
            print(f"  round {r + 1}: {name} {times[name][-1]:.2f} s", flush=True)
    if not args.repeats:
        return _memory(args)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"median of {args.repeats}: plain forward {med['plain']:.2f} s, corpus run {med['corpus']:.2f} s: "
        f"{med['corpus'] / med['plain']:.2f}× (goal ≤ 2×); load average now {os.getloadavg()[0]:.2f}"
    )
    page, period = induction_scores(lm.model)
    H = cfg.attention.n_heads
    top = [divmod(int(i), H) for i in np.argsort(-page.reshape(-1), kind="stable")[:5]]
    print(f"top induction heads: the Metrics page (random block of {period}, twice) {_heads(top)}")
    for name in ("induction", "induction_random"):
        print(f"  the corpus run's {name}: {_heads(last[0].top_heads(name, 5))}")
    return _memory(args)


def _memory(args) -> int:
    rows = []
    for n in (int(x) for x in args.memory_prompts.split(",") if x):
        cmd = [sys.executable, __file__, "--child", str(n), "--checkpoint", args.checkpoint]
        cmd += ["--corpus", args.corpus, "--memory-seq-len", str(args.memory_seq_len)]
        if args.threads:
            cmd += ["--threads", str(args.threads)]
        out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
        rows.append(json.loads(out))
        r = rows[-1]
        print(
            f"N = {n} × {args.memory_seq_len} tokens, the model open: peak {r['forward_mb']:.0f} MB in a "
            f"plain pass, {r['run_mb']:.0f} MB during the run"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
