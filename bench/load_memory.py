"""How much memory opening a GPT-2-small-shaped Hugging Face directory takes, beyond its weights.

Writes random weights of GPT-2 small's shapes (12 layers, 12 heads, d = 768, 1024 positions,
V = 50257: 124.4M parameters, 498 MB in float32) as ``model.safetensors`` with GPT-2's tensor names,
then opens the directory with :func:`model.io.pretrained.open_model` in a fresh process and reports:

* ``weights``: bytes of the loaded parameters (float32);
* ``peak growth``: the process's peak resident set (``ru_maxrss``) after loading minus its resident
  set just before (torch and the loader already imported);
* ``overhead = peak growth - weights``: what loading costs on top of holding the model (target: < 1 GB).

``--shape tinyllama`` writes a TinyLlama-1.1B-shaped Llama folder instead (22 layers, d = 2048, 32
query heads over 4 key/value heads, d_ff = 5632, V = 32000: 1.10B parameters) as random **bfloat16**
safetensors shards with an index (2.2 GB on disk, 4.4 GB once upcast to float32), opens it (float32 by
default, ``--dtype bf16`` keeps bfloat16) and then traces every head of a 512-token prompt the way the
Attention tab does (:func:`model.interp.inspection.inspect_prompt`: 22 × 32 heads of [512, 512] weights,
float16 past ``FLOAT32_LIMIT``), reporting the trace's peak growth against
:func:`model.interp.plan.estimate_nbytes` and its time.

Usage: ``python bench/load_memory.py [--layers 12] [--d-model 768] [--keep DIR]`` or
``python bench/load_memory.py --shape tinyllama [--dtype bf16]``. Figures, not pass/fail.
"""

from __future__ import annotations

import argparse
import contextlib
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

    from model.text.bpe import bytes_to_unicode

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


#: TinyLlama-1.1B's shape (its config.json).
TINYLLAMA = dict(layers=22, d=2048, heads=32, kv_heads=4, d_ff=5632, vocab=32000, context=2048)


def write_llama_dir(directory: Path, shard_bytes: int = 600_000_000) -> int:
    """A Llama folder of TinyLlama's shape with random bfloat16 weights in safetensors shards plus
    ``model.safetensors.index.json``; one shard's tensors are in memory at a time. Returns parameters."""
    import torch
    from safetensors.torch import save_file

    from model.text.bpe import bytes_to_unicode

    s = TINYLLAMA
    d, dff, V, H, Hkv = s["d"], s["d_ff"], s["vocab"], s["heads"], s["kv_heads"]
    dk = d // H
    g = torch.Generator().manual_seed(0)

    def shapes():
        yield "model.embed_tokens.weight", (V, d)
        for i in range(s["layers"]):
            p = f"model.layers.{i}."
            yield p + "input_layernorm.weight", (d,)
            yield p + "post_attention_layernorm.weight", (d,)
            yield p + "self_attn.q_proj.weight", (H * dk, d)
            yield p + "self_attn.k_proj.weight", (Hkv * dk, d)
            yield p + "self_attn.v_proj.weight", (Hkv * dk, d)
            yield p + "self_attn.o_proj.weight", (d, H * dk)
            yield p + "mlp.gate_proj.weight", (dff, d)
            yield p + "mlp.up_proj.weight", (dff, d)
            yield p + "mlp.down_proj.weight", (d, dff)
        yield "model.norm.weight", (d,)
        yield "lm_head.weight", (V, d)

    shard: dict[str, torch.Tensor] = {}
    size, n_params, files, weight_map = 0, 0, [], {}

    def flush():
        nonlocal shard, size
        name = f"model-{len(files) + 1:05d}.safetensors"
        save_file(shard, str(directory / name), metadata={"format": "pt"})
        files.append(name)
        weight_map.update(dict.fromkeys(shard, name))
        shard, size = {}, 0

    for name, shape in shapes():
        t = (torch.randn(*shape, generator=g) * 0.02).to(torch.bfloat16)
        if len(shape) == 1:
            t = torch.ones(shape, dtype=torch.bfloat16)
        shard[name] = t
        size += t.numel() * 2
        n_params += t.numel()
        if size >= shard_bytes:
            flush()
    if shard:
        flush()
    index = {"metadata": {"total_size": n_params * 2}, "weight_map": weight_map}
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))
    config = {
        "model_type": "llama",
        "vocab_size": V,
        "hidden_size": d,
        "intermediate_size": dff,
        "num_hidden_layers": s["layers"],
        "num_attention_heads": H,
        "num_key_value_heads": Hkv,
        "max_position_embeddings": s["context"],
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    (directory / "config.json").write_text(json.dumps(config))
    byte_vocab = {c: i for i, c in enumerate(bytes_to_unicode().values())} | {"<|endoftext|>": 256}
    (directory / "vocab.json").write_text(json.dumps(byte_vocab))
    (directory / "merges.txt").write_text("#version: 0.2\n")
    return n_params


def measure(directory: Path, dtype: str = "fp32", trace_tokens: int = 0) -> dict:
    """In this (fresh) process: open the directory, return the memory figures (and those of tracing
    every head of a ``trace_tokens``-token prompt, when > 0)."""
    import resource

    import torch

    from model.io.pretrained import open_model

    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()

    before = rss()
    t0 = time.perf_counter()
    ckpt = open_model(directory, dtype=torch.bfloat16 if dtype == "bf16" else torch.float32)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    weights = sum(p.numel() * p.element_size() for p in ckpt.model.parameters())
    after = rss() - before
    with torch.no_grad():
        ckpt.model(torch.zeros(1, 8, dtype=torch.long))  # it works
    out = {
        "n_params": ckpt.meta["n_params"],
        "weights": weights,
        "rss_before": before,
        "peak_growth": peak - before,
        "rss_after": after,
        "seconds": seconds,
    }
    if trace_tokens:
        out.update(_measure_trace(ckpt, trace_tokens, rss))
    return out


def _measure_trace(ckpt, T: int, rss) -> dict:
    """Trace every head of a T-token prompt as the Attention tab does; the peak growth is read from
    /proc/self/status (VmHWM after resetting it through /proc/self/clear_refs)."""
    import torch

    from model.interp.inspection import inspect_prompt
    from model.interp.plan import FLOAT32_LIMIT, estimate_nbytes, plan_prompt
    from model.interp.prompt import prompt_of_ids

    cfg = ckpt.model.config
    ids = torch.randint(0, 256, (T,), generator=torch.Generator().manual_seed(0)).tolist()
    big = cfg.core.n_layers * cfg.attention.n_heads * T * T > FLOAT32_LIMIT
    budget = estimate_nbytes(
        cfg.core.n_layers,
        cfg.attention.n_heads,
        T,
        cfg.core.d_model,
        cfg.d_head,
        kinds=("pattern",),
        bytes_per_value=2 if big else 4,
    )
    with contextlib.suppress(OSError):  # reset the high-water mark to the present resident set (Linux 4.0+)
        Path("/proc/self/clear_refs").write_text("5")
    start = rss()
    t0 = time.perf_counter()
    plan = plan_prompt(cfg, ckpt.tokenizer, prompt_of_ids(ckpt.tokenizer, ids), budget=1 << 62)
    insp = inspect_prompt(ckpt.model, ckpt.tokenizer, plan)
    seconds = time.perf_counter() - t0
    hwm = 0
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            hwm = int(line.split()[1]) * 1024
    return {
        "trace_T": T,
        "trace_heads": f"{cfg.core.n_layers}x{cfg.attention.n_heads}",
        "trace_seconds": seconds,
        "trace_budget": budget,
        "trace_held": insp.weights.nbytes + insp.overview.nbytes,
        "trace_peak_growth": hwm - start,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--positions", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--keep", type=Path, help="write the directory here and keep it")
    ap.add_argument("--shape", choices=("gpt2", "tinyllama"), default="gpt2")
    ap.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32", help="what the weights become")
    ap.add_argument("--trace-tokens", type=int, default=512, help="prompt length traced (tinyllama)")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the child process
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.measure:
        trace = args.trace_tokens if args.shape == "tinyllama" else 0
        print(json.dumps(measure(args.measure, args.dtype, trace)))
        return 0
    if args.shape == "tinyllama":
        return _main_tinyllama(args)

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


def _main_tinyllama(args) -> int:
    mb = 1e6
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        if not (directory / "model.safetensors.index.json").is_file():
            code = (
                "import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
                "from bench.load_memory import write_llama_dir; print(write_llama_dir(Path(sys.argv[2])))"
            )
            subprocess.run([sys.executable, "-c", code, str(ROOT), str(directory)], check=True)
        written = time.perf_counter() - t0
        cmd = [sys.executable, __file__, "--shape", "tinyllama", "--dtype", args.dtype]
        cmd += ["--trace-tokens", str(args.trace_tokens), "--measure", str(directory)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        r = json.loads(out.stdout.strip().splitlines()[-1])
    on_disk = r["n_params"] * 2
    print(f"TinyLlama-shaped (22 layers, d=2048, 32/4 heads): {r['n_params'] / 1e9:.3f}B params, bf16 shards")
    print(
        f"written in {written:.1f} s ({on_disk / mb:.0f} MB on disk); "
        f"opened as {args.dtype} in {r['seconds']:.1f} s"
    )
    print(f"weights ({args.dtype}):          {r['weights'] / mb:8.0f} MB")
    print(f"RSS before open:         {r['rss_before'] / mb:8.0f} MB (python + torch + loader)")
    print(f"peak RSS growth:         {r['peak_growth'] / mb:8.0f} MB")
    print(f"overhead beyond weights: {(r['peak_growth'] - r['weights']) / mb:8.0f} MB (target < 1000 MB)")
    print(
        f"trace of {r['trace_heads']} heads at T={r['trace_T']}: {r['trace_seconds']:.1f} s, holds "
        f"{r['trace_held'] / mb:.0f} MB (estimate_nbytes: {r['trace_budget'] / mb:.0f} MB), "
        f"peak growth {r['trace_peak_growth'] / mb:.0f} MB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
