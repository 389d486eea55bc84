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
    from model.nn.gpt import init_model

    cfg = GPTConfig(n_layers=2, d_model=32, n_heads=4, context_length=96, **shape).with_vocab(64)
    model = init_model(cfg, seed=3)
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


class _Ids:
    special_ids = ()

    def token_strings(self, ids):
        return [f"t{i}" for i in ids]


@pytest.mark.parametrize(
    "how",
    [
        dict(),
        dict(compress=True),
        dict(float16=True, kinds=("pattern", "resid_pre", "resid_mid", "resid_post"), layers=[0, 2]),
        dict(behind=4096),
        dict(behind=4096, float16=True),
    ],
)
def test_the_file_written_as_it_is_computed_is_np_savez_of_the_arrays(tmp_path, monkeypatch, how):
    """``write_inspection`` writes each layer's squares at their place in the file as the forward
    pass makes them: ``np.load`` reads it exactly as ``np.savez`` of the arrays in memory (the same
    keys, dtypes, shapes and values; every CRC right), and no temporary file is left beside it.
    ``behind``: written behind by the writer thread (as a file of gigabytes is), 4 KiB waiting at
    most, so the layers wait on it: the same file, and the thread gone after."""
    import threading
    import zipfile

    import model.interp.inspection as inspection
    from model.config import GPTConfig
    from model.interp.inspection import export_arrays, write_inspection
    from model.nn.gpt import init_model

    behind = how.pop("behind", 0)
    if behind:
        monkeypatch.setattr(inspection, "write_ahead", lambda file_bytes: behind)

    cfg = GPTConfig(n_layers=3, d_model=32, n_heads=4, context_length=64, attn_sinks=True).with_vocab(300)
    model = init_model(cfg, seed=5)
    ids = [(7 * i + 3) % 300 for i in range(41)]
    compress = how.pop("compress", False)
    extra = {"dropped": np.array(2), "positions": np.arange(2, 43, dtype=np.int64)}
    path = write_inspection(model, _Ids(), ids, tmp_path / "streamed", compress=compress, extra=extra, **how)
    assert path == tmp_path / "streamed.npz" and [p.name for p in tmp_path.iterdir()] == ["streamed.npz"]
    np.savez(tmp_path / "held.npz", **export_arrays(model, _Ids(), ids, **how), **extra)
    with np.load(path, allow_pickle=False) as got, np.load(tmp_path / "held.npz", allow_pickle=False) as want:
        assert sorted(got.files) == sorted(want.files)
        for key in want.files:
            assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape, key
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
        method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
        assert {i.compress_type for i in z.infolist()} == {method}
    assert not [t for t in threading.enumerate() if t.name == "npz write-behind"]


@pytest.mark.parametrize("when", ["forward", "assembly"])
def test_a_write_stopped_on_the_way_removes_every_temporary_and_keeps_the_old_file(
    tmp_path, monkeypatch, when
):
    """Interrupted during the forward pass (Ctrl+C, a cancelled job) or failing on the way (a full
    disk): the half-written file is gone, the old file whole."""
    import errno

    from model.atomic import WriteError
    from model.config import GPTConfig
    from model.interp.inspection import write_inspection
    from model.interp.npzfile import NpzWriter
    from model.nn.gpt import init_model

    model = init_model(
        GPTConfig(n_layers=3, d_model=32, n_heads=4, context_length=64).with_vocab(256), seed=0
    )
    old = tmp_path / "att.npz"
    old.write_bytes(b"the user's earlier export")
    if when == "forward":
        model.blocks[2].register_forward_hook(lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
        expected: type[BaseException] = KeyboardInterrupt
    else:

        def full(npz, key, array):
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(NpzWriter, "add", full)
        expected = WriteError
    with pytest.raises(expected):
        write_inspection(model, _Ids(), list(range(30)), old)
    assert [p.name for p in tmp_path.iterdir()] == [
        "att.npz"
    ] and old.read_bytes() == b"the user's earlier export"


def test_a_full_disk_met_by_the_writer_thread_stops_the_export_and_keeps_the_old_file(tmp_path, monkeypatch):
    """Written behind, a write that fails in the writer thread (a full disk) is raised in the caller
    at its next write or at the end: the export stops with one line, the half-written file is gone,
    the old file whole, the thread ended."""
    import errno
    import threading

    import model.interp.inspection as inspection
    import model.interp.npzfile as npzfile
    from model.atomic import WriteError
    from model.config import GPTConfig
    from model.interp.inspection import write_inspection
    from model.nn.gpt import init_model

    model = init_model(
        GPTConfig(n_layers=3, d_model=32, n_heads=4, context_length=64).with_vocab(256), seed=0
    )
    old = tmp_path / "att.npz"
    old.write_bytes(b"the user's earlier export")
    monkeypatch.setattr(inspection, "write_ahead", lambda file_bytes: 4096)
    written = []
    real = npzfile.os.pwrite

    def pwrite(fd, data, at):
        if threading.current_thread().name != "npz write-behind":
            return real(fd, data, at)  # the local headers, written by the caller at the end
        written.append(len(data))
        if sum(written) > 20_000:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data, at)

    monkeypatch.setattr(npzfile.os, "pwrite", pwrite)
    with pytest.raises(WriteError, match="No space left"):
        write_inspection(model, _Ids(), list(range(30)), old)
    assert [p.name for p in tmp_path.iterdir()] == ["att.npz"]
    assert old.read_bytes() == b"the user's earlier export"
    assert not [t for t in threading.enumerate() if t.name == "npz write-behind"]
