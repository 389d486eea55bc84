"""`attention-lab circuits`: the strongest compositions and copying heads, every score as .npz or .csv,
and user mistakes as one line + exit 2."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from app.cli import main


@pytest.fixture
def config_file(tmp_path):
    def write(**fields):
        path = tmp_path / "cfg.json"
        cfg = {"n_layers": 3, "d_model": 32, "n_heads": 4, "context_length": 32, **fields}
        path.write_text(json.dumps(cfg))
        return path

    return write


def test_the_starters_induction_circuit_is_printed_and_saved(shipped_starter, tmp_path, capsys):
    out = tmp_path / "circuits.npz"
    assert main(["circuits", "--checkpoint", str(shipped_starter), "--top", "3", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "2 layers × 4 heads, d 128, d_k 32" in text
    assert "chance: 0.0883" in text
    assert "K  L0H1 → L1H3  0.2636  3.0×" in text.splitlines()[3]  # the strongest composition first
    assert "copying heads" in text and "fold_ln" in text
    data = np.load(out)
    assert data["composition"].shape == (3, 2, 4, 2, 4) and data["copying"].shape == (2, 4)
    assert data["composition"][1, 0, 1, 1, 3] == pytest.approx(0.2636, abs=1e-4)


def test_one_kind_as_a_csv_table(config_file, tmp_path, capsys):
    out = tmp_path / "v.csv"
    argv = ["circuits", "--config", str(config_file()), "--seed", "2", "--kind", "v", "--out", str(out)]
    assert main(argv) == 0
    assert "strongest V-compositions" in capsys.readouterr().out
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 3 * 4 * 4  # (L0→L1, L0→L2, L1→L2) × 4 × 4 heads
    assert {r["kind"] for r in rows} == {"V"}
    scores = [float(r["score"]) for r in rows]
    assert scores == sorted(scores, reverse=True)
    assert all(int(r["writer_layer"]) < int(r["reader_layer"]) for r in rows)


def test_a_rope_model_says_its_offset(config_file, capsys):
    cfg = config_file(positions="rope", n_kv_heads=2, norm="rmsnorm")
    assert main(["circuits", "--config", str(cfg), "--rope-offset", "2", "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert (
        "(2 key/value heads)" in text and "RoPE: QK circuits and Q/K-composition at relative offset 2" in text
    )


@pytest.mark.parametrize(
    "extra, fields, words",
    [
        (["--top", "0"], {}, "--top 0"),
        (["--out", "scores.txt"], {}, "write a .npz or a .csv"),
        (["--kind", "X"], {}, "invalid choice"),
        (["--rope-offset", "-1"], {}, "0 or more"),
        (["--rope-offset", "99"], {"positions": "rope"}, "outside the context"),
        ([], {"norm_position": "post"}, "Post-LN"),
        ([], {"d_model": 30}, "d_model"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(config_file, capsys, extra, fields, words):
    assert main(["circuits", "--config", str(config_file(**fields)), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err and err.startswith("attention-lab circuits: error:")


def test_a_missing_checkpoint_is_one_line(tmp_path, capsys):
    assert main(["circuits", "--checkpoint", str(tmp_path / "nothing")]) == 2
    assert "\n" not in capsys.readouterr().err.strip()
