"""Training throughput: the project's Trainer against a plain hand-written PyTorch GPT of the same shape.

Both train in this process on batches of the same size from the same corpus, for the same number of
steps, in interleaved chunks (which one goes first alternates), so a machine shared with other work
slows both alike. The reference is what a user would write by hand: GPT-2 blocks (fused QKV linear,
``F.scaled_dot_product_attention(is_causal=True)``, GELU MLP, LayerNorm, learned positions, untied
head), AdamW with decay on matrices, gradient clipping at 1.0. The Trainer runs as the app runs it:
schedule, clipping, loss checks, events, and a probe trace every ``--probe-every`` steps.

Printed: tokens/s of each and their ratio (target >= 0.95), achieved model FLOP/s ``6·N·tokens/s``
(N = parameters) beside a dense fp32 matmul rate measured in the same run.

    python bench/train_throughput.py                      # d_model 384, 6 layers, 6 heads, seq 256
    python bench/train_throughput.py --steps 20 --chunk 5 --d-model 128 --n-layers 2 --n-heads 4
"""

from __future__ import annotations

import argparse
import contextlib
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch
import torch.nn as nn
import torch.nn.functional as F

from model.config import GPTConfig
from model.runtime import pick_device, set_threads
from model.text.sources import resolve_source
from model.train.probes import Prober
from model.train.settings import TrainSettings
from model.train.trainer import Trainer


# ---------------------------------------------------------------------------------------------
# the hand-written reference
# ---------------------------------------------------------------------------------------------
class RefAttention(nn.Module):
    def __init__(self, d: int, h: int):
        super().__init__()
        self.h = h
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class RefBlock(nn.Module):
    def __init__(self, d: int, h: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(d)
        self.attn = RefAttention(d, h)
        self.ln_2 = nn.LayerNorm(d)
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class RefGPT(nn.Module):
    def __init__(self, vocab: int, context: int, n_layers: int, d: int, h: int):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(context, d)
        self.h = nn.ModuleList(RefBlock(d, h) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        for p in self.parameters():
            if p.dim() >= 2:
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, idx, targets):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


# ---------------------------------------------------------------------------------------------
def matmul_rate(device: torch.device, n: int = 1024, seconds: float = 1.5) -> float:
    """Dense fp32 matmul FLOP/s: ``2·n³`` per ``n×n @ n×n``, best of short timed runs."""
    a = torch.randn(n, n, device=device)
    b = torch.randn(n, n, device=device)
    best = 0.0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sync(device)
        t0 = time.perf_counter()
        for _ in range(4):
            a @ b
        sync(device)
        best = max(best, 4 * 2 * n**3 / (time.perf_counter() - t0))
    return best


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def fmt(x: float, unit: str = "") -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.2f} {prefix}{unit}"
    return f"{x:.1f} {unit}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d-model", type=int, default=384)
    p.add_argument("--n-layers", type=int, default=6)
    p.add_argument("--n-heads", type=int, default=6)
    p.add_argument("--seq-len", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=100, help="timed steps per model")
    p.add_argument("--chunk", type=int, default=5, help="steps per model before switching to the other")
    p.add_argument("--warmup-steps", type=int, default=3, help="untimed steps per model first")
    p.add_argument("--probe-every", type=int, default=50, help="the Trainer's probe trace interval (0 = off)")
    p.add_argument("--corpus", default="builtin:stdlib")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0, help="CPU threads for both (0 = every core)")
    args = p.parse_args(argv)

    device = pick_device(args.device)
    set_threads(args.threads)
    source = resolve_source(args.corpus)
    V = source.vocab_size
    config = GPTConfig(
        vocab_size=V,
        context_length=args.seq_len,
        n_layers=args.n_layers,
        d_model=args.d_model,
        n_heads=args.n_heads,
    )
    settings = TrainSettings(
        steps=10**9,  # the schedule never ends and no final evaluation happens inside the bench
        batch_size=args.batch_size,
        seq_len=args.seq_len,
        lr=3e-4,
        warmup=10,
        eval_every=10**9,
        probe_every=args.probe_every,
        device=str(device),
        threads=args.threads,
    )
    trainer = Trainer(config, source, settings, callbacks={"on_step_end": [Prober()]})  # as the app probes

    ref = RefGPT(V, args.seq_len, args.n_layers, args.d_model, args.n_heads).to(device)
    n_ours, n_ref = trainer.model.num_params(), sum(p.numel() for p in ref.parameters())
    if n_ours != n_ref:
        print(f"warning: parameter counts differ: project {n_ours:,}, reference {n_ref:,}")
    decay = [p for p in ref.parameters() if p.dim() >= 2]
    other = [p for p in ref.parameters() if p.dim() < 2]
    ref_opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
        lr=3e-4,
        betas=(0.9, 0.99),
    )
    ref_gen = torch.Generator().manual_seed(1)
    amp_dtype = trainer.engine.amp_dtype
    amp = torch.autocast("cuda", dtype=amp_dtype) if amp_dtype is not None else contextlib.nullcontext()

    def ref_step() -> None:
        x, y = source.get_batch("train", args.batch_size, args.seq_len, ref_gen)
        x, y = x.to(device), y.to(device)
        with amp:
            loss = ref(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), 1.0)
        ref_opt.step()
        ref_opt.zero_grad(set_to_none=True)
        loss.item()  # what a user logs each step

    def ours_step() -> None:
        trainer.train_step()

    print(
        f"shape: {args.n_layers} layers, d_model {args.d_model}, {args.n_heads} heads, seq {args.seq_len}, "
        f"batch {args.batch_size}, vocab {V}; {n_ours:,} parameters; device {device}, "
        f"{torch.get_num_threads()} threads; probe trace every {args.probe_every} steps"
    )
    peak_before = matmul_rate(device)
    for _ in range(args.warmup_steps):
        ours_step()
        ref_step()

    times = {"ours": 0.0, "ref": 0.0}
    per_step_times: dict[str, list[float]] = {"ours": [], "ref": []}
    round_ratios: list[float] = []
    done = {"ours": 0, "ref": 0}
    steps = {"ours": ours_step, "ref": ref_step}
    rounds = math.ceil(args.steps / args.chunk)
    for r in range(rounds):
        order = ("ours", "ref") if r % 2 == 0 else ("ref", "ours")
        n = min(args.chunk, args.steps - done["ours"])
        for name in order:
            for _ in range(n):
                sync(device)
                t0 = time.perf_counter()
                steps[name]()
                sync(device)
                per_step_times[name].append(time.perf_counter() - t0)
            times[name] += sum(per_step_times[name][-n:])
            done[name] += n
        round_ratios.append(sum(per_step_times["ref"][-n:]) / sum(per_step_times["ours"][-n:]))
        per_step = args.batch_size * args.seq_len
        print(
            f"  round {r + 1}/{rounds}: project {done['ours'] * per_step / times['ours']:,.0f} tok/s, "
            f"reference {done['ref'] * per_step / times['ref']:,.0f} tok/s",
            flush=True,
        )
    peak_after = matmul_rate(device)

    tokens = args.steps * args.batch_size * args.seq_len
    ours_tps, ref_tps = tokens / times["ours"], tokens / times["ref"]
    peak = max(peak_before, peak_after)
    print()
    print(
        f"project Trainer   : {ours_tps:10,.0f} tokens/s   "
        f"model FLOP/s {fmt(6 * n_ours * ours_tps, 'FLOP/s')}"
    )
    print(
        f"hand-written GPT  : {ref_tps:10,.0f} tokens/s   model FLOP/s {fmt(6 * n_ref * ref_tps, 'FLOP/s')}"
    )
    med = {k: statistics.median(v) for k, v in per_step_times.items()}
    print(f"ratio project/ref : {ours_tps / ref_tps:.3f}   (target >= 0.95)")
    print(
        f"median step       : project {med['ours'] * 1e3:.0f} ms, reference {med['ref'] * 1e3:.0f} ms, "
        f"ratio {med['ref'] / med['ours']:.3f}; median of the per-round ratios "
        f"{statistics.median(round_ratios):.3f} (both robust to bursts of other load on a shared machine)"
    )
    print(
        f"dense fp32 matmul : {fmt(peak, 'FLOP/s')} (1024² mm, best of before {fmt(peak_before, 'FLOP/s')} / "
        f"after {fmt(peak_after, 'FLOP/s')}); project achieves {6 * n_ours * ours_tps / peak:.0%} of it"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
