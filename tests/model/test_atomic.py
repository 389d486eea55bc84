"""model.atomic: one atomic writer for every single-file save, and what killed writes leave behind.

The comparison file, the run folder's status and probes and the history's snapshot cache each had
their own temporary name, and a killed save left it for good; they now share ``write_atomic``, whose
next write to the same path removes the leftovers of dead processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from model.atomic import clean_stale_temps, pid_alive, write_atomic
from model.compare.comparison import Comparison, load_comparison, save_comparison
from model.io.runs.folder import STATUS_FILE, RunWriter


@pytest.fixture
def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_pid_alive_tells_a_finished_process_from_a_running_one(dead_pid):
    assert pid_alive(os.getpid()) and not pid_alive(dead_pid)


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\x00\xffbytes", b"\x00\xffbytes"),
        ("tèxt\r\n", "tèxt\r\n".encode()),
        (lambda fh: fh.write(b"fn"), b"fn"),
    ],
)
def test_write_atomic_writes_bytes_text_or_a_writer(tmp_path, content, expected):
    path = write_atomic(tmp_path / "sub" / "f.bin", content)
    assert path.read_bytes() == expected
    assert sorted(p.name for p in path.parent.iterdir()) == ["f.bin"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "f.json"
    path.write_text("old")

    def fail(fh):
        fh.write(b"half")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        write_atomic(path, fail)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_only_dead_processes_temporaries_are_removed(tmp_path, dead_pid):
    path = tmp_path / "cmp.json"
    stale = tmp_path / f".cmp.json.{dead_pid}.a1b2.tmp"
    live = tmp_path / f".cmp.json.{os.getppid()}.c3d4.tmp"
    other = tmp_path / f".other.json.{dead_pid}.e5f6.tmp"
    for p in (stale, live, other):
        p.write_text("partial")
    assert clean_stale_temps(path) == [stale]
    assert live.exists() and other.exists()


def test_saving_a_comparison_removes_what_a_killed_save_left(tmp_path, dead_pid):
    stale = tmp_path / f".runs.json.{dead_pid}.zz99.tmp"
    stale.write_text('{"half": ')
    path = save_comparison(tmp_path / "runs.json", Comparison(title="two norms", prompt="abc"))
    assert not stale.exists()
    assert load_comparison(path).title == "two norms"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["runs.json"]


def test_a_run_folders_status_is_written_atomically_with_the_umask_mode(tmp_path, dead_pid):
    writer = RunWriter(tmp_path / "run")
    stale = writer.path / f".{STATUS_FILE}.{dead_pid}.q1.tmp"
    stale.write_text("{")
    writer.status("running", step=3)
    writer.close()
    assert not stale.exists()
    assert json.loads((writer.path / STATUS_FILE).read_text())["step"] == 3
    mode = os.stat(writer.path / STATUS_FILE).st_mode & 0o777
    mask = os.umask(0)
    os.umask(mask)
    assert mode == 0o666 & ~mask


def test_a_write_that_fails_on_the_way_is_one_line_naming_the_file_and_keeps_the_old_one(tmp_path):
    """A full disk mid-write: WriteError (still an OSError for callers that catch those), one line
    naming the file and why; the file before it is whole and no temporary file is left."""
    import errno

    from model.atomic import WriteError
    from model.errors import AttentionLabError

    path = tmp_path / "export.csv"
    path.write_bytes(b"the earlier export")

    def full(fh):
        fh.write(b"half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with pytest.raises(WriteError) as caught:
        write_atomic(path, full)
    message = str(caught.value)
    assert message == f"cannot write {str(path)!r}: {os.strerror(errno.ENOSPC)} (the disk is full)"
    assert isinstance(caught.value, OSError) and isinstance(caught.value, AttentionLabError)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.csv"]
    assert path.read_bytes() == b"the earlier export"
