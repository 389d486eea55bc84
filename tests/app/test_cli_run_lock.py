"""Two ``train`` processes into one ``--out``: the second is refused in one line naming the folder and
the first one's PID, exit 2, and the folder is byte-for-byte as the first left it (it once printed
"saved" too, and one of the two runs was gone without a word). A holder killed with ``kill -9``
leaves no stale lock: the folder is trained into again at once.

The lock is ``flock``'s, held by an open file (not by a process), so the second run may be this test's
own process opening the folder anew (:func:`app.cli.main`, without a subprocess's ~4 s of imports):
only the first run of the kill -9 case, the one killed, needs a process of its own.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from app.cli import main
from model.io.runs.lock import LOCK_FILE, RunLock
from tests.app.test_cli_bad_input import TASK, TINY, one_thread
from tests.app.test_cli_user_files import snapshot

__all__ = ["one_thread"]  # the imported fixture: one torch thread for the module

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ["train", *TINY, *TASK, "--batch-size", "2", "--seq-len", "8"]


def cli(argv: list[str], **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "app.main", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
        **kwargs,
    )


def refused_naming(argv: list[str], folder: Path, pid: int, capfd) -> None:
    """Run ``argv`` (in this process); assert exit 2 and one line naming ``folder`` and the holder's
    ``pid``."""
    capfd.readouterr()
    code = main(argv)
    out, err = capfd.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert str(folder) in lines[0] and f"PID {pid}" in lines[0], lines[0]
    assert "saved" not in out


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("lock") / "run"
    assert main([*TRAIN, "--steps", "2", "--probe-every", "1", "--out", str(run)]) == 0
    return run


@pytest.mark.parametrize("how", ["fresh", "resume"])
def test_a_second_run_into_a_locked_folder_is_refused_and_changes_nothing(tmp_path, trained, how, capfd):
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    argv = [*TRAIN, "--steps", "3", "--out", str(run)] if how == "fresh" else ["train", "--resume", str(run)]
    with RunLock(run):  # the first run, as far as the lock goes
        before = snapshot(run)
        refused_naming([*argv, "--steps", "4"] if how == "resume" else argv, run, os.getpid(), capfd)
        assert snapshot(run) == before  # the first run's files, lock included, byte for byte
    assert not (run / LOCK_FILE).exists()  # released: the folder as a finished run leaves it


@pytest.mark.slow
def test_after_kill_9_of_a_running_train_the_folder_is_trained_into_again(tmp_path, capfd):
    run = tmp_path / "run"
    first = cli([*TRAIN, "--steps", "1000000", "--log-every", "1", "--out", str(run)])
    watchdog = threading.Timer(120, first.kill)  # a child that never starts training fails, not hangs
    watchdog.start()
    try:
        # its "training N parameters ..." line is flushed once its run folder is open and locked
        started = first.stdout.readline() if first.stdout is not None else ""
        assert started.startswith("training "), started + first.communicate()[1]
        assert (run / LOCK_FILE).read_text().strip() == str(first.pid)
        refused_naming([*TRAIN, "--steps", "3", "--out", str(run)], run, first.pid, capfd)
    finally:
        watchdog.cancel()
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=60)
    assert first.returncode == -signal.SIGKILL
    assert (run / LOCK_FILE).is_file()  # what kill -9 leaves: the file, but no lock
    capfd.readouterr()
    code = main([*TRAIN, "--steps", "3", "--overwrite", "--out", str(run)])  # it saved a checkpoint
    out, err = capfd.readouterr()
    assert code == 0, err
    assert f"saved {run}" in out
    assert not (run / LOCK_FILE).exists()


def test_a_refused_run_leaves_no_folder_the_lock_made(tmp_path, capsys):
    run = tmp_path / "new" / "run"
    argv = [*TRAIN, "--steps", "3", "--warmup", "-1", "--out", str(run)]  # refused once locked, building
    assert main(argv) == 2
    assert "warmup" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
