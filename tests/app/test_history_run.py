"""Our own run's history: `train --save-every 20 --keep-checkpoints` on task:induction, 200 steps, opened as a
history whose best induction score rises across the saved steps."""

from __future__ import annotations

import json

import numpy as np

from app.cli import main
from model.io.history.revisions import open_source
from model.io.history.traced import History

#: The smallest shape that still shows the rise within 200 steps on a CPU (the task's recommended
#: d_model 128 × batch 64 makes the full phase change near step 120, but takes minutes).
RUN = ["train", "--corpus", "task:induction", "--n-layers", "2", "--d-model", "64", "--n-heads", "4"]
RUN += ["--context-length", "64", "--seq-len", "64", "--batch-size", "32", "--lr", "3e-3", "--warmup", "10"]
RUN += [
    "--eval-every",
    "100",
    "--eval-batches",
    "1",
    "--probe-every",
    "100",
    "--threads",
    "1",
    "--device",
    "cpu",
]


def _spearman(a, b) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def test_a_task_induction_run_saved_every_20_steps_shows_induction_rising(tmp_path, capsys):
    run = tmp_path / "run"
    argv = [*RUN, "--steps", "200", "--save-every", "20", "--keep-checkpoints", "--out", str(run)]
    assert main(argv) == 0
    kept = sorted(p.name for p in (run / "checkpoints").iterdir())
    assert kept == [f"step-{s:08d}" for s in range(20, 201, 20)]
    assert not (run / "checkpoints" / "step-00000020" / "optimizer.safetensors").exists()  # weights only
    assert json.loads((run / "checkpoints" / "step-00000100" / "meta.json").read_text())["step"] == 100

    hist = History(open_source(run), "unused: the run's own probe prompt", cache_dir=tmp_path / "cache")
    assert hist.steps == list(range(20, 201, 20))
    assert hist.snapshots() == []  # nothing traced before it is asked for
    for i in range(len(hist)):
        hist.snapshot(i)
    steps, scores = hist.series("induction")
    assert list(steps) == hist.steps
    assert scores[-1] > 1.8 * scores[0], scores  # well above where it started
    assert _spearman(steps, scores) > 0.7, scores  # and rising across the saved steps, not by chance
    columns, rows = hist.table()
    assert len(rows) == 10 and rows[-1][columns.index("best induction")] == round(scores[-1], 6)

    # a fresh run into the same folder (told to replace it) drops the kept saves of the old one past its start
    fresh = [*RUN, "--steps", "20", "--save-every", "20", "--keep-checkpoints", "--overwrite"]
    assert main([*fresh, "--out", str(run)]) == 0
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-00000020"]
