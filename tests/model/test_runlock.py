"""model.io.runs.lock: the lock a run holds on its folder, what a killed holder leaves, and a platform
without ``fcntl``."""

from __future__ import annotations

import json
import os

import pytest

from model.io.runs import lock as runlock
from model.io.runs.folder import RUN_FORMAT, check_run_folder
from model.io.runs.lock import LOCK_FILE, RunFolderBusy, RunLock, refuse_if_busy


def test_a_second_holder_is_refused_naming_the_folder_and_the_first_ones_pid(tmp_path):
    import os

    run = tmp_path / "run"
    with RunLock(run) as first:
        assert first.held and (run / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        with pytest.raises(RunFolderBusy, match=rf"{run}.*PID {os.getpid()}"):
            RunLock(run).acquire()
        assert first.held
    assert not run.exists()  # the folder the lock made, still empty: removed with the lock
    with RunLock(run):  # and free again
        pass


def test_the_lock_file_of_a_killed_run_is_the_runs_own(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).write_text("4242\n")  # what kill -9 of a holder leaves
    assert check_run_folder(run) == run  # alone: the folder counts as empty
    (run / "run.json").write_text(json.dumps({"format": RUN_FORMAT, "status": "running"}))
    (run / "log.jsonl").write_text("")
    assert check_run_folder(run) == run
    with RunLock(run):
        assert (run / LOCK_FILE).read_text().strip() != "4242"
    assert sorted(p.name for p in run.iterdir()) == ["log.jsonl", "run.json"]


def test_without_fcntl_the_lock_is_a_no_op_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(runlock, "fcntl", None)
    with RunLock(tmp_path / "run") as lock:
        assert not lock.held
        RunLock(tmp_path / "run").acquire()  # nothing keeps runs apart here, and nothing fails
    assert not (tmp_path / "run").exists()


def test_a_lock_that_may_not_create_leaves_a_missing_folder_missing(tmp_path):
    with RunLock(tmp_path / "resumed", create=False) as lock:
        assert not lock.held
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "resumed").mkdir()
    with RunLock(tmp_path / "resumed", create=False) as lock:
        assert lock.held


def test_a_folder_being_written_is_named_busy_before_its_files_are_read(tmp_path):
    """A run writing its folder has temporary files of its own: a second run is told the folder is
    busy (with the first one's PID), not that those files are foreign (seen once in CI)."""
    run = tmp_path / "run"
    refuse_if_busy(run)  # missing: nothing to refuse
    with RunLock(run):
        (run / "probes").mkdir()
        (run / "probes" / ".step-00000345.npz.1234.abcd.tmp").write_bytes(b"half written")
        with pytest.raises(RunFolderBusy) as caught:
            refuse_if_busy(run)
        assert str(caught.value) == (
            f"the run folder {str(run)!r} is being written by another run (PID {os.getpid()}): "
            "wait for it to end, or choose another --out"
        )
    refuse_if_busy(run)  # released: free again
