"""Long prompts: the Attention tab's inspection against a plain forward of the same prompt, on a model of
SmolLM2-135M's shape (30 layers × 9 query heads over 3 key/value heads, d 576, d_ff 1536, a 49,152-token
vocabulary, RoPE; random weights: the time and the memory depend on the shape alone).

Each case runs in a process of its own: the model is built, then a plain forward (``model(idx)``, the
fused attention kernel, the logits [T, V]) and the inspection (``plan_prompt`` + ``inspect_prompt``,
streamed past the held limit) run back to back on the same threads; the ratio is the inspection's time
over the forward's, both measured in that process. Memory: the peak resident set each adds over the
loaded model (``VmHWM`` reset before each, Linux), so the two peaks are each their own.

Goals (2-core CPU): 8,192 tokens inspected in ≤ 1.5× the plain forward, peak ≤ 2 GB over the model;
32,768 tokens inspected without running out of memory (the model's context raised to fit them).

    python bench/long_prompt.py                          # 8,192 tokens, 3 runs, medians
    python bench/long_prompt.py --tokens 32768 --runs 1 --no-plain  # the long one (about half an hour)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

SHAPE = dict(
    vocab_size=49152,
    n_layers=30,
    d_model=576,
    n_heads=9,
    n_kv_heads=3,
    d_ff=1536,
    mlp="swiglu",
    norm="rmsnorm",
    positions="rope",
    tie_embeddings=True,
    bias="none",
)


def _status(field: str) -> int:
    """A ``/proc/self/status`` figure in bytes (``VmRSS``, ``VmHWM``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident set


class _Ids:
    """A tokenizer for token ids already chosen: each token's text is its id."""

    def encode(self, text: str, errors: str = "strict") -> list[int]:
        return [int(t) for t in text.split()]

    def token_strings(self, ids: list[int]) -> list[str]:
        return [f"{i} " for i in ids]


def child(T: int, plain: bool = True) -> dict:
    """One case in this process: the plain forward (unless ``plain`` is False), then the inspection;
    times and peaks."""
    import torch

    from model.config import GPTConfig
    from model.interp.inspection import inspect_prompt
    from model.interp.plan import plan_prompt
    from model.interp.prompt import prompt_of_ids
    from model.nn.gpt import init_model

    cfg = GPTConfig(**SHAPE, context_length=max(8192, T))
    model = init_model(cfg, seed=0).eval()
    tok = _Ids()
    ids = torch.randint(0, cfg.core.vocab_size, (T,), generator=torch.Generator().manual_seed(0)).tolist()
    with torch.no_grad():  # warm both paths on a short prompt (first-call costs)
        model(torch.tensor([ids[:256]]))
    base = _status("VmRSS")
    plain_s, plain_peak = float("nan"), float("nan")
    if plain:
        _reset_peak()
        t0 = time.perf_counter()
        with torch.no_grad():
            model(torch.tensor([ids]))
        plain_s = time.perf_counter() - t0
        plain_peak = _status("VmHWM") - base
    import gc

    gc.collect()
    base2 = _status("VmRSS")
    _reset_peak()
    t0 = time.perf_counter()
    plan = plan_prompt(cfg, tok, prompt_of_ids(tok, ids), budget=16 * 2**30)
    insp = inspect_prompt(model, tok, plan)
    inspect_s = time.perf_counter() - t0
    inspect_peak = _status("VmHWM") - base2
    t0 = time.perf_counter()
    head = insp.head(cfg.core.n_layers - 1, 0)  # one head opened: [T, T]
    open_s = time.perf_counter() - t0
    return {
        "T": T,
        "held": insp.held,
        "threads": torch.get_num_threads(),
        "model_mb": base / 2**20,
        "plain_s": plain_s,
        "inspect_s": inspect_s,
        "ratio": inspect_s / plain_s,
        "plain_peak_mb": plain_peak / 2**20,
        "inspect_peak_mb": inspect_peak / 2**20,
        "record_mb": insp.weights.nbytes / 2**20,
        "open_head_s": open_s,
        "head_mb": head.nbytes / 2**20,
    }


def _s(x: float) -> str:
    return "not run" if x != x else f"{x:.1f} s"


def _mb(x: float) -> str:
    return "not run" if x != x else f"{x:.0f} MB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[8192])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument(
        "--no-plain",
        action="store_true",
        help="skip the plain forward (no time ratio): at 32,768 tokens it alone takes about as long as "
        "the inspection, since both are quadratic",
    )
    ap.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, plain=not args.no_plain)))
        return
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for T in args.tokens:
        runs = []
        for i in range(args.runs):
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(T), *(["--no-plain"] if args.no_plain else [])],
                cwd=root,
                capture_output=True,
                text=True,
            )
            if out.returncode != 0:
                print(f"T={T} run {i + 1}: failed ({out.returncode})\n{out.stderr[-2000:]}")
                break
            r = json.loads(out.stdout.strip().splitlines()[-1])
            runs.append(r)
            print(
                f"T={T:,} run {i + 1}: plain {_s(r['plain_s'])}, inspect {r['inspect_s']:.1f} s "
                f"(ratio {'not measured' if r['ratio'] != r['ratio'] else format(r['ratio'], '.2f')}, "
                f"held={r['held']}); the model resident "
                f"{r['model_mb']:.0f} MB, peak over it: plain {_mb(r['plain_peak_mb'])}, "
                f"inspect {r['inspect_peak_mb']:.0f} MB (record {r['record_mb']:.0f} MB); "
                f"one head opened {r['open_head_s']:.2f} s, {r['head_mb']:.0f} MB; "
                f"load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
        if runs:
            med = {k: statistics.median(r[k] for r in runs) for k in ("plain_s", "inspect_s", "ratio")}
            peak = statistics.median(r["inspect_peak_mb"] for r in runs)
            # the goals are the at 8,192 tokens; at 32,768 the goal is only not to run out of memory
            goals = (" (goal ≤ 1.5)", " (goal ≤ 2048 MB)") if T == 8192 else ("", "")
            ratio = "not measured" if med["ratio"] != med["ratio"] else f"{med['ratio']:.2f}"
            print(
                f"T={T:,} median of {len(runs)}: plain {_s(med['plain_s'])}, "
                f"inspect {med['inspect_s']:.1f} s, "
                f"ratio {ratio}{goals[0]}, inspection peak {peak:.0f} MB over the model"
                f"{goals[1]}; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
                flush=True,
            )


if __name__ == "__main__":
    main()
