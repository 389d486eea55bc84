"""A growing float64 column: the points of a curve, appended one drain at a time."""

from __future__ import annotations

import numpy as np


class Column:
    """A growing float64 column: appends in amortised O(1), the points so far as a numpy view.

    8 bytes a point where a list of Python floats takes 32, and a redraw hands pyqtgraph the view
    instead of converting the whole list again: a curve of a long run costs neither memory nor time.
    """

    __slots__ = ("_buf", "_n")

    def __init__(self, values=()):
        v = np.asarray(values, dtype=np.float64).ravel()
        self._buf = np.empty(max(16, 2 * len(v)))
        self._buf[: len(v)] = v
        self._n = len(v)

    def __len__(self) -> int:
        return self._n

    @property
    def values(self) -> np.ndarray:
        return self._buf[: self._n]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return self.values if dtype is None else self.values.astype(dtype)

    def extend(self, values) -> None:
        v = np.asarray(values, dtype=np.float64).ravel()
        n = self._n + len(v)
        if n > len(self._buf):
            buf = np.empty(max(n, 2 * len(self._buf)))
            buf[: self._n] = self._buf[: self._n]
            self._buf = buf
        self._buf[self._n : n] = v
        self._n = n


__all__ = ["Column"]
