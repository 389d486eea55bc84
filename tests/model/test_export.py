"""One head's matrix as CSV (``model.export``): what the Attention tab's "Save as CSV" writes."""

from __future__ import annotations

import numpy as np
import pytest


def test_head_csv_round_trips_with_awkward_token_labels(tmp_path):
    from model.export import read_head_csv, write_head_csv

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
