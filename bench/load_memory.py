"""How much memory opening a GPT-2-small-shaped Hugging Face directory takes, beyond its weights.

Writes random weights of GPT-2 small's shapes (12 layers, 12 heads, d = 768, 1024 positions,
V = 50257: 124.4M parameters, 498 MB in float32) as ``model.safetensors`` with GPT-2's tensor names,
then opens the directory with :func:`model.pretrained.open_model` in a fresh process and reports:

* ``weights``: bytes of the loaded parameters (float32);
* ``peak growth``: the process's peak resident set (``ru_maxrss``) after loading minus its resident
  set just before (torch and the loader already imported);
* ``overhead = peak growth - weights``: what loading costs on top of holding the model (target: < 1 GB).

Usage: ``python bench/load_memory.py [--layers 12] [--d-model 768] [--keep DIR]``. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def write_gpt2_dir(directory: Path, n_layer: int, n_embd: int, n_positions: int, vocab: int) -> int:
    """A GPT-2-family directory with random weights (Conv1D layout, tied head); returns parameter count."""
    import torch
    from safetensors.torch import save_file

    from model.bpe import bytes_to_unicode

    g = torch.Generator().manual_seed(0)
    d = n_embd

    def rnd(*shape):
        return torch.randn(*shape, generator=g) * 0.02

    t: dict[str, torch.Tensor] = {
        "transformer.wte.weight": rnd(vocab, d),
        "transformer.wpe.weight": rnd(n_positions, d),
    }
    for i in range(n_layer):
        p = f"transformer.h.{i}."
        t[p + "ln_1.weight"], t[p + "ln_1.bias"] = torch.ones(d), torch.zeros(d)
        t[p + "ln_2.weight"], t[p + "ln_2.bias"] = torch.ones(d), torch.zeros(d)
        t[p + "attn.c_attn.weight"], t[p + "attn.c_attn.bias"] = rnd(d, 3 * d), torch.zeros(3 * d)
        t[p + "attn.c_proj.weight"], t[p + "attn.c_proj.bias"] = rnd(d, d), torch.zeros(d)
        t[p + "mlp.c_fc.weight"], t[p + "mlp.c_fc.bias"] = rnd(d, 4 * d), torch.zeros(4 * d)
        t[p + "mlp.c_proj.weight"], t[p + "mlp.c_proj.bias"] = rnd(4 * d, d), torch.zeros(d)
    t["transformer.ln_f.weight"], t["transformer.ln_f.bias"] = torch.ones(d), torch.zeros(d)
    save_file(t, str(directory / "model.safetensors"), metadata={"format": "pt"})
    n_params = sum(v.numel() for v in t.values())
    config = {
        "model_type": "gpt2",
        "n_layer": n_layer,
        "n_head": 12,
        "n_embd": d,
        "n_positions": n_positions,
        "vocab_size": vocab,
        "activation_function": "gelu_new",
        "layer_norm_epsilon": 1e-5,
    }
    (directory / "config.json").write_text(json.dumps(config))
    # A byte-level vocabulary without merges: enough to open the model (ids past it decode to U+FFFD).
    byte_vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())} | {"<|endoftext|>": 256}
    (directory / "vocab.json").write_text(json.dumps(byte_vocab))
    (directory / "merges.txt").write_text("#version: 0.2\n")
    return n_params


def measure(directory: Path) -> dict:
    """In this (fresh) process: open the directory, return the memory figures."""
    import resource

    import torch

    from model.pretrained import open_model

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()

    before = rss()
    t0 = time.perf_counter()
    ckpt = open_model(directory)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    weights = sum(p.numel() * p.element_size() for p in ckpt.model.parameters())
    after = rss() - before
    with torch.no_grad():
        ckpt.model(torch.zeros(1, 8, dtype=torch.long))  # it works
    return {
        "n_params": ckpt.meta["n_params"],
        "weights": weights,
        "rss_before": before,
        "peak_growth": peak - before,
        "rss_after": after,
        "seconds": seconds,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--positions", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--keep", type=Path, help="write the directory here and keep it")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child process
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        code = (
            "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
            "from bench.load_memory import write_gpt2_dir; "
            "print(write_gpt2_dir(Path(sys.argv[2]), *map(int, sys.argv[3:])))"
        )
        subprocess.run(
            [
                sys.executable,
                "-c",
                code,
                str(ROOT),
                str(directory),
                str(args.layers),
                str(args.d_model),
                str(args.positions),
                str(args.vocab),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        written = time.perf_counter() - t0
        cmd = [sys.executable, __file__, "--measure", str(directory)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
    mb = 1e6
    shape = f"{args.layers} layers, d={args.d_model}, V={args.vocab}"
    print(f"GPT-2-shaped: {shape}: {r['n_params'] / 1e6:.1f}M params")
    print(f"written in {written:.1f} s; opened in {r['seconds']:.2f} s")
    print(f"weights (float32):       {r['weights'] / mb:8.0f} MB")
    print(f"RSS before open:         {r['rss_before'] / mb:8.0f} MB (python + torch + loader)")
    print(f"peak RSS growth:         {r['peak_growth'] / mb:8.0f} MB")
    print(f"overhead beyond weights: {(r['peak_growth'] - r['weights']) / mb:8.0f} MB (target < 1000 MB)")
    print(f"RSS growth after open:   {r['rss_after'] / mb:8.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
