"""A GGUF file's RoPE metadata as a Hugging Face config's fields (:mod:`model.io.gguf.load`):
``partial_rotary_factor`` from ``rope.dimension_count``, ``rope_scaling`` from ``rope.scaling.type``
(linear) or from Llama 3.1's ``rope_freqs`` tensor, which llama.cpp's converter writes in place of
``rope_scaling: llama3``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from model.io.gguf.file import GGUFHeader, read_tensor
from model.io.loaded import CheckpointError
from model.nn.layers import llama3_frequencies

__all__ = ["LLAMA3_SCALING", "llama3_scaling", "rope_hf"]


def rope_hf(
    header: GGUFHeader, arch: str, key: Callable[..., Any], base: float, head_dim: int
) -> dict[str, Any]:
    """``partial_rotary_factor`` and ``rope_scaling`` as the file's RoPE metadata sets them."""
    out: dict[str, Any] = {}
    dims = key("rope.dimension_count")
    if dims is not None and not (isinstance(dims, int) and 0 < dims <= head_dim and dims % 2 == 0):
        raise CheckpointError(  # 0 is no rotation at all, not "absent": llama.cpp reads it as written
            f"{header.path.name}: {arch}.rope.dimension_count={dims} must be an even whole number from 2 "
            f"to the head's size ({arch}.attention.key_length={head_dim}): RoPE rotates pairs of a head's "
            f"dimensions"
        )
    if dims and head_dim and dims != head_dim:
        out["partial_rotary_factor"] = dims / head_dim
    scaling = header.metadata.get(f"{arch}.rope.scaling.type")
    if "rope_freqs.weight" in header.tensors:  # Llama 3.1+: the per-frequency factors themselves
        out["rope_scaling"] = llama3_scaling(header, base, dims or head_dim)
    elif scaling not in (None, "none"):
        if scaling != "linear":
            raise CheckpointError(
                f"{header.path.name}: RoPE scaling {scaling!r} is not implemented (linear is)"
            )
        out["rope_scaling"] = {"rope_type": "linear", "factor": key("rope.scaling.factor", 1.0)}
    return out


#: Llama 3's RoPE scaling (transformers' ``rope_type: llama3``) as Meta's models set it, which
#: llama.cpp's converter writes out as the ``rope_freqs`` tensor
LLAMA3_SCALING = {"low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}


def llama3_scaling(header: GGUFHeader, base: float, rotary_dim: int) -> dict[str, Any]:
    """The ``rope_scaling`` whose factors the file's ``rope_freqs.weight`` holds.

    llama.cpp stores Llama 3.1's scaling as ``f_i`` [r/2] (each θ_i is divided by f_i): ``factor`` for
    long wavelengths, 1 for short ones and a blend between (:func:`model.nn.layers.rope_frequencies`).
    Their largest is ``factor``; the rest must be what :data:`LLAMA3_SCALING` gives with it, else
    they are refused in one line (RoPE factors of another kind are not implemented).
    """
    where = header.path.name
    t = header.tensors["rope_freqs.weight"]
    if tuple(t.shape) != (rotary_dim // 2,):
        raise CheckpointError(
            f"{where}: rope_freqs.weight has shape {list(t.shape)}, not [{rotary_dim // 2}] (half the "
            f"rotary dimensions)"
        )
    found = read_tensor(header.path, t).astype(np.float64)
    if not np.all(np.isfinite(found)) or found.min() <= 0:
        raise CheckpointError(f"{where}: rope_freqs.weight holds factors that are not positive numbers")
    factor = float(found.max())
    inv_freq = 1.0 / (base ** (torch.arange(0, rotary_dim, 2, dtype=torch.float64) / rotary_dim))
    expected = inv_freq / llama3_frequencies(inv_freq, factor, *LLAMA3_SCALING.values())
    if not np.allclose(found, expected.numpy(), rtol=1e-4):
        raise CheckpointError(
            f"{where}: rope_freqs.weight holds RoPE factors other than Llama 3's scaling (factor "
            f"{factor:g}, low/high frequency factors 1/4, original context 8192): not implemented"
        )
    return {"rope_type": "llama3", "factor": factor, **LLAMA3_SCALING}
