"""What the idle hook points cost: a training step of the GPT as it is against the same GPT with every
hook point removed (replaced by a plain identity function), in the same process.

Both copies hold the same weights and train on the same batches with their own AdamW, in interleaved
chunks whose order alternates, so a machine shared with other work slows both alike. Printed: the
median over rounds of (step time with hook points) / (step time without) for training and for an
eval forward, and the ratio of the fastest single steps (on a busy machine the least disturbed
figure); the goal for training is ≤ 1.02 (nothing hooked must cost nothing measurable).

    python bench/hook_overhead.py                       # the 10.8M model of train_throughput.py
    python bench/hook_overhead.py --rounds 6 --chunk 3 --d-model 128 --n-layers 2
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from model.config import GPTConfig
from model.nn.gpt import init_model
from model.nn.hooks import HookPoint


class _Bare:
    """A plain identity callable with no hooks (what the model reads of a point: ``fns``)."""

    fns = ()

    def __call__(self, x):
        return x


def without_hook_points(model):
    """A deep copy of ``model`` in which every :class:`HookPoint` is a plain identity function."""
    bare = copy.deepcopy(model)
    for parent in list(bare.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, HookPoint):
                delattr(parent, name)
                object.__setattr__(parent, name, _Bare())
    assert not any(isinstance(m, HookPoint) for m in bare.modules())
    return bare


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d-model", type=int, default=384)
    p.add_argument("--n-layers", type=int, default=6)
    p.add_argument("--n-heads", type=int, default=6)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--vocab", type=int, default=96)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--chunk", type=int, default=3, help="steps per model before switching to the other")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0 = every core)")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = GPTConfig(
        vocab_size=args.vocab,
        context_length=args.seq_len,
        n_layers=args.n_layers,
        d_model=args.d_model,
        n_heads=args.n_heads,
    )
    hooked = init_model(cfg, seed=0)
    bare = without_hook_points(hooked)
    models = {"hooked": hooked, "bare": bare}
    opts = {k: torch.optim.AdamW(m.parameters(), lr=3e-4) for k, m in models.items()}
    gen = torch.Generator().manual_seed(0)
    batches = [
        torch.randint(0, args.vocab, (args.batch_size, args.seq_len + 1), generator=gen) for _ in range(4)
    ]

    def train_step(name: str, i: int) -> None:
        b = batches[i % len(batches)]
        _, loss = models[name](b[:, :-1], b[:, 1:])
        loss.backward()
        opts[name].step()
        opts[name].zero_grad(set_to_none=True)
        loss.item()

    def eval_step(name: str, i: int) -> None:
        with torch.no_grad():
            models[name](batches[i % len(batches)][:1, :-1])

    n_params = sum(p.numel() for p in hooked.parameters())
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"{args.n_layers} layers, d_model {args.d_model}, {args.n_heads} heads, seq {args.seq_len}, batch "
        f"{args.batch_size}: {n_params:,} parameters, {torch.get_num_threads()} threads, load {load:.1f}; "
        f"{sum(isinstance(m, HookPoint) for m in hooked.modules())} hook points"
    )
    for what, step in (("training step", train_step), ("eval forward", eval_step)):
        for name in models:  # warm-up
            step(name, 0)
        ratios, fastest = [], {"hooked": float("inf"), "bare": float("inf")}
        for r in range(args.rounds):
            spent = {}
            for name in ("hooked", "bare") if r % 2 == 0 else ("bare", "hooked"):
                spent[name] = 0.0
                for i in range(args.chunk):
                    t0 = time.perf_counter()
                    step(name, i)
                    dt = time.perf_counter() - t0
                    spent[name] += dt
                    fastest[name] = min(fastest[name], dt)
            ratios.append(spent["hooked"] / spent["bare"])
        med = statistics.median(ratios)
        goal = " (goal ≤ 1.02)" if what == "training step" else ""
        print(
            f"  {what}: with / without hook points, median over {args.rounds} rounds {med:.3f}{goal} "
            f"(rounds from {min(ratios):.3f} to {max(ratios):.3f}); fastest step "
            f"{fastest['hooked'] * 1e3:.0f} / {fastest['bare'] * 1e3:.0f} ms = "
            f"{fastest['hooked'] / fastest['bare']:.3f} (the least disturbed by other work)",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
