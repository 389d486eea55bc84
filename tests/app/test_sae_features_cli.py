"""`attention-lab sae features`: one row per feature of an SAE folder in SAELens's format (frequency,
activations, promoted tokens, the strongest example, the head that writes it), the same numbers as the
Python functions give, and bad input as one line + exit 2 before the model is opened."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from app.cli import main
from model import api
from model.interp.sae import Site
from model.interp.sae.dashboard import feature_stats
from model.interp.sae.readout import feature_logits
from model.text.tokens import visible
from tests.model.sae_hand import hand_sae, write_saelens_folder


def _features(starter, sae_dir, *args: str) -> list[str]:
    return ["sae", "features", "--checkpoint", str(starter), "--sae", str(sae_dir), *args]


def test_one_row_per_feature_with_the_functions_numbers(shipped_starter, tmp_path, capsys):
    sae = hand_sae()
    folder = write_saelens_folder(sae, tmp_path / "sae")
    out = tmp_path / "feats.csv"
    run = ["--top", "3", "--prompts", "8", "--seq-len", "32", "--batch-size", "4", "--out", str(out)]
    assert main(_features(shipped_starter, folder, *run)) == 0  # the corpus: the starter's own
    captured = capsys.readouterr()
    assert "8 of 8 prompts" in captured.err
    assert "64 features of the SAE on attention z, layer 1 over task:induction" in captured.out
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [int(r["feature"]) for r in rows] == list(range(64))
    assert (rows[0]["dominant_head"], float(rows[0]["head_share"])) == ("3", pytest.approx(1.0))
    assert (rows[1]["dominant_head"], float(rows[1]["head_share"])) == ("2", pytest.approx(0.75))
    lm = api.open_model(shipped_starter)
    stats = feature_stats(lm.model, lm.tokenizer, sae, "task:induction", n_prompts=8, seq_len=32, top_k=3,
                          batch_size=4)  # fmt: skip
    promoted = feature_logits(lm.model, sae, None, k=3).tokens(lm.tokenizer)
    np.testing.assert_allclose([float(r["frequency"]) for r in rows], stats.frequency, rtol=1e-5)
    np.testing.assert_allclose([float(r["max_activation"]) for r in rows], stats.max_activation, rtol=1e-5)
    for i, row in enumerate(rows):
        assert row["promoted"] == " ".join(visible(s) for s in promoted[i])
        fired = stats.fired[i] > 0
        assert (
            (row["top_example"] == stats.example_text(i, 0, lm.tokenizer))
            if fired
            else not row["top_example"]
        )
        assert ("⟦" in row["top_example"]) == fired


def test_an_sae_off_z_has_no_head_columns(shipped_starter, tmp_path, capsys):
    folder = write_saelens_folder(hand_sae(Site("resid_pre", 1)), tmp_path / "sae")
    out = tmp_path / "feats.csv"
    args = ["--corpus", "task:induction", "--prompts", "4", "--seq-len", "16", "--out", str(out)]
    assert main(_features(shipped_starter, folder, *args)) == 0
    assert "residual stream, layer 1" in capsys.readouterr().out
    header = out.read_text(encoding="utf-8").splitlines()[0].split(",")
    assert "promoted" in header and "dominant_head" not in header


@pytest.mark.parametrize(
    "args, says",
    [
        (["--top", "0"], "--top 0"),
        (["--prompts", "0"], "--prompts 0"),
        (["--seq-len", "65"], "the model's context is 64 tokens"),
        (["--out", "x.txt"], "write a .csv"),
        (["--sae", "no-such-folder"], "--sae no-such-folder: not a folder"),
    ],
)
def test_bad_input_is_one_line(shipped_starter, tmp_path, monkeypatch, capsys, args, says):
    monkeypatch.chdir(tmp_path)
    folder = write_saelens_folder(hand_sae(), tmp_path / "sae")
    assert main([*_features(shipped_starter, folder), *args]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1, err
