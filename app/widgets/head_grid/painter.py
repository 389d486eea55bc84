"""What the head grid's image shows, painted from its values: :class:`MosaicPainter`.

:class:`MosaicPainter` places the pooled cells on one float32 canvas (the gaps between them at the
colour table's gap entry), colours them through a lookup table (weights in [0, 1], log10 weights
in [−4, 0], or A − B at symmetric levels on a diverging map), paints what a query cannot see grey
(:data:`~app.widgets.palette.HIDDEN_COLOR`, the legend's "masked" square) and writes the axes' tick
labels. It hands pyqtgraph colour-table indices, so a repaint is a plain indexed-image copy.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from app.widgets.head_grid.axis import GroupAxis
from app.widgets.head_grid.geometry import MAJOR_ROWS, MosaicGeometry
from app.widgets.legend import ColorLegend
from app.widgets.levels import LOG_FLOOR, log_weights, lut_indices, lut_levels
from app.widgets.palette import DIVERGING_CMAP, matrix_lut
from model.interp.pooling import pool_visible

#: The longest colour-bar label (characters) that fits along the bar of a small grid.
LEGEND_LABEL_CHARS = 24


class MosaicPainter:
    """The image, colour bar and tick labels of one mosaic (see the module docstring)."""

    def __init__(self, plot: pg.PlotItem, top: GroupAxis, image: pg.ImageItem, legend: ColorLegend):
        self.plot, self.top, self.image, self.legend = plot, top, image, legend
        #: the values drawn (float32, the pooled cells placed with their gaps), None when empty
        self.canvas: np.ndarray | None = None
        self._scratch: np.ndarray | None = None
        self._index_canvas: np.ndarray | None = None
        self._hidden: tuple[object, np.ndarray] | None = None
        self._ticks_key: tuple | None = None

    def new_canvas(self, geom: MosaicGeometry) -> None:
        self.canvas = np.empty(geom.canvas_shape, dtype=np.float32)

    def clear(self) -> None:
        self.canvas = self._scratch = None
        self.image.clear()
        self._ticks_key = None
        self.plot.getAxis("left").setTicks([[]])
        self.top.set_columns([], 1)

    def set_ticks(
        self,
        g: MosaicGeometry,
        row_labels: list[str],
        col_labels: list[str],
        names: tuple[str, str],
        compact: bool,
        flow: bool,
    ) -> None:
        """Name the rows and columns on the axes (``flow``: none; the cells carry their names); ``names``:
        (rows, columns), the words a ``compact`` mosaic writes once as the axes' titles."""
        left, top = self.plot.getAxis("left"), self.top
        if flow:
            self._ticks_key = None
            left.setTicks([[]])
            top.set_columns([], 1)
            left.setWidth(4)
            return
        step = g.S + g.g
        key = (g, tuple(row_labels), tuple(col_labels), compact)
        if key == self._ticks_key:  # setTicks re-lays the axis out (~15 ms each)
            return
        self._ticks_key = key
        # the first band's rows (the other bands' are written beside them, in the view)
        # every fifth row named first; the others where pyqtgraph finds room for their text
        ticks = [(i * step + g.S / 2, row_labels[r]) for i, r in enumerate(g.drawn[: g.rows])]
        left.setTicks([ticks[::MAJOR_ROWS], [t for i, t in enumerate(ticks) if i % MAJOR_ROWS]])
        row_name, col_name = names
        if compact and left.labelText != row_name:  # the word the ticks leave out
            left.setLabel(row_name)
        if compact and top.labelText != col_name:
            top.setLabel(col_name)
        left.setWidth(int(7 * max(len(s) for s in row_labels) + (34 if compact else 12)))
        top.set_columns(
            [(g.band_x(b) + c * step + g.S / 2, col_labels[c]) for b in range(g.bands) for c in range(g.C)],
            g.C,
        )

    def paint(
        self,
        geom: MosaicGeometry,
        overview: np.ndarray,
        *,
        mode: str,
        log: bool,
        levels: tuple[float, float],
        mask: np.ndarray | list[np.ndarray | None] | None,
        block: int,
    ) -> None:
        """Draw ``overview`` (the pooled cells [R, C, S, S]) on the canvas of ``geom``; ``mask``: one
        [T, T] for every head, or a list of one per row (None: nothing hidden in that row)."""
        ov = overview
        if mode == "difference":
            lo, hi = levels
            ov = np.clip(ov, np.float32(lo), np.float32(hi))
        elif log:
            lo, hi = float(np.log10(LOG_FLOOR)), 0.0
            ov = log_weights(ov)
        else:
            lo, hi = 0.0, 1.0
        lo, top, grey, gap = lut_levels(lo, hi)
        canvas = self.canvas
        assert canvas is not None  # made by new_canvas for this geometry
        canvas.fill(np.float32(gap))
        geom.place(canvas, ov)
        hidden = self._hidden_canvas(geom, mask, block)
        if hidden is not None:
            np.copyto(canvas, np.float32(grey), where=hidden)
        self.legend.set_hidden("masked" if hidden is not None else None)
        self.image.setImage(self._indices(canvas, lo, top), levels=None, autoLevels=False)
        self.legend.set_levels(*((lo, hi) if mode == "weights" else levels))

    def _indices(self, canvas: np.ndarray, lo: float, top: float) -> np.ndarray:
        """The canvas as colour-table entries (:func:`lut_indices`, in reused buffers): the paint is
        then a plain indexed-image copy instead of pyqtgraph's float rescale (~25 ms a 12×12 grid at
        256 tokens, in the GUI thread, on every repaint)."""
        if self._scratch is None or self._scratch.shape != canvas.shape:
            self._scratch = np.empty(canvas.shape, np.float32)
            self._index_canvas = np.empty(canvas.shape, np.uint8)
        return lut_indices(canvas, lo, top, scratch=self._scratch, out=self._index_canvas)

    def _hidden_canvas(
        self, geom: MosaicGeometry, mask: np.ndarray | list[np.ndarray | None] | None, block: int
    ) -> np.ndarray | None:
        """bool canvas of the masked pixels (cached per mask and geometry), or None when none is masked.
        Row masks: each distinct array (by identity) is pooled once."""
        if mask is None:
            return None
        if isinstance(mask, np.ndarray):
            vis = pool_visible(mask, block)
            if vis.all():
                return None
            key: tuple = (geom, block, vis.tobytes())
            if self._hidden is None or self._hidden[0] != key:
                hidden = np.zeros(geom.canvas_shape, dtype=bool)  # the canvas's
                geom.place(hidden, ~vis)
                self._hidden = (key, hidden)
            return self._hidden[1]
        which: list[int] = []  # per row: the index of its mask among the distinct ones (-1: none)
        seen: dict[int, int] = {}
        distinct: list[np.ndarray] = []
        for m in mask:
            if m is None:
                which.append(-1)
                continue
            if id(m) not in seen:
                seen[id(m)] = len(distinct)
                distinct.append(pool_visible(m, block))
            which.append(seen[id(m)])
        if all(v.all() for v in distinct):
            return None
        key = (geom, block, tuple(which), tuple(v.tobytes() for v in distinct))
        if self._hidden is None or self._hidden[0] != key:
            S = geom.S
            cells = np.zeros((geom.R, 1, S, S), dtype=bool)
            for r, i in enumerate(which[: geom.R]):
                if i >= 0:
                    cells[r, 0] = ~distinct[i]
            hidden = np.zeros(geom.canvas_shape, dtype=bool)  # the canvas's
            geom.place(hidden, np.broadcast_to(cells, (geom.R, geom.C, S, S)))
            self._hidden = (key, hidden)
        return self._hidden[1]

    def set_colours(self, mode: str, cmap: str, gamma: float, *, log: bool, names: tuple[str, str]) -> None:
        """The colour table and the colour bar's label: ``cmap`` at ``gamma`` for weights (log10
        when ``log``), the diverging map for A − B (named by the two runs when that fits)."""
        diverging = mode == "difference"
        cmap, gamma = (DIVERGING_CMAP, 1.0) if diverging else (cmap, gamma)
        self.image.setLookupTable(matrix_lut(cmap, gamma))
        self.legend.set_cmap(cmap, gamma)
        if diverging:  # the runs' names when they fit beside the bar (the title has them anyway)
            full = f"{names[0]} − {names[1]}"
            self.legend.set_label(full if len(full) <= LEGEND_LABEL_CHARS else "A − B")
        else:
            self.legend.set_label("log₁₀ weight" if log else "weight")


__all__ = ["LEGEND_LABEL_CHARS", "MosaicPainter"]
