"""What a run may write, at the model level: :func:`model.atomic.check_output` (devices, pipes, names
too long, paths under a file), :func:`check_run_folder` (only a run folder of ours, every entry its
own), :class:`RunWriter` (run.json first, nothing left by a failed start), ``--log-json``'s
:func:`check_extra_log`, :func:`drop_kept_after` (only kept saves it wrote) and
:func:`model.train.state.check_state` (a damaged training state named, field by field)."""

from __future__ import annotations

import json
import os

import pytest

from model.atomic import TEMP_NAME_ROOM, OutputError, check_output
from model.io.checkpoint.saved import CheckpointError
from model.io.history.revisions import drop_kept_after
from model.io.runs.folder import RUN_FORMAT, RunFolderError, RunWriter, check_extra_log, check_run_folder
from model.train.state import check_state


def test_check_output_refuses_what_cannot_be_written(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    cases = {
        (str(fifo), False): "not a regular file",
        ("/dev/null", False): "not a regular file",
        ("/dev/null", True): "not a folder",
        (str(tmp_path / "file"), True): "is a file, not a folder",
        (str(tmp_path / "dir"), False): "is a folder",
        (str(tmp_path / "file" / "a.npz"), False): "is not a folder",
        (str(tmp_path / ("y" * 300)), True): "the name is 300 bytes",
        (str(tmp_path / "dangling"), False): "link to nothing",
        (" ", False): "empty",
    }
    for (path, folder), words in cases.items():
        with pytest.raises(OutputError, match=words):
            check_output(path, what="--out", folder=folder)
    # a file's name leaves room for the temporary name it is written through
    edge = "z" * (255 - TEMP_NAME_ROOM + 1)
    with pytest.raises(OutputError, match="at most"):
        check_output(tmp_path / edge)
    assert check_output(tmp_path / edge, folder=True) == tmp_path / edge
    assert check_output(tmp_path / "new" / "a.npz") == tmp_path / "new" / "a.npz"
    assert check_output(tmp_path / "file") == tmp_path / "file"


def written_run(path):
    w = RunWriter(path)
    w.log({"step": 1, "train_loss": 2.0})
    w.close()
    (path / "probes").mkdir()
    (path / "probes" / "step-00000001.npz").write_bytes(b"")
    (path / "probes" / ".step-00000002.npz.123.abc_x.tmp").write_bytes(b"")  # a killed write's
    (path / "checkpoint").mkdir()
    (path / "checkpoint" / "config.json").write_text("{}")
    (path / ".checkpoint.tmp-123-0badf00d").mkdir()
    (path / "checkpoints" / "step-00000001").mkdir(parents=True)
    (path / "checkpoints" / "step-00000001" / "model.safetensors").write_bytes(b"")
    return path


def test_only_a_run_folder_of_ours_with_its_own_entries_is_written(tmp_path):
    run = written_run(tmp_path / "run")
    assert json.loads((run / "run.json").read_text())["format"] == RUN_FORMAT
    assert check_run_folder(run) == run
    foreign = {
        "notes.txt": "notes.txt",
        "probes/mine.npz": "probes/mine.npz",
        "checkpoint/README.md": "checkpoint/README.md",
        "checkpoints/step-00000001/notes.txt": "checkpoints/step-00000001/notes.txt",
        "checkpoints/best/config.json": "checkpoints/best",
    }
    for rel, named in foreign.items():
        (run / rel).parent.mkdir(parents=True, exist_ok=True)
        (run / rel).write_text("mine")
        with pytest.raises(RunFolderError, match=named):
            check_run_folder(run)
        (run / rel).unlink()
        if rel.startswith("checkpoints/best"):
            (run / rel).parent.rmdir()
    (run / "run.json").write_text(json.dumps({"status": "finished"}))  # written before the mark: ours
    assert check_run_folder(run) == run
    (run / "run.json").write_text(json.dumps({"format": "someone-else", "status": "finished"}))
    with pytest.raises(RunFolderError, match=r"run\.json is not one this program wrote"):
        check_run_folder(run)


def test_a_run_writer_that_cannot_open_its_second_log_leaves_nothing(tmp_path):
    with pytest.raises(RunFolderError, match="--log-json"):
        RunWriter(tmp_path / "run", extra_log=tmp_path / "missing" / "log.jsonl")
    assert list(tmp_path.iterdir()) == []


def test_log_json_must_be_a_log_of_ours_outside_the_run_and_its_inputs(tmp_path):
    run = tmp_path / "run"
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("hello " * 100)
    log = tmp_path / "extra.jsonl"
    rows = [json.dumps({"step": i, "train_loss": 1.0}) for i in range(1, 40000)]
    log.write_text("\n".join(rows) + "\n")  # large: its head and tail are read, each a log row
    assert check_extra_log(log, run=run, inputs=(str(corpus),)) == log
    assert check_extra_log(tmp_path / "new.jsonl", run=run) == tmp_path / "new.jsonl"
    with pytest.raises(RunFolderError, match="input of this run"):
        check_extra_log(corpus, run=run, inputs=(str(corpus),))
    with pytest.raises(RunFolderError, match="not a training log"):
        check_extra_log(corpus, run=run)
    run.mkdir()
    with pytest.raises(RunFolderError, match="inside the run folder"):
        check_extra_log(run / "log.jsonl", run=run)
    log.write_text("\n".join(rows[:-1]) + '\n{"stage": 3}\n')  # its last row is not one of ours
    with pytest.raises(RunFolderError, match="not a training log"):
        check_extra_log(log, run=run)


def test_drop_kept_after_removes_only_the_kept_saves_it_wrote(tmp_path):
    kept = tmp_path / "checkpoints"
    for name, files in {
        "step-00000010": ["config.json", "model.safetensors"],
        "step-00000020": ["config.json", "notes.txt"],
        "step-30": ["config.json"],
    }.items():
        (kept / name).mkdir(parents=True)
        for f in files:
            (kept / name / f).write_text("x")
    assert drop_kept_after(tmp_path, 5) == [10]
    assert sorted(p.name for p in kept.iterdir()) == ["step-00000020", "step-30"]


GOOD = {
    "step": 2,
    "settings": {"steps": 4},
    "history": [{"step": 2, "train_loss": 2.4, "val_loss": None, "lr": 0.001}],
    "elapsed": 0.5,
    "tokens_seen": 32,
    "source": {"name": "task:copy", "sha256": "ab"},
    "seq_len": 8,
    "param_groups": [["a"], ["b"]],
    "scaler": None,
    "world_size": 1,
    "grad_accum": 1,
}


@pytest.mark.parametrize(
    "change, words",
    [
        ({"step": True}, "step is true"),
        ({"elapsed": -1.0}, "elapsed is -1.0"),
        ({"world_size": 0}, "world_size is 0"),
        ({"param_groups": [["a", 1]]}, "param_groups"),
        ({"source": {"name": 3}}, "source.name is 3"),
        ({"history": [{"step": 1, "train_loss": "low"}]}, "history row 1 has train_loss"),
        ({"history": [{"step": -1, "train_loss": 1.0}]}, "history row 1 has step -1"),
        ({"history": [{"step": 1, "train_loss": 1.0, "val_loss": "nan"}]}, "val_loss"),
    ],
)
def test_a_damaged_training_state_is_named_field_by_field(change, words):
    check_state(GOOD)
    with pytest.raises(CheckpointError, match=words):
        check_state({**GOOD, **change})
    state = dict(GOOD)
    del state["step"]
    with pytest.raises(CheckpointError, match="has no step"):
        check_state(state)
