"""The one memory estimate of an inspection (``model.interp.plan.inspection_need``) against the peak
resident set it measures, for the shapes of the families we open (a vocabulary of 262,144 included).

Each shape runs in one child process (Linux: ``VmHWM`` reset through ``/proc/self/clear_refs`` before
each inspection, so each peak is its own; freed arrays go back to the kernel, so none is hidden by
memory an earlier one left). A shape is small (2–6 layers, d = 64) and its prompt short, so that the
whole file takes a few seconds; the vocabulary is each family's own where it is large (then the logits
[T, V] lead) and 512 at a longer prompt (then the heads [L, H, T, T] lead)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASE = dict(n_layers=2, d_model=64, n_heads=4, head_dim=16, d_ff=128, context_length=1024)
ROPE = dict(positions="rope", norm="rmsnorm", mlp="swiglu", bias="none")
SHAPES = {
    "gpt2": dict(BASE, positions="learned", norm="layernorm", mlp="gelu", bias="all", vocab_size=50257),
    "llama-gqa": dict(BASE, **ROPE, n_kv_heads=2, vocab_size=128256),
    "neox-parallel": dict(
        BASE, **dict(ROPE, norm="layernorm", mlp="gelu"), parallel_residual=True, vocab_size=50304
    ),
    "gemma2-softcaps": dict(
        BASE,
        **ROPE,
        n_kv_heads=2,
        vocab_size=256000,
        attn_softcap=50.0,
        final_softcap=30.0,
        sliding_window=64,
        window_pattern="LG",
        norm_position="sandwich",
        embed_scale=True,
        tie_embeddings=True,
    ),
    "gemma3-270m-vocabulary": dict(
        BASE,
        **ROPE,
        n_layers=6,
        n_kv_heads=1,
        vocab_size=262144,
        sliding_window=64,
        window_pattern="LLLLLG",
        qk_rmsnorm=True,
        norm_position="sandwich",
        tie_embeddings=True,
        embed_scale=True,
    ),
    "gpt-oss-sinks-moe": dict(
        BASE, **ROPE, n_kv_heads=2, vocab_size=201088, attn_sinks=True, n_experts=4, n_experts_per_token=2
    ),
    "deepseek-mla-moe": dict(
        {k: v for k, v in BASE.items() if k != "head_dim"},
        **ROPE,
        vocab_size=129280,
        kv_lora_rank=16,
        qk_rope_head_dim=8,
        qk_nope_head_dim=16,
        v_head_dim=16,
        n_experts=4,
        n_experts_per_token=2,
    ),
}
#: (prompt tokens, vocabulary: None = the family's own)
SIZES = ((64, None), (640, 512))

CHILD = r"""
import json, sys
import torch
torch.set_num_threads(1)
from model.config import GPTConfig
from model.interp.inspection import export_arrays, inspect_prompt, write_inspection
from model.interp.plan import ALL_KINDS, REQUIRED_KINDS, inspection_need, plan_prompt
from model.interp.prompt import prompt_of_ids
from model.interp.trace import run_with_trace
from model.nn.gpt import init_model

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024

class Ids:
    special_ids = ()
    def token_strings(self, ids):
        return [str(i) for i in ids]

def export(model, ids):
    export_arrays(model, Ids(), ids)
    return inspection_need(model.config, len(ids), kinds=REQUIRED_KINDS)

def to_file(model, ids):
    write_inspection(model, Ids(), ids, folder + "/inspection.npz")
    return inspection_need(model.config, len(ids), kinds=REQUIRED_KINDS, to_file=True)

def view(model, ids):
    plan = plan_prompt(model.config, Ids(), prompt_of_ids(Ids(), ids), budget=1 << 40)
    inspect_prompt(model, Ids(), plan)
    return plan.need

def every_kind(model, ids):
    run_with_trace(model, ids)
    return inspection_need(model.config, len(ids), kinds=ALL_KINDS)

shapes, sizes, folder = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3]
for name, kw in shapes.items():
    for T, V in sizes:
        cfg = GPTConfig(**dict(kw, vocab_size=V or kw["vocab_size"]))
        model = init_model(cfg, seed=0)
        ids = [1 + i % (cfg.core.vocab_size - 1) for i in range(T)]
        paths = [export, to_file, view] + ([every_kind] if V is None and name.startswith("gemma3") else [])
        for path in paths:
            path(model, ids[:8])  # lazy initialisations of torch's kernels first
            before = status("VmRSS")
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # VmHWM := VmRSS
            need = path(model, ids)
            V = cfg.core.vocab_size
            print(json.dumps([name, T, V, path.__name__, status("VmHWM") - before, need.total]))
        del model
"""


@pytest.fixture(scope="module")
def peaks(tmp_path_factory) -> dict:
    if not Path("/proc/self/clear_refs").exists():
        pytest.skip("the peak resident set is reset through Linux's /proc/self/clear_refs")
    # a fixed threshold: every array of 64 KiB or more is its own mapping, handed back when freed
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            json.dumps(SHAPES),
            json.dumps(SIZES),
            str(tmp_path_factory.mktemp("npz")),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("[")]
    return {(name, T, path): (V, measured, need) for name, T, V, path, measured, need in rows}


@pytest.mark.slow
@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_estimate_is_within_15_percent_of_the_measured_peak(peaks, shape):
    """For every path that records (the .npz export of the API in memory, ``inspect``'s file written
    as it is computed, the Attention tab's held patterns; a trace of every kind for Gemma 3's
    vocabulary), at a long vocabulary and at long prompts."""
    for (name, T, path), (V, measured, need) in peaks.items():
        if name == shape:
            assert abs(need - measured) <= 0.15 * measured, (
                f"{shape} T={T} V={V} {path}: estimated {need / 1e6:.1f} MB, measured {measured / 1e6:.1f} MB"
            )


def test_a_large_vocabulary_holds_its_logits_once(peaks):
    """Gemma 3's 262,144 tokens: the export's peak is about one [T, V] of float32 plus its heads, not
    the logits copied (or soft-capped into new arrays) several times."""
    V, measured, _ = peaks[("gemma3-270m-vocabulary", 64, "export")]
    assert V == 262144 and measured < 1.5 * 4 * 64 * V
    V, measured, _ = peaks[("gemma2-softcaps", 64, "export")]
    assert V == 256000 and measured < 1.5 * 4 * 64 * V


def test_the_file_written_as_it_is_computed_holds_no_square(peaks):
    """``inspect``'s writer at 640 tokens, where the three squares [L, H, T, T] lead: each layer goes
    to disk as it is made, so its peak is below one square of Gemma 3's six layers, and below half
    the export in memory, which holds all three, for every family."""
    for (name, T, path), (_, measured, _) in peaks.items():
        if path == "to_file" and T == 640:
            in_memory = peaks[(name, T, "export")][1]
            assert measured < in_memory / 2, (
                f"{name}: {measured / 1e6:.1f} MB, in memory {in_memory / 1e6:.1f} MB"
            )
    cfg, measured = SHAPES["gemma3-270m-vocabulary"], peaks[("gemma3-270m-vocabulary", 640, "to_file")][1]
    assert measured < 4 * cfg["n_layers"] * cfg["n_heads"] * 640**2
