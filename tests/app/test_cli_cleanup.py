"""What a command leaves behind and where it writes: stale temporaries of killed runs removed at the next
start, no empty torch cache folder, exports with the umask's mode, ``inspect --out DIR`` inside DIR,
and the warnings that explain a --config vocabulary or a changed --corpus."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from app.cli import main
from model.interp.export import load_inspection
from model.io.runs.folder import RUN_FORMAT
from tests.app.test_cli_inspect import free_disk

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--n-layers", "1", "--d-model", "16", "--n-heads", "2", "--context-length", "16", "--threads", "1"]


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def config_file(tmp_path) -> Path:
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"n_layers": 1, "d_model": 16, "n_heads": 2, "context_length": 32}))
    return path


def test_inspect_removes_what_a_killed_inspect_left_and_keeps_a_running_ones(tmp_path, config_file, dead_pid):
    stale = tmp_path / f".att.npz.{dead_pid}.k2j4.tmp"
    running = tmp_path / f".att.npz.{os.getppid()}.x9q1.tmp"
    for p in (stale, running):
        p.write_bytes(b"partial")
    argv = ["inspect", "--config", str(config_file), "--prompt", "abc", "--out", str(tmp_path / "att.npz")]
    assert main(argv) == 0
    assert not stale.exists() and running.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([running.name, "att.npz", "cfg.json"])


def test_train_removes_a_killed_saves_temporary_folder_at_start(tmp_path, dead_pid, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "log.jsonl").write_text("")  # what a killed run leaves: a run folder of ours...
    (run / "run.json").write_text(json.dumps({"format": RUN_FORMAT, "status": "running", "steps": 10}))
    stale = run / f".checkpoint.tmp-{dead_pid}-0badc0de"  # ...and the half-written checkpoint
    stale.mkdir()
    (stale / "model.safetensors").write_bytes(b"x" * 100)
    assert main(["train", "--corpus", "task:copy", "--lr", "nan", "--out", str(tmp_path / "run")]) == 2
    assert not stale.exists()


def test_train_holding_the_lock_removes_every_temporary_a_killed_run_left(tmp_path, dead_pid, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"format": RUN_FORMAT, "status": "running", "steps": 10}))
    reused = run / f".checkpoint.tmp-{os.getpid()}-0badc0de"  # the killed run's PID is ours now
    kept = run / "checkpoints" / f".step-00000004.tmp-{dead_pid}"  # a kept save cut short
    probe = run / "probes" / f".step-00000002.npz.{dead_pid}.k2j4.tmp"
    for folder in (reused, kept):
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"x" * 100)
    probe.parent.mkdir()
    probe.write_bytes(b"partial")
    assert main(["train", "--corpus", "task:copy", "--lr", "nan", "--out", str(run)]) == 2
    assert not reused.exists() and not kept.exists() and not probe.exists()


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_exports_get_the_mode_the_umask_gives(tmp_path, config_file, umask, mode):
    old = os.umask(umask)
    try:
        out = tmp_path / "att.npz"
        assert main(["inspect", "--config", str(config_file), "--prompt", "abc", "--out", str(out)]) == 0
    finally:
        os.umask(old)
    assert out.stat().st_mode & 0o777 == mode


def test_inspect_out_a_folder_writes_inside_it(tmp_path, config_file, capsys):
    folder = tmp_path / "exports"
    folder.mkdir()
    assert main(["inspect", "--config", str(config_file), "--prompt", "abc", "--out", str(folder)]) == 0
    assert (folder / "inspection.npz").is_file() and not (tmp_path / "exports.npz").exists()
    assert load_inspection(folder / "inspection.npz")["weights"].shape == (1, 2, 3, 3)


def test_a_partial_export_says_what_it_left_out(tmp_path, capsys, monkeypatch):
    cfg = tmp_path / "deep.json"
    cfg.write_text(json.dumps({"n_layers": 8, "d_model": 16, "n_heads": 4, "context_length": 512}))
    out = tmp_path / "att.npz"
    argv = [
        "inspect",
        "--config",
        str(cfg),
        "--prompt",
        "ab" * 256,
        "--out",
        str(out),
    ]
    free_disk(monkeypatch, 20 * 2**20)  # the float16 weights alone fit (16.8 MiB)
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert (
        "on a disk with 20.00 MiB free" in err and "float16" in err and "without scores_raw and scores" in err
    )
    data = load_inspection(out)
    L = len(data["layers"])
    assert data["weights"].shape == (L, 4, 512, 512) and data["weights"].dtype == "float16" and L == 8
    np_rows = data["weights"].astype("float64").sum(-1)
    assert abs(np_rows - 1).max() < 1e-2


@pytest.mark.slow
def test_no_empty_torch_cache_folder_is_left_in_the_temp_dir(tmp_path):
    code = "import torch, model.runtime; torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))])"
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("torchinductor_")]


def test_a_config_vocabulary_is_kept_when_larger_and_explained(tmp_path, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"vocab_size": 1000, "n_layers": 1, "d_model": 16, "n_heads": 2}))
    argv = ["train", "--corpus", "task:copy", "--config", str(cfg), "--steps", "1", "--batch-size", "2"]
    assert main([*argv, "--seq-len", "8", "--threads", "1", "--out", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "vocab_size=1000" in err and "larger than the tokenizer's" in err
    assert json.loads((tmp_path / "o" / "checkpoint" / "config.json").read_text())["vocab_size"] == 1000


def test_resuming_on_another_corpus_names_both(tmp_path, capsys):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("abcabc def def\n" * 200)
    b.write_text("fed cba cba fed\n" * 200)
    base = ["train", *TINY, "--batch-size", "2", "--seq-len", "8"]
    assert main([*base, "--corpus", str(a), "--steps", "1", "--out", str(tmp_path / "c")]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "c"), "--corpus", str(b), "--steps", "2"]) == 0
    warning = next(line for line in capsys.readouterr().err.splitlines() if "warning" in line)
    assert f"training continues on {str(b)!r}, not on {str(a)!r}" in warning
