"""Every path a command reads goes through one check (:func:`model.files.check_input`): a FIFO, a
device or a folder where a file is expected is refused in one line naming it, exit 2, and never opened
(a FIFO's reader would wait for a writer forever: each case runs under an alarm that ends a blocked
``open`` with an error). The cases run in this process, through ``attention-lab``'s own entry point
(:func:`app.main.main`): a subprocess each paid Python's and torch's imports again, ~3 s of CPU a case.
Only a device that never ends (``/dev/zero``) is read in a subprocess with a timeout: its reader would
fill this process's memory, not wait.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app import main as entry
from tests.app.test_cli_user_files import snapshot

pytestmark = pytest.mark.usefixtures("one_thread")  # a command may set torch's threads: restored after

ROOT = Path(__file__).resolve().parents[2]
#: s a case may take; an ``open`` that waits on a FIFO longer is ended by SIGALRM, the test failed
TIMEOUT = 60
#: a device whose reading never ends and grows the reader's memory: read only by a child process
ENDLESS = "/dev/zero"

CASES = {
    "budget --config": ["budget", "--config", "{fifo}"],
    "budget --config folder/config.json": ["budget", "--config", "{folder}"],
    "inspect --checkpoint": ["inspect", "--checkpoint", "{fifo}", "--prompt", "ab", "--out", "{w}/a.npz"],
    "inspect --config": ["inspect", "--config", "{fifo}", "--prompt", "ab", "--out", "{w}/a.npz"],
    "generate --checkpoint": ["generate", "--checkpoint", "{fifo}", "--prompt", "ab"],
    "circuits --checkpoint": ["circuits", "--checkpoint", "{fifo}"],
    "circuits --config": ["circuits", "--config", "{fifo}"],
    "train --config": ["train", "--config", "{fifo}", "--corpus", "task:copy", "--out", "{w}/run"],
    "train --corpus": ["train", "--corpus", "{fifo}", "--out", "{w}/run"],
    "train --resume": ["train", "--resume", "{fifo}", "--out", "{w}/run"],
    "the window's MODEL": ["{fifo}"],
}


class Blocked(Exception):
    """A case still running after :data:`TIMEOUT` (a FIFO opened for reading waits for a writer)."""


@contextlib.contextmanager
def alarm(seconds: int):
    """Raise :class:`Blocked` in this (the main) thread after ``seconds``: the handler's exception ends
    a blocking system call such as ``open`` of a FIFO (PEP 475 retries it only when the handler
    returns)."""

    def blocked(_signum, _frame):
        raise Blocked(f"still running after {seconds} s: a FIFO was opened for reading?")

    before = signal.signal(signal.SIGALRM, blocked)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)


def run_cli(argv: list[str], capfd, monkeypatch) -> tuple[int, str]:
    """``attention-lab ARGV``: (exit status, what it wrote to stderr). In this process, by the entry
    point as the command runs it, less its malloc settings (the process's, not under test); in a child
    with a timeout when ARGV names :data:`ENDLESS`."""
    if ENDLESS in argv:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "app.main", *argv]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=TIMEOUT)
        return proc.returncode, proc.stderr
    monkeypatch.setattr(entry, "keep_freed_memory", lambda: True)
    capfd.readouterr()
    with alarm(TIMEOUT):
        code = entry.main(argv)
    return code, capfd.readouterr().err


@pytest.fixture
def world(tmp_path) -> dict[str, str]:
    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    folder = tmp_path / "saved"  # a checkpoint folder whose config.json is a FIFO
    folder.mkdir()
    os.mkfifo(folder / "config.json")
    return {"fifo": str(fifo), "folder": str(folder), "w": str(tmp_path)}


@pytest.mark.parametrize("name", list(CASES))
def test_a_fifo_where_a_file_is_read_is_refused_in_one_line_never_opened(
    world, tmp_path, name, capfd, monkeypatch
):
    before = snapshot(tmp_path)
    argv = [a.format(**world) for a in CASES[name]]
    code, err = run_cli(argv, capfd, monkeypatch)  # a FIFO opened for reading would block until the alarm
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "not a regular file" in lines[0], lines[0]
    assert "model.json" in lines[0] or "saved/config.json" in lines[0], lines[0]
    assert snapshot(tmp_path) == before  # nothing written beside it
    assert Path(world["fifo"]).is_fifo()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["budget", "--config", ENDLESS], [ENDLESS, "not a regular file or folder"]),
        (["train", "--config", ENDLESS, "--corpus", "task:copy", "--out", "{w}/run"], ["not a regular"]),
        (["train", "--config", "{w}", "--corpus", "task:copy", "--out", "{w}/run"], ["is a directory"]),
        (["train", "--corpus", "{w}/empty", "--out", "{w}/run"], ["holds no UTF-8 text file"]),
    ],
    ids=["budget device", "train --config device", "train --config folder", "train --corpus empty folder"],
)
def test_a_device_or_a_folder_where_a_file_is_read_is_refused(tmp_path, argv, words, capfd, monkeypatch):
    (tmp_path / "empty").mkdir()  # a folder is a corpus of its text files: this one has none
    before = snapshot(tmp_path)
    code, err = run_cli([a.format(w=tmp_path) for a in argv], capfd, monkeypatch)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    for word in words:
        assert word in lines[0], lines[0]
    assert snapshot(tmp_path) == before
