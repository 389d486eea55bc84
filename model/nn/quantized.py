"""Weight matrices kept as the file stores them (quantized blocks, float16, bfloat16), made float32 on use.

A model opened from a quantized file need not hold its weights in float32: a 7B model is 28 GB that way
and 4 GB as Q4_K. A :class:`StoredMatrix` keeps a matrix ``W`` [rows, cols] as the file's bytes, a
memory-mapped view (no copy), and decodes rows of it to float32 when asked, a chunk of rows at a time
(the decoding is the file format's, given by whoever opened the file: :mod:`model.io.gguf.file`):

* :class:`StoredLinear` replaces an ``nn.Linear``: ``y = x Wᵀ + b``, ``x`` [..., cols] → ``y``
  [..., rows], with ``W`` decoded to float32 for this call only (one layer at a time), by blocks of
  output rows when ``W`` in float32 would pass :data:`WORKING_BYTES` (an untied head [V, d]);
* :class:`StoredEmbedding` replaces the token ``nn.Embedding``: ``E[idx]`` decodes only the rows
  looked up ([B, T] → [B, T, d]); :meth:`StoredEmbedding.unembed` is the tied head ``x Eᵀ`` [..., V],
  by blocks of vocabulary rows, so the float32 [V, d] is never held at once.

Both keep the interface of what they replace for the code that reads weights (circuits, attribution,
logit lens, exports): ``.weight`` is the whole matrix decoded to float32, made on each access (read it
once per use); ``state_dict()`` holds it as ``weight`` too, so a saved checkpoint or a copy of the
model is an ordinary float32 one. Stored bytes are never written: the mapping is copy-on-write.

Training needs float weights to update: :func:`dequantize_stored` replaces every stored module with
the float32 ``nn.Linear`` / ``nn.Embedding`` it stands for (the trainer does so before it starts).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = [
    "CHUNK_VALUES",
    "WORKING_BYTES",
    "StoredEmbedding",
    "StoredLinear",
    "StoredMatrix",
    "dequantize_stored",
    "has_stored",
    "install_stored",
    "stored_bytes",
    "stored_numel",
]

#: Values decoded in one go (2 MiB of float32): bounds the decoder's own temporaries (a Q4_K chunk
#: makes a few float32 arrays of its size).
CHUNK_VALUES = 1 << 19

#: Largest float32 matrix a layer decodes whole for one product (16 MiB: a 1B model's attention
#: matrix); a larger one (its MLP matrices, a head [V, d]) is multiplied by blocks of output rows of
#: about this size. At 64 MiB a 1B Q4_K model's open and 256-token inspect peaked 1.34× its file.
WORKING_BYTES = 16 << 20

#: ``decode(raw rows) -> float32 [n, cols]``: the file format's decoding of ``n`` whole stored rows.
Decoder = Callable[[np.ndarray], "np.ndarray | torch.Tensor"]


class StoredMatrix:
    """A matrix ``W`` [rows, cols] as stored: ``raw`` [R, row_bytes] (one stored row per row of ``W``,
    a view of the mapped file), its ``decode`` to float32, its type's name (``kind``, e.g. ``"Q4_K"``),
    and ``order``: row ``i`` of ``W`` is stored row ``order[i]`` (None: row ``i``), e.g. a row
    permutation the file's writer made. Read-only: nothing here writes the bytes."""

    def __init__(
        self, raw: np.ndarray, cols: int, decode: Decoder, kind: str, order: np.ndarray | None = None
    ):
        if raw.ndim != 2:
            raise ValueError(f"stored rows must be a 2-D array of bytes, not {raw.ndim}-D")
        self.raw, self.cols, self.decode, self.kind, self.order = raw, int(cols), decode, kind, order
        self.rows = len(order) if order is not None else raw.shape[0]

    # ---- what it is --------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    def numel(self) -> int:
        return self.rows * self.cols

    @property
    def nbytes(self) -> int:
        """Bytes of the stored rows this matrix reads (its share of the file)."""
        return self.rows * self.raw.shape[1]

    def __repr__(self) -> str:
        return f"StoredMatrix({self.kind}, [{self.rows}, {self.cols}])"

    def __deepcopy__(self, memo: dict) -> StoredMatrix:
        return self  # read-only: a copied model shares the mapped bytes (a copy would read them all)

    # ---- rows of it --------------------------------------------------------------------------
    def row_block(self, start: int, stop: int) -> StoredMatrix:
        """Rows ``start..stop-1`` of ``W`` as a matrix of their own (a view: nothing read)."""
        if self.order is None:
            return StoredMatrix(self.raw[start:stop], self.cols, self.decode, self.kind)
        return StoredMatrix(self.raw, self.cols, self.decode, self.kind, self.order[start:stop])

    def reordered(self, rows: Sequence[int]) -> StoredMatrix:
        """``W[rows]`` [len(rows), cols]: its row ``i`` is row ``rows[i]`` of ``W`` (a view: nothing read),
        e.g. rows a file's writer permuted, put back in the order the model computes with."""
        at = np.asarray(rows, dtype=np.int64)
        return StoredMatrix(
            self.raw, self.cols, self.decode, self.kind, at if self.order is None else self.order[at]
        )

    def _decode(self, raw: np.ndarray) -> torch.Tensor:
        out = self.decode(np.asarray(raw))
        if not isinstance(out, torch.Tensor):
            out = torch.from_numpy(np.ascontiguousarray(out, dtype=np.float32))
        return out.reshape(len(raw), self.cols)

    def _chunk(self) -> int:
        return max(1, CHUNK_VALUES // max(1, self.cols))

    def rows_at(self, ids: np.ndarray) -> torch.Tensor:
        """Rows ``ids`` [n] of ``W`` in float32 [n, cols]: only those rows are read and decoded."""
        where = self.order[ids] if self.order is not None else ids
        step = self._chunk()
        if len(where) <= step:
            return self._decode(self.raw[where])
        return torch.cat([self._decode(self.raw[where[a : a + step]]) for a in range(0, len(where), step)])

    def dequantize(self, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """Rows ``start..stop-1`` of ``W`` (all by default) in float32 [stop - start, cols], decoded a
        chunk of :data:`CHUNK_VALUES` values at a time into one tensor."""
        stop = self.rows if stop is None else stop
        n, step = stop - start, self._chunk()
        if self.order is None and n <= step:
            return self._decode(self.raw[start:stop])
        out = torch.empty(n, self.cols, dtype=torch.float32)
        for a in range(start, stop, step):
            b = min(a + step, stop)
            rows = self.raw[a:b] if self.order is None else self.raw[self.order[a:b]]
            out[a - start : b - start] = self._decode(rows)
        return out

    def linear(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        """``x Wᵀ + b``: ``x`` [..., cols] → [..., rows], ``W`` decoded for this product only, in blocks
        of output rows when it is larger than :data:`WORKING_BYTES` in float32."""
        step = max(1, WORKING_BYTES // (4 * max(1, self.cols)))

        def part(a: int, b: int) -> torch.Tensor:
            return self.dequantize(a, b).to(device=x.device, dtype=x.dtype)

        if self.rows <= step:
            y = F.linear(x, part(0, self.rows))
        else:
            y = torch.cat(
                [F.linear(x, part(a, min(a + step, self.rows))) for a in range(0, self.rows, step)], -1
            )
        return y if bias is None else y + bias.to(dtype=y.dtype)


class StoredLinear(nn.Module):
    """``nn.Linear`` whose ``W`` [out_features, in_features] is a :class:`StoredMatrix`: ``y = x Wᵀ + b``,
    ``x`` [..., in] → [..., out], ``W`` made float32 for each call; ``bias`` [out] is a float parameter."""

    def __init__(self, stored: StoredMatrix, bias: nn.Parameter | None = None):
        super().__init__()
        self.stored = stored
        self.out_features, self.in_features = stored.shape
        self.bias = bias

    @property
    def weight(self) -> torch.Tensor:
        """``W`` [out, in] decoded to float32 (made on each access)."""
        return self.stored.dequantize()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stored.linear(x, self.bias)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "weight"] = self.weight
        super()._save_to_state_dict(destination, prefix, keep_vars)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, stored={self.stored.kind}"


class StoredEmbedding(nn.Module):
    """The token table ``E`` [V, d] as a :class:`StoredMatrix`: ``forward(idx)`` = ``E[idx]``, [B, T] →
    [B, T, d], decoding only the distinct ids looked up; :meth:`unembed` ``x Eᵀ``: [..., d] → [..., V]."""

    def __init__(self, stored: StoredMatrix):
        super().__init__()
        self.stored = stored
        self.num_embeddings, self.embedding_dim = stored.shape

    @property
    def weight(self) -> torch.Tensor:
        """``E`` [V, d] decoded to float32 (made on each access)."""
        return self.stored.dequantize()

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        flat = idx.reshape(-1).cpu()
        if flat.numel() and (int(flat.min()) < 0 or int(flat.max()) >= self.num_embeddings):
            raise IndexError(f"index out of range in self (ids must be 0..{self.num_embeddings - 1})")
        ids, inverse = torch.unique(flat, return_inverse=True)
        rows = self.stored.rows_at(ids.numpy())  # [n, d]
        return rows[inverse].reshape(*idx.shape, self.embedding_dim).to(idx.device)

    def unembed(self, x: torch.Tensor) -> torch.Tensor:
        """The tied head ``x Eᵀ``: [..., d] → [..., V], by blocks of vocabulary rows."""
        return self.stored.linear(x)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "weight"] = self.weight

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.embedding_dim}, stored={self.stored.kind}"


Stored = StoredLinear | StoredEmbedding


def _stored_modules(model: nn.Module) -> list[tuple[str, Stored]]:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, StoredLinear | StoredEmbedding)]


def has_stored(model: nn.Module) -> bool:
    """Whether ``model`` holds any weight as stored."""
    return bool(_stored_modules(model))


def stored_numel(model: nn.Module) -> int:
    """Values of the matrices ``model`` holds as stored (not among its parameters)."""
    return sum(m.stored.numel() for _, m in _stored_modules(model))


def stored_bytes(model: nn.Module) -> int:
    """Bytes of the file those matrices read (mapped, not copied)."""
    return sum(m.stored.nbytes for _, m in _stored_modules(model))


def _parent(model: nn.Module, path: str) -> tuple[nn.Module, str]:
    head, _, attr = path.rpartition(".")
    return (model.get_submodule(head) if head else model), attr


def install_stored(model: nn.Module, stored: dict[str, StoredMatrix]) -> None:
    """Replace the module of each ``"<module>.weight"`` of ``stored`` (an ``nn.Linear`` or the
    ``nn.Embedding`` of the tokens) by its stored form, keeping a Linear's bias parameter."""
    for name, matrix in stored.items():
        path, _, kind = name.rpartition(".")
        parent, attr = _parent(model, path)
        old = getattr(parent, attr, None)
        if kind != "weight" or not isinstance(old, nn.Linear | nn.Embedding) or old.weight.ndim != 2:
            raise ValueError(f"{name} is not the weight of a linear layer or of an embedding")
        if tuple(old.weight.shape) != matrix.shape:
            raise ValueError(f"{name} is {list(old.weight.shape)} but the stored matrix {list(matrix.shape)}")
        if type(old) is nn.Embedding:
            new: nn.Module = StoredEmbedding(matrix)
        elif isinstance(old, nn.Linear):
            new = StoredLinear(matrix, old.bias)
        else:
            raise ValueError(f"{name} is an embedding of another kind ({type(old).__name__}): not stored")
        setattr(parent, attr, new)


def dequantize_stored(model: nn.Module) -> int:
    """Replace every stored module of ``model`` by the float32 ``nn.Linear`` / ``nn.Embedding`` it
    stands for, in place (on the device of the model's parameters); returns how many."""
    done = _stored_modules(model)
    device = next(iter(model.parameters()), torch.empty(0)).device
    for name, m in done:
        parent, attr = _parent(model, name)
        rows, cols = m.stored.shape
        with torch.device("meta"):
            new = (
                nn.Embedding(rows, cols)
                if isinstance(m, StoredEmbedding)
                else nn.Linear(cols, rows, bias=False)
            )
        new.weight = nn.Parameter(m.stored.dequantize().to(device))
        if isinstance(m, StoredLinear) and m.bias is not None:
            new.bias = m.bias
        setattr(parent, attr, new)
    return len(done)
