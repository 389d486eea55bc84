"""AttentionLines: the "head view" of one attention pattern — queries on the left, keys on the
right, a line from query ``i`` to key ``j`` whose opacity is the weight ``w_ij``.

Cheap for long prompts: lines below ``min_weight`` are not drawn, at most ``max_lines`` of the
strongest are kept, and the rest are grouped into :data:`N_BINS` opacity bins, each one
``PlotCurveItem(connect="pairs")`` (one path per bin, not one item per line). Token labels come from
:class:`~app.widgets.token_axis.TokenAxis`, so zooming in (wheel) shows every token and
dragging scrolls a 1024-token prompt. Hovering a query highlights its lines and lists where it looks.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.widgets.token_axis import TokenAxis

#: Opacity bins (one curve item each).
N_BINS = 10
#: Tokens in view at first on a long prompt (wheel/drag for the rest).
INITIAL_ROWS = 64

_LINE_RGB = (31, 90, 190)
_HIGHLIGHT_RGB = (235, 110, 0)


def line_segments(
    weights: np.ndarray, min_weight: float, max_lines: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(query, key, weight) of the lines to draw: ``w ≥ min_weight``, the strongest ``max_lines``."""
    w = np.asarray(weights, dtype=np.float32)
    q, k = np.nonzero(w >= min_weight)
    vals = w[q, k]
    if len(vals) > max_lines:
        keep = np.argpartition(vals, len(vals) - max_lines)[-max_lines:]
        q, k, vals = q[keep], k[keep], vals[keep]
    return q, k, vals


class AttentionLines(QWidget):
    """Lines view of one [T, T] pattern; ``queryHovered(i)`` (-1 when leaving)."""

    queryHovered = Signal(int)

    def __init__(self, parent: QWidget | None = None, *, min_weight: float = 0.02, max_lines: int = 30_000):
        super().__init__(parent)
        self.min_weight = float(min_weight)
        self.max_lines = int(max_lines)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.left_axis = TokenAxis("left", offset=0.0, index=True)
        self.right_axis = TokenAxis("right", offset=0.0, index=True)
        self.plot: pg.PlotItem = self.view.addPlot(
            row=0, col=0, axisItems={"left": self.left_axis, "right": self.right_axis}
        )
        p = self.plot
        p.showAxis("right")
        p.hideAxis("bottom")
        p.invertY(True)
        p.setMenuEnabled(False)
        p.hideButtons()
        p.setLabel("left", "queries (each looks at…)")
        p.setLabel("right", "…keys")
        self.vb: pg.ViewBox = p.getViewBox()
        self.vb.setMouseEnabled(x=False, y=True)
        self.vb.setXRange(-0.02, 1.02, padding=0.0)
        self.curves: list[pg.PlotCurveItem] = []
        for b in range(N_BINS):
            alpha = int(255 * ((b + 0.5) / N_BINS) ** 0.8)
            pen = pg.mkPen((*_LINE_RGB, max(alpha, 12)), width=1.0 + 2.0 * b / N_BINS)
            curve = pg.PlotCurveItem(connect="pairs", pen=pen, skipFiniteCheck=True)
            p.addItem(curve)
            self.curves.append(curve)
        self.highlight = pg.PlotCurveItem(
            connect="pairs", pen=pg.mkPen((*_HIGHLIGHT_RGB, 230), width=2.5), skipFiniteCheck=True
        )
        p.addItem(self.highlight)
        self.dots = pg.ScatterPlotItem(size=5, pen=None, brush=pg.mkBrush(60, 60, 60))
        p.addItem(self.dots)
        layout.addWidget(self.view, 1)
        self.readout = QLabel(" ")
        self.readout.setTextFormat(Qt.TextFormat.PlainText)  # token texts: <s> is no tag
        self.readout.setWordWrap(True)  # every weight it lists shows, on more lines when narrow
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        layout.addWidget(self.readout)
        self.weights: np.ndarray | None = None
        self.tokens: list[str] = []
        self.n_lines = 0
        self._hover = -1
        self._T = -1
        self.view.scene().sigMouseMoved.connect(self._on_move)

    def set_weights(self, weights: np.ndarray, tokens: list[str], *, min_weight: float | None = None) -> None:
        """Draw pattern ``weights`` [T, T] (rows = queries) with token labels."""
        w = np.asarray(weights, dtype=np.float32)
        if w.ndim != 2 or w.shape[0] != w.shape[1]:
            raise ValueError(f"a lines view needs one [T, T] pattern, got shape {w.shape}")
        if min_weight is not None:
            self.min_weight = float(min_weight)
        T = w.shape[0]
        self.weights, self.tokens = w, list(tokens)
        q, k, vals = line_segments(w, self.min_weight, self.max_lines)
        self.n_lines = len(vals)
        # bin by weight over [min_weight, 1]
        span = max(1e-6, 1.0 - self.min_weight)
        bins = np.clip(((vals - self.min_weight) / span * N_BINS).astype(int), 0, N_BINS - 1)
        for b, curve in enumerate(self.curves):
            sel = bins == b
            n = int(sel.sum())
            x = np.tile(np.array([0.0, 1.0], dtype=np.float32), n)
            y = np.empty(2 * n, dtype=np.float32)
            y[0::2], y[1::2] = q[sel], k[sel]
            curve.setData(x, y)
        pos = np.arange(T, dtype=np.float32)
        self.dots.setData(np.r_[np.zeros(T), np.ones(T)], np.r_[pos, pos])
        self.left_axis.set_labels(self.tokens)
        self.right_axis.set_labels(self.tokens)
        if T != self._T:
            self._T = T
            self.vb.setLimits(yMin=-1.0, yMax=T, xMin=-0.05, xMax=1.05)
            self.vb.setYRange(-0.5, min(T, INITIAL_ROWS) - 0.5, padding=0.0)
            self._hover = min(T, INITIAL_ROWS) - 1  # start with the last query in view highlighted
        self._show_query(self._hover if self._hover < T else -1)

    def show_all(self) -> None:
        if self._T > 0:
            self.vb.setYRange(-0.5, self._T - 0.5, padding=0.0)

    def _show_query(self, i: int) -> None:
        self._hover = i
        if self.weights is None or i < 0:
            self.highlight.setData([], [])
            self.readout.setText("Hover a query on the left to see where it looks.")
            return
        row = self.weights[i]
        ks = np.nonzero(row >= self.min_weight)[0]
        x = np.tile(np.array([0.0, 1.0], dtype=np.float32), len(ks))
        y = np.empty(2 * len(ks), dtype=np.float32)
        y[0::2], y[1::2] = i, ks
        self.highlight.setData(x, y)
        top = np.argsort(row)[::-1][:6]
        parts = [f"{j} '{self.tokens[j]}' {row[j]:.2f}" for j in top if row[j] > 0]
        self.readout.setText(f"query {i} '{self.tokens[i]}' looks at: " + ",  ".join(parts))

    def hover_query(self, i: int) -> None:
        self._show_query(i)
        self.queryHovered.emit(i)

    def _on_move(self, pos: QPointF) -> None:
        if self.weights is None or not self.vb.sceneBoundingRect().contains(pos):
            return
        p = self.vb.mapSceneToView(pos)
        if p.x() >= 0.5:
            return  # the keys' side: keep the last query highlighted
        i = round(p.y())
        if not 0 <= i < self._T:
            i = -1
        if i != self._hover:
            self.hover_query(i)


__all__ = ["INITIAL_ROWS", "N_BINS", "AttentionLines", "line_segments"]
