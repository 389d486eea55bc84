"""What reading an SAE's features over a corpus costs: ``feature_stats`` against the bare pass to the
site over the same prompts, its peak memory at two numbers of prompts, and ``feature_logits`` of every
feature.

The SAE is freshly initialised (a random TopK SAE of ``--expansion`` × d_in features on ``--site`` of
``--layer``): what reading costs does not depend on what the features mean. Time: the medians of
``--repeats`` runs of each, alternating in one process; the goal is a small overhead over the pass
itself (the encoding, the heaps, the histograms). Memory: a child process per N of
``--memory-prompts`` opens the model, then reports the peak resident set (Linux's VmHWM, reset after
loading) of the run; the kept state is F·(bins + k·2(2c + 1)) numbers whatever N, so the peak should
not move with N.

    python bench/sae_features.py                    # SmolLM2-135M, resid_pre of layer 15, ×8, 32 × 128
    python bench/sae_features.py --checkpoint assets/starter --corpus task:induction --site z \\
        --layer 1 --seq-len 64 --prompts 256 --memory-prompts 256,2048
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch

from model import open_model
from model.interp.corpus import CorpusSettings
from model.interp.corpus.run import batch_size_for, bos_prefix, open_source, prompt_batches
from model.interp.sae import SAEConfig, Site, SparseAutoencoder, site_activations
from model.interp.sae.dashboard import feature_stats
from model.interp.sae.readout import feature_logits


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise OSError("no VmHWM")


def _reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def _setup(args):
    lm = open_model(args.checkpoint)
    site = Site(args.site, args.layer if args.layer is not None else lm.config.core.n_layers // 2)
    d_in = site.d_in(lm.config)
    sae = SparseAutoencoder(SAEConfig(site, d_in, args.expansion * d_in, k=args.k))
    sae.reset_parameters(seed=0)
    return lm, sae


def _settings(args, n: int) -> CorpusSettings:
    return CorpusSettings(args.corpus, n_prompts=n, seq_len=args.seq_len, top_k=args.top_k)


def _memory(args) -> None:
    lm, sae = _setup(args)
    source = open_source(args.corpus, lm.tokenizer)
    _reset_peak()
    before = _peak_mb()
    feature_stats(lm.model, lm.tokenizer, sae, _settings(args, args.prompts), source=source)
    print(json.dumps({"before": before, "peak": _peak_mb()}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", default="package:SmolLM2-135M-Instruct")
    p.add_argument("--corpus", default="builtin:tales")
    p.add_argument("--site", default="resid_pre")
    p.add_argument("--layer", type=int, default=None, help="default: the middle layer")
    p.add_argument("--expansion", type=int, default=8)
    p.add_argument("--k", type=int, default=32)
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--memory-prompts", default="32,128")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    torch.set_num_threads(2)
    if args.child:
        _memory(args)
        return
    lm, sae = _setup(args)
    settings = _settings(args, args.prompts)
    source = open_source(args.corpus, lm.tokenizer)
    prefix = bos_prefix(lm.tokenizer, args.seq_len)
    batches = [
        ids for _, ids in prompt_batches(source, settings, prefix, batch_size_for(lm.config, settings))
    ]
    bare, stats_times = [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        for ids in batches:
            site_activations(lm.model, sae.config.site, ids)
        bare.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        stats = feature_stats(lm.model, lm.tokenizer, sae, settings, source=source)
        stats_times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    feature_logits(lm.model, sae, None, k=10)
    logits_s = time.perf_counter() - t0
    b, s = statistics.median(bare), statistics.median(stats_times)
    F = sae.config.d_sae
    print(f"{args.checkpoint}: SAE of {F} features on {sae.config.site.label()}, {args.prompts} prompts × "
          f"{args.seq_len} tokens of {args.corpus} ({stats.n_tokens} read)")  # fmt: skip
    print(f"  pass to the site {b:.2f} s, feature_stats {s:.2f} s: {s / b:.2f}× (medians of {args.repeats})")
    print(f"  feature_logits of all {F} features: {logits_s:.2f} s; {int((stats.fired > 0).sum())} fired")
    for n in [int(x) for x in args.memory_prompts.split(",")]:
        argv = [sys.executable, __file__, *sys.argv[1:], "--child", "--prompts", str(n)]
        got = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
        print(f"  N = {n}: peak {got['peak']:.0f} MB, {got['peak'] - got['before']:.0f} MB over the model's")


if __name__ == "__main__":
    main()
