"""`attention-lab heads`: every head's scores over a corpus as .csv or .npz (no pickle), progress on
stderr, bad input as one line + exit 2, and an interrupted run leaves no file."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from app.cli import main


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_CACHE", str(tmp_path / "cache"))


def _heads(starter, *args: str) -> list[str]:
    return ["heads", "--checkpoint", str(starter), "--corpus", "task:induction", *args]


def test_the_table_and_the_arrays(shipped_starter, tmp_path, capsys):
    out = tmp_path / "heads.csv"
    assert main(_heads(shipped_starter, "--prompts", "24", "--seq-len", "40", "--out", str(out))) == 0
    captured = capsys.readouterr()
    assert "24 of 24 prompts" in captured.err and "0 of 24 prompts" in captured.err
    assert "2 layers × 4 heads, 24 prompts of 40 tokens" in captured.out
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 8 and {"induction", "induction_low", "induction_high", "cluster"} <= set(rows[0])
    for row in rows:
        assert float(row["induction_low"]) <= float(row["induction"]) <= float(row["induction_high"])
    npz = tmp_path / "heads.npz"
    assert main(_heads(shipped_starter, "--prompts", "24", "--seq-len", "40", "--out", str(npz))) == 0
    assert "read from the cache" in capsys.readouterr().out  # the same run again
    with np.load(npz, allow_pickle=False) as z:
        assert z["mean"].shape == (9, 2, 4) and z["per_prompt"].shape == (9, 24, 2, 4)
        assert z["top_attention_text"].shape == (2, 4, 10) and "«" in str(z["top_attention_text"][1, 3, 0])
        assert z["top_z_query"].shape == (2, 4, 10) and z["cluster_coords"].shape == (2, 4, 2)
        csv_mean = {(int(r["layer"]), int(r["head"])): float(r["induction"]) for r in rows}
        names = list(z["score_names"])
        for (layer, head), value in csv_mean.items():
            assert z["mean"][names.index("induction"), layer, head] == pytest.approx(value, rel=1e-5)
        # the heads compared by their patterns on the shared prompts: [L·H, L·H], and each head's place
        s = z["pattern_similarity"]
        assert s.shape == (8, 8) and np.array_equal(s, s.T) and np.all(np.diag(s) == 1)
        for row in rows:
            layer, head = int(row["layer"]), int(row["head"])
            xy = z["pattern_cluster_coords"][layer, head]
            assert (float(row["pattern_x"]), float(row["pattern_y"])) == pytest.approx(tuple(xy), abs=1e-5)
            label = z["pattern_cluster_labels"][layer, head]
            assert row["pattern_cluster"] == z["pattern_cluster_names"][label]
    assert "clusters of heads alike by their patterns on 16 shared prompts" in captured.out


@pytest.mark.parametrize(
    "args, says",
    [
        (["--prompts", "0"], "--prompts 0"),
        (["--prompts", "-3"], "--prompts -3"),
        (["--seq-len", "65"], "the model's context is 64 tokens"),
        (["--seq-len", "1"], "at least 2 tokens"),
        (["--out", "x.txt"], "write a .npz or a .csv"),
    ],
)
def test_bad_numbers_are_one_line(shipped_starter, args, says, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(_heads(shipped_starter, *args)) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == [tmp_path / "cache"] or not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "content, says",
    [
        (b"", "is empty"),
        (b"\x7fELF\x02\x01\x01\x00\x00\x00" * 50, "looks binary"),
        (b"abcabcabcabc", "shorter than one prompt: 12 characters"),
    ],
)
def test_bad_corpora_are_one_line(shipped_starter, content, says, capsys, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(content)
    argv = ["heads", "--checkpoint", str(shipped_starter), "--corpus", str(corpus), "--seq-len", "32"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err


def test_an_interrupted_run_leaves_no_file(shipped_starter, tmp_path, monkeypatch, capsys):
    import model.interp.corpus.run as corpus

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(corpus, "_result", interrupted)  # Ctrl+C once every prompt was read
    out = tmp_path / "heads.npz"
    assert main(_heads(shipped_starter, "--prompts", "8", "--seq-len", "32", "--out", str(out))) == 130
    assert "interrupted" in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.glob(".heads*"))
    assert not list((tmp_path / "cache").rglob("*.npz"))
