"""Scrubbing a training history: switching steps from the trace cache against one plain forward, and memory.

Writes a Pythia-70m-shaped GPT-NeoX folder (6 layers, 8 heads, d = 512, d_ff = 2048, rotary on 25% of
each head, parallel residual, V = 50304: 70.4M parameters, random float32 weights, nothing downloaded)
and 16 revisions of it as sub-folders ``step0`` … ``step143000`` (Pythia's 16 log-spaced default
steps). The revisions hard-link one weights file (so the disk holds it once): each is still a separate
revision to :class:`model.io.history.traced.History` -- its own identity, its own load, trace and cache entry.

Then, in this process:

1. **first pass**: every revision opened and traced on the prompt (what a first visit costs);
2. **switching with all revisions cached**: a fresh History (as after a restart) asked for each step in
   turn, then again from memory; the median time of one switch, against one plain forward
   ``model(ids)`` of the same model on the same prompt (median of the same number of calls);
3. **memory**: the resident set before the history, after the first pass (``max_models`` opened models
   kept, 16 snapshots), and the bytes the 16 snapshots hold; the trace cache's size on disk.

Usage: ``python bench/history.py [--tokens 64] [--rounds 3] [--keep DIR]``. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PYTHIA_70M = dict(
    vocab_size=50304,
    hidden_size=512,
    intermediate_size=2048,
    num_hidden_layers=6,
    num_attention_heads=8,
    max_position_embeddings=2048,
    rotary_pct=0.25,
    use_parallel_residual=True,
    tie_word_embeddings=False,
    bos_token_id=0,
    eos_token_id=0,
)
TEXT = "The quick brown fox jumps over the lazy dog. " * 40


def write_revisions(root: Path, steps: list[int]) -> int:
    """A Pythia-70m-shaped folder and ``step<N>`` sub-folders hard-linking its files; the parameter count."""
    import json

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    torch.manual_seed(0)
    base = root / "base"
    model = GPTNeoXForCausalLM(GPTNeoXConfig(**PYTHIA_70M))
    n = sum(p.numel() for p in model.parameters())
    model.save_pretrained(str(base))
    del model
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([TEXT], trainer)
    (base / "tokenizer.json").write_text(tok.to_str(), encoding="utf-8")
    (base / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|endoftext|>"}), encoding="utf-8")
    revs = root / "revisions"
    for s in steps:
        d = revs / f"step{s}"
        d.mkdir(parents=True)
        for f in base.iterdir():
            os.link(f, d / f.name)
    return n


def rss() -> int:
    """The resident set now (Linux: /proc/self/statm), else the peak so far."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=64, help="prompt length in tokens (about)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of switching through every step")
    p.add_argument("--max-models", type=int, default=2)
    p.add_argument("--keep", default=None, help="write the folders here (default: a temporary folder)")
    args = p.parse_args(argv)

    import torch

    from model.io.history.revisions import log_spaced_steps, open_source
    from model.io.history.traced import History
    from model.runtime import set_threads

    set_threads(0)
    steps = log_spaced_steps()
    root = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="attention-lab-history-"))
    try:
        t0 = time.perf_counter()
        n_params = write_revisions(root, steps)
        print(
            f"wrote a Pythia-70m-shaped model ({n_params / 1e6:.1f}M parameters) and {len(steps)} revisions "
            f"in {time.perf_counter() - t0:.1f} s"
        )
        source = open_source(root / "revisions")
        cache = root / "cache"
        from model.io.pretrained import open_model

        ckpt = open_model(root / "base")
        ids = ckpt.tokenizer.encode(TEXT)[: args.tokens]
        prompt = ckpt.tokenizer.decode(ids)
        x = torch.tensor([ids])

        before = rss()
        hist = History(source, prompt, cache_dir=cache, max_models=args.max_models)
        t0 = time.perf_counter()
        firsts = []
        for i in range(len(hist)):
            t1 = time.perf_counter()
            hist.snapshot(i)
            firsts.append(time.perf_counter() - t1)
        first = time.perf_counter() - t0
        after = rss()
        snap_bytes = sum(
            s.weights.nbytes + sum(m.nbytes for m in s.metrics.values()) for s in hist.snapshots()
        )
        disk = sum(f.stat().st_size for f in cache.rglob("*.npz"))
        T = hist.snapshot(0).weights.shape[-1]
        print(
            f"first pass: {len(hist)} revisions opened and traced on {T} tokens in {first:.1f} s "
            f"(median {statistics.median(firsts):.2f} s each); models opened {hist.loads}"
        )
        print(
            f"memory: resident set +{(after - before) / 2**20:.0f} MiB after the first pass "
            f"({hist.max_models} models kept of {len(hist)}; one float32 model is "
            f"{n_params * 4 / 2**20:.0f} MiB); 16 snapshots hold {snap_bytes / 2**20:.2f} MiB; "
            f"trace cache on disk {disk / 2**20:.2f} MiB"
        )
        del hist

        switch_disk, switch_mem = [], []
        for _ in range(args.rounds):
            fresh = History(source, prompt, cache_dir=cache, max_models=args.max_models)
            for i in range(len(fresh)):  # from the disk cache
                t1 = time.perf_counter()
                fresh.snapshot(i)
                switch_disk.append(time.perf_counter() - t1)
            for i in reversed(range(len(fresh))):  # from memory
                t1 = time.perf_counter()
                fresh.snapshot(i)
                switch_mem.append(time.perf_counter() - t1)
            assert fresh.loads == 0, "a cached revision loaded its model"
        model = ckpt.model.eval()
        forwards = []
        with torch.no_grad():
            model(x)
            for _ in range(len(switch_disk)):
                t1 = time.perf_counter()
                model(x)
                forwards.append(time.perf_counter() - t1)
        d, m, f = (statistics.median(v) * 1000 for v in (switch_disk, switch_mem, forwards))
        print(
            f"switch a step, all cached: {d:.2f} ms from the disk cache, {m * 1000:.0f} µs from memory; "
            f"one plain forward of {T} tokens: {f:.1f} ms -> ratio (disk switch / forward) {d / f:.3f}"
        )
        print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
