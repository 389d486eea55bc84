"""The inspection file format (.npz) shared by `attention-lab inspect` and the app's exports, and
one head's matrix as CSV (:func:`write_head_csv`).

Arrays (``L`` layers, ``H`` heads, ``T`` tokens, ``V`` vocabulary):

==================  ==============  ===============================================
key                 shape / dtype   meaning
==================  ==============  ===============================================
``tokens``          [T] str         each token's text
``layers``          [L] int         the layers present (all, unless the export was planned to fit)
``weights``         [L, H, T, T]    attention weights (rows sum to 1)
``scores_raw``      [L, H, T, T]    Q Kᵀ
``scores_scaled``   [L, H, T, T]    the softmax input before masking
``mask``            [T, T] bool     True where a query may attend
``resid_norms``     [P, T]          ‖residual stream‖₂ at each checkpoint
``resid_points``    [P] str         checkpoint names: embed, L0.mid, L0.post, ...
``logits``          [T, V]          next-token logits at every position
``config``          () str          the model's GPTConfig as JSON
==================  ==============  ===============================================

Written by ``attention-lab inspect`` and the Attention tab as the forward pass computes it
(:func:`model.interp.inspection.write_inspection`): each layer's [H, T, T] of each square kind goes
to a temporary file beside the output (a :class:`Spool`) while the layer is in memory, and the .npz is
assembled after the last layer (:func:`save_inspection`: a zip, ZIP64 past 4 GiB, of ``KEY.npy``
entries, byte for byte what ``np.savez`` writes), atomically, every temporary removed whatever
happens. In memory: the logits or one layer, never [L, H, T, T]; on disk: the file and one square
kind while it is copied in.

The square arrays keep the format's own names (``weights``, ``scores_scaled``: the trace keys
``pattern``, ``scores``), so files written before read the same. No pickled objects: every array is
a plain numeric, bool or unicode array, so ``np.load(path, allow_pickle=False)`` reads it.

Both forms may also say where the prompt was cut to the model's context: ``dropped`` () int, the
tokens of the text left out, and ``positions`` [T] int, each kept token's place in the whole encoded
text (counting from 0: a BOS kept in front, then the last tokens).

**Streamed** (``streamed`` () True; :func:`streamed_arrays`): when every head's [T, T] cannot be held
(L·H·T² past :data:`~model.interp.plan.HELD_LIMIT`, or the memory allowed), the file keeps what the
Attention tab keeps of a long prompt (:mod:`model.interp.streamed`), never a [T, T] array:

==================  ====================  ==================================================
``overview``        [L, H, S, S] float32  the max of each ``b × b`` block of each head's weights
``overview_mean``   [L, H, S, S] float32  the mean of each block (``S = ceil(T / b)``)
``block``           () int                ``b``
``q``               [L, H, T, d_k] f32    the queries as the softmax multiplies them (RoPE, QK-norm
                                          and the scaling rule applied)
``k``               [L, H_kv, T, d_k]     the keys likewise; query head ``h`` reads key head
                                          ``h·H_kv / H``
``scale``           [L] float32           ``c``, the scale still to apply (1 when folded into ``q``)
``window``          [L] int               each layer's sliding window ``W`` (0: none)
``causal``          () bool               the model's mask is causal
``softcap``         () float32            Gemma 2's score soft-cap ``κ`` (0: none)
``sinks``           [L, H] float32        each head's sink logit (only for a model with sinks)
``final_stream``    [T, d] float32        the stream after the final norm (logits = it · W_Uᵀ)
``logits_last``     [V] float32           the logits of the last position: the next token
==================  ====================  ==================================================

plus ``tokens``, ``layers``, ``config``, ``dropped``, ``positions``. Head ``(l, h)``'s weights are
``A = softmax(mask_l(cap(c_l · q[l, h] · k[l, g]ᵀ)))`` [T, T], ``cap(x) = κ·tanh(x/κ)``,
``mask_l(i, j) = j ≤ i ∧ (W_l = 0 ∨ j > i − W_l)`` (every pair when not causal), each sink a last
column of the softmax then dropped; :func:`streamed_head` computes it, equal to the model's own to
float32 rounding. Memory ``L·T·(H + H_kv)·d_k`` values, not ``L·H·T²``.
"""

from __future__ import annotations

import csv
import math
import os
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from model.atomic import write_atomic
from model.interp.plan import COPY_CHUNK as CHUNK
from model.interp.trace import Trace

#: The file's keys for the square kinds (the format's own names, older than the trace's hook names).
FILE_KEYS = {"weights": "pattern", "scores_raw": "scores_raw", "scores_scaled": "scores"}


def _stacked(trace: Trace, kind: str, batch: int, dtype: npt.DTypeLike) -> np.ndarray | None:
    """``kind`` of every recorded layer as one [L, ...] array, filled layer by layer (one copy)."""
    layers = [layer for layer in trace.layers if trace.has(kind, layer)]
    if not layers:
        return None
    first = trace[kind, layers[0]][batch]
    out = np.empty((len(layers), *first.shape), dtype=dtype)
    as_torch = torch.float16 if np.dtype(dtype) == np.float16 else torch.float32
    for i, layer in enumerate(layers):
        out[i] = trace[kind, layer][batch].to(as_torch).numpy()
    return out


def inspection_arrays(
    trace: Trace, token_strings: list[str], batch: int = 0, *, dtype: npt.DTypeLike = np.float32
) -> dict[str, np.ndarray]:
    """The arrays of the inspection format from a trace that recorded
    :data:`model.interp.plan.REQUIRED_KINDS`.

    A trace of some layers only, or without the two score kinds (an inspection planned to fit in
    memory or on disk, :func:`model.interp.plan.plan_file_export`), gives the arrays it has;
    ``layers`` always names the layers present. ``dtype`` float16 halves the size of the [L, H, T, T] arrays.
    """
    if trace.config is None:
        raise ValueError("the trace has no config: record it with run_with_trace")
    points, norms = trace.resid_norms(batch)
    out = {"tokens": np.array(token_strings, dtype=str)}
    for key, kind in FILE_KEYS.items():
        stacked = _stacked(trace, kind, batch, dtype)
        if stacked is not None:
            out[key] = stacked
    out.update(
        {
            "layers": np.array(trace.layers, dtype=np.int64),
            "mask": trace.mask.numpy().astype(bool),
            "resid_norms": norms.astype(np.float32),
            "resid_points": np.array(points, dtype=str),
            "logits": trace.logits[batch].numpy().astype(np.float32, copy=False),  # the trace's, not a copy
            "config": np.array(trace.config.to_json()),
        }
    )
    return out


def streamed_arrays(model, ids: list[int], token_strings: list[str], block: int) -> dict[str, np.ndarray]:
    """The arrays of the streamed form (see the module docstring) of token ``ids`` [T] through
    ``model``: one pass of :func:`~model.interp.streamed.stream_prompt`, pooling by ``block``."""
    from model.interp.streamed import stream_prompt

    cfg = model.config
    run = stream_prompt(model, ids, block)
    layers = run.patterns.layers  # emptied as each layer is copied: one copy of the queries at a time
    L = len(layers)
    q = np.empty((L, *layers[0].q.shape), dtype=np.float32)
    k = np.empty((L, *layers[0].k.shape), dtype=np.float32)
    scale = np.empty(L, dtype=np.float32)
    for i in range(L):
        rec = layers.pop(0)
        q[i], k[i], scale[i] = rec.q.numpy(), rec.k.numpy(), rec.c
    out: dict[str, np.ndarray] = {
        "streamed": np.array(True),
        "tokens": np.array(token_strings, dtype=str),
        "layers": np.arange(L, dtype=np.int64),
        "overview": run.overview,
        "overview_mean": run.overview_mean,
        "block": np.array(int(block)),
        "q": q,
        "k": k,
        "scale": scale,
        "window": np.array(
            [int(cfg.sliding_window or 0) if cfg.is_local_layer(i) else 0 for i in range(L)], dtype=np.int64
        ),
        "causal": np.array(bool(cfg.causal)),
        "softcap": np.array(float(cfg.attn_softcap or 0.0), dtype=np.float32),
        "final_stream": run.logits.x.float().numpy(),
        "logits_last": run.logits[-1:][0].numpy(),
        "config": np.array(cfg.to_json()),
    }
    if cfg.attn_sinks:
        sinks = [model.blocks[i].attn.sinks.detach().float() for i in range(L)]
        out["sinks"] = torch.stack(sinks).numpy()
    return out


def streamed_head(arrays: dict[str, np.ndarray], layer: int, head: int) -> np.ndarray:
    """Head ``(layer, head)``'s weights [T, T] float32 from a streamed file's ``arrays`` (the formula in
    the module docstring), without the model."""
    q = torch.from_numpy(np.asarray(arrays["q"][layer, head], dtype=np.float32))  # [T, d_k]
    H, H_kv = arrays["q"].shape[1], arrays["k"].shape[1]
    k = torch.from_numpy(np.asarray(arrays["k"][layer, head * H_kv // H], dtype=np.float32))
    s = (q @ k.T) * float(arrays["scale"][layer])
    kappa = float(arrays["softcap"])
    if kappa > 0:
        s = torch.tanh(s / kappa) * kappa
    T = s.shape[0]
    if bool(arrays["causal"]):
        i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
        visible = j <= i
        W = int(arrays["window"][layer])
        if W > 0:
            visible &= j > i - W
        s = s.masked_fill(~visible, float("-inf"))
    if "sinks" in arrays:
        sink = torch.full((T, 1), float(arrays["sinks"][layer, head]))
        return torch.softmax(torch.cat([s, sink], dim=-1), dim=-1)[:, :-1].numpy()
    return torch.softmax(s, dim=-1).numpy()


def npz_path(path: str | Path) -> Path:
    """``path`` with ``.npz`` appended when it lacks it (what :func:`save_inspection` writes)."""
    path = Path(path)
    return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def npz_bytes(arrays: Mapping[str, np.ndarray | Spool]) -> int:
    """About the size of the uncompressed .npz of ``arrays`` (their data; headers are a few KB)."""
    return sum(a.nbytes if isinstance(a, Spool) else np.asarray(a).nbytes for a in arrays.values())


class Spool:
    """One array [N, ...] on its way into a .npz, row by row (a :class:`~model.interp.trace.Sink`):
    each row, in ``dtype``, is written to a temporary file beside ``path`` as it is made, with plain
    file writes (a memory map's dirty pages would count in the resident set), and copied into the
    .npz by :func:`save_inspection`, CHUNK bytes at a time. In memory: one row at a time, never [N, ...].
    The temporary file has the name of ``path``'s temporaries (:func:`model.atomic.clean_stale_temps`
    removes it after a killed run); :meth:`close` removes it."""

    def __init__(self, path: str | Path, shape: tuple[int, ...], dtype: npt.DTypeLike):
        path = Path(path)
        self.shape, self.dtype, self.rows = tuple(int(n) for n in shape), np.dtype(dtype), 0
        self._torch = torch.float16 if self.dtype == np.float16 else torch.float32
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd, self.name = tempfile.mkstemp(
            prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent
        )

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    def write(self, row: int, tensor: torch.Tensor) -> None:
        if row != self.rows or tuple(tensor.shape) != self.shape[1:]:
            raise ValueError(
                f"spool {self.shape}: row {row} of shape {tuple(tensor.shape)}, expected row {self.rows}"
            )
        for piece in _pieces(tensor, CHUNK // self.dtype.itemsize):  # no whole copy of a strided row
            data = memoryview(piece.to(self._torch).contiguous().numpy().reshape(-1).view(np.uint8))
            while data:  # a write may stop short (a file-size limit): the next one says why
                data = data[os.write(self._fd, data) :]
        self.rows += 1

    def copy_into(self, fh) -> None:
        """The .npy of the spooled array (header, then the rows) written to ``fh``."""
        if self.rows != self.shape[0]:
            raise ValueError(f"spool {self.shape}: only {self.rows} rows were written")
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": self.shape,
        }
        np.lib.format.write_array_header_1_0(fh, header)
        buffer, at = bytearray(CHUNK), 0
        while chunk := os.preadv(self._fd, [buffer], at):
            fh.write(memoryview(buffer)[:chunk])
            at += chunk

    def close(self) -> None:
        """Remove the temporary file (again: nothing)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            Path(self.name).unlink(missing_ok=True)


def _pieces(t: torch.Tensor, most: int):
    """``t`` in C order as consecutive pieces of at most ``most`` values (but one row of its last axis):
    views, so that converting or gathering a strided tensor copies one piece at a time."""
    if t.numel() <= most or t.dim() <= 1:
        yield t
    elif t.dim() == 2:
        step = max(1, most // max(1, t.shape[1]))
        for i in range(0, t.shape[0], step):
            yield t[i : i + step]
    else:
        for sub in t.unbind(0):
            yield from _pieces(sub, most)


def write_npy(fh, array: npt.ArrayLike) -> None:
    """``array`` as ``np.save`` writes it (the .npy header, then the values in C order) to ``fh``,
    CHUNK bytes at a time straight from the array: no copy of it (``np.save`` into a zip entry copies
    16 MiB at a time, as much again as a small vocabulary's logits)."""
    array = np.asanyarray(array)
    if array.dtype.hasobject or not array.flags.c_contiguous:
        np.lib.format.write_array(fh, array, allow_pickle=False)  # refuses objects; copies the others
        return
    np.lib.format.write_array_header_1_0(fh, np.lib.format.header_data_from_array_1_0(array))
    data = memoryview(array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]  # numpy's buffer
    for at in range(0, len(data), CHUNK):
        fh.write(data[at : at + CHUNK])


def save_inspection(
    path: str | Path, arrays: Mapping[str, np.ndarray | Spool], *, compress: bool = False
) -> Path:
    """Write ``arrays`` (any plain arrays: the inspection format, a page's numbers; or a
    :class:`Spool`, whose rows are on disk already) as a .npz atomically (temp file in the same folder,
    then rename); ``.npz`` is appended if missing. The file is what ``np.savez`` writes: a zip (ZIP64
    past 4 GiB) of one ``KEY.npy`` per key, in order. Each spool is removed once copied in, and every
    one on the way out, whatever happened (a failed write, an interrupt). Uncompressed by default:
    deflating SmolLM2's 2.8 GB of weights at 1024 tokens took 250 s of a 307 s export, for a file
    attention patterns barely shrink; ``compress=True`` for small files that are kept."""
    path = npz_path(path)
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED

    def write(fh) -> None:
        with zipfile.ZipFile(fh, "w", compression=method, allowZip64=True) as zf:
            for key, value in arrays.items():
                with zf.open(f"{key}.npy", "w", force_zip64=True) as entry:
                    if isinstance(value, Spool):
                        value.copy_into(entry)
                        value.close()  # its disk space back before the next one is copied
                    else:
                        write_npy(entry, value)

    try:
        return write_atomic(path, write)
    finally:
        for value in arrays.values():
            if isinstance(value, Spool):
                value.close()


def load_inspection(path: str | Path) -> dict[str, np.ndarray]:
    """Read an inspection file back (never unpickles)."""
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def write_head_csv(
    path: str | Path, matrix: np.ndarray, labels: list[str], *, corner: str = "query \\ key"
) -> Path:
    """One head's [T, T] matrix as CSV: a header row of ``index:token`` key names, then one row per query.

    Labels carry the position (``"3:␣"``) so repeated tokens stay distinct; values are written with 8
    significant digits. Written atomically; ``.csv`` is appended to a path without it.
    """
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape != (len(labels), len(labels)):
        raise ValueError(f"a head matrix of shape {m.shape} does not fit {len(labels)} token labels")
    names = [f"{i}:{lab}" for i, lab in enumerate(labels)]
    return write_matrix_csv(path, m, names, names, corner=corner)


def write_matrix_csv(
    path: str | Path, matrix: np.ndarray, row_labels: list[str], col_labels: list[str], *, corner: str = ""
) -> Path:
    """Any labelled [R, C] matrix as CSV (a header row ``corner, col_labels...``, then one row per
    label of ``row_labels``), values with 8 significant digits, NaN as ``nan``. Written atomically;
    ``.csv`` is appended to a path without it."""
    m = np.asarray(matrix, dtype=np.float64)
    if m.ndim != 2 or m.shape != (len(row_labels), len(col_labels)):
        raise ValueError(
            f"a matrix of shape {m.shape} does not fit {len(row_labels)} row and "
            f"{len(col_labels)} column labels"
        )

    def write(fh):
        w = csv.writer(fh)
        w.writerow([corner, *col_labels])
        for name, row in zip(row_labels, m, strict=True):
            w.writerow([name, *(f"{v:.8g}" for v in row)])

    path = Path(path)
    if path.suffix.lower() != ".csv":
        path = path.with_name(path.name + ".csv")
    return write_atomic(path, write, text=True)


def read_head_csv(path: str | Path) -> tuple[list[str], list[str], np.ndarray]:
    """(query labels, key labels, matrix) back from :func:`write_head_csv`."""
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    keys = rows[0][1:]
    queries = [r[0] for r in rows[1:]]
    m = np.array([[float(v) for v in r[1:]] for r in rows[1:]], dtype=np.float64)
    return queries, keys, m
