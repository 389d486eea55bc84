"""A write that fails on the way (here a 1 KB file-size limit, ``RLIMIT_FSIZE`` with ``SIGXFSZ``
ignored, so each write past it gets ``EFBIG``) is one line naming the file and exit 2 from every writer
-- probes, the log, the checkpoint, exports, screenshots -- through one path
(:func:`model.atomic.writing`), never an ``OSError`` traceback; and what was written before is
byte-for-byte as it was (the run folder's status says the run failed; the log keeps whole lines).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import main
from tests.app.test_cli_bad_input import TASK, TINY, one_thread
from tests.app.test_cli_user_files import snapshot

__all__ = ["one_thread"]  # the imported fixture: one torch thread for the module

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 1024
TRAIN = ["train", *TINY, *TASK, "--batch-size", "2", "--seq-len", "8"]


def _limit_file_size() -> None:  # in the child, before it runs
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))


def run_limited(argv: list[str]) -> tuple[int, str]:
    """``attention-lab ARGV`` under the file-size limit: (exit status, its one error line), after
    asserting that stderr holds that one line and no traceback (Qt's offscreen notes aside)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen"}
    proc = subprocess.run(
        [sys.executable, "-m", "app.main", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=240,
        preexec_fn=_limit_file_size,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    lines = [line for line in lines if "propagateSizeHints" not in line and ": note: " not in line]
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr[-3000:]
    return proc.returncode, lines[0]


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A small run of ours (2 steps, a probe each), made once without a limit; tests copy it."""
    run = tmp_path_factory.mktemp("limits") / "run"
    assert main([*TRAIN, "--steps", "2", "--probe-every", "1", "--out", str(run)]) == 0
    return run


def _copy(trained: Path, tmp_path: Path) -> tuple[Path, dict]:
    run = tmp_path / "run"
    shutil.copytree(trained, run)
    return run, snapshot(run)


def _failed_and_intact(run: Path, before: dict, *, grown: tuple[str, ...] = ()) -> None:
    """``run`` as ``before`` but for its status (now failed) and the files in ``grown``, which only
    grew by whole lines; no temporary file left."""
    after = snapshot(run)
    assert json.loads((run / "run.json").read_text())["status"] == "failed"
    assert set(after) == set(before), set(after) ^ set(before)
    for name, data in before.items():
        if name == "run.json":
            continue
        if name in grown:
            assert after[name].startswith(data) and after[name].endswith(b"\n"), name
            for line in after[name].splitlines():
                json.loads(line)
        else:
            assert after[name] == data, name


@pytest.mark.slow
def test_resume_whose_probe_cannot_be_written_is_one_line_and_loses_nothing(tmp_path, trained):
    run, before = _copy(trained, tmp_path)
    rc, line = run_limited(["train", "--resume", str(run), "--steps", "4"])
    assert rc == 2 and "step-00000003.npz" in line and "File too large" in line, line
    _failed_and_intact(run, before)


@pytest.mark.slow
def test_a_log_row_that_cannot_be_written_is_cut_off_whole_and_is_one_line(tmp_path, trained):
    run, before = _copy(trained, tmp_path)
    argv = ["train", "--resume", str(run), "--steps", "40", "--probe-every", "0", "--log-every", "1"]
    rc, line = run_limited(argv)
    assert rc == 2 and "log.jsonl" in line and "File too large" in line, line
    _failed_and_intact(run, before, grown=("log.jsonl",))
    assert len((run / "log.jsonl").read_bytes()) > len(before["log.jsonl"])  # rows came until the limit


@pytest.mark.slow
def test_a_checkpoint_that_cannot_be_written_is_one_line_and_keeps_the_old_one(tmp_path, trained):
    run, before = _copy(trained, tmp_path)
    rc, line = run_limited(["train", "--resume", str(run), "--steps", "3", "--probe-every", "0"])
    assert rc == 2 and "checkpoint" in line and "File too large" in line, line
    _failed_and_intact(run, before, grown=("log.jsonl",))


@pytest.mark.slow
@pytest.mark.parametrize("command", ["inspect", "circuits"])
def test_an_export_that_cannot_be_written_is_one_line_and_the_old_file_stays(tmp_path, trained, command):
    out = tmp_path / "mine.npz"
    out.write_bytes(b"the user's earlier export")
    argv = [command, "--checkpoint", str(trained), "--out", str(out)]
    argv += ["--prompt", "abcabc"] if command == "inspect" else []
    before = snapshot(tmp_path)
    rc, line = run_limited(argv)
    assert rc == 2 and "mine.npz" in line and "File too large" in line, line
    assert snapshot(tmp_path) == before  # the old file whole, no temporary file beside it


@pytest.mark.slow
def test_a_screenshot_that_cannot_be_written_is_one_line(tmp_path, shipped_starter):
    out = tmp_path / "shots"
    argv = ["screenshot", "--checkpoint", str(shipped_starter), "--steps", "0", "--only", "panel-data"]
    rc, line = run_limited([*argv, "--out", str(out)])
    assert rc == 2 and "panel-data.png" in line and "File too large" in line, line
    assert not out.exists()  # the folder it made, empty, is gone again
