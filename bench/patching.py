"""Activation patching of every head against plain forwards (the issue's target: ≤ 1.5×).

Patches all ``L·H`` heads of a random model (default 12 layers × 12 heads, d 768, as GPT-2 small)
at ``--tokens`` tokens with :func:`model.interp.analysis.patching.patch_heads` (one clean and one corrupted
forward, then the ``L·H`` patched runs batched), and times ``L·H + 1`` plain forwards of one prompt
for comparison. Prints each repeat, the median ratio and the load average.

    python bench/patching.py                    # 12×12, d 768, 64 tokens, 3 repeats
    python bench/patching.py --layers 4 --heads 4 --d-model 128 --tokens 128
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from model.config import GPTConfig
from model.interp.analysis.patching import patch_heads
from model.nn.gpt import init_model


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--d-model", type=int, default=768)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--max-batch", type=int, default=None)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args(argv)

    config = GPTConfig(
        vocab_size=args.vocab,
        context_length=max(args.tokens, 64),
        n_layers=args.layers,
        n_heads=args.heads,
        d_model=args.d_model,
    )
    model = init_model(config, seed=0, device=args.device).eval()
    g = torch.Generator().manual_seed(0)
    clean = torch.randint(0, args.vocab, (args.tokens,), generator=g)
    corrupt = clean.clone()
    corrupt[args.tokens // 3] = (clean[args.tokens // 3] + 1) % args.vocab
    n = args.layers * args.heads
    idx = clean[None].to(args.device)

    def sync():
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()

    def plain() -> float:
        sync()
        t = time.perf_counter()
        with torch.no_grad():
            for _ in range(n + 1):
                model(idx)
        sync()
        return time.perf_counter() - t

    def patched() -> float:
        sync()
        t = time.perf_counter()
        patch_heads(model, clean, corrupt, max_batch=args.max_batch)
        sync()
        return time.perf_counter() - t

    print(
        f"{args.layers} layers × {args.heads} heads, d {args.d_model}, {args.tokens} tokens, "
        f"V {args.vocab}, {args.device}, {torch.get_num_threads()} threads; load {load()}"
    )
    patched()  # warm-up
    plain()
    ratios = []
    for r in range(args.repeats):
        tp, tf = patched(), plain()
        ratios.append(tp / tf)
        print(
            f"repeat {r}: patch {n} heads {tp * 1e3:8.0f} ms   {n + 1} plain forwards {tf * 1e3:8.0f} ms   "
            f"ratio {tp / tf:.2f}"
        )
    print(f"median ratio {statistics.median(ratios):.2f} (target ≤ 1.5); load {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
