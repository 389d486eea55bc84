"""One head's matrix as CSV (``model.interp.export``): what the Attention tab's "Save as CSV" writes."""

from __future__ import annotations

import numpy as np
import pytest


def test_head_csv_round_trips_with_awkward_token_labels(tmp_path):
    from model.interp.export import read_head_csv, write_head_csv

    labels = [",", '"', "␣", "⏎", "a"]
    m = np.random.default_rng(2).random((5, 5))
    path = write_head_csv(tmp_path / "h", m, labels)
    assert path.suffix == ".csv"
    rows, cols, back = read_head_csv(path)
    assert rows == cols == [f"{i}:{s}" for i, s in enumerate(labels)]
    np.testing.assert_allclose(back, m, rtol=1e-7)
    with pytest.raises(ValueError):
        write_head_csv(tmp_path / "bad.csv", m, labels[:3])
    assert [p.name for p in tmp_path.iterdir()] == ["h.csv"]  # nothing half-written left behind


def test_write_matrix_csv_labels_rows_and_columns_and_refuses_a_misfit(tmp_path):
    import csv

    from model.interp.export import write_matrix_csv

    m = np.array([[0.5, np.nan, -1.25], [1e-9, 2.0, 3.0]])
    p = write_matrix_csv(tmp_path / "m", m, ["L0", "L1"], ["H0", "H1", "H2"], corner="layer \\ head")
    assert p.name == "m.csv"
    with open(p, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["layer \\ head", "H0", "H1", "H2"] and [r[0] for r in rows[1:]] == ["L0", "L1"]
    np.testing.assert_array_equal(np.array([[float(v) for v in r[1:]] for r in rows[1:]]), m)
    with pytest.raises(ValueError, match="does not fit 2 row and 2 column labels"):
        write_matrix_csv(tmp_path / "bad.csv", m, ["L0", "L1"], ["H0", "H1"])
