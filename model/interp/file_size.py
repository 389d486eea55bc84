"""Bytes of an inspection file (``model.interp.export``) before it is written: what ``attention-lab
inspect`` holds against the free disk of its folder (:func:`model.interp.plan.plan_file_export`).
Arithmetic on a config only, no torch."""

from __future__ import annotations

from model.budget.sizing import size_or_zero
from model.config import GPTConfig
from model.errors import AttentionLabError
from model.interp.pooling import block_size

#: Bytes written at a time into an .npz (``model.interp.npzfile``): a piece of a row, of the logits.
COPY_CHUNK = 2**20
#: Bytes of logits [rows, V] unembedded at a time into an .npz written as it is computed: each block
#: reads the whole unembedding, so small blocks are slow (64 rows of Gemma 3's 262,144 took 1.5x the
#: time of one [1024, V] product here, 256 rows 1.1x).
LOGITS_BLOCK = 256 * 2**20
#: Bytes an .npz written as it is computed may hold waiting for its writer thread
#: (:class:`model.interp.npzfile.WriteBehind`): a block of logits, or the pieces of layers made ahead.
WRITE_AHEAD = LOGITS_BLOCK


def write_ahead(file_bytes: int) -> int:
    """Bytes written behind for an .npz of ``file_bytes`` (:class:`model.interp.npzfile.WriteBehind`):
    :data:`WRITE_AHEAD` for a file of gigabytes, whose writing the page cache throttles to the
    disk's speed, so that computing overlaps it; 0 (written at once) for a smaller one, which the
    page cache takes as fast as it comes."""
    return WRITE_AHEAD if file_bytes >= 4 * WRITE_AHEAD else 0


class DiskTooSmall(AttentionLabError, ValueError):
    """An export whose file does not fit on its disk: one line with the numbers."""


def export_file_bytes(cfg: GPTConfig, seq_len: int, *, squares: int, float16: bool = False) -> int:
    """Bytes of the held .npz of ``seq_len`` tokens with ``squares`` square kinds [L, H, T, T]:
    ``L·H·T²·b`` each (``b`` = 2 in float16, else 4), the logits ``4·T·V``, the mask ``T²``, the
    residual norms ``4·(2L + 1)·T``, and the tokens (16 characters each, ``64·T``)."""
    L, H, V = (size_or_zero(v) for v in (cfg.core.n_layers, cfg.attention.n_heads, cfg.core.vocab_size))
    T = max(1, size_or_zero(seq_len))
    return squares * L * H * T * T * (2 if float16 else 4) + 4 * T * V + T * T + 4 * (2 * L + 1) * T + 64 * T


def streamed_file_bytes(cfg: GPTConfig, seq_len: int) -> int:
    """Bytes of the streamed .npz of ``seq_len`` tokens: the queries and keys ``4·L·T·(H + H_kv)·d_k``,
    the two overviews ``8·L·H·S²`` (``S = ceil(T / block)``, :func:`~model.interp.pooling.block_size`),
    the final stream ``4·T·d``, the last logits ``4·V`` and the tokens ``64·T``."""
    L, H, d, d_k, V = (
        size_or_zero(v)
        for v in (cfg.core.n_layers, cfg.attention.n_heads, cfg.core.d_model, cfg.d_head, cfg.core.vocab_size)
    )
    T = max(1, size_or_zero(seq_len))
    S = -(-T // block_size(T, L * H))
    return 4 * L * T * (H + size_or_zero(cfg.kv_heads)) * d_k + 8 * L * H * S * S + 4 * T * d + 4 * V + 64 * T


__all__ = ["DiskTooSmall", "export_file_bytes", "streamed_file_bytes"]
