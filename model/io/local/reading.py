"""The small readers a look at the machine's models uses (:mod:`model.io.local.models`): an error as
one line, a file's size (0 when it cannot be read), a GGUF header's summary kept per unchanged file
(a second look reads no header again), a small JSON file (a manifest, a config) and the size of a file
split by llama.cpp's ``gguf-split``."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

from model.budget.units import human_bytes
from model.files import read_json
from model.io.gguf.load import GGUFSummary, summarize_gguf
from model.io.loaded import CheckpointError

__all__ = ["MAX_JSON_BYTES"]

#: A manifest or config.json larger than this is not one (they are a few KB).
MAX_JSON_BYTES = 4 << 20

#: llama.cpp's gguf-split names: ``name-00001-of-00003.gguf``.
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$", re.IGNORECASE)


def _one_line(exc: BaseException, path: Path | None = None, called: str = "the file") -> str:
    """The first line of ``exc``'s message, ``path`` in it ``called`` so (a blob's hash is no news)."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    if path is not None:
        text = text.replace(str(path), called).replace(path.name, called)
    return text


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


_summaries: dict[tuple[str, int, int], GGUFSummary] = {}
_summaries_lock = threading.Lock()
_SUMMARIES_KEPT = 1024


def _summary(path: Path) -> GGUFSummary:
    """:func:`summarize_gguf`, kept per (path, size, mtime): an unchanged file's header is read once."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    with _summaries_lock:
        if key in _summaries:
            return _summaries[key]
    summary = summarize_gguf(path)
    with _summaries_lock:
        if len(_summaries) >= _SUMMARIES_KEPT:
            _summaries.clear()
        _summaries[key] = summary
    return summary


def _small_json(path: Path) -> Any:
    """The JSON value of a small file (a manifest, a config); CheckpointError naming what is wrong."""
    if _size(path) > MAX_JSON_BYTES:
        raise CheckpointError(f"{path.name} is {human_bytes(_size(path))}, too large to be what it says")
    return read_json(path, error=CheckpointError)


def _split_size(first: Path) -> int:
    """Bytes of every part of a gguf-split file, from its first part's name."""
    m = _SPLIT.search(first.name)
    if m is None:
        return _size(first)
    stem, n = first.name[: m.start()], int(m.group(2))
    return sum(_size(first.with_name(f"{stem}-{i:05d}-of-{n:05d}.gguf")) for i in range(1, n + 1))
