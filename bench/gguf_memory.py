"""Peak memory of opening a 1B-shaped Llama GGUF and inspecting 256 tokens: matrices kept as stored
(the default) against every tensor dequantized to float32 once (``stored=False``, the earlier path).

Writes, in a temporary folder of its own, a Llama of TinyLlama / Llama-3.2-1B's size with random
weights (d = 2048, 16 layers, 32 query heads over 8 key/value heads, d_ff = 8192, V = 32000, tied
head: 1.04B values) in Q8_0 and in Q4_K, and a byte-level vocabulary of 32000 tokens. The blocks are
random bytes with small finite float16 scales, not quantized floats: ``gguf`` has no Q4_K quantizer,
and quantizing 1B floats to Q8_0 in numpy takes minutes here, while the memory figures depend only on
the sizes. Each (file, path) is measured in a fresh process: open with :func:`model.io.gguf.load.load_gguf`,
then trace every head of a 256-token prompt as the Attention tab does
(:func:`model.interp.inspection.inspect_prompt`), and report

* ``peak``: the process's peak resident set (VmHWM) minus its resident set before opening (python,
  torch and the loader imported, and a small file of the same types opened and traced first, so that
  torch's first-use costs, the code pages of its kernels and its thread pools, are not counted as the
  model's; ``--cold`` counts them): the mapped file's pages count once touched;
* ``held``: the trace it keeps (the activations the inspect returns);
* ``(peak - held) / file``: the issue's target is at most 1.3 for the stored path.

Usage: ``python bench/gguf_memory.py [--types Q8_0 Q4_K] [--layers 16] [--tokens 256] [--cold]``. Figures, not
pass/fail; about four minutes on two cores.
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

#: ggml type -> (bytes per block, values per block, byte offsets of the float16 scales, largest scale)
BLOCKS = {
    "Q8_0": (34, 32, (0,), 4e-4),  # d, 32 × int8: values ≈ d·q, spread ≈ 74·d
    "Q4_K": (144, 256, (0, 2), 7e-5),  # d, dmin, 12 bytes of scales, 128 bytes of nibbles
}


def _random_blocks(rng, n_values: int, qtype: str):
    import numpy as np

    size, block, offsets, largest = BLOCKS[qtype]
    n = n_values // block
    blocks = rng.integers(0, 256, (n, size), dtype=np.uint8)
    for offset in offsets:
        scale = rng.uniform(largest / 10, largest, n).astype(np.float16)
        blocks[:, offset : offset + 2] = scale.view(np.uint8).reshape(n, 2)
    return blocks


def write_llama_gguf(
    path: Path, qtype: str, *, d: int, layers: int, heads: int, kv: int, ffn: int, vocab: int
) -> int:
    """A random Llama GGUF at ``path``, matrices in ``qtype``, norms F32; returns the values written."""
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFWriter

    from model.text.bpe import bytes_to_unicode

    rng = np.random.default_rng(0)
    w = GGUFWriter(str(path), arch="llama")
    w.add_name(f"bench-1b-{qtype}")
    w.add_context_length(2048)
    w.add_embedding_length(d)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(d // heads)
    w.add_layer_norm_rms_eps(1e-5)
    byte_tokens = list(bytes_to_unicode().values())
    tokens = [*byte_tokens, "Ġt"] + [f"<t{i}>" for i in range(vocab - len(byte_tokens) - 1)]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([1] * vocab)
    w.add_token_merges(["Ġ t"])
    kind = GGMLQuantizationType[qtype]
    d_kv = d // heads * kv
    n = 0

    def matrix(name: str, rows: int, cols: int) -> None:
        nonlocal n
        blocks = _random_blocks(rng, rows * cols, qtype).reshape(rows, -1)
        w.add_tensor(name, blocks, raw_dtype=kind)
        n += rows * cols

    def norm(name: str) -> None:
        nonlocal n
        w.add_tensor(name, np.ones(d, dtype=np.float32))
        n += d

    matrix("token_embd.weight", vocab, d)
    for i in range(layers):
        norm(f"blk.{i}.attn_norm.weight")
        for part, rows, cols in (
            ("attn_q", d, d), ("attn_k", d_kv, d), ("attn_v", d_kv, d), ("attn_output", d, d),
            ("ffn_gate", ffn, d), ("ffn_up", ffn, d), ("ffn_down", d, ffn),
        ):  # fmt: skip
            matrix(f"blk.{i}.{part}.weight", rows, cols)
        norm(f"blk.{i}.ffn_norm.weight")
    norm("output_norm.weight")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n


def measure(path: Path, stored: bool, tokens: int, warm: Path | None = None) -> dict:
    """In this (fresh) process: open ``path`` and trace a ``tokens``-token prompt; the figures. ``warm``:
    a small file of the same types opened and traced first, so that torch's own first-use costs (the
    code pages of its kernels, thread pools) are in the baseline and not counted as the model's."""
    import contextlib
    import resource

    import torch

    from model.interp.inspection import inspect_prompt
    from model.interp.plan import plan_prompt
    from model.interp.prompt import prompt_of_ids
    from model.io.gguf.load import load_gguf
    from model.nn.quantized import stored_bytes

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()

    def hwm() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return 0

    if warm is not None:
        small = load_gguf(warm, stored=stored)
        ids = list(range(tokens))
        plan = plan_prompt(
            small.model.config, small.tokenizer, prompt_of_ids(small.tokenizer, ids), budget=1 << 62
        )
        inspect_prompt(small.model, small.tokenizer, plan)
        del small, plan
        import gc

        gc.collect()
    with contextlib.suppress(OSError):  # the high-water mark from here (Linux 4.0+)
        Path("/proc/self/clear_refs").write_text("5")
    before = rss()
    t0 = time.perf_counter()
    ckpt = load_gguf(path, stored=stored)
    opened = time.perf_counter() - t0
    open_peak = hwm() - before
    floats = sum(t.numel() * t.element_size() for t in [*ckpt.model.parameters(), *ckpt.model.buffers()])
    ids = torch.randint(0, 256, (tokens,), generator=torch.Generator().manual_seed(0)).tolist()
    t0 = time.perf_counter()
    plan = plan_prompt(ckpt.model.config, ckpt.tokenizer, prompt_of_ids(ckpt.tokenizer, ids), budget=1 << 62)
    insp = inspect_prompt(ckpt.model, ckpt.tokenizer, plan)
    inspected = time.perf_counter() - t0
    return {
        "open_seconds": opened,
        "inspect_seconds": inspected,
        "open_peak": open_peak,
        "peak": hwm() - before,
        "held": int(insp.weights.nbytes + insp.overview.nbytes),
        "float_bytes": floats,
        "stored_bytes": stored_bytes(ckpt.model),
        "rss_before": before,
    }


def _child(*args: str) -> str:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--types", nargs="+", default=list(BLOCKS), choices=list(BLOCKS))
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--d-model", type=int, default=2048)
    ap.add_argument("--tokens", type=int, default=256)
    ap.add_argument("--vocab", type=int, default=32000, help=argparse.SUPPRESS)
    ap.add_argument("--write", nargs=3, help=argparse.SUPPRESS)  # child: path type layers
    ap.add_argument("--measure", nargs="+", help=argparse.SUPPRESS)  # child: path stored tokens [warm]
    ap.add_argument(
        "--cold",
        action="store_true",
        help="count torch's first-use costs as the model's (no small file opened and traced first)",
    )
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.write:
        path, qtype, layers = args.write
        d = args.d_model
        shape = dict(d=d, layers=int(layers), heads=d // 64, kv=max(1, d // 256), ffn=4 * d, vocab=args.vocab)
        print(write_llama_gguf(Path(path), qtype, **shape))
        return 0
    if args.measure:
        path, stored, tokens, *warm = args.measure
        print(
            json.dumps(measure(Path(path), stored == "stored", int(tokens), Path(warm[0]) if warm else None))
        )
        return 0
    mb = 1e6
    with tempfile.TemporaryDirectory() as tmp:
        for qtype in args.types:
            path = Path(tmp) / f"bench-{qtype}.gguf"
            t0 = time.perf_counter()
            values = int(
                _child("--write", str(path), qtype, str(args.layers), "--d-model", str(args.d_model))
            )
            size = path.stat().st_size
            warm = Path(tmp) / f"warm-{qtype}.gguf"
            _child("--write", str(warm), qtype, "1", "--d-model", "256", "--vocab", "512")
            print(
                f"{qtype}: {values / 1e9:.2f}B values, file {size / mb:.0f} MB, written in "
                f"{time.perf_counter() - t0:.0f} s"
            )
            peaks = {}
            for how in ("stored", "full"):
                extra = [] if args.cold else [str(warm)]
                r = json.loads(_child("--measure", str(path), how, str(args.tokens), *extra))
                peaks[how] = r["peak"]
                print(
                    f"  {how:6}: opened in {r['open_seconds']:5.1f} s (peak {r['open_peak'] / mb:6.0f} MB), "
                    f"{args.tokens}-token inspect {r['inspect_seconds']:5.1f} s; "
                    f"peak {r['peak'] / mb:6.0f} MB "
                    f"= {(r['peak'] - r['held']) / size:.2f} × file + trace {r['held'] / mb:.0f} MB; "
                    f"float tensors {r['float_bytes'] / mb:.0f} MB, stored {r['stored_bytes'] / mb:.0f} MB"
                )
            print(f"  stored / full peak: {peaks['stored'] / peaks['full']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
