"""The run folder: probes round-trip as float16 without pickles; a follower reads only whole lines and
whole probes, and notices the end of a run and a vanished folder."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from model.interp.frame import AttentionFrame
from model.io.runs.folder import (
    RunFolderError,
    RunWriter,
    check_run_folder,
    read_probe,
    write_probe,
)
from model.io.runs.follow import RunFollower


def frame(step: int, T: int = 3) -> AttentionFrame:
    rng = np.random.default_rng(step)
    w = rng.random((2, 2, T, T)).astype(np.float16)
    return AttentionFrame(step=step, prompt="ab=", labels=["a", "b", "="][:T], weights=w)


def test_probe_round_trips_as_float16_without_pickles(tmp_path):
    f = frame(7)
    path = write_probe(tmp_path, f)
    assert path.name == "step-00000007.npz" and not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    with np.load(path, allow_pickle=False) as z:  # loads with pickles refused
        assert z["weights"].dtype == np.float16
    back = read_probe(path)
    assert (back.step, back.prompt, back.labels) == (7, "ab=", ["a", "b", "="])
    np.testing.assert_array_equal(back.weights, f.weights)


def test_follower_reads_whole_lines_and_whole_probes_only(tmp_path):
    w = RunWriter(tmp_path / "run")
    w.status("running", steps=4)
    w.log({"step": 1, "train_loss": 2.0})
    follow = RunFollower(tmp_path / "run")
    with open(tmp_path / "run" / "log.jsonl", "a") as f:  # a row still being written
        f.write('{"step": 2, "train_lo')
    up = follow.poll()
    assert [r["step"] for r in up.rows] == [1] and up.status == "running" and not up.done

    probe = write_probe(tmp_path / "other", frame(2)).read_bytes()
    (tmp_path / "run" / "probes").mkdir()
    half = tmp_path / "run" / "probes" / "step-00000002.npz"
    half.write_bytes(probe[: len(probe) // 2])  # a copy still arriving (a synced folder)
    assert follow.poll().frames == []
    with open(tmp_path / "run" / "log.jsonl", "a") as f:
        f.write('ss": 1.5}\nnot json\n{"step": 3, "train_loss": 1.2}\n')
    half.write_bytes(probe)
    up = follow.poll()
    assert [r["step"] for r in up.rows] == [2, 3]  # the finished row; the garbage line skipped
    assert [fr.step for fr in up.frames] == [2]
    assert not follow.poll()  # nothing new: an empty update

    w.close()
    w.status("finished", step=3)
    assert follow.poll().done
    shutil.rmtree(tmp_path / "run")
    up = follow.poll()
    assert up.done and up.status == "gone"


def test_a_fresh_run_starts_a_new_log_and_the_follower_starts_over(tmp_path):
    w = RunWriter(tmp_path / "run")
    w.log({"step": 1})
    w.log({"step": 2})
    write_probe(tmp_path / "run" / "probes", frame(2))
    follow = RunFollower(tmp_path / "run")
    assert len(follow.poll().rows) == 2
    w.close()
    w = RunWriter(tmp_path / "run", resume_step=2)  # resume appends
    w.log({"step": 3})
    w.close()
    assert [r["step"] for r in follow.poll().rows] == [3]
    log = tmp_path / "run" / "log.jsonl"  # a sync tool (rsync) writes a longer copy and renames it
    copy = tmp_path / "run" / ".log.jsonl.sync"
    copy.write_text(log.read_text() + '{"step": 4}\n')
    copy.replace(log)
    up = follow.poll()
    assert not up.restarted and [r["step"] for r in up.rows] == [4]
    w2 = RunWriter(tmp_path / "run")  # a fresh run: empty log, old probes gone
    w2.log({"step": 1})
    up = follow.poll()
    assert up.restarted and [r["step"] for r in up.rows] == [1]
    assert not list((tmp_path / "run" / "probes").iterdir())
    w2.close()


def test_run_folder_targets(tmp_path):
    assert check_run_folder(tmp_path / "new") == tmp_path / "new"
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("x")
    with pytest.raises(RunFolderError, match="not a checkpoint or run folder"):
        check_run_folder(tmp_path / "notes")
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "config.json").write_text(json.dumps({}))
    with pytest.raises(RunFolderError, match="bare checkpoint"):
        check_run_folder(tmp_path / "bare")
    (tmp_path / "file").write_text("x")
    with pytest.raises(RunFolderError, match="is a file"):
        check_run_folder(tmp_path / "file")
