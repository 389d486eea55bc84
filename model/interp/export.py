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
(:func:`model.interp.inspection.write_inspection`): the zip's entries for the square kinds are
reserved first (:mod:`model.interp.npzfile`: stored, ZIP64), each layer's [H, T, T] is written at its
place in the file while the layer is in memory, the logits [T, V] a block of positions at a time,
then the other arrays, then the zip's directory; to a temporary name, renamed when whole, removed
whatever happens (:func:`write_npz`). In memory: one layer or a block of logits, never
[L, H, T, T]; on disk: the file (twice it with ``--compress``, which deflates it in a second pass).

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
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch

from model.atomic import write_atomic
from model.interp.file_size import COPY_CHUNK
from model.interp.npzfile import NpzWriter
from model.interp.trace import Trace

#: The file's keys for the square kinds → the trace's hook names. The format keeps its own names
#: (``weights``, ``scores_scaled``: the kinds' names before they took their hook points') so that
#: files written before, and every reader of them, read the same. This is the one place they map: as
#: kinds they are retired (``model.interp.plan.RETIRED``), refused by every function that takes a kind.
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
            [int(cfg.attention.sliding_window or 0) if cfg.is_local_layer(i) else 0 for i in range(L)],
            dtype=np.int64,
        ),
        "causal": np.array(bool(cfg.core.causal)),
        "softcap": np.array(float(cfg.attention.attn_softcap or 0.0), dtype=np.float32),
        "final_stream": run.logits.x.float().numpy(),
        "logits_last": run.logits[-1:][0].numpy(),
        "config": np.array(cfg.to_json()),
    }
    if cfg.attention.attn_sinks:
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


def npz_bytes(arrays: Mapping[str, npt.ArrayLike]) -> int:
    """About the size of the uncompressed .npz of ``arrays`` (their data; headers are a few KB)."""
    return sum(np.asarray(a).nbytes for a in arrays.values())


def write_npz(
    path: str | Path, fill: Callable[[NpzWriter], None], *, compress: bool = False, ahead: int = 0
) -> Path:
    """A .npz written atomically at ``path`` (``.npz`` appended if missing; a temporary file in the
    same folder, then a rename, removed on any error or interrupt): ``fill(writer)`` reserves and adds
    its entries (:class:`~model.interp.npzfile.NpzWriter`; a forward pass may run inside it, filling
    reserved entries as it goes), then the zip is closed. ``compress``: the stored zip, in an unnamed
    temporary file beside it, is deflated into the file (twice the disk while it runs). ``ahead``:
    bytes written behind (:class:`~model.interp.npzfile.NpzWriter`; 0: each write done at once)."""
    path = npz_path(path)

    def stored(fh) -> None:
        npz = NpzWriter(fh, ahead=ahead)
        try:
            fill(npz)
            npz.close()
        finally:
            npz.stop()

    def deflated(fh) -> None:
        with tempfile.TemporaryFile(dir=path.parent) as raw:  # unnamed: gone whatever happens
            stored(raw)
            raw.seek(0)
            with zipfile.ZipFile(raw) as src, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as dst:
                for info in src.infolist():
                    with src.open(info) as r, dst.open(info.filename, "w", force_zip64=True) as w:
                        shutil.copyfileobj(r, w, COPY_CHUNK)

    return write_atomic(path, deflated if compress else stored)


def save_inspection(path: str | Path, arrays: Mapping[str, npt.ArrayLike], *, compress: bool = False) -> Path:
    """Write ``arrays`` (any plain arrays: the inspection format, a page's numbers) as a .npz atomically
    (:func:`write_npz`): what ``np.load`` reads as it reads ``np.savez``'s, each array copied once,
    straight into the file. Uncompressed by default: deflating SmolLM2's 2.8 GB of weights at 1024
    tokens took 250 s of a 307 s export, for a file attention patterns barely shrink;
    ``compress=True`` for small files that are kept."""

    def fill(npz: NpzWriter) -> None:
        for key, value in arrays.items():
            npz.add(key, value)

    return write_npz(path, fill, compress=compress)


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
