"""Opening a model with its matrices kept as the file stores them: when, how large, how decoded.

Shared by the GGUF loader (quantized blocks, :mod:`model.io.gguf.stored`) and the safetensors one
(float16 / bfloat16 matrices, :func:`model.io.weights.safetensors_source`): every 2-D weight becomes a
:class:`~model.nn.quantized.StoredMatrix` over a copy-on-write mapping of the file, decoded to float32
one layer at a time as it is used, and the rest (norms, biases) is read into float32.

* :func:`keeps_stored_by_default`: a model opens so, unless told, when its float32 weights pass
  :data:`STORED_ABOVE` or would not fit the memory left; a small one is widened once and runs at full
  speed (decoding per call would slow every generated token);
* :func:`float_decoder`: the decoding of a float type's raw rows (F32 as is, F16 widened, BF16 as the
  high 16 bits of a float32, exact);
* :func:`stored_plan_need`: what holding a model so takes, for :func:`model.budget.sizing.check`.
"""

from __future__ import annotations

import numpy as np
import torch

from model.budget.sizing import Need, load_need, stored_load_need, usable_bytes
from model.config import GPTConfig
from model.nn.quantized import CHUNK_VALUES, WORKING_BYTES, Decoder

__all__ = ["STORED_ABOVE", "float_decoder", "keeps_stored_by_default", "stored_plan_need"]

#: Float32 weights (bytes) past which a model opens with its matrices kept as stored by default: 1 GiB,
#: about 270M parameters. SmolLM2-135M (0.5 GB in float32) is widened once and runs at full speed; a
#: 1B model (4.5 GB in float32, 0.7 GB as Q4, 2.2 GB as bfloat16) stays near its file's size.
STORED_ABOVE = 1 << 30


def keeps_stored_by_default(
    cfg: GPTConfig, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32
) -> bool:
    """Whether a model of ``cfg`` opened on ``device`` in ``dtype`` keeps its matrices as stored when not
    told: only on the CPU in float32, when its float32 weights ``4·N`` pass :data:`STORED_ABOVE` or
    opening it in float32 would not fit the memory left."""
    if torch.device(device).type != "cpu" or dtype != torch.float32:
        return False
    need = load_need(cfg)  # its "weights" part: 4·N bytes of float32
    return need.parts.get("weights", 0) > STORED_ABOVE or need.total > usable_bytes()


def float_decoder(kind: str) -> Decoder | None:
    """``raw`` [n, row_bytes] uint8 → float32 [n, cols] for a float type (``"F32"``, ``"F16"``,
    ``"BF16"``), None for any other."""
    if kind == "F32":  # the mapped bytes themselves: no copy
        return lambda raw: torch.from_numpy(raw.view(np.float32))
    if kind == "F16":
        return lambda raw: torch.from_numpy(raw.view(np.float16)).float()
    if kind == "BF16":  # bfloat16 is the top half of a float32: widened exactly
        return lambda raw: torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16).float()
    return None


def stored_plan_need(
    cfg: GPTConfig, matrices: list[tuple[int, int, int]], float_values: int, *, what: str
) -> Need:
    """What holding a model of ``cfg`` takes with ``matrices`` [(values, stored bytes, columns)] kept as
    stored and ``float_values`` read into float32: the stored bytes (they count in the process's memory
    once touched), the float32 tensors, and one matrix decoded to float32 while a layer uses it (whole,
    or by blocks of :data:`~model.nn.quantized.WORKING_BYTES`) with the decoder's chunk in flight."""
    largest = max((n for n, _, _ in matrices), default=0)
    widest = max((c for _, _, c in matrices), default=0)
    working = min(4 * largest, WORKING_BYTES + 4 * widest) + 4 * 4 * CHUNK_VALUES if matrices else 0
    return stored_load_need(
        cfg,
        stored_bytes=sum(b for _, b, _ in matrices),
        float_values=float_values,
        working_bytes=working,
        what=what,
    )
