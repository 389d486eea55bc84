"""A GGUF file's matrices kept as stored: mapped from the file, decoded to float32 one layer at a time.

:func:`stored_matrices` maps the file once (copy-on-write: nothing is ever written to it) and gives each
2-D weight a :class:`~model.nn.quantized.StoredMatrix` over its bytes: a row of ``W`` [out, in] is
``in / block_size`` whole blocks (:mod:`model.io.gguf.file` checked every tensor's size against the file
before), decoded by :mod:`model.io.gguf.decode` (torch; ``gguf.quants.dequantize`` for the types it
lacks) for the quantized types and by a view for the float ones (F32 as is, F16 widened, BF16 as the
high 16 bits of a float32). Nothing is read until it is used.

:func:`stored_need` sizes the open as this plan holds the model (for :func:`model.budget.sizing.check`):
the stored bytes (they count in the process's memory once touched), the float32 tensors beside them
(norms, biases, position tables), and one matrix decoded to float32 while a layer uses it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from model.budget.sizing import Need
from model.config import GPTConfig
from model.io.gguf.decode import torch_decoder
from model.io.gguf.file import DEQUANTIZED, GGUFHeader, GGUFTensor
from model.io.stored import float_decoder, stored_plan_need
from model.nn.quantized import Decoder, StoredMatrix

__all__ = ["decoder", "keeps_stored", "stored_matrices", "stored_need"]


def decoder(ggml_type: int) -> Decoder:
    """``raw`` [n, row_bytes] uint8 → float32 [n, cols] for ggml type ``ggml_type``."""
    plain = float_decoder(DEQUANTIZED[ggml_type][0])
    if plain is not None:
        return plain
    fast = torch_decoder(ggml_type)
    if fast is not None:
        return fast
    from gguf import GGMLQuantizationType  # ggml-org's package: only once a quantized file is used
    from gguf.quants import dequantize

    qtype = GGMLQuantizationType(ggml_type)
    return lambda raw: dequantize(raw, qtype)


def keeps_stored(name: str, t: GGUFTensor) -> bool:
    """Whether tensor ``name`` stays as stored: every 2-D weight but GPT-2's position table (a small
    table that is not a linear layer) and llama's RoPE factors (read into the config)."""
    return len(t.shape) == 2 and name not in ("position_embd.weight", "rope_freqs.weight")


def stored_matrices(
    header: GGUFHeader, order: Callable[[str, int], np.ndarray | None]
) -> dict[str, StoredMatrix]:
    """GGUF name -> :class:`StoredMatrix` of each tensor :func:`keeps_stored` keeps, over one
    copy-on-write mapping of the file; ``order(name, rows)``: the row order to read it in (None: as
    stored), e.g. llama's Q and K rows put back in the order our RoPE rotates."""
    kept = {n: t for n, t in header.tensors.items() if keeps_stored(n, t)}
    if not kept:
        return {}
    mapped = np.memmap(header.path, dtype=np.uint8, mode="c")
    out = {}
    for name, t in kept.items():
        rows, cols = t.shape
        raw = mapped[t.offset : t.offset + t.nbytes].reshape(rows, t.nbytes // rows if rows else 0)
        out[name] = StoredMatrix(raw, cols, decoder(t.ggml_type), t.type_name, order(name, rows))
    return out


def stored_need(header: GGUFHeader, cfg: GPTConfig, *, what: str) -> Need:
    """What opening ``header``'s file with its matrices kept as stored takes (module docstring)."""
    kept = [(t.numel, t.nbytes, t.shape[1]) for n, t in header.tensors.items() if keeps_stored(n, t)]
    floats = sum(t.numel for n, t in header.tensors.items() if not keeps_stored(n, t))
    return stored_plan_need(cfg, kept, floats, what=what)
