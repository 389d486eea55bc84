"""The head grid: :class:`HeadMosaic`, the L×H grid of heads, every head a [T, T] cell of one image.

Why one image and not L·H plot items: a new prompt (or a new training frame) then costs one array
copy and one ``setImage`` (no per-item layout or repaint bookkeeping), hit-testing is arithmetic, and
zoom/pan over the whole grid comes for free, which is what a 12×12 model on a long prompt needs. Cell
``(r, c)`` (layer, head) occupies pixels ``[y, y + S) × [x, x + S)`` of the canvas, ``x = j·(S+g)``,
``y = i·(S+g)`` with ``(i, j)`` its place on screen, ``S`` the drawn size of a head and ``g`` a gap.
Inside a cell rows are queries (top = first token) and columns keys.

Modes:

- **weights** (:meth:`HeadMosaic.set_data`): attention weights in [0, 1] (``log``: log10 weights in
  [−4, 0]; ``gamma`` < 1 brightens small weights); cells a query may not see are grey
  (:data:`~app.widgets.palette.HIDDEN_COLOR`, as in every matrix of the app, the legend's grey square
  says "masked"): the ``mask`` given, else the one the weights carry (exact zeros in every head above
  the diagonal, or outside a sliding window: :func:`model.interp.frame.carried_mask`), so a training frame or
  a checkpoint's snapshot is drawn by the same rule as an inspection; ``mask`` may also be one per row
  (a model of local and global layers: a local layer's cells grey out what its window hides);
- **difference** (:meth:`HeadMosaic.set_difference`): ``A − B`` per head on a diverging map, at
  symmetric levels ``(−m, m)`` shared by every head, so equal differences look equally strong;
- **pooled overview** (either mode, long prompts): a head of ``T`` tokens is drawn at
  ``S = ceil(T / b)`` pixels with ``b = model.pooling.block_size``; a pixel shows the largest weight
  (the largest |difference|) of its ``b × b`` block. Readouts always use the full-resolution values.

**Grouped-query attention** (``kv_group`` = query heads per key/value head, ``n_heads / n_kv_heads``):
the columns of each K/V head are framed together (a blue border around the group, every layer); the
top axis names each group (``K/V head g``, ``kvg`` when narrow) over a blue bracket, and each column
``h c``; the readout names the K/V head.

**Deep models** (30 layers × 9 heads): ``set_rows`` folds rows away, ``set_scrolling`` sets the rows in
bands or scrolls them and pools cells to the screen's resolution (:mod:`~app.widgets.head_grid.fit`,
:mod:`~app.widgets.head_grid.readable`), ``keys=True`` lets the arrow keys move the selection
(:mod:`~app.widgets.head_grid.keys`).

``flow=True`` wraps the cells into as many rows as fill the widget best (a handful of averaged heads
instead of a thin strip); each cell is then named in its top-right corner instead of on the axes.

The grid holds its parts and hands each what it needs: the scene it draws in
(:class:`~app.widgets.head_grid.scene.GridScene`), the painter of its image
(:class:`~app.widgets.head_grid.painter.MosaicPainter`), the marks over its cells
(:class:`~app.widgets.head_grid.marks.CellMarks`), the scroll bar, the fit, what keeps it readable, the
pointer and the keys; the parts that read what is drawn now read it from the grid through small
protocols (``FitHost``, ``ReadableHost``, ``PointerHost``), never the grid's class.
"""

from app.widgets.head_grid.fit import FIT_PX, MAX_BANDS, SCROLL_PX
from app.widgets.head_grid.geometry import MosaicGeometry, flow_columns
from app.widgets.head_grid.grid import HeadMosaic
from app.widgets.head_grid.pointer import readout_text

__all__ = ["FIT_PX", "MAX_BANDS", "SCROLL_PX", "HeadMosaic", "MosaicGeometry", "flow_columns", "readout_text"]
