"""Every path a command reads goes through one check (:func:`model.files.check_input`): a FIFO, a
device or a folder where a file is expected is refused in one line naming it, exit 2, and never opened
(a FIFO's reader would wait for a writer forever: each case runs in a subprocess with a timeout).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.app.test_cli_user_files import snapshot

ROOT = Path(__file__).resolve().parents[2]

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


def run_cli(argv: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "app.main", *argv], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.fixture
def world(tmp_path) -> dict[str, str]:
    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    folder = tmp_path / "saved"  # a checkpoint folder whose config.json is a FIFO
    folder.mkdir()
    os.mkfifo(folder / "config.json")
    return {"fifo": str(fifo), "folder": str(folder), "w": str(tmp_path)}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_a_fifo_where_a_file_is_read_is_refused_in_one_line_never_opened(world, tmp_path, name):
    before = snapshot(tmp_path)
    argv = [a.format(**world) for a in CASES[name]]
    proc = run_cli(argv)  # a FIFO opened for reading would block until the timeout
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "not a regular file" in lines[0], lines[0]
    assert "model.json" in lines[0] or "saved/config.json" in lines[0], lines[0]
    assert snapshot(tmp_path) == before  # nothing written beside it
    assert Path(world["fifo"]).is_fifo()


@pytest.mark.parametrize(
    "argv, words",
    [
        (["budget", "--config", "/dev/zero"], ["/dev/zero", "not a regular file or folder"]),
        (["train", "--config", "/dev/zero", "--corpus", "task:copy", "--out", "{w}/run"], ["not a regular"]),
        (["train", "--config", "{w}", "--corpus", "task:copy", "--out", "{w}/run"], ["is a directory"]),
        (["train", "--corpus", "{w}/empty", "--out", "{w}/run"], ["holds no UTF-8 text file"]),
    ],
    ids=["budget device", "train --config device", "train --config folder", "train --corpus empty folder"],
)
@pytest.mark.slow
def test_a_device_or_a_folder_where_a_file_is_read_is_refused(tmp_path, argv, words):
    (tmp_path / "empty").mkdir()  # a folder is a corpus of its text files: this one has none
    before = snapshot(tmp_path)
    proc = run_cli([a.format(w=tmp_path) for a in argv])
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert snapshot(tmp_path) == before
