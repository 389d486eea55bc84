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


@pytest.mark.parametrize(
    "shape",
    [
        dict(n_kv_heads=2, positions="rope", norm="rmsnorm", window_pattern="LG", sliding_window=16),
        dict(attn_softcap=5.0, attn_sinks=True, attn_scale="qk_norm"),
    ],
)
def test_a_streamed_export_recomputes_every_head_and_pools_it(shape):
    """The streamed form (``attention-lab inspect`` past what every head's [T, T] may take) holds no
    [T, T] array, yet its queries and keys give back each head's weights as the model computes them,
    and its overviews are the max and the mean of each block of them."""
    import torch

    from model.config import GPTConfig
    from model.interp.export import streamed_arrays, streamed_head
    from model.interp.pooling import pool_max
    from model.interp.trace import run_with_trace
    from model.nn.gpt import build_model

    cfg = GPTConfig(n_layers=2, d_model=32, n_heads=4, context_length=96, **shape).with_vocab(64)
    model = build_model(cfg, seed=3)
    with torch.no_grad():  # weights far enough from uniform that a wrong mask or scale shows
        for p in model.parameters():
            p.mul_(4.0)
    ids = [int(i) for i in torch.randint(0, 64, (90,), generator=torch.Generator().manual_seed(1))]
    held = torch.stack([run_with_trace(model, ids, kinds=["pattern"])["pattern", i][0] for i in range(2)])
    held = held.numpy()
    b = 8
    data = streamed_arrays(model, ids, [str(i) for i in ids], b)
    assert not any(a.ndim >= 2 and a.shape[-2:] == (90, 90) for a in data.values())
    for layer in range(2):
        for head in range(4):
            np.testing.assert_allclose(streamed_head(data, layer, head), held[layer, head], atol=2e-6)
    np.testing.assert_allclose(data["overview"], pool_max(held, b), atol=2e-6)
    S = -(-90 // b)
    padded = np.zeros((2, 4, S * b, S * b))
    padded[..., :90, :90] = held
    sums = padded.reshape(2, 4, S, b, S, b).sum((3, 5))
    sides = np.minimum(b, 90 - b * np.arange(S))
    np.testing.assert_allclose(data["overview_mean"], sums / np.outer(sides, sides), atol=2e-6)
    with torch.no_grad():
        np.testing.assert_allclose(data["logits_last"], model(torch.tensor([ids]))[0][0, -1], atol=1e-4)
