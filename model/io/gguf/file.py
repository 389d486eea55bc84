"""The GGUF file format (llama.cpp, Ollama, LM Studio): its header read by us, its tensors dequantized by
``gguf``, ggml-org's own package.

A GGUF file is, in order (all little-endian)::

    "GGUF"  u32 version (2 or 3)  u64 n_tensors  u64 n_kv
    n_kv ×      key: string   u32 value_type   value          (the metadata: config, tokenizer, ...)
    n_tensors × name: string  u32 n_dims  u64 ne[n_dims]  u32 ggml_type  u64 offset
    padding to ``general.alignment`` (32 by default), then the tensors' bytes, each at ``offset``

with ``string = u64 length + UTF-8 bytes`` and ``array = u32 element_type + u64 count + elements``.
``ne[0]`` is the fastest-varying dimension, so a matrix ``W`` [out, in] is stored with
``ne = (in, out)``: :attr:`GGUFTensor.shape` gives it in PyTorch's order (``ne`` reversed).

A quantized type packs ``block_size`` values into ``type_size`` bytes (Q4_1: 32 values as a float16
scale ``d``, a float16 minimum ``m`` and 32 four-bit ``q``, so ``x = d·q + m``; Q8_0: ``x = d·q`` with
eight-bit ``q``; the K-quants nest 256-value super-blocks with quantized scales). A row of ``ne[0]``
values is ``ne[0] / block_size`` blocks, so the header alone says every tensor's size in bytes.

:func:`read_header` reads and checks the header only: every length, count, shape and offset is held
against the file's size before it is used, and a metadata key or tensor written twice is refused (as
llama.cpp refuses it), so a corrupt or hostile file is refused in one line and nothing large is
allocated. :func:`read_tensor` reads one tensor's bytes and dequantizes them to
float32 with ``gguf.quants.dequantize`` (never our own arithmetic: the file's format is theirs).
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from model.io.loaded import CheckpointError

__all__ = [
    "DEQUANTIZED",
    "OTHER_TYPES",
    "GGUFHeader",
    "GGUFTensor",
    "is_gguf",
    "quant_summary",
    "read_header",
    "read_tensor",
    "tensor_types_by_role",
    "undequantized",
]

MAGIC = b"GGUF"

#: ggml type number -> (name, values per block, bytes per block): the types this reader dequantizes
#: (llama.cpp's ``ggml_type`` numbering; each checked against ``gguf.GGML_QUANT_SIZES`` in the tests).
DEQUANTIZED: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    30: ("BF16", 1, 2),
    39: ("MXFP4", 32, 17),
}

#: The other ggml types a file may hold (name, values per block, bytes per block): listed and sized,
#: but refused when opened (the i-quants, the ternary, 1-bit and fp4 types, integers, float64).
OTHER_TYPES: dict[int, tuple[str, int, int]] = {
    9: ("Q8_1", 32, 40),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
}

#: metadata value types: number -> (struct format, size); 8 string, 9 array.
_SCALARS = {
    0: ("<B", 1),
    1: ("<b", 1),
    2: ("<H", 2),
    3: ("<h", 2),
    4: ("<I", 4),
    5: ("<i", 4),
    6: ("<f", 4),
    7: ("<?", 1),
    10: ("<Q", 8),
    11: ("<q", 8),
    12: ("<d", 8),
}
_NUMPY = {
    0: "<u1",
    1: "<i1",
    2: "<u2",
    3: "<i2",
    4: "<u4",
    5: "<i4",
    6: "<f4",
    10: "<u8",
    11: "<i8",
    12: "<f8",
}
_STRING, _ARRAY, _FLOAT32 = 8, 9, 6


def shortest_float32(v: float) -> float:
    """The float32 ``v`` as the shortest decimal that is the same float32: a file's ``1e-05`` is stored
    as float32 0.0000099999997…, and read as a double it would be shown as 9.999999747378752e-06. The
    value is unchanged for any float32 computation (it rounds back to the very same float32)."""
    return float(np.format_float_scientific(np.float32(v), unique=True))


#: llama.cpp's GGML_MAX_DIMS.
_MAX_DIMS = 4


def type_name(ggml_type: int) -> str:
    known = DEQUANTIZED.get(ggml_type) or OTHER_TYPES.get(ggml_type)
    return known[0] if known else f"type {ggml_type}"


def undequantized(header: GGUFHeader) -> list[str]:
    """``"name (TYPE)"`` of each tensor stored in a type :func:`read_tensor` does not dequantize."""
    return [f"{t.name} ({t.type_name})" for t in header.tensors.values() if t.ggml_type not in DEQUANTIZED]


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a GGUF file: ``shape`` in PyTorch's order (``ne`` reversed), its ggml type and
    where its ``nbytes`` bytes lie (``offset`` from the start of the file)."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int
    nbytes: int

    @property
    def type_name(self) -> str:
        return type_name(self.ggml_type)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass
class GGUFHeader:
    """A GGUF file's header: its ``metadata`` (key -> Python value; arrays as lists) and ``tensors``."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, GGUFTensor] = field(default_factory=dict)
    data_start: int = 0

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", ""))

    def get(self, key: str, default: Any = None) -> Any:
        return self.metadata.get(key, default)


def is_gguf(path: str | Path) -> bool:
    """Whether ``path`` is a file starting with GGUF's magic bytes."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


class _Cursor:
    """Reads little-endian values from a mapped file, refusing any read past its end."""

    def __init__(self, buf: mmap.mmap, name: str):
        self.buf, self.pos, self.size, self.name = buf, 0, len(buf), name

    def fail(self, what: str) -> CheckpointError:
        return CheckpointError(f"{self.name} is not a readable GGUF file: {what}")

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.size:
            raise self.fail(f"{what} runs past the end of the file (truncated?)")

    def scalar(self, vtype: int, what: str) -> Any:
        fmt, n = _SCALARS[vtype]
        self.need(n, what)
        (v,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        if vtype == _FLOAT32:
            return shortest_float32(v)
        return v

    def u32(self, what: str) -> int:
        return int(self.scalar(4, what))

    def u64(self, what: str) -> int:
        return int(self.scalar(10, what))

    def string(self, what: str) -> str:
        n = self.u64(what)
        self.need(n, what)
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{what} is not UTF-8 text") from None

    def value(self, vtype: int, what: str, depth: int = 0) -> Any:
        if vtype in _SCALARS:
            return self.scalar(vtype, what)
        if vtype == _STRING:
            return self.string(what)
        if vtype != _ARRAY:
            raise self.fail(f"{what} has a value of unknown type {vtype}")
        if depth > 1:
            raise self.fail(f"{what} holds arrays nested more than two deep")
        etype, count = self.u32(what), self.u64(what)
        if etype in _NUMPY:  # numbers: one read, checked against what is left of the file
            width = _SCALARS[etype][1]
            self.need(count * width, what)
            values = np.frombuffer(self.buf, dtype=_NUMPY[etype], count=count, offset=self.pos).tolist()
            self.pos += count * width
            return values
        if etype == 7:
            self.need(count, what)
            flags = [bool(b) for b in self.buf[self.pos : self.pos + count]]
            self.pos += count
            return flags
        if etype in (_STRING, _ARRAY):
            self.need(count * 8, what)  # every element takes at least its 8-byte length
            return [self.value(etype, what, depth + 1) for _ in range(count)]
        raise self.fail(f"{what} is an array of unknown type {etype}")


def read_header(path: str | Path) -> GGUFHeader:
    """Read and check a GGUF file's header (no tensor data is read). Raises :class:`CheckpointError`."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            if size < 24 or f.read(4) != MAGIC:
                raise CheckpointError(f"{path.name} is not a GGUF file (it does not start with 'GGUF')")
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                return _parse(buf, path)
    except OSError as exc:
        raise CheckpointError(f"{path.name} cannot be read: {exc.strerror or exc}") from None


def _parse(buf: mmap.mmap, path: Path) -> GGUFHeader:
    c = _Cursor(buf, path.name)
    c.pos = 4
    version = c.u32("the version")
    if version not in (2, 3):
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        hint = " (a big-endian file: convert it on a little-endian machine)" if swapped in (2, 3) else ""
        raise c.fail(f"version {version} is not 2 or 3{hint}")
    n_tensors, n_kv = c.u64("the tensor count"), c.u64("the metadata count")
    # every metadata entry takes at least 8 + 4 bytes and every tensor entry at least 8 + 4 + 4 + 8
    if n_kv * 12 + n_tensors * 24 > c.size - c.pos:
        raise c.fail(
            f"it claims {n_kv:,} metadata entries and {n_tensors:,} tensors, more than its size holds"
        )
    metadata: dict[str, Any] = {}
    for i in range(n_kv):
        key = c.string(f"metadata key {i}")
        if key in metadata:  # llama.cpp refuses the file: which value is meant cannot be told
            raise c.fail(f"metadata key {key!r} is written twice (which value is meant?)")
        metadata[key] = c.value(c.u32(f"metadata {key!r}"), f"metadata {key!r}")
    infos = []
    for i in range(n_tensors):
        name = c.string(f"tensor name {i}")
        n_dims = c.u32(f"tensor {name!r}")
        if not 1 <= n_dims <= _MAX_DIMS:
            raise c.fail(f"tensor {name!r} has {n_dims} dimensions (GGUF allows 1 to {_MAX_DIMS})")
        ne = [c.u64(f"tensor {name!r}") for _ in range(n_dims)]
        infos.append((name, ne, c.u32(f"tensor {name!r}"), c.u64(f"tensor {name!r}")))
    alignment = metadata.get("general.alignment", 32)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise c.fail(f"general.alignment {alignment!r} is not a power of two")
    data_start = -(-c.pos // alignment) * alignment
    tensors: dict[str, GGUFTensor] = {}
    for name, ne, ggml_type, offset in infos:
        if name in tensors:
            raise c.fail(f"tensor {name!r} is listed twice")
        tensors[name] = _tensor(c, name, ne, ggml_type, offset, data_start, alignment)
    return GGUFHeader(path=path, version=version, metadata=metadata, tensors=tensors, data_start=data_start)


def _tensor(
    c: _Cursor, name: str, ne: list[int], ggml_type: int, offset: int, data_start: int, alignment: int
) -> GGUFTensor:
    known = DEQUANTIZED.get(ggml_type) or OTHER_TYPES.get(ggml_type)
    if known is None:
        raise c.fail(f"tensor {name!r} has ggml type {ggml_type}, which no GGUF version defines")
    _, block, type_size = known
    if ne[0] % block:
        raise c.fail(f"tensor {name!r} has rows of {ne[0]} values, not whole {block}-value blocks")
    n = math.prod(ne)
    nbytes = n // block * type_size
    begin = data_start + offset
    if offset % alignment:
        raise c.fail(f"tensor {name!r} is at offset {offset:,}, not a multiple of the alignment {alignment}")
    if begin + nbytes > c.size:
        raise c.fail(f"tensor {name!r} ({nbytes:,} bytes at {begin:,}) lies outside the file (truncated?)")
    return GGUFTensor(name, tuple(reversed(ne)), ggml_type, begin, nbytes)


def read_tensor(path: str | Path, t: GGUFTensor) -> np.ndarray:
    """Tensor ``t`` of the file at ``path``, dequantized to float32, of shape ``t.shape``.

    Read with one ``readinto`` (not memory-mapped: mapped pages would count twice while the model is
    built); dequantized by ``gguf.quants.dequantize``, row by row of ``ne[0]`` values.
    """
    # ggml-org's package (0.2 s to import): only once a GGUF's weights are read
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    if t.ggml_type not in DEQUANTIZED:
        raise CheckpointError(f"tensor {t.name!r} is stored as {t.type_name}, which is not dequantized here")
    buf = bytearray(t.nbytes)
    with open(path, "rb") as f:
        f.seek(t.offset)
        if f.readinto(buf) != t.nbytes:
            raise CheckpointError(f"{Path(path).name} ends inside tensor {t.name!r} (truncated?)")
    raw = np.frombuffer(buf, dtype=np.uint8)
    name, block, type_size = DEQUANTIZED[t.ggml_type]
    if name == "F32":
        return raw.view(np.float32).reshape(t.shape)  # writable: the bytearray is ours
    rows = t.numel // t.shape[-1]
    data = raw.reshape(rows, t.shape[-1] // block * type_size)
    out = dequantize(data, GGMLQuantizationType(t.ggml_type))
    return np.ascontiguousarray(out, dtype=np.float32).reshape(t.shape)


def quant_summary(header: GGUFHeader) -> str:
    """How the weights are stored, by share of values: e.g. ``"Q4_1 (83%), Q8_0 (17%), F32 (0.1%)"``."""
    counts: dict[str, int] = {}
    for t in header.tensors.values():
        counts[t.type_name] = counts.get(t.type_name, 0) + t.numel
    total = sum(counts.values()) or 1

    def share(n: int) -> str:
        p = 100 * n / total
        return f"{p:.0f}%" if p >= 1 else f"{p:.1g}%"

    return ", ".join(f"{k} ({share(v)})" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))


def tensor_types_by_role(tensor_types: dict[str, str]) -> list[str]:
    """How each kind of tensor is stored, one line per kind and type, e.g. ``"attn_q: Q4_1 (30 layers)"``,
    ``"token_embd: Q8_0"``: the per-tensor types of :func:`load_gguf`'s ``meta["tensor_types"]``, with the
    layer number taken out of each name."""
    groups: dict[tuple[str, str], int] = {}
    for name, kind in tensor_types.items():
        parts = name.split(".")
        role = ".".join(parts[2:-1]) if len(parts) > 3 and parts[0] == "blk" else ".".join(parts[:-1]) or name
        groups[(role, kind)] = groups.get((role, kind), 0) + 1
    return [
        f"{role}: {kind}" + (f" ({n} layers)" if n > 1 else "")
        for (role, kind), n in sorted(groups.items(), key=lambda rk: (rk[0][0], rk[0][1]))
    ]
