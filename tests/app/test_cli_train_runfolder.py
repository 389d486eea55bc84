"""`train --out DIR` writes a run folder: log.jsonl, checkpoint/, float16 probes, run.json; resuming
appends to the logs (from the saved step); a resume that would train no step is refused, and so is a
fresh run into a folder holding a trained model, unless told to replace it."""

from __future__ import annotations

import datetime as dt
import json

import numpy as np
import pytest
import torch

from app.cli import main
from model.io.checkpoint.saved import load_checkpoint
from model.io.runs.follow import RunFollower

TINY = ["--n-layers", "1", "--d-model", "32", "--n-heads", "2", "--context-length", "32", "--threads", "1"]
BASE = ["train", "--corpus", "task:copy", *TINY, "--seq-len", "16", "--batch-size", "4"]
BASE += ["--eval-batches", "1"]


def rows(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_out_is_a_run_folder_with_log_checkpoints_and_probes(tmp_path, capsys):
    run = tmp_path / "run"
    argv = [*BASE, "--steps", "6", "--log-every", "2", "--eval-every", "3", "--probe-every", "2"]
    assert main([*argv, "--save-every", "4", "--out", str(run)]) == 0
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint", "log.jsonl", "probes", "run.json"]
    assert [r["step"] for r in rows(run / "log.jsonl")] == [2, 3, 4, 6]
    assert all(r["world_size"] == 1 for r in rows(run / "log.jsonl"))
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    assert load_checkpoint(run).train_state["step"] == 6  # the folder opens as its newest checkpoint

    up = RunFollower(run).poll()
    assert [f.step for f in up.frames] == [2, 4, 6] and up.checkpoint_step == 6
    f = up.frames[-1]
    assert f.weights.dtype == np.float16 and f.weights.shape[:2] == (1, 2)
    assert f.weights.shape[-1] == len(f.labels)
    np.testing.assert_allclose(f.weights.astype(np.float32).sum(-1), 1.0, atol=1e-2)  # attention rows


def test_resume_appends_to_both_logs(tmp_path, capsys):
    run, extra = tmp_path / "run", tmp_path / "extra.jsonl"
    argv = [*BASE, "--log-every", "1", "--eval-every", "10"]
    assert main([*argv, "--steps", "3", "--log-json", str(extra), "--out", str(run)]) == 0
    resume = ["train", "--resume", str(run), "--steps", "5", "--log-every", "1", "--log-json", str(extra)]
    assert main(resume) == 0
    assert [r["step"] for r in rows(extra)] == [1, 2, 3, 4, 5]
    assert [r["step"] for r in rows(run / "log.jsonl")] == [1, 2, 3, 4, 5]


def test_resume_at_or_below_the_saved_step_is_refused_in_one_line(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*BASE, "--steps", "3", "--out", str(run)]) == 0
    capsys.readouterr()
    for steps in ("3", "2"):
        assert main(["train", "--resume", str(run), "--steps", steps]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--steps {steps}" in err[0] and "already at step 3" in err[0]
    assert load_checkpoint(run).train_state["step"] == 3


def test_a_bare_checkpoint_is_not_overwritten_as_a_run_folder(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*BASE, "--steps", "2", "--out", str(run)]) == 0
    capsys.readouterr()
    bare = run / "checkpoint"
    assert main(["train", "--resume", str(bare), "--steps", "4"]) == 2
    assert "bare checkpoint" in capsys.readouterr().err
    assert main(["train", "--resume", str(bare), "--steps", "4", "--out", str(tmp_path / "next")]) == 0
    assert load_checkpoint(tmp_path / "next").train_state["step"] == 4


def test_gpu_options_on_the_cpu_are_off_with_one_line_each(tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("the CPU path is under test")
    assert main([*BASE, "--steps", "1", "--dtype", "bf16", "--out", str(tmp_path / "run")]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if "note:" in line]
    assert len(notes) == 2
    assert "dtype bf16 is for CUDA: training in fp32 on cpu" in notes[0]
    assert "TF32 matmuls are CUDA-only" in notes[1]
    assert main([*BASE, "--steps", "1", "--grad-accum", "3", "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "must be a multiple of world_size×grad_accum = 1×3 = 3" in err[0]


def test_a_folder_holding_a_finished_run_is_not_replaced_unless_told(tmp_path, capsys):
    run = tmp_path / "run"
    assert main([*BASE, "--steps", "6", "--log-every", "2", "--out", str(run)]) == 0
    weights = (run / "checkpoint" / "model.safetensors").read_bytes()
    log = (run / "log.jsonl").read_text()
    saved = json.loads((run / "checkpoint" / "meta.json").read_text())["saved_at"]
    day = dt.datetime.fromisoformat(saved).astimezone(dt.timezone.utc).strftime("%Y-%m-%d")
    capsys.readouterr()

    assert main([*BASE, "--steps", "2", "--out", str(run)]) == 2  # one forgotten --resume
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a finished run" in err[0] and "step 6" in err[0] and day in err[0]
    assert f"--resume {run}" in err[0] and "--overwrite" in err[0]
    assert (run / "checkpoint" / "model.safetensors").read_bytes() == weights
    assert (run / "log.jsonl").read_text() == log

    assert main(["train", "--resume", str(run), "--out", str(run), "--steps", "7"]) == 0  # its own run
    assert main([*BASE, "--steps", "2", "--overwrite", "--out", str(run)]) == 0
    assert load_checkpoint(run).train_state["step"] == 2
    assert [r["step"] for r in rows(run / "log.jsonl")] == [2]


def test_a_resume_logs_each_step_once_after_a_kill_past_the_save(tmp_path, capsys):
    run, extra = tmp_path / "run", tmp_path / "extra.jsonl"
    argv = [*BASE, "--log-every", "1", "--eval-every", "10", "--log-json", str(extra)]
    assert main([*argv, "--steps", "3", "--out", str(run)]) == 0
    for log in (run / "log.jsonl", extra):  # a run killed at step 5 had logged 4 and 5 after its save of 3
        last = rows(log)[-1]
        with log.open("a") as f:
            for step in (4, 5):
                f.write(json.dumps({**last, "step": step, "train_loss": -1.0}) + "\n")
    resume = ["train", "--resume", str(run), "--steps", "6", "--log-every", "1", "--log-json", str(extra)]
    assert main(resume) == 0
    for log in (run / "log.jsonl", extra):
        assert [r["step"] for r in rows(log)] == [1, 2, 3, 4, 5, 6]
        assert all(r["train_loss"] > 0 for r in rows(log))  # the resumed run's rows, not the killed one's
