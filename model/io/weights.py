"""Tensors of another project's model file, checked and mapped onto our GPT's, then built into one.

* A :class:`TensorSource` gives a file's named tensors one at a time: safetensors files (one, or the
  shards of an index) each read with one ``readinto``, or a dictionary ``torch.load`` returned
  (:func:`torch_load`: ``weights_only=True``, never arbitrary objects).
* A :class:`WeightMap` row names one tensor of the file, its shape, and the tensors of ours it fills;
  every loader lists its rows (GPT-2 and nanoGPT: :mod:`model.io.hf.gpt2`; the Llama-era families:
  :mod:`model.io.hf.families`) so that :func:`check_weights` names every missing, misshapen or unexpected
  tensor before anything is read, and :func:`map_weights` reads each once.
* :func:`build_from_state_dict` builds the model on the ``meta`` device and assigns the tensors, so
  memory peaks at about the weights plus one tensor in flight (see ``bench/load_memory.py``).

Every loader reaches these through the one build step, :func:`model.io.build.build_model`.
"""

from __future__ import annotations

import math
import pickle
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import torch

from model.budget.sizing import skip_init_on_meta
from model.config import ConfigError, GPTConfig
from model.io.loaded import CheckpointError
from model.io.stored import float_decoder
from model.nn.gpt import GPT
from model.nn.layers import make_positions
from model.nn.quantized import StoredMatrix, install_stored
from model.safetensors_file import safetensors_entries

#: Problems listed in one error message before "and N more".
_MAX_LISTED = 6


# ---------------------------------------------------------------------------------------------
# where the tensors come from
# ---------------------------------------------------------------------------------------------
class TensorSource:
    """Named tensors in a file, read one at a time: ``keys``, ``shape(name)`` (no read), ``get(name)``.

    ``fresh``: every ``get`` returns a tensor in memory of its own that nothing else holds (e.g. just
    dequantized), so :func:`map_weights` may keep it instead of copying it once more. ``stored``: the
    matrix a name holds as the file stores it (:class:`~model.nn.quantized.StoredMatrix`, nothing read),
    or None for a tensor to ``get``; a source without it is read whole.
    """

    def __init__(
        self,
        keys: Iterable[str],
        shape: Callable[[str], tuple],
        get: Callable[[str], torch.Tensor],
        *,
        fresh: bool = False,
        stored: Callable[[str], StoredMatrix | None] | None = None,
    ):
        self.keys = list(keys)
        self._names = set(self.keys)
        self.shape = shape
        self.get = get
        self.fresh = fresh
        self.stored = stored

    def __contains__(self, name: str) -> bool:
        return name in self._names


def dict_source(sd: dict[str, Any], where: str) -> TensorSource:
    bad = [k for k, v in sd.items() if not isinstance(k, str) or not isinstance(v, torch.Tensor)]
    if bad:
        raise CheckpointError(f"{where}: {bad[0]!r} is not a named tensor")
    return TensorSource(sd.keys(), lambda k: tuple(sd[k].shape), lambda k: sd.pop(k))


#: safetensors dtype names -> torch dtypes (the floating ones weights come in, plus integers).
_ST_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def _safetensors_index(path: Path) -> dict[str, tuple[torch.dtype, tuple[int, ...], int, int]]:
    """A safetensors file's tensors: name -> (dtype, shape, first byte, end byte) in the file.

    The header is read and its entries checked by :func:`~model.safetensors_file.safetensors_entries`
    (kinds, a name written twice, tensors sharing bytes); here each entry's bytes are held against its
    dtype and shape, and against the file's size.
    """
    bad = f"{path.name} is not a readable safetensors file"
    try:
        entries, start = safetensors_entries(path)
        size = path.stat().st_size
    except (ValueError, OSError) as exc:
        raise CheckpointError(f"{bad}: {str(exc).removeprefix(path.name).lstrip(': ')}") from None
    out = {}
    for name, (dtype_name, shape, begin, end) in entries.items():
        dtype = _ST_DTYPES.get(dtype_name)
        if dtype is None:
            raise CheckpointError(
                f"{bad}: {name} has dtype {dtype_name!r}, not one of {', '.join(_ST_DTYPES)}"
            )
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        if end - begin != nbytes or start + end > size:
            raise CheckpointError(f"{bad}: {name}'s bytes do not fit its shape or the file (truncated?)")
        out[name] = (dtype, shape, start + begin, start + end)
    return out


def safetensors_source(files: list[Path], *, keep_stored: bool = False) -> TensorSource:
    """Tensors of safetensors files, each read into its own memory with one ``readinto``.

    A tensor in two of the files is refused, as one named twice in a header is. Not memory-mapped on
    purpose: a mapped file's pages count in the process's resident memory as they are touched, which
    would double the peak while the weights are copied into the model.
    ``keep_stored``: each 2-D float16 / bfloat16 tensor is offered as stored instead
    (:attr:`TensorSource.stored`, a :class:`~model.nn.quantized.StoredMatrix` over a copy-on-write
    mapping of its file, nothing read), for a model that keeps them so (:mod:`model.io.stored`).
    """
    where: dict[str, tuple[Path, tuple[torch.dtype, tuple[int, ...], int, int]]] = {}
    for f in files:
        for name, entry in _safetensors_index(f).items():
            if name in where:  # two shards of one model: which copy is meant cannot be told
                raise CheckpointError(f"{name} is in both {where[name][0].name} and {f.name}: refused")
            where[name] = (f, entry)

    def get(name: str) -> torch.Tensor:
        path, (dtype, shape, begin, end) = where[name]
        buf = bytearray(end - begin)
        with open(path, "rb") as fh:
            fh.seek(begin)
            if fh.readinto(buf) != len(buf):
                raise CheckpointError(f"{path.name} ends inside {name} (truncated?)")
        if not buf:
            return torch.empty(shape, dtype=dtype)
        return torch.frombuffer(buf, dtype=dtype).reshape(shape)

    maps: dict[Path, np.ndarray] = {}

    def stored(name: str) -> StoredMatrix | None:
        path, (dtype, shape, begin, end) = where[name]
        kind = _STORED_KINDS.get(dtype)
        if kind is None or len(shape) != 2 or 0 in shape:
            return None
        if path not in maps:
            maps[path] = np.memmap(path, dtype=np.uint8, mode="c")  # copy-on-write: never written
        raw = maps[path][begin:end].reshape(shape[0], (end - begin) // shape[0])
        return StoredMatrix(raw, shape[1], float_decoder(kind), kind)  # type: ignore[arg-type]

    return TensorSource(where.keys(), lambda k: where[k][1][1], get, stored=stored if keep_stored else None)


#: Float types a safetensors matrix is kept in as stored (float32 is read: keeping it saves nothing).
_STORED_KINDS = {torch.float16: "F16", torch.bfloat16: "BF16"}


_UNSUPPORTED_GLOBAL = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


def torch_load(path: Path) -> Any:
    """``torch.load(weights_only=True)`` (memory-mapped when the format allows); CheckpointError otherwise."""
    try:
        try:
            return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:
            if "mmap" not in str(exc):
                raise
            return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        found = _UNSUPPORTED_GLOBAL.search(str(exc))
        what = f" (it asks for {found.group(1)})" if found else ""
        raise CheckpointError(
            f"{path.name} holds Python objects beyond tensors and plain data{what}; opening it would run "
            f"code stored in the file, which Attention Lab never does. Re-save just the weights, e.g. "
            f"torch.save({{'model_args': ..., 'model': model.state_dict()}}, path)"
        ) from None
    except Exception as exc:  # torch raises RuntimeError/KeyError/EOFError/... for files it cannot read
        raise CheckpointError(f"{path.name} is not a readable PyTorch checkpoint: {exc}") from None


# ---------------------------------------------------------------------------------------------
# how they map onto ours
# ---------------------------------------------------------------------------------------------
def vocab_of(cfg: GPTConfig) -> int:
    """``cfg.core.vocab_size`` of a config read from another project's file, which every loader requires."""
    if cfg.core.vocab_size is None:
        raise ConfigError(["vocab_size is not set: the config of a weights file must give it"])
    return cfg.core.vocab_size


class WeightMap(NamedTuple):
    """One tensor of the file (``src``, of ``shape``) and our names it fills: several ``dst`` split its
    rows evenly, or in ``sizes`` rows each (Phi-3's fused ``qkv_proj``: Q, K, V of GQA), or, with
    ``heads`` > 0, per head (``heads`` groups of ``len(dst)`` parts each, as GPT-NeoX fuses Q, K and V),
    or, ``interleaved``, row ``i`` to part ``i mod len(dst)`` (gpt-oss's gate and up columns);
    ``transpose``: stored ``[in, out]`` (Hugging Face's ``Conv1D``, gpt-oss's experts), so it is
    transposed to ``nn.Linear``'s ``[out, in]``; ``rows``: our row ``i`` is the file's row ``rows[i]``
    (after the transpose; DeepSeek's interleaved rotary rows made half-split); ``stacked``: the first
    dimension indexes items (experts) done one by one, ``dst`` item after item."""

    src: str
    shape: tuple[int, ...]
    dst: tuple[str, ...]
    heads: int = 0
    transpose: bool = False
    sizes: tuple[int, ...] = ()
    interleaved: bool = False
    rows: tuple[int, ...] = ()
    stacked: bool = False


class Layout(NamedTuple):
    """Where a file's tensors go in our model: ``entries`` (every tensor it must hold), ``implied``
    (what its config said, named when a shape does not match it) and ``extra_ok`` (tensors it may hold
    beside them, left unread: a stored copy of a tied matrix, buffers that are not weights)."""

    entries: list[WeightMap]
    implied: str
    extra_ok: frozenset[str] = frozenset()


#: Buffers some GPT-2 files carry that are not weights: the causal mask and its fill value.
_IGNORED = re.compile(r"(^|\.)h\.\d+\.attn\.(bias|masked_bias)$")


def listed(items: list[str], kind: str = "", most: int = _MAX_LISTED) -> str:
    """The first ``most`` of ``items``, then how many more (of ``kind``, when given)."""
    more = len(items) - most
    rest = f" and {more} more" + (f" {kind}" if kind else "") if more > 0 else ""
    return ", ".join(items[:most]) + rest


def check_weights(
    src: TensorSource, entries: list[WeightMap], where: str, implied: str, extra_ok: set[str]
) -> None:
    """Raise one CheckpointError, ``"{where} does not match {implied}: ..."``, listing missing tensors,
    tensors of another shape than ``implied`` gives them and tensors with no place in the model."""
    problems = []
    missing = [e.src for e in entries if e.src not in src]
    if missing:
        problems.append(f"missing {listed(missing)}")
    wrong = [
        f"{e.src} has shape {list(src.shape(e.src))}, not {list(e.shape)}"
        for e in entries
        if e.src in src and tuple(src.shape(e.src)) != e.shape
    ]
    if wrong:
        problems.append(listed(wrong, "tensors of another shape", most=3))  # each names two shapes
    expected = {e.src for e in entries} | extra_ok
    unexpected = [k for k in src.keys if k not in expected and not _IGNORED.search(k)]
    if unexpected:
        problems.append(f"tensors this GPT has no place for: {listed(unexpected)}")
    if problems:
        raise CheckpointError(f"{where} does not match {implied}: " + "; ".join(problems))


def _parts(t: torch.Tensor, e: WeightMap, n: int) -> list[torch.Tensor]:
    """One item of entry ``e`` (the whole tensor unless ``stacked``) as its ``n`` parts, as views."""
    if e.transpose:
        t = t.t()
    if e.rows:
        t = t[torch.tensor(e.rows)]
    if n == 1:
        return [t]
    if e.interleaved:  # row i -> part i mod n
        return [t[j::n] for j in range(n)]
    if e.heads:  # [heads · n · rows, ...] -> part j: [heads · rows, ...]
        grouped = t.reshape(e.heads, n, -1, *t.shape[1:])
        return [grouped[:, j].reshape(-1, *t.shape[1:]) for j in range(n)]
    if e.sizes:
        return list(t.split(list(e.sizes), dim=0))
    return list(t.chunk(n, dim=0))


def _stored_parts(m: StoredMatrix, e: WeightMap) -> list[StoredMatrix] | None:
    """Entry ``e``'s parts of the stored matrix ``m`` as stored matrices of their own (blocks of its
    rows, or its rows reordered, nothing read), or None for a mapping that is neither."""
    n = len(e.dst)
    if e.rows and n == 1 and not (e.transpose or e.stacked):  # DeepSeek's rotary rows de-interleaved
        return [m.reordered(e.rows)]
    if e.transpose or e.rows or e.stacked or e.interleaved or e.heads or (m.rows % n and not e.sizes):
        return None
    sizes = list(e.sizes) if e.sizes else [m.rows // n] * n
    starts = [sum(sizes[:i]) for i in range(n)]
    return [m.row_block(a, a + k) for a, k in zip(starts, sizes, strict=True)]


def map_weights(
    src: TensorSource,
    entries: list[WeightMap],
    dtype: torch.dtype,
    stored: dict[str, StoredMatrix] | None = None,
) -> dict[str, torch.Tensor]:
    """Read each entry once and turn it into our tensors (transposed / permuted / split, fresh memory,
    ``dtype``; a :attr:`TensorSource.fresh` tensor that needs none of it is kept as read).

    ``stored`` given and the source keeping an entry's matrix as stored: its parts go into ``stored``
    under our names instead, unread (a mapping other than a split of whole rows decodes it)."""
    out: dict[str, torch.Tensor] = {}
    for e in entries:
        kept = src.stored(e.src) if stored is not None and src.stored is not None else None
        parts = _stored_parts(kept, e) if kept is not None else None
        if stored is not None and parts is not None:
            stored.update(zip(e.dst, parts, strict=True))
            continue
        t = kept.dequantize() if kept is not None else src.get(e.src)
        if len(e.dst) == 1 and not (e.transpose or e.rows or e.stacked):
            keep = src.fresh and t.dtype == dtype and t.is_contiguous()
            out[e.dst[0]] = t if keep else t.to(dtype=dtype, memory_format=torch.contiguous_format, copy=True)
            del t
            continue
        items = t.unbind(0) if e.stacked else (t,)
        names = iter(e.dst)
        for item in items:
            for part in _parts(item, e, len(e.dst) // len(items)):
                out[next(names)] = part.to(dtype=dtype, memory_format=torch.contiguous_format, copy=True)
        del t, items
    return out


def build_from_state_dict(
    config: GPTConfig,
    state: dict[str, torch.Tensor],
    device: str | torch.device = "cpu",
    stored: dict[str, StoredMatrix] | None = None,
) -> GPT:
    """A :class:`GPT` holding exactly ``state`` (our parameter names), without a random init first;
    the weights named in ``stored`` kept as stored (:func:`model.nn.quantized.install_stored`).

    The model is built on the ``meta`` device and the tensors are assigned, so no second copy of the
    weights is ever allocated. Fixed tables (sinusoidal, rope) are computed. Eval mode.
    """
    with torch.device("meta"), skip_init_on_meta():
        model = GPT(config)
    if stored:
        install_stored(model, stored)
    model.load_state_dict(state, strict=True, assign=True)
    if any(buf.is_meta for buf in model.buffers()):  # the fixed tables (sinusoidal, rope): computed
        model.pos_emb = make_positions(config)
    if any(buf.is_meta for buf in model.buffers()):  # pragma: no cover - a new buffer needs a line here
        raise RuntimeError("a buffer of the model has no value after loading")
    return model.to(device).eval()


__all__ = [
    "Layout",
    "TensorSource",
    "WeightMap",
    "build_from_state_dict",
    "check_weights",
    "dict_source",
    "listed",
    "map_weights",
    "safetensors_source",
    "torch_load",
]
