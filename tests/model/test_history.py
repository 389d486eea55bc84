"""A model's training history: revisions from the fake Hub (a tiny Pythia at 5 revisions) and our own runs."""

import csv

import numpy as np
import pytest
import torch

from model.io.history import revisions as R
from model.io.history.revisions import HistoryError, open_source
from model.io.history.traced import History
from model.io.hub import DownloadCancelled, HubRef, fetch
from model.io.pretrained import open_model

PROMPT = "The cat sat. The cat sat on the mat."


def test_pythia_steps_and_the_default_16():
    assert len(R.PYTHIA_STEPS) == 154 and R.PYTHIA_STEPS[:11] == (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    steps = R.log_spaced_steps()
    assert len(steps) == 16 and steps[0] == 0 and steps[-1] == 143000
    assert set(steps) <= set(R.PYTHIA_STEPS) and steps == sorted(steps)
    ratios = np.diff(np.log(steps[1:]))
    assert ratios.min() > 0.3 and ratios.max() < 1.6  # roughly even on a log axis
    assert R.snap_steps([3000.4, 700, 0], R.PYTHIA_STEPS) == [0, 512, 3000]
    src = open_source("hf:EleutherAI/pythia-70m")
    assert [r.label for r in src.revisions][:3] == ["step0", "step1", "step2"]
    assert open_source("hf:pythia-70m", [1000, "step2"]).repo_id == "EleutherAI/pythia-70m"
    assert [r.step for r in open_source("hf:a/b", [1000, "step2"]).revisions] == [2, 1000]


def test_the_readme_and_the_docstring_list_the_default_revisions_the_code_uses():
    """The README's "A model's training history" lists the default Pythia steps: the very ones
    log_spaced_steps() gives (it once said 25000 59000 where the dialog used 26000 61000)."""
    import re
    from pathlib import Path

    import model

    readme = (Path(model.__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## A model's training history\n", 1)[1].split("\n## ", 1)[0]
    lists = re.findall(r"`((?:\d+ ){3,}\d+)`", section)
    assert len(lists) == 1, lists
    assert [int(n) for n in lists[0].split()] == R.log_spaced_steps()
    doc = re.search(r"defaults\): ([\d ]+)\.", R.log_spaced_steps.__doc__)
    assert doc is not None and [int(n) for n in doc.group(1).split()] == R.log_spaced_steps()


def _reference_weights(hf_model, tokenizer, prompt):
    ids = tokenizer.encode(prompt)
    with torch.no_grad():
        out = hf_model(torch.tensor([ids]), output_attentions=True)
    return np.stack([a[0].numpy() for a in out.attentions])  # [L, H, T, T]


def test_hub_history_scrubs_through_revisions_and_caches_traces(
    neox_history_hub, tiny_neox_history, tmp_path
):
    revs = list(tiny_neox_history)
    hist = History(open_source("hf:tiny/pythia", revs), PROMPT, cache_dir=tmp_path / "cache", max_models=2)
    assert hist.steps == [0, 1, 4, 16, 64] and not any(hist.cached(i) for i in range(len(hist)))
    assert neox_history_hub.gets("model.safetensors") == []  # opening fetches nothing: lazy
    progress = []
    snaps = [hist.snapshot(i, on_progress=progress.append) for i in range(len(hist))]
    assert progress and progress[-1].finished
    assert hist.loads == 5 and hist.traces == 5 and len(hist.models_in_memory()) == 2  # the LRU
    # each step shows that revision's attention: as transformers computes it for that revision
    for rev, snap in zip(revs, snaps, strict=True):
        ckpt = open_model(fetch(HubRef("tiny/pythia", rev)))  # that revision loaded directly
        want = _reference_weights(tiny_neox_history[rev][1], ckpt.tokenizer, PROMPT)
        assert snap.weights.shape == want.shape == (2, 4, want.shape[-1], want.shape[-1])
        np.testing.assert_allclose(snap.weights.astype(np.float32), want, atol=2e-3)
    assert not np.allclose(snaps[0].weights, snaps[-1].weights, atol=1e-2)  # revisions differ
    # the metric table: one row per revision, best head of each kind, every head's metrics
    columns, rows = hist.table()
    assert [r[0] for r in rows] == hist.steps and [r[1] for r in rows] == revs
    assert "best induction" in columns and "induction L1H3" in columns and "entropy_norm L0H0" in columns
    i = columns.index("best sink")
    assert rows[2][i] == pytest.approx(snaps[2].metrics["sink"].max(), abs=1e-6)
    path = hist.write_csv(tmp_path / "table.csv")
    with open(path, newline="") as f:
        read = list(csv.reader(f))
    assert read[0] == columns and len(read) == 6

    # a second pass (a fresh History, as after a restart) reads the disk cache: no model is opened
    n_gets = len(neox_history_hub.requests)
    again = History(open_source("hf:tiny/pythia", revs), PROMPT, cache_dir=tmp_path / "cache")
    assert all(again.cached(i) for i in range(len(again)))
    for i in range(len(again)):
        snap = again.snapshot(i)
        assert snap.from_cache and np.array_equal(snap.weights, snaps[i].weights)
        assert np.array_equal(snap.metrics["induction"], snaps[i].metrics["induction"])
    assert again.loads == 0 and again.traces == 0 and len(neox_history_hub.requests) == n_gets
    # another prompt is another key
    other = History(open_source("hf:tiny/pythia", revs), "Another prompt.", cache_dir=tmp_path / "cache")
    assert not other.cached(0)


def test_cancel_mid_download_leaves_the_history_usable(neox_history_hub, tmp_path, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 1024)
    hist = History(open_source("hf:tiny/pythia", ["step0", "step4"]), PROMPT, cache_dir=tmp_path / "c")
    asked = []

    def stop_in_weights():
        if neox_history_hub.gets("model.safetensors"):
            asked.append(1)
        return len(asked) > 3

    with pytest.raises(DownloadCancelled):
        hist.snapshot(1, should_stop=stop_in_weights)
    assert not hist.cached(1) and hist.peek(1) is None and hist.models_in_memory() == []
    assert hist.snapshot(0).step == 0  # another revision works
    snap = hist.snapshot(1)  # and the cancelled one, asked again
    assert snap.step == 4 and hist.cached(1) and len(hist.table()[1]) == 2


def test_a_folder_of_checkpoints_and_bad_folders(tmp_path, write_hf_family):
    root = tmp_path / "ckpts"
    for step, seed in ((300, 1), (20, 2)):
        write_hf_family(root / f"step{step}", "gpt_neox", seed=seed, num_key_value_heads=None)
    (root / "notes").mkdir()
    hist = History(open_source(root), PROMPT, cache_dir=tmp_path / "c")
    assert hist.steps == [20, 300] and hist.index_of(250) == 1
    a, b = hist.snapshot(0), hist.snapshot(1)
    assert a.weights.shape == b.weights.shape and not np.allclose(a.weights, b.weights)
    with pytest.raises(HistoryError, match="holds no sub-folders that are checkpoints"):
        open_source(tmp_path / "c")
    with pytest.raises(HistoryError, match="not a folder"):
        open_source(tmp_path / "missing")
    with pytest.raises(HistoryError, match="only for a Hub repo"):
        open_source(root, ["step1"])
    with pytest.raises(HistoryError, match="empty"):
        History(open_source(root), "")
