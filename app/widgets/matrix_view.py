"""How a matrix sits in its plot: :func:`matrix_axes` (read as a matrix is: row 0 at the top, column
names along the top) and :class:`TopLeftFit` (square cells at the top left of a wider or taller
view). Used by every :class:`~app.widgets.matrix_plot.MatrixPanel` and by the head grid."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QRectF


def matrix_axes(p: pg.PlotItem) -> pg.PlotItem:
    """Lay ``p`` out as a matrix is read: row 0 at the top, column labels along the top axis (ticks
    pointing out), no bottom axis, context menu or auto-range button (used by MatrixPanel and
    HeadMosaic)."""
    p.hideAxis("bottom")
    p.showAxis("top")
    for name in ("left", "top"):  # ticks point out, beside the labels: none is drawn on the data
        p.getAxis(name).setStyle(tickLength=4)
    p.invertY(True)
    p.setMenuEnabled(False)
    p.hideButtons()
    return p


class TopLeftFit:
    """Keeps an aspect-locked view's content (``W × H`` from the origin) at the top left.

    pyqtgraph centres locked content in a wider (or taller) view, which leaves the matrix far from
    its axis labels. This sets the range so the content starts at the axes, again after every resize,
    until the user zooms or pans (then "reset" brings it back).
    """

    def __init__(self, vb: pg.ViewBox):
        self.vb = vb
        self.size: tuple[float, float] | None = None
        self.margin = 0.0
        self.user_moved = False
        vb.sigResized.connect(self._on_resized)
        vb.sigRangeChangedManually.connect(self._on_manual)

    def _on_manual(self, *_):
        self.user_moved = True

    def _on_resized(self, *_):
        if not self.user_moved:
            self.apply()

    def fit(self, W: float, H: float, margin: float = 0.0) -> None:
        """Show ``[−margin, W + margin] × [−margin, H + margin]`` (the margin: room for frames)."""
        self.size = (float(W) + 2 * margin, float(H) + 2 * margin)
        self.margin = float(margin)
        self.user_moved = False
        self.apply()

    def apply(self) -> None:
        if self.size is None:
            return
        W, H = self.size
        m = self.margin
        vw, vh = self.vb.width(), self.vb.height()
        if vw <= 1 or vh <= 1 or W <= 0 or H <= 0:
            self.vb.setRange(QRectF(-m, -m, W, H), padding=0.0)
            return
        if vw / vh > W / H:  # the view is wider than the content: extra room on the right
            self.vb.setRange(xRange=(-m, H * vw / vh - m), yRange=(-m, H - m), padding=0.0)
        else:  # taller: extra room at the bottom
            self.vb.setRange(xRange=(-m, W - m), yRange=(-m, W * vh / vw - m), padding=0.0)


__all__ = ["TopLeftFit", "matrix_axes"]
