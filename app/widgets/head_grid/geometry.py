"""Where the cells of the head grid go: :class:`MosaicGeometry`.

``R × C`` heads of ``S × S`` pixels, a gap of ``g`` pixels after each, laid out ``cols`` to a row on
screen (``cols = C`` for the L×H grid; fewer or more when the cells flow, :func:`flow_columns`). Head
``(r, c)`` is the ``n = r·C + c``-th cell; it sits at screen place ``(i, j) = divmod(n, cols)``, its
top-left pixel at ``(x, y) = (j·(S+g), i·(S+g))``. A pixel ``(x, y)`` inside a cell shows the
``block × block`` tokens from query ``y_in·block`` and key ``x_in·block``. Rows may be folded away
(``shown``: the rows drawn, e.g. layers 10–19 of 30): the drawn rows are then numbered ``0, 1, …`` on
screen in their order, and every position still names the real row. A tall grid may be set in bands
of rows side by side (``bands``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from PySide6.QtCore import QRectF


def flow_columns(n: int, width: float, height: float) -> int:
    """How many columns give ``n`` cells in a ``width × height`` area the largest square inside each
    cell (on a tie, the fewest empty places, then the fewest rows)."""
    if n <= 1 or width <= 1 or height <= 1:
        return max(1, n)

    def score(c: int):
        rows = math.ceil(n / c)
        return (round(min(width / c, height / rows), 6), -(rows * c - n), c)

    return max(range(1, n + 1), key=score)


@dataclass(frozen=True)
class MosaicGeometry:
    R: int
    C: int
    S: int
    g: int
    cols: int
    #: the rows drawn, in order, when not all of them are (``()``: every row ``0 … R−1``)
    shown: tuple[int, ...] = ()
    #: side-by-side bands of rows (a tall grid set in columns, like a newspaper's: 30 layers as
    #: L0–L14 | L15–L29), each ``C`` cells wide, ``band_gap`` empty cells between two bands
    bands: int = 1
    band_gap: int = 1

    @classmethod
    def of(
        cls,
        R: int,
        C: int,
        S: int,
        cols: int | None = None,
        gap: int = 12,
        shown: tuple[int, ...] | None = None,
        bands: int = 1,
        band_gap: int = 1,
    ) -> MosaicGeometry:
        """The geometry of R×C heads drawn at S pixels (a gap of ``max(1, S // gap)``); ``shown``: the
        rows drawn (None: all); ``bands`` > 1 sets them in that many bands side by side (not with
        ``cols``)."""
        rows = tuple(shown) if shown is not None and tuple(shown) != tuple(range(R)) else ()
        n = len(rows) if rows else R
        bands = max(1, min(int(bands), n)) if cols in (None, C) else 1
        if bands > 1:
            bands = math.ceil(n / math.ceil(n / bands))  # no empty band
        g = max(1, S // gap)
        return cls(R, C, S, g, C if cols is None else max(1, cols), rows, bands, max(1, band_gap))

    @property
    def drawn(self) -> tuple[int, ...]:
        """The rows drawn, top first (band by band)."""
        return self.shown or tuple(range(self.R))

    @property
    def n_drawn(self) -> int:
        return len(self.shown) if self.shown else self.R

    def shows(self, r: int) -> bool:
        """Whether row ``r`` is drawn (not folded away)."""
        return 0 <= r < self.R and (not self.shown or r in self.shown)

    @property
    def per_band(self) -> int:
        """Rows in each band (the last may have fewer)."""
        return math.ceil(self.n_drawn / self.bands)

    @property
    def rows(self) -> int:
        """Rows of cells on screen."""
        if self.bands > 1:
            return self.per_band
        return math.ceil(self.n_drawn * self.C / self.cols)

    @property
    def slots(self) -> int:
        """Places for a cell across the canvas (with the empty ones between bands)."""
        if self.bands > 1:
            return self.bands * self.C + (self.bands - 1) * self.band_gap
        return self.cols

    @property
    def canvas_shape(self) -> tuple[int, int]:
        return self.rows * (self.S + self.g), self.slots * (self.S + self.g)

    def band_x(self, b: int) -> int:
        """x of the first pixel of band ``b``."""
        return b * (self.C + self.band_gap) * (self.S + self.g)

    def band_of(self, r: int) -> tuple[int, int]:
        """(band, row within it) of drawn row ``r``."""
        i_r = self.shown.index(r) if self.shown else r
        return divmod(i_r, self.per_band) if self.bands > 1 else (0, i_r)

    def _slot(self, i_r: int, c: int) -> tuple[int, int]:
        """(screen row, screen place) of the ``i_r``-th drawn row's head ``c``."""
        if self.bands > 1:
            b, i = divmod(i_r, self.per_band)
            return i, b * (self.C + self.band_gap) + c
        return divmod(i_r * self.C + c, self.cols)

    def origin(self, r: int, c: int) -> tuple[int, int]:
        """(x, y) of the top-left pixel of head (r, c) (a ValueError when row r is not drawn)."""
        i_r = self.shown.index(r) if self.shown else r
        i, j = self._slot(i_r, c)
        return j * (self.S + self.g), i * (self.S + self.g)

    def cell_rect(self, r: int, c: int) -> QRectF:
        x, y = self.origin(r, c)
        return QRectF(x, y, self.S, self.S)

    def locate(self, x: float, y: float, T: int, block: int) -> tuple[int, int, int, int] | None:
        """(r, c, query, key) at canvas coordinates (x, y), or None in a gap or outside."""
        step = self.S + self.g
        i, j = int(y // step), int(x // step)
        if not (0 <= j < self.slots and 0 <= i < self.rows):
            return None
        if self.bands > 1:
            b, c = divmod(j, self.C + self.band_gap)
            i_r = b * self.per_band + i
            if c >= self.C or i_r >= self.n_drawn:
                return None
        else:
            i_r, c = divmod(i * self.cols + j, self.C)
            if i_r >= self.n_drawn:
                return None
        yin, xin = y - i * step, x - j * step
        if not (0 <= yin < self.S and 0 <= xin < self.S):
            return None
        return self.drawn[i_r], c, min(T - 1, int(yin * block)), min(T - 1, int(xin * block))

    def place(self, canvas: np.ndarray, cells: np.ndarray) -> None:
        """Write ``cells`` [R, C, S, S] (the drawn rows of them; or one [S, S] for every head) into
        ``canvas`` in place."""
        step = self.S + self.g
        view = canvas.reshape(-1, step, self.slots, step)[:, : self.S, :, : self.S].transpose(0, 2, 1, 3)
        n = self.n_drawn
        if cells.ndim == 2:
            cells = np.broadcast_to(cells, (n, self.C, self.S, self.S))
        elif self.shown:
            cells = cells[list(self.shown)]
        flat = cells.reshape(n * self.C, self.S, self.S)
        if self.bands > 1:
            where = [self._slot(i_r, c) for i_r in range(n) for c in range(self.C)]
            view[tuple(np.array(where).T)] = flat
            return
        for i in range(view.shape[0]):
            part = flat[i * self.cols : (i + 1) * self.cols]
            view[i, : len(part)] = part


#: Rows too small for every name on screen are named every this many (as on the axis's first level)
MAJOR_ROWS = 5


class Drawn(Protocol):
    """A grid as its parts read it: the geometry drawn now (None before the first data)."""

    @property
    def geom(self) -> MosaicGeometry | None: ...


__all__ = ["MAJOR_ROWS", "Drawn", "MosaicGeometry", "flow_columns"]
