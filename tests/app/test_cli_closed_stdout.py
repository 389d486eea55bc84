"""A reader that closes stdout early (``attention-lab budget --json | head -c 100``) ends a command
quietly, as it ends a Unix tool: nothing on stderr (no BrokenPipeError traceback), exit status
:data:`app.cli.BROKEN_PIPE_STATUS` (141, 128 + SIGPIPE).

Each command runs in a subprocess whose stdout is a pipe: either closed before the command writes at
all (its first write fails, whatever the size of its output), or closed once the first bytes are read,
with the pipe shrunk to one page so that a command writing more than that is still writing then.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import BROKEN_PIPE_STATUS, main
from tests.app.test_cli_bad_input import TASK, TINY, one_thread

__all__ = ["one_thread"]  # the imported fixture: one torch thread for the module

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("closed_stdout") / "run"
    argv = ["train", *TINY, *TASK, "--steps", "2", "--batch-size", "2", "--seq-len", "8", "--out", str(run)]
    assert main(argv) == 0
    return run


def run_with_stdout_closed(argv: list[str], *, after: int = 0) -> tuple[int, bytes, bytes]:
    """Run ``attention-lab ARGV`` with stdout a pipe whose reader closes it before anything is written
    (``after`` 0) or once ``after`` bytes came; (exit status, bytes read, stderr)."""
    read_end, write_end = os.pipe()
    if after == 0:
        os.close(read_end)
    elif hasattr(fcntl, "F_SETPIPE_SZ"):
        fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)  # a bigger output waits for the reader
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.main", *argv], stdout=write_end, stderr=subprocess.PIPE, env=env, cwd=ROOT
    )
    os.close(write_end)
    got = b""
    if after:
        while len(got) < after:
            chunk = os.read(read_end, after - len(got))
            if not chunk:
                break
            got += chunk
        os.close(read_end)
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return proc.returncode, got, err


@pytest.mark.parametrize(
    "argv",
    [
        ["budget", "--list-presets"],
        ["budget", "--preset", "llama2-7b"],
        ["download", "--list"],
    ],
    ids=lambda a: " ".join(a),
)
def test_a_command_whose_stdout_is_closed_ends_quietly(argv):
    rc, _, err = run_with_stdout_closed(argv)
    assert err == b"" and rc == BROKEN_PIPE_STATUS, (rc, err.decode())


@pytest.mark.parametrize(
    "argv, after",
    [(["budget", "--preset", "llama2-7b", "--json"], 100), (["budget", "--preset", "llama2-7b"], 1)],
    ids=["budget --json | head -c 100", "budget | head -c 1"],
)
def test_a_command_whose_reader_stops_after_the_first_bytes_ends_quietly(argv, after):
    rc, got, err = run_with_stdout_closed(argv, after=after)
    assert len(got) == after  # it had begun writing when the reader went away
    assert err == b"" and rc == BROKEN_PIPE_STATUS, (rc, err.decode())


@pytest.mark.slow
def test_generate_into_a_closed_pipe_ends_quietly(checkpoint):
    argv = ["generate", "--checkpoint", str(checkpoint), "--prompt", "ab", "--max-new-tokens", "40"]
    rc, _, err = run_with_stdout_closed(argv)
    assert err == b"" and rc == BROKEN_PIPE_STATUS, (rc, err.decode())


def test_an_open_stdout_still_gets_everything_and_exit_0(capsys):
    assert main(["budget", "--list-presets"]) == 0
    assert "llama2-7b" in capsys.readouterr().out
