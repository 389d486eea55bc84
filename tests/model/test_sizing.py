"""model.sizing: a model, a training step and a trace are sized before they exist, and refused in one
line naming the need, the machine's amount and the value to lower; plus the numeric guards beside it."""

from __future__ import annotations

import json
import math
import os
import time

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from model.budget import sizing
from model.budget.arithmetic import parameters
from model.budget.sizing import Available, ModelTooLarge, available_memory, check, load_need, training_need
from model.config import ConfigError, GPTConfig
from model.interp.file_size import export_file_bytes
from model.interp.plan import inspection_need, plan_file_export
from model.interp.trace import run_with_trace
from model.io.checkpoint.saved import CheckpointError, load_checkpoint, save_checkpoint
from model.nn.generate import check_sampling, check_seed
from model.nn.gpt import init_model
from model.safetensors_file import safetensors_shapes
from model.text.sources import resolve_source
from model.text.tokens import ByteTokenizer
from model.train.settings import TrainSettings
from model.train.trainer import Trainer

GiB = 1024**3


def rss() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_available_memory_is_what_proc_meminfo_says_at_most():
    """At most MemAvailable plus what this process's heap holds free for reuse (which MemAvailable does
    not count): the suite's own earlier tests leave gigabytes there, and other processes change
    MemAvailable between the two readings, hence the slack."""
    from model.machine import held_free_bytes

    have = available_memory()
    with open("/proc/meminfo") as fh:
        mem = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    assert 0 < have.bytes <= (mem + held_free_bytes()) * 1.05 and have.source


def test_training_need_is_the_budget_calculators_bytes_per_parameter():
    cfg = GPTConfig(vocab_size=100, n_layers=2, d_model=32, n_heads=4, context_length=16)
    need = training_need(cfg, batch=4, seq_len=16)
    n = parameters(cfg).total
    assert need.parts["weights"] == 4 * n and need.parts["gradients"] == 4 * n
    assert need.parts["AdamW state"] == 8 * n
    assert need.parts["activations of 4 × 16 tokens"] > 0


@pytest.mark.parametrize(
    "changes, named",
    [
        ({"d_model": 8192, "n_heads": 8}, "d_model=8192"),
        ({"n_layers": 10**7}, "n_layers=10000000"),
        ({"d_ff": 10**8}, "d_ff=100000000"),
        ({"context_length": 10**9}, "context_length=1000000000"),
        ({"vocab_size": 10**9}, "vocab_size=1000000000"),
        ({"head_dim": 10**6}, "head_dim=1000000"),
    ],
)
def test_a_refusal_is_one_line_with_the_need_the_machine_and_the_value(changes, named):
    cfg = GPTConfig(vocab_size=100, n_layers=2, d_model=32, n_heads=4).replace(**changes)
    with pytest.raises(ModelTooLarge) as info:
        check(training_need(cfg, batch=1, seq_len=16), available=Available(16 * GiB, "MemAvailable"))
    text = str(info.value)
    assert "\n" not in text and named in text
    assert "16.00 GiB available (MemAvailable)" in text and "needs about" in text


def test_the_batch_is_named_when_lowering_it_alone_makes_it_fit():
    cfg = GPTConfig(vocab_size=100, n_layers=2, d_model=64, n_heads=4, context_length=256)
    need = training_need(cfg, batch=10**6, seq_len=256)
    with pytest.raises(ModelTooLarge, match=r"lower --batch-size 1000000"):
        check(need, available=Available(4 * GiB, "MemAvailable"))


def test_override_by_argument_and_environment(monkeypatch):
    need = load_need(GPTConfig(vocab_size=100, d_model=10**6, n_heads=1))
    tiny = Available(1024, "test")
    with pytest.raises(ModelTooLarge):
        check(need, available=tiny)
    check(need, available=tiny, override=True)
    monkeypatch.setenv(sizing.OVERRIDE_ENV, "1")
    check(need, available=tiny)


def test_a_trainer_of_a_huge_config_is_refused_before_allocation(tiny_settings):
    before, t0 = rss(), time.perf_counter()
    with pytest.raises(ModelTooLarge, match="d_model=200000"):
        Trainer(GPTConfig(d_model=200_000, n_heads=4, n_layers=2), resolve_source("task:copy"), tiny_settings)
    assert time.perf_counter() - t0 < 1.0 and rss() - before < 100 * 2**20


def test_a_lying_config_json_is_refused_before_the_model_is_built(tmp_path, tiny_config):
    save_checkpoint(tmp_path / "c", init_model(tiny_config.with_vocab(256), seed=0), ByteTokenizer())
    cfg = json.loads((tmp_path / "c" / "config.json").read_text())
    experts = {"mlp": "swiglu", "n_experts_per_token": 1}  # as many modules, even on the meta device
    for lie in ({"d_model": 8192}, {"n_layers": 5000, "d_model": 512}, {**experts, "n_experts": 50_000}):
        (tmp_path / "c" / "config.json").write_text(json.dumps({**cfg, **lie}))
        before, t0 = rss(), time.perf_counter()
        with pytest.raises(CheckpointError, match="does not match"):
            load_checkpoint(tmp_path / "c")
        assert time.perf_counter() - t0 < 3.0 and rss() - before < 100 * 2**20, lie


def test_header_shapes_and_parameter_count(tmp_path):
    save_file({"a": torch.zeros(3, 4), "b": torch.zeros(5)}, tmp_path / "w.safetensors")
    assert safetensors_shapes(tmp_path / "w.safetensors") == {"a": (3, 4), "b": (5,)}
    (tmp_path / "bad.safetensors").write_bytes(b"\xff" * 8 + b"{}")
    with pytest.raises(ValueError, match="header length"):
        safetensors_shapes(tmp_path / "bad.safetensors")


# ---- inspection within a budget ---------------------------------------------------------------
KINDS = ("pattern", "scores_raw", "scores", "resid_pre", "resid_mid", "resid_post")
LONG = GPTConfig(vocab_size=256, n_layers=12, n_heads=12, d_model=48, context_length=4096)


def test_the_12x12_model_at_4096_tokens_needs_the_issues_29_gb():
    need = inspection_need(LONG, 4096, kinds=("pattern", "scores_raw", "scores"))
    assert math.isclose(need.parts["recorded heads"], 3 * 12 * 12 * 4096**2 * 4)  # 29 GB


def test_an_export_holds_the_logits_or_one_layer_and_the_disk_decides_what_the_file_keeps():
    """``inspect`` writes the squares [L, H, T, T] as they are computed: in memory it needs less than
    one of them, whatever it keeps; the file against the free disk decides float16, then the weights
    alone; memory that cannot hold even the layer in flight gives
    no held plan, in milliseconds."""
    T, square = 1024, 12 * 12 * 1024**2 * 4
    need = inspection_need(LONG, T, kinds=KINDS, to_file=True)
    assert need.total < square < inspection_need(LONG, T, kinds=KINDS).total
    full, why = plan_file_export(LONG, T, budget=need.total)
    assert full is not None and full.kinds == KINDS and not full.float16 and why == ""
    assert full.file == export_file_bytes(LONG, T, squares=3) > 3 * square
    half, why = plan_file_export(LONG, T, budget=need.total, disk=full.file - 1)
    assert half is not None and half.float16 and half.kinds == KINDS and "on a disk with" in why
    weights = export_file_bytes(LONG, T, squares=1, float16=True)
    alone, _ = plan_file_export(LONG, T, budget=need.total, disk=weights)
    assert alone is not None and alone.dropped == ["scores_raw", "scores"] and alone.float16
    t0 = time.perf_counter()
    alone_need = inspection_need(LONG, T, kinds=tuple(alone.kinds), to_file=True)
    none, why = plan_file_export(LONG, T, budget=alone_need.total - 1, disk=weights - 1)
    assert none is None and "of memory is needed" in why
    assert time.perf_counter() - t0 < 0.1


def test_run_with_trace_refuses_what_the_machine_cannot_hold(monkeypatch, tiny_config):
    model = init_model(tiny_config.with_vocab(256), seed=0)
    ids = list(range(20))
    assert run_with_trace(model, ids, kinds=["pattern"]).stack("pattern").shape == (2, 2, 20, 20)
    monkeypatch.setattr(sizing, "available_memory", lambda device="cpu": Available(10_000, "test"))
    with pytest.raises(ModelTooLarge, match="inspecting 20 tokens in 2 layers × 2 heads"):
        run_with_trace(model, ids, kinds=["pattern"])


# ---- numeric values ---------------------------------------------------------------------------
@pytest.mark.parametrize("value", [float("inf"), float("nan"), -math.inf, 1.0, 0.5])
def test_rope_base_must_be_a_finite_number_above_one(value):
    with pytest.raises(ConfigError, match="rope_base"):
        GPTConfig(positions="rope", rope_base=value).validate()


def test_config_files_that_are_not_regular_files_are_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero", tmp_path):
        with pytest.raises(ConfigError, match="not a regular file"):
            GPTConfig.load(path)


@pytest.mark.parametrize(
    "field, value",
    [("seed", 10**23), ("seed", -1), ("threads", 100_000), ("steps", 10**12), ("batch_size", 10**12)],
)
def test_train_settings_have_maxima(field, value):
    with pytest.raises(ConfigError, match=field):
        TrainSettings(**{field: value}).validate()


@pytest.mark.parametrize("temperature", [float("nan"), float("inf"), 1e-300, -1.0, 1e6])
def test_sampling_temperature_must_be_finite_and_sensible(temperature):
    with pytest.raises(ValueError, match="temperature"):
        check_sampling(temperature, None, None)
    check_sampling(0, None, None)  # greedy
    check_sampling(0.8, None, None)


@pytest.mark.parametrize("seed", [10**23, -5, 2**63])
def test_seed_must_fit_a_64_bit_generator(seed):
    with pytest.raises(ValueError, match="seed"):
        check_seed(seed)


def test_resume_checks_the_optimizer_state_shapes(tiny_config, tiny_settings):
    trainer = Trainer(tiny_config, resolve_source("task:copy"), tiny_settings)
    trainer.run(1)
    state = trainer.state_dict()
    key = next(
        k for k in sorted(state["tensors"]) if k.endswith("/exp_avg") and state["tensors"][k].dim() == 2
    )
    state["tensors"][key] = torch.zeros(np.add(state["tensors"][key].shape, 1).tolist())
    fresh = Trainer(tiny_config, resolve_source("task:copy"), tiny_settings)
    with pytest.raises(ValueError, match="optimizer state shapes do not match the model"):
        fresh.load_state(state)


def test_an_export_of_gigabytes_counts_the_bytes_waiting_for_its_writer_thread():
    """A file of gigabytes is written behind (the computing overlaps the writing): what waits for the
    writer thread is in the estimate; a small file is written at once and counts nothing for it."""
    from model.interp.file_size import WRITE_AHEAD, write_ahead

    big, small = 2048, 64
    assert write_ahead(export_file_bytes(LONG, big, squares=3)) == WRITE_AHEAD
    assert write_ahead(export_file_bytes(LONG, small, squares=3)) == 0
    parts = inspection_need(LONG, big, kinds=KINDS, to_file=True).parts
    assert parts["bytes waiting to be written"] == WRITE_AHEAD
    assert "bytes waiting to be written" not in inspection_need(LONG, small, kinds=KINDS, to_file=True).parts
    assert "bytes waiting to be written" not in inspection_need(LONG, big, kinds=KINDS).parts
