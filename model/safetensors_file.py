"""The safetensors file format (Hugging Face folders' weights, our checkpoints' ``model.safetensors``):
its header read and checked before any tensor is.

A file is, in order: an 8-byte little-endian length ``n``, ``n`` bytes of JSON
``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``, then the tensors'
bytes, each at ``[8 + n + begin, 8 + n + end)``.

:func:`read_safetensors_header` reads the JSON through the one reader of JSON that comes with a model
(:func:`model.files.parse_json`), so a tensor named twice is refused instead of the last copy winning
unseen. :func:`safetensors_entries` checks every entry as the safetensors library reads it: the shape
and the offsets are whole numbers, 0 or more (``1e400`` is a float, infinite once read: refused in one
line, not an ``OverflowError``), ``begin ≤ end``, and no two tensors share bytes (the library refuses
overlapping offsets; two names over the same bytes would be one tensor opened twice). Every refusal is a
ValueError of one line naming the file, the tensor and the value.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path
from typing import Any, NamedTuple, TypeGuard

from model.files import parse_json

__all__ = ["SafetensorsEntry", "read_safetensors_header", "safetensors_entries", "safetensors_shapes"]

#: The longest header read (the largest real ones are a few MB: one entry per tensor).
MAX_HEADER_BYTES = 100 * 2**20


class SafetensorsEntry(NamedTuple):
    """One tensor of a safetensors header: its dtype's name (``"F32"``...), ``shape``, and where its
    bytes lie, ``[begin, end)`` relative to the end of the header."""

    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def read_safetensors_header(path: str | Path, *, limit: int = MAX_HEADER_BYTES) -> tuple[dict, int]:
    """(the JSON header of a safetensors file, the offset where its tensor bytes start): an 8-byte
    little-endian length ``n``, then ``n`` bytes of JSON, so the bytes start at ``8 + n``. ``n`` is
    checked against the file's size and ``limit``; the JSON is read by :func:`model.files.parse_json`
    (a key written twice is refused). A ValueError naming the problem otherwise; reads at most the
    header."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            n = int.from_bytes(fh.read(8), "little")
            if n <= 0 or 8 + n > size or n > limit:
                raise ValueError(f"{path.name}: its header length is wrong (truncated or not safetensors?)")
            text = fh.read(n).decode("utf-8")
    except OSError as exc:
        raise ValueError(f"{path.name} cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path.name}: its header is not UTF-8 text (truncated or corrupt?)") from None
    header = parse_json(text, error=ValueError, what=f"{path.name}: its header")
    if not isinstance(header, dict):
        raise ValueError(f"{path.name}: its header is not a JSON object")
    return header, 8 + n


def _whole_numbers(value: Any, count: int | None = None) -> TypeGuard[list[int]]:
    """``value`` is a list of whole numbers, 0 or more (``count`` of them when given)."""
    return (
        isinstance(value, list)
        and (count is None or len(value) == count)
        and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in value)
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _entry(where: str, name: str, info: Any) -> SafetensorsEntry:
    """The checked entry of tensor ``name`` in the header of ``where`` (module docstring)."""
    if not isinstance(info, dict) or not isinstance(info.get("dtype"), str):
        raise ValueError(f"{where}: the entry for {name} is malformed (no dtype, shape and data_offsets)")
    shape, offsets = info.get("shape"), info.get("data_offsets")
    if not _whole_numbers(shape):
        raise ValueError(f"{where}: {name} has shape {_shown(shape)}, not a list of whole numbers 0 or more")
    if not _whole_numbers(offsets, 2) or offsets[0] > offsets[1]:
        raise ValueError(
            f"{where}: {name} has data_offsets {_shown(offsets)}, not two whole numbers [begin, end] with "
            f"0 ≤ begin ≤ end"
        )
    return SafetensorsEntry(info["dtype"], tuple(shape), offsets[0], offsets[1])


def safetensors_entries(path: str | Path) -> tuple[dict[str, SafetensorsEntry], int]:
    """(tensor name -> its checked :class:`SafetensorsEntry`, the offset where the tensor bytes start)
    of a safetensors file's header (module docstring). ValueError naming the file, the tensor and the
    value; reads at most the header."""
    path = Path(path)
    header, start = read_safetensors_header(path)
    entries = {name: _entry(path.name, name, info) for name, info in header.items() if name != "__metadata__"}
    held = sorted(((e.begin, e.end, name) for name, e in entries.items() if e.end > e.begin))
    for (_, end, before), (begin, _, after) in pairwise(held):
        if begin < end:
            raise ValueError(
                f"{path.name}: {before} and {after} share bytes (their data_offsets overlap at {begin:,}): "
                f"each tensor must have bytes of its own"
            )
    return entries, start


def safetensors_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """Tensor name -> shape from a safetensors file's header alone (:func:`safetensors_entries`).

    Raises ValueError when the header is not readable; reads at most the header.
    """
    entries, _ = safetensors_entries(path)
    return {name: e.shape for name, e in entries.items()}
