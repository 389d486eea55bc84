"""The user's own files are never replaced or deleted by a command, and a refused command leaves
nothing behind: each case exits 2 with one line on stderr (no traceback), every file that was there is
byte-for-byte what it was, and no run folder or output file appears.

Covered: ``train --out`` into a folder of the user's (their log.jsonl, checkpoint/, probes/,
checkpoints/step-*), ``--log-json`` naming the corpus, a file that is not a log, a device or a file in
a missing folder, ``--resume`` of a run whose train_state.json is damaged or missing, names too long
for the file system (train, inspect, circuits, --log-json) and a screenshot folder of other files.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from app.cli import main
from tests.app.test_cli_bad_input import TASK, TINY

TRAIN = ["train", *TINY, *TASK, "--steps", "2", "--batch-size", "2", "--seq-len", "8"]
LONG = "x" * 300  # longer than any file system's name limit (255 bytes)


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """One small trained run folder of ours, made once; tests copy it."""
    run = tmp_path_factory.mktemp("trained") / "run"
    assert main([*TRAIN, "--keep-checkpoints", "--save-every", "1", "--out", str(run)]) == 0
    return run


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under ``root``, by relative path."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
        if not p.is_fifo()
    }


def refused(capsys, argv: list[str], root: Path, *words: str) -> str:
    """Run ``argv``; assert exit 2, one stderr line naming ``words``, and ``root`` exactly as it was."""
    capsys.readouterr()
    before = snapshot(root)
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], lines[0]
    assert snapshot(root) == before  # nothing replaced, nothing removed, nothing left behind
    return lines[0]


# ---- train --out: a folder of the user's -------------------------------------------------------
def test_a_folder_with_the_users_own_log_and_run_json_is_refused(tmp_path, capsys):
    user = tmp_path / "notes"
    user.mkdir()
    (user / "log.jsonl").write_text("my lab notebook\n")
    (user / "run.json").write_text(json.dumps({"experiment": "mine"}))
    refused(capsys, [*TRAIN, "--out", str(user)], tmp_path, str(user), "run.json")


def test_the_users_files_in_checkpoint_are_not_deleted(tmp_path, capsys):
    user = tmp_path / "hf_model"
    (user / "checkpoint").mkdir(parents=True)
    (user / "log.jsonl").write_text("downloaded\n")
    (user / "checkpoint" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (user / "checkpoint" / "README.md").write_text("# my model\n")
    (user / "checkpoint" / "pytorch_model.bin").write_bytes(b"\x80weights")
    refused(capsys, [*TRAIN, "--out", str(user)], tmp_path, str(user))


def test_the_users_files_in_probes_are_not_removed(tmp_path, capsys):
    user = tmp_path / "mine"
    (user / "probes").mkdir(parents=True)
    (user / "log.jsonl").write_text("x\n")
    (user / "probes" / "step-00000001.npz").write_bytes(b"my own arrays")
    refused(capsys, [*TRAIN, "--out", str(user)], tmp_path, str(user))


def test_a_run_folder_with_a_foreign_file_is_refused_naming_it(tmp_path, capsys, trained):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    (run / "probes").mkdir(exist_ok=True)
    (run / "probes" / "notes.txt").write_text("what I saw at step 1\n")
    refused(capsys, [*TRAIN, "--out", str(run)], tmp_path, "probes/notes.txt")


def test_keep_checkpoints_never_removes_step_folders_it_did_not_write(tmp_path, capsys, trained):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    mine = run / "checkpoints" / "step-00000500"
    mine.mkdir(parents=True)
    (mine / "notes.txt").write_text("the good one\n")
    argv = [*TRAIN, "--keep-checkpoints", "--out", str(run)]  # a fresh run drops kept saves after 0
    refused(capsys, argv, tmp_path, "checkpoints/step-00000500")
    shutil.move(mine, tmp_path / "kept")  # moved out: the run folder is ours again, and resumes
    assert main(["train", "--resume", str(run), "--steps", "3", "--keep-checkpoints"]) == 0
    assert sorted(p.name for p in (run / "checkpoints").iterdir())[-1] == "step-00000003"


# ---- --log-json ---------------------------------------------------------------------------------
def test_log_json_naming_the_corpus_is_refused(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat. " * 50)
    argv = ["train", *TINY, "--corpus", str(corpus), "--steps", "2", "--batch-size", "2", "--seq-len", "8"]
    argv += ["--out", str(tmp_path / "run"), "--log-json", str(corpus)]
    refused(capsys, argv, tmp_path, "--log-json", "input")
    log = tmp_path / "log.jsonl"  # an earlier run's log: replaced
    log.write_text(json.dumps({"step": 1, "train_loss": 2.0}) + "\n")
    assert main([*argv[:-1], str(log)]) == 0
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [2]


@pytest.mark.parametrize(
    "name, content, words",
    [
        ("notes.txt", "my notes\n", ["not a training log"]),
        ("rows.jsonl", '{"a": 1}\n', ["not a training log"]),
        (f"{LONG}.jsonl", None, ["--log-json", "choose a shorter name"]),
        ("missing/log.jsonl", None, ["does not exist"]),
    ],
)
def test_log_json_that_is_not_ours_or_cannot_be_written_is_refused(tmp_path, capsys, name, content, words):
    target = tmp_path / name
    if content is not None:
        target.write_text(content)
    argv = [*TRAIN, "--out", str(tmp_path / "run"), "--log-json", str(target)]
    refused(capsys, argv, tmp_path, *words)


def test_log_json_on_a_device_is_refused_before_the_run(tmp_path, capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    argv = [*TRAIN, "--out", str(tmp_path / "run"), "--log-json", "/dev/full"]
    refused(capsys, argv, tmp_path, "not a regular file")


# ---- --resume of a damaged or missing training state --------------------------------------------
@pytest.mark.parametrize(
    "field, value, words",
    [
        ("step", -3, ["step is -3"]),
        ("step", 1.5, ["step is 1.5"]),
        ("step", None, ["step is null"]),
        ("history", ["a", "b"], ["history row 1"]),
        ("history", None, ["history is null"]),
        ("history", 3, ["history is 3"]),
        ("tokens_seen", -5, ["tokens_seen is -5"]),
        ("source", "corpus.txt", ["source is"]),
        ("scaler", "x", ["scaler is"]),
        ("seq_len", "8", ["seq_len is"]),
    ],
)
def test_resume_of_a_damaged_training_state_writes_nothing(tmp_path, capsys, trained, field, value, words):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    state_file = run / "checkpoint" / "train_state.json"
    state = json.loads(state_file.read_text())
    state[field] = value
    state_file.write_text(json.dumps(state))
    argv = ["train", "--resume", str(run), "--steps", "4", "--log-json", str(tmp_path / "extra.jsonl")]
    refused(capsys, argv, tmp_path, "train_state.json is damaged", *words)


def test_resume_without_a_training_state_names_it(tmp_path, capsys, trained):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    (run / "checkpoint" / "train_state.json").unlink()
    (run / "checkpoint" / "optimizer.safetensors").unlink()
    refused(capsys, ["train", "--resume", str(run), "--steps", "4"], tmp_path, "no training state")


# ---- names too long for the file system, on every command that writes --------------------------
def test_an_out_name_too_long_is_one_line_for_every_command(tmp_path, capsys, trained):
    cases = [
        [*TRAIN, "--out", str(tmp_path / LONG)],
        ["inspect", "--checkpoint", str(trained), "--prompt", "ab", "--out", str(tmp_path / LONG)],
        ["inspect", "--checkpoint", str(trained), "--prompt", "ab", "--out", str(tmp_path / LONG / "a.npz")],
        ["circuits", "--checkpoint", str(trained), "--out", str(tmp_path / f"{LONG}.npz")],
    ]
    for argv in cases:
        refused(capsys, argv, tmp_path, "bytes", "choose a shorter name")


def test_screenshot_refuses_a_folder_of_other_files(tmp_path, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "index.md").write_text("# my docs\n")
    (folder / "old.png").write_bytes(b"\x89PNG")
    argv = ["screenshot", "--out", str(folder), "--source", "task:no-such-task"]
    refused(capsys, argv, tmp_path, "index.md", "not only screenshots")
