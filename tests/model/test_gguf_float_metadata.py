"""A GGUF file's float32 metadata (``rms_norm_epsilon``, ``rope.freq_base``) reads as the decimal the
file's author wrote: the Model panel shows ``1e-05``, not 9.999999747378752e-06, and the value is the
same float32 the file holds."""

from __future__ import annotations

import gguf
import numpy as np
import pytest

from model.io.gguf.file import read_header, shortest_float32


@pytest.mark.parametrize("written", [1e-5, 1e-6, 10000.0, 500000.0, 0.1, 3.14159, 1.0 / 3.0])
def test_float32_metadata_reads_as_written(tmp_path, written):
    path = tmp_path / "m.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_float32("llama.attention.layer_norm_rms_epsilon", written)
    w.add_tensor("t", np.zeros(4, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    got = read_header(path).get("llama.attention.layer_norm_rms_epsilon")
    assert np.float32(got) == np.float32(written)  # the very same float32
    assert len(repr(got)) <= len(repr(float(np.float32(written))))
    if written in (1e-5, 1e-6, 10000.0, 500000.0, 0.1):
        assert got == written  # the decimal its author wrote


def test_shortest_float32_round_trips():
    for bits in np.random.default_rng(0).integers(0, 2**31 - 2**23, size=2000, dtype=np.uint32):
        f = np.array([bits], dtype=np.uint32).view(np.float32)[0]
        assert np.float32(shortest_float32(float(f))) == f
