"""Data-parallel `attention-lab train` on the CPU (gloo): torchrun as-is, equivalence, resume, a dead rank.

Runs use a flat learning rate (warmup 0, min_lr = lr) so a 3-step run resumed to 5 steps follows the
same schedule as a straight 5-step run. Several processes start here, so this file takes ~15 s.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from app.cli import main
from model.io.checkpoint.saved import load_checkpoint
from model.train.distributed import shard

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--n-layers", "1", "--d-model", "32", "--n-heads", "2", "--context-length", "32", "--threads", "1"]
FLAT = ["--lr", "1e-3", "--min-lr", "1e-3", "--warmup", "0"]
BASE = ["train", "--corpus", "task:copy", *TINY, *FLAT, "--seq-len", "16", "--batch-size", "8"]
BASE += ["--eval-every", "5", "--eval-batches", "2", "--log-every", "1", "--seed", "3"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", **extra)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        if name not in extra:
            env.pop(name, None)
    return env


def start_ranks(argv: list[str], world: int = 2) -> list[subprocess.Popen]:
    """The processes torchrun would start: the same command, told its rank by the environment."""
    port = str(free_port())
    procs = []
    for rank in range(world):
        env = child_env(
            RANK=str(rank),
            WORLD_SIZE=str(world),
            LOCAL_RANK=str(rank),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "app.main", *argv],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return procs


def weights(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path).model.state_dict()


def max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> Path:
    """One process, 5 steps: the reference every data-parallel run must reproduce."""
    out = tmp_path_factory.mktemp("straight") / "run"
    assert main([*BASE, "--steps", "5", "--out", str(out)]) == 0
    return out


def test_rank_shards_are_disjoint_and_cover_the_batch():
    rows = [list(range(24))[shard(24, r, 4)] for r in range(4)]
    assert sorted(i for r in rows for i in r) == list(range(24)) and all(len(r) == 6 for r in rows)


@pytest.mark.slow
def test_torchrun_two_processes_and_grad_accum_match_one_process(tmp_path, straight, capsys):
    two = tmp_path / "two"
    port = str(free_port())
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--master_addr=127.0.0.1"]
    cmd += [f"--master_port={port}", "-m", "app.main", *BASE, "--steps", "5", "--out", str(two)]
    proc = subprocess.run(cmd, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("saved ") == 1  # rank 0 alone reports
    assert "2 processes (gloo)" in proc.stdout

    assert main([*BASE, "--steps", "5", "--grad-accum", "2", "--out", str(tmp_path / "accum")]) == 0
    ref = weights(straight)
    assert max_diff(weights(two), ref) <= 1e-5
    assert max_diff(weights(tmp_path / "accum"), ref) <= 1e-5

    rows = [json.loads(line) for line in (two / "log.jsonl").read_text().splitlines()]
    ref_rows = [json.loads(line) for line in (straight / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5]  # one writer, no duplicated rows
    assert {r["world_size"] for r in rows} == {2} and {r["world_size"] for r in ref_rows} == {1}
    for r, q in zip(rows, ref_rows):  # the global mean, not rank 0's half
        assert abs(r["train_loss"] - q["train_loss"]) < 1e-5
    assert abs(rows[-1]["val_loss"] - ref_rows[-1]["val_loss"]) < 1e-5
    assert load_checkpoint(two).train_state["world_size"] == 2


@pytest.mark.slow
def test_resume_on_one_process_continues_a_two_process_run_exactly(tmp_path, straight, capsys):
    run = tmp_path / "run"
    procs = start_ranks([*BASE, "--steps", "3", "--out", str(run)])
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
    assert load_checkpoint(run).train_state["step"] == 3
    assert main(["train", "--resume", str(run), "--steps", "5", "--log-every", "1"]) == 0
    assert max_diff(weights(run), weights(straight)) <= 1e-5
    sizes = [json.loads(line)["world_size"] for line in (run / "log.jsonl").read_text().splitlines()]
    assert sizes == [2, 2, 2, 1, 1]  # the log was continued, each row saying who wrote it


@pytest.mark.slow
def test_a_dead_rank_makes_the_other_exit_with_a_clear_error(tmp_path):
    run = tmp_path / "run"
    argv = [*BASE, "--steps", "100000", "--save-every", "3", "--dist-timeout", "10", "--out", str(run)]
    procs = start_ranks(argv)
    try:
        # rank 0 prints a line per step (--log-every 1); the line of step 4 comes after step 3's save
        watchdog = threading.Timer(60, lambda: [p.kill() for p in procs])
        watchdog.start()
        try:
            for line in procs[0].stdout:
                if line.startswith("step") and int(line.split()[1].split("/")[0]) >= 4:
                    break
        finally:
            watchdog.cancel()
        assert (run / "checkpoint" / "meta.json").exists(), procs[0].stderr.read()[-2000:]
        procs[1].send_signal(signal.SIGKILL)
        t_kill = time.monotonic()
        _, err = procs[0].communicate(timeout=40)
        waited = time.monotonic() - t_kill
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert procs[0].returncode == 1 and waited < 10 + 15
    lines = [line for line in err.splitlines() if "error" in line]
    assert len(lines) == 1 and "another rank died or did not answer" in lines[0]
    assert "is intact" in lines[0]
    ckpt = load_checkpoint(run)  # the last checkpoint still loads
    assert ckpt.train_state["step"] % 3 == 0 and ckpt.train_state["world_size"] == 2
    assert json.loads((run / "run.json").read_text())["status"] == "failed"
