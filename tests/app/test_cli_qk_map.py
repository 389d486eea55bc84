"""`attention-lab qk-map`: one head's joint query–key map over a corpus as .csv or .npz (the points,
token, position, query/key, and the correlation of distance with the dot product), a typed prompt
placed in it, and user mistakes as one line + exit 2."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from app.cli import main
from app.commands.qk_map import CSV_COLUMNS


def test_the_map_as_csv_has_every_column_and_the_prompts_points(shipped_starter, tmp_path, capsys):
    out = tmp_path / "map.csv"
    argv = ["qk-map", "--checkpoint", str(shipped_starter), "--layer", "1", "--head", "3",
            "--corpus", "task:induction", "--prompts", "8", "--seq-len", "16", "--prompt", "abcab",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "128 queries and 128 keys of 8 windows × 16 tokens" in text
    assert "correlation of distance with q·k" in text
    rows = list(csv.DictReader(out.open()))
    assert tuple(rows[0]) == CSV_COLUMNS
    corpus = [r for r in rows if r["source"] == "corpus"]
    prompt = [r for r in rows if r["source"] == "prompt"]
    assert len(corpus) == 2 * 8 * 16 and {r["kind"] for r in corpus} == {"query", "key"}
    assert [r["token"] for r in prompt if r["kind"] == "query"] == list("abcab")
    assert [int(r["position"]) for r in prompt if r["kind"] == "key"] == [0, 1, 2, 3, 4]
    corr = float(rows[0]["corr_full"])
    assert -1.0 <= corr < 0 and all(float(r["corr_full"]) == corr for r in rows)
    assert f"{corr:+.3f} in d_k" in text  # the number printed is the number written
    xy = np.array([[float(r["x"]), float(r["y"])] for r in rows])
    assert np.isfinite(xy).all() and xy.std(0).min() > 0


def test_the_map_as_npz_reads_back_without_pickle(shipped_starter, tmp_path, capsys):
    out = tmp_path / "map.npz"
    argv = ["qk-map", "--checkpoint", str(shipped_starter), "--layer", "0", "--head", "1",
            "--corpus", "task:induction", "--prompts", "4", "--seq-len", "16", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    with np.load(out, allow_pickle=False) as data:
        assert data["points"].shape == (128, 2) and data["is_query"].sum() == 64
        assert data["token"].dtype.kind == "U" and len(data["token"]) == 128
        assert np.isfinite(float(data["corr_full"])) and int(data["layer"]) == 0


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--layer", "2", "--head", "0"], "layer 2: the model has layers 0 to 1"),
        (["--layer", "0", "--head", "4"], "head 4: the model has heads 0 to 3"),
        (["--layer", "0", "--head", "0", "--prompts", "0"], "--prompts 0"),
        (["--layer", "0", "--head", "0", "--seq-len", "65"], "seq-len = 65"),
        (["--layer", "0", "--head", "0", "--corpus", "builtin:primer"], "not in the tokenizer's vocabulary"),
        (["--layer", "0", "--head", "0", "--corpus", "EMPTY"], "is empty"),
        (["--layer", "0", "--head", "0", "--out", "map.txt"], "write a .csv or a .npz file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(shipped_starter, tmp_path, capsys, args, says):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    args = [str(empty) if a == "EMPTY" else a for a in args]
    argv = ["qk-map", "--checkpoint", str(shipped_starter), "--corpus", "task:induction", *args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
