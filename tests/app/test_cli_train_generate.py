"""`attention-lab train` and `attention-lab generate`: logs, checkpoints, resume, one-line user errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from app.cli import main
from model.io.checkpoint.saved import load_checkpoint
from model.nn.generate import trained_window

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--n-layers", "1", "--d-model", "32", "--n-heads", "2", "--context-length", "32", "--threads", "1"]
TEXT = "".join(f"def f{i}(x):\n    return x * {i} + {i % 7}\n\n" for i in range(120))


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)  # the trainer sets its thread count in the thread that trains


@pytest.fixture
def corpus(tmp_path) -> Path:
    path = tmp_path / "code.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def run_cli(argv: list[str]) -> int:
    """``main(argv)``'s exit code, including argparse's own ``SystemExit`` for malformed flags."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code)


def train(tmp_path, corpus, *extra: str, out: str = "ckpt") -> tuple[int, Path]:
    argv = [
        "train",
        *TINY,
        "--corpus",
        str(corpus),
        "--batch-size",
        "4",
        "--seq-len",
        "16",
        "--eval-every",
        "4",
    ]
    rc = main([*argv, "--out", str(tmp_path / out), *extra])
    return rc, tmp_path / out


def test_train_writes_checkpoint_and_json_log(tmp_path, corpus, capsys):
    log = tmp_path / "log.jsonl"
    rc, out = train(
        tmp_path, corpus, "--steps", "10", "--log-every", "3", "--log-json", str(log), "--lr", "5e-3"
    )
    assert rc == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r["step"] for r in lines] == [3, 4, 6, 8, 9, 10]  # every 3rd, every evaluation, the last
    assert {"step", "train_loss", "val_loss", "lr", "tokens_per_s"} <= set(lines[0])
    assert [r["val_loss"] is not None for r in lines] == [False, True, False, True, False, True]
    ckpt = load_checkpoint(out)
    assert ckpt.config.core.n_layers == 1 and ckpt.config.core.d_model == 32
    assert ckpt.train_state["step"] == 10 and ckpt.meta["source"]["name"] == str(corpus)
    assert trained_window(ckpt) == 16  # generation will read no more than the trained positions
    printed = capsys.readouterr().out  # not a terminal: plain lines, no carriage returns
    assert "\r" not in printed and "step  3/10" in printed and f"saved {out}" in printed


def test_resume_continues_to_the_new_total(tmp_path, corpus):
    assert train(tmp_path, corpus, "--steps", "4", out="a")[0] == 0
    rc = main(["train", "--resume", str(tmp_path / "a"), "--steps", "7", "--out", str(tmp_path / "b")])
    assert rc == 0
    b = load_checkpoint(tmp_path / "b")
    assert b.train_state["step"] == 7 and [h["step"] for h in b.train_state["history"]] == list(range(1, 8))
    assert b.train_state["settings"]["steps"] == 7 and b.train_state["settings"]["batch_size"] == 4
    assert load_checkpoint(tmp_path / "a").train_state["step"] == 4  # the original is untouched


def test_generate_prints_prompt_and_continuation(tmp_path, corpus, capsys):
    assert train(tmp_path, corpus, "--steps", "3")[0] == 0
    capsys.readouterr()
    args = ["generate", "--checkpoint", str(tmp_path / "ckpt"), "--prompt", "def f", "--max-new-tokens", "20"]
    assert main([*args, "--seed", "5"]) == 0
    first = capsys.readouterr().out
    assert first.startswith("def f") and len(first) == len("def f") + 20 + 1
    assert main([*args, "--seed", "5"]) == 0
    assert capsys.readouterr().out == first
    assert main([*args, "--greedy"]) == 0 and main([*args, "--greedy", "--no-cache"]) == 0
    greedy, uncached = capsys.readouterr().out.split("\n")[:2]
    assert greedy == uncached


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--corpus", "missing-file.txt", "--out", "{tmp}/o"], "no such file"),
        (["train", "--corpus", "builtin:nope", "--out", "{tmp}/o"], "unknown built-in corpus"),
        (["train", "--corpus", "task:copy", "--device", "tpu", "--out", "{tmp}/o"], "device"),
        (["train", "--corpus", "task:copy", *TINY, "--seq-len", "64", "--out", "{tmp}/o"], "seq_len=64"),
        (["train", "--corpus", "task:copy", "--d-model", "30", "--out", "{tmp}/o"], "d_model=30"),
        (["train", "--corpus", "task:copy", "--lr", "-1", "--out", "{tmp}/o"], "lr=-1"),
        (["train", "--corpus", "task:copy"], "--out"),
        (["train", "--config", "{tmp}/none.json", "--out", "{tmp}/o"], "does not exist"),
        (["train", "--resume", "{tmp}/none"], "does not exist"),
        (["train", "--corpus", "task:copy", "--out", "{tmp}/notes"], "not a checkpoint"),
        (["train", "--corpus", "task:copy", "--steps", "x", "--out", "{tmp}/o"], "invalid int value"),
        (["generate", "--checkpoint", "{tmp}/none", "--prompt", "a"], "does not exist"),
        (["generate", "--checkpoint", "{tmp}/notes", "--prompt", "a"], "holds no model"),
        (["generate", "--checkpoint", "{tmp}/o", "--prompt", "a", "--top-p", "2"], "top_p"),
        (
            ["generate", "--checkpoint", "{tmp}/o", "--prompt", "a", "--max-new-tokens", "0"],
            "must be at least 1",
        ),
    ],
)
def test_user_mistakes_are_one_line_and_exit_2(tmp_path, capsys, argv, message):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("keep me")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    rc = run_cli(argv)
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert (tmp_path / "notes" / "todo.txt").read_text() == "keep me"


def test_corrupt_checkpoint_and_unknown_prompt_characters(tmp_path, corpus, capsys):
    assert train(tmp_path, corpus, "--steps", "2")[0] == 0
    capsys.readouterr()
    ckpt = tmp_path / "ckpt"
    assert main(["generate", "--checkpoint", str(ckpt), "--prompt", "déf"]) == 2
    assert "'é'" in capsys.readouterr().err
    weights = ckpt / "checkpoint" / "model.safetensors"  # --out is a run folder; its checkpoint/
    weights.write_bytes(weights.read_bytes()[:100])
    assert main(["generate", "--checkpoint", str(ckpt), "--prompt", "def"]) == 2
    err = capsys.readouterr().err
    assert "model.safetensors is truncated or corrupt" in err and len(err.strip().splitlines()) == 1


def test_changing_the_shape_of_a_resumed_model_is_refused(tmp_path, corpus, capsys):
    assert train(tmp_path, corpus, "--steps", "2")[0] == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(tmp_path / "ckpt"), "--n-layers", "3"]) == 2
    assert "--n-layers cannot change a model being resumed" in capsys.readouterr().err


def test_console_script_reports_without_traceback(tmp_path):
    """The real process: a user mistake prints one line and exits 2."""
    proc = subprocess.run(
        [sys.executable, "-m", "app.main", "generate", "--checkpoint", str(tmp_path / "x"), "--prompt", "a"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"attention-lab generate: error: {str(tmp_path / 'x')!r} does not exist"


def test_a_model_whose_weights_are_nan_opens_and_generate_says_where_in_one_line(
    tmp_path, write_hf_family, capsys
):
    """Layer 1's MLP holds a NaN: the model opens, and generation stops before sampling, in one line
    naming the non-finite logits and where they first appear (that MLP's output); exit status 2."""
    from safetensors.torch import load_file, save_file

    write_hf_family(tmp_path, "llama")
    path = tmp_path / "model.safetensors"
    weights = load_file(path)
    weights["model.layers.1.mlp.up_proj.weight"][3, 2] = float("nan")
    save_file(weights, path, metadata={"format": "pt"})
    capsys.readouterr()
    rc = main(["generate", "--checkpoint", str(tmp_path), "--prompt", "Hi", "--max-new-tokens", "3"])
    out, err = capsys.readouterr()
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert out == "Hi\n"  # the prompt, its line ended before the error
    assert "logits for new token 1 are not finite" in err and "NaN" in err
    assert "first appear at blocks.1.mlp.out;" in err and "in blocks.1.mlp." in err
