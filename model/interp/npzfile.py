"""A .npz written in place (:class:`NpzWriter`): what ``np.load`` reads as it reads ``np.savez``'s
files, with no array ever copied into the file twice and no whole array needed at once.

A .npz is a zip of one ``KEY.npy`` per array (the .npy header, then the values in C order). Here the
zip is stored (no compression) and ZIP64 throughout (sizes and offsets past 4 GiB), so each entry's
size is known when it is reserved: :meth:`NpzWriter.reserve` places it at the end of the file and
returns an :class:`Entry` whose bytes are written at their own offset as they come (``pwrite``; a
row of a square kind as the forward pass makes it, never a memory map, whose dirty pages would count
in the resident set), with its CRC-32 kept running; :meth:`NpzWriter.close` writes each entry's local
header (its CRC known by then) and the central directory. Layout (PKWARE APPNOTE 4.3, 4.5.3)::

    [local header | KEY.npy bytes] ...  [central directory] [ZIP64 end record] [ZIP64 locator] [end record]

Write-behind (``NpzWriter(fh, ahead=n)``): the CRC and the ``pwrite`` of each piece run in one writer
thread, in the order the pieces came, while the caller computes the next layer or block of logits;
at most ``n`` bytes wait (a single larger piece waits alone), so the time of an export is about the
larger of computing and writing, not their sum (the page cache's writeback throttles a writer of
gigabytes to the disk's speed, and the forward pass's kernels and the write both let go of the GIL).
A piece the caller still owns (a view of the buffer the next layer reuses) is copied before it waits.
"""

from __future__ import annotations

import collections
import io
import math
import os
import struct
import threading
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt
from isal.isal_zlib import crc32  # zlib's CRC-32, computed with carry-less multiplication: ~6x faster

from model.interp.file_size import COPY_CHUNK, LOGITS_BLOCK

_LOCAL = struct.Struct("<4s2B4HL2L2H")  # zipfile's structFileHeader
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # structCentralDir
_END64 = struct.Struct("<4sQ2H2L4Q")  # structEndArchive64
_LOCATOR64 = struct.Struct("<4sLQL")  # structEndArchive64Locator
_END = struct.Struct("<4s4H2LH")  # structEndArchive
_FULL = 0xFFFFFFFF  # a 32-bit field whose value is in the ZIP64 extra field
_VERSION = 45  # ZIP64
_DATE = (0 << 9) | (1 << 5) | 1  # 1980-01-01, as np.savez's entries (zipfile's default date)
_EXTRA_LOCAL = struct.Struct("<2H2Q")  # ZIP64 extra: tag 1, 16 bytes: uncompressed, compressed size
_EXTRA_CENTRAL = struct.Struct("<2H3Q")  # ... and the local header's offset


def npy_header(shape: tuple[int, ...], dtype: npt.DTypeLike) -> bytes:
    """The .npy header of a C-ordered array of ``shape`` and ``dtype``, as ``np.save`` writes it."""
    buffer = io.BytesIO()
    d = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
        "fortran_order": False,
        "shape": tuple(shape),
    }
    np.lib.format.write_array_header_1_0(buffer, d)
    return buffer.getvalue()


def _pwrite_all(fd: int, data: memoryview, at: int) -> None:
    while data:  # a write may stop short (a file-size limit): the next one says why
        n = os.pwrite(fd, data, at)
        data, at = data[n:], at + n


class WriteBehind:
    """The writer thread of an :class:`NpzWriter` written behind (module docstring): ``submit`` queues
    a piece (waiting while ``ahead`` bytes already wait), the thread adds it to its entry's CRC and
    writes it at its offset; ``drain`` waits for every piece and raises the first error the thread met
    (a full disk, say); ``stop`` ends the thread, whatever is left unwritten."""

    def __init__(self, ahead: int):
        self.ahead, self.queued = ahead, 0
        self.items: collections.deque[tuple[Entry, memoryview, int]] = collections.deque()
        self.cond = threading.Condition()
        self.error: BaseException | None = None
        self.stopping = False
        self.thread = threading.Thread(target=self._run, name="npz write-behind", daemon=True)
        self.thread.start()

    def submit(self, entry: Entry, view: memoryview, at: int) -> None:
        with self.cond:
            while self.queued and self.queued + len(view) > self.ahead and self.error is None:
                self.cond.wait()
            self._raise()
            self.items.append((entry, view, at))
            self.queued += len(view)
            self.cond.notify_all()

    def _run(self) -> None:
        while True:
            with self.cond:
                while not self.items and not self.stopping:
                    self.cond.wait()
                if self.stopping:
                    return
                entry, view, at = self.items[0]
            try:
                if self.error is None:  # after an error the rest is only let go
                    entry.crc = crc32(view, entry.crc)
                    _pwrite_all(entry.fd, view, at)
            except BaseException as exc:  # handed to the caller by its next submit or drain
                self.error = exc
            with self.cond:
                self.items.popleft()
                self.queued -= len(view)
                self.cond.notify_all()

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    def drain(self) -> None:
        with self.cond:
            while self.items:
                self.cond.wait()
            self._raise()

    def stop(self) -> None:
        with self.cond:
            self.stopping = True
            self.cond.notify_all()
        self.thread.join()


class Entry:
    """One ``KEY.npy`` of an :class:`NpzWriter`, its bytes written in order as they come (by ``behind``'s
    thread when given)."""

    def __init__(self, fd: int, name: bytes, offset: int, size: int, behind: WriteBehind | None = None):
        self.fd, self.name, self.offset, self.size = fd, name, offset, size
        self.data_at = offset + _LOCAL.size + len(name) + _EXTRA_LOCAL.size
        self.written, self.crc = 0, 0
        self.behind = behind

    def write(self, data, *, owned: bool = False) -> None:
        """Append ``data`` (any buffer) to the entry's bytes. ``owned``: the caller lets go of ``data``
        (a fresh array), so written behind it is not copied first."""
        view = memoryview(data).cast("B")
        if self.written + len(view) > self.size:
            raise ValueError(f"{self.name.decode()}: {self.written + len(view)} bytes, {self.size} reserved")
        at = self.data_at + self.written
        self.written += len(view)
        if self.behind is None:
            self.crc = crc32(view, self.crc)
            _pwrite_all(self.fd, view, at)
        else:
            self.behind.submit(self, view if owned else memoryview(bytearray(view)), at)

    def local_header(self) -> bytes:
        head = _LOCAL.pack(
            b"PK\x03\x04",
            _VERSION,
            0,
            0,
            0,
            0,
            _DATE,
            self.crc,
            _FULL,
            _FULL,
            len(self.name),
            _EXTRA_LOCAL.size,
        )
        return head + self.name + _EXTRA_LOCAL.pack(1, 16, self.size, self.size)

    def central_header(self) -> bytes:
        head = _CENTRAL.pack(
            b"PK\x01\x02", _VERSION, 3, _VERSION, 0, 0, 0, 0, _DATE, self.crc, _FULL, _FULL,
            len(self.name), _EXTRA_CENTRAL.size, 0, 0, 0, 0o644 << 16, _FULL,
        )  # fmt: skip
        return head + self.name + _EXTRA_CENTRAL.pack(1, 24, self.size, self.size, self.offset)


class NpzWriter:
    """A .npz built in the open binary file ``fh`` (seekable, empty): :meth:`reserve` an array's entry
    and fill it (an :class:`ArrayEntry`), or :meth:`add` a whole array; :meth:`close` ends the zip.
    Entries are listed in the order reserved. ``ahead``: bytes written behind (module docstring; 0:
    every write done before ``write`` returns); :meth:`stop` ends the writer thread (after
    :meth:`close`, or on an error)."""

    def __init__(self, fh, *, ahead: int = 0):
        self.fd = fh.fileno()
        self.end = 0
        self.entries: list[Entry] = []
        self.behind = WriteBehind(ahead) if ahead > 0 else None

    def stop(self) -> None:
        if self.behind is not None:
            self.behind.stop()

    def reserve(self, key: str, shape: tuple[int, ...], dtype: npt.DTypeLike) -> ArrayEntry:
        header = npy_header(shape, dtype)
        name = f"{key}.npy".encode()
        size = len(header) + math.prod(shape) * np.dtype(dtype).itemsize
        entry = ArrayEntry(self.fd, name, self.end, size, tuple(shape), np.dtype(dtype), self.behind)
        entry.write(header)
        self.end = entry.data_at + size
        self.entries.append(entry)
        return entry

    def add(self, key: str, value: npt.ArrayLike) -> None:
        """``value`` as ``np.save`` would write it, COPY_CHUNK bytes at a time from the array itself."""
        array: np.ndarray = np.asarray(value)
        if not array.flags.c_contiguous:
            array = array.copy(order="C")  # (np.ascontiguousarray would make a 0-d array 1-d)
        if array.dtype.hasobject:
            raise ValueError(f"{key}: an array of objects is not written (it would need pickling)")
        entry = self.reserve(key, array.shape, array.dtype)
        data = memoryview(array.reshape(-1).view(np.uint8))  # type: ignore[arg-type]  # numpy's buffer
        for at in range(0, len(data), COPY_CHUNK):
            entry.write(data[at : at + COPY_CHUNK])

    def close(self) -> None:
        """Each entry's local header, then the central directory and the end records (every piece
        written behind written first)."""
        if self.behind is not None:
            self.behind.drain()
        for e in self.entries:
            if e.written != e.size:
                raise ValueError(f"{e.name.decode()}: {e.written} of {e.size} bytes were written")
            _pwrite_all(self.fd, memoryview(e.local_header()), e.offset)
        central = b"".join(e.central_header() for e in self.entries)
        n, at = len(self.entries), self.end
        end64 = _END64.pack(b"PK\x06\x06", _END64.size - 12, _VERSION, _VERSION, 0, 0, n, n, len(central), at)
        locator = _LOCATOR64.pack(b"PK\x06\x07", 0, at + len(central), 1)
        end = _END.pack(b"PK\x05\x06", 0, 0, min(n, 0xFFFF), min(n, 0xFFFF), _FULL, _FULL, 0)
        _pwrite_all(self.fd, memoryview(central + end64 + locator + end), at)


class ArrayEntry(Entry):
    """An entry of one array [N, ...], written row by row (a :class:`~model.interp.trace.Sink`): row
    ``i`` (a tensor, converted to the entry's dtype a piece at a time) must follow row ``i − 1``."""

    def __init__(
        self,
        fd: int,
        name: bytes,
        offset: int,
        size: int,
        shape: tuple[int, ...],
        dtype: np.dtype,
        behind: WriteBehind | None = None,
    ):
        super().__init__(fd, name, offset, size, behind)
        self.shape, self.dtype, self.rows = shape, dtype, 0

    def write_row(self, row: int, tensor) -> None:
        import torch

        if row != self.rows or tuple(tensor.shape) != self.shape[1:]:
            name = self.name.decode()
            raise ValueError(
                f"{name} {self.shape}: row {row} of shape {tuple(tensor.shape)}, expected {self.rows}"
            )
        as_torch = torch.float16 if self.dtype == np.float16 else torch.float32
        for piece in _pieces(tensor, COPY_CHUNK // self.dtype.itemsize):  # no whole copy of a strided row
            values = piece.to(as_torch).contiguous()
            owned = values.data_ptr() != piece.data_ptr()  # converted or gathered: a fresh copy
            super().write(values.numpy().reshape(-1).view(np.uint8), owned=owned)
        self.rows += 1


class RowSink:
    """:class:`ArrayEntry` as the trace's :class:`~model.interp.trace.Sink` (``write(row, tensor)``)."""

    def __init__(self, entry: ArrayEntry):
        self.entry = entry

    def write(self, row: int, tensor) -> None:
        self.entry.write_row(row, tensor)


def write_rows(entry: Entry, rows, block: int = LOGITS_BLOCK) -> None:
    """Fill ``entry`` with ``rows[a:b]`` (an array-like of tensors [N, V], e.g. the logits unembedded a
    block of positions at a time, :class:`~model.interp.streamed.Unembedding`: a fresh tensor for each
    block), blocks of about ``block`` bytes float32. In memory: one block, never [N, V]; written
    behind, the block being written and the next one made."""
    N, V = rows.shape
    step = max(1, block // (4 * max(1, V)))
    for a in range(0, N, step):
        values = rows[a : a + step].float().contiguous()
        entry.write(values.numpy().reshape(-1).view(np.uint8), owned=True)


def _pieces(t, most: int) -> Iterator:
    """Tensor ``t`` in C order as consecutive views of at most ``most`` values (but one row of its last
    axis), so that converting or gathering a strided tensor copies one piece at a time."""
    if t.numel() <= most or t.dim() <= 1:
        yield t
    elif t.dim() == 2:
        step = max(1, most // max(1, t.shape[1]))
        for i in range(0, t.shape[0], step):
            yield t[i : i + step]
    else:
        for sub in t.unbind(0):
            yield from _pieces(sub, most)


__all__ = ["ArrayEntry", "Entry", "NpzWriter", "RowSink", "WriteBehind", "npy_header", "write_rows"]
