"""Decoding a GGUF tensor's stored rows to float32 in torch, for the matrices kept as stored.

``gguf.quants.dequantize`` (ggml-org's numpy code) is the reference, and the decoder of every type
without an entry here. It runs in small groups of rows on one core: about 50M values a second here, so
a 135M model decoded layer by layer spent most of each forward pass in it. The types most files use
are transcribed below op for op into torch (the same float32 products and sums in the same order,
so the same bits: ``tests/model/test_gguf_stored.py`` holds each equal to ``gguf.quants.dequantize``),
which runs 3 to 7 times faster. Per block (little-endian; ``d``, ``m``, ``dmin`` float16; ggml-common.h):

==========  ======  ==========================================================================
type        bytes   values
==========  ======  ==========================================================================
``Q8_0``    34      ``d``, 32 × int8 ``q``: ``x = q·d``
``Q4_0``    18      ``d``, 16 bytes of 4-bit ``q`` (low nibbles are values 0-15, high 16-31):
                    ``x = d·(q − 8)``
``Q4_1``    20      ``d``, ``m``, 16 bytes of 4-bit ``q``: ``x = d·q + m``
``Q4_K``    144     ``d``, ``dmin``, 12 bytes of eight 6-bit scales ``s_j`` and mins ``m_j``, 128
                    bytes of 4-bit ``q`` (per 64 values: 32 low nibbles, then 32 high):
                    ``x = (d·s_j)·q − dmin·m_j`` for sub-block ``j`` of 32 values
``Q6_K``    210     128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 int8 scales ``s_j``,
                    ``d``: ``q`` = low | high << 4 (0..63), ``x = (d·s_j)·(q − 32)`` per 16 values
``MXFP4``   17      an E8M0 exponent ``e`` (no sign, no mantissa), 16 bytes of 4-bit E2M1 codes ``q``
                    (low nibbles values 0-15, high 16-31; gpt-oss's experts): ``x = d·k[q]`` with
                    ``k`` = (0, 1, 2, 3, 4, 6, 8, 12, 0, −1, …, −12) the doubled E2M1 values and
                    ``d = 2^(e − 128)`` (half of E8M0's ``2^(e − 127)``), as float32 bits: ``(e − 1) << 23``,
                    or ``0x00200000 << e`` below e = 2 (subnormal)
==========  ======  ==========================================================================

Each decoder takes ``raw`` [n, row_bytes] uint8 (whole stored rows) and returns float32 [n, cols].
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

__all__ = ["TORCH_DECODED", "torch_decoder"]


def _f16(b: torch.Tensor) -> torch.Tensor:
    """Bytes [n, 2] as the float16 they hold, widened to float32 [n, 1]."""
    return b.contiguous().view(torch.float16).float()


def _nibbles(qs: torch.Tensor) -> torch.Tensor:
    """Bytes [..., k] → their 4-bit halves [..., 2, k]: low nibbles, then high."""
    return torch.stack([qs & 0x0F, qs >> 4], dim=-2)


def _q8_0(b: torch.Tensor) -> torch.Tensor:
    return b[:, 2:].contiguous().view(torch.int8).float() * _f16(b[:, :2])


def _q4_0(b: torch.Tensor) -> torch.Tensor:
    q = _nibbles(b[:, 2:]).reshape(len(b), 32).to(torch.int8) - 8
    return _f16(b[:, :2]) * q.float()


def _q4_1(b: torch.Tensor) -> torch.Tensor:
    q = _nibbles(b[:, 4:]).reshape(len(b), 32).float()
    return (_f16(b[:, :2]) * q) + _f16(b[:, 2:4])


def _q4_k(b: torch.Tensor) -> torch.Tensor:
    n = len(b)
    d, dmin = _f16(b[:, :2]), _f16(b[:, 2:4])
    s = b[:, 4:16].reshape(n, 3, 4)
    lo, hi, mix = s[:, 0], s[:, 1], s[:, 2]  # the 6-bit scales and mins, packed as ggml packs them
    sc = torch.cat([lo & 0x3F, (mix & 0x0F) | ((lo >> 2) & 0x30)], dim=-1)
    mn = torch.cat([hi & 0x3F, (mix >> 4) | ((hi >> 2) & 0x30)], dim=-1)
    scale = (d * sc.float()).reshape(n, 8, 1)
    low = (dmin * mn.float()).reshape(n, 8, 1)
    q = _nibbles(b[:, 16:].reshape(n, 4, 32)).reshape(n, 8, 32).float()
    return (scale * q - low).reshape(n, 256)


def _q6_k(b: torch.Tensor) -> torch.Tensor:
    n = len(b)
    ql = _nibbles(b[:, :128].reshape(n, 2, 64)).reshape(n, 8, 32)
    qh_bytes = b[:, 128:192].reshape(n, 2, 1, 32)
    qh = torch.cat([(qh_bytes >> k) & 0x03 for k in (0, 2, 4, 6)], dim=2).reshape(n, 8, 32)
    q = ((ql | (qh << 4)).to(torch.int8) - 32).reshape(n, 16, 16).float()
    scale = (_f16(b[:, 208:210]) * b[:, 192:208].contiguous().view(torch.int8).float()).reshape(n, 16, 1)
    return (scale * q).reshape(n, 256)


#: MXFP4's doubled E2M1 values, by 4-bit code.
_E2M1 = torch.tensor([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=torch.float32)


def _mxfp4(b: torch.Tensor) -> torch.Tensor:
    e = b[:, :1].to(torch.int32)
    bits = torch.where(e < 2, torch.tensor(0x00200000, dtype=torch.int32) << e, (e - 1) << 23)
    q = _nibbles(b[:, 1:]).reshape(len(b), 32).long()
    return bits.view(torch.float32) * _E2M1[q]


#: ggml type number -> (bytes per block, the block's decoding [blocks, bytes] → [blocks, values]).
TORCH_DECODED: dict[int, tuple[int, Callable[[torch.Tensor], torch.Tensor]]] = {
    8: (34, _q8_0),
    2: (18, _q4_0),
    3: (20, _q4_1),
    12: (144, _q4_k),
    14: (210, _q6_k),
    39: (17, _mxfp4),
}


def torch_decoder(ggml_type: int) -> Callable[[np.ndarray], torch.Tensor] | None:
    """The torch decoding of ``ggml_type``'s rows, or None when it has none here."""
    entry = TORCH_DECODED.get(ggml_type)
    if entry is None:
        return None
    size, blocks = entry

    def decode(raw: np.ndarray) -> torch.Tensor:
        b = torch.from_numpy(raw)
        n = b.shape[0]
        return blocks(b.reshape(-1, size)).reshape(n, -1)

    return decode
