"""The head graph of the Circuits page (:mod:`app.views.attention.circuits_page`): layers left to right,
each head a node (named heads in their role's colour and labelled), an edge from an earlier head to a
later one whose queries (Q, blue), keys (K, red) or values (V, green) read what the earlier one's OV
circuit writes, entering the node at three ports (Q above, V below); width by score. Clicking a head
or an edge, hovering for a readout; :meth:`HeadGraph.set_selected` highlights one head's edges.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QBrush, QFont
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.views.attention.grid_controls import CELL_NAMES, ROLE_COLORS
from app.widgets.axes import ReadableAxis

#: The composition kinds and their colours (tab10 blue, red, green).
KINDS = ("Q", "K", "V")
KIND_COLORS = {"Q": (31, 119, 180), "K": (214, 39, 40), "V": (44, 160, 44)}
#: Where each kind's edge enters its reader, in heads (Q above the node, V below).
PORTS = {"Q": -0.24, "K": 0.0, "V": 0.24}
#: Edge widths (px) of the four score bins between the threshold and the strongest edge shown.
WIDTHS = (1.2, 2.2, 3.4, 5.0)
#: Named heads get a text label up to this many heads (beyond, their colour says it).
LABEL_HEADS = 256


def head_name(head) -> str:
    """``(layer, head)`` as the pages write it: ``L3H5``."""
    return f"L{head[0]}H{head[1]}"


class HeadGraph(QWidget):
    """The head graph (module docstring) with a readout line under it.

    ``headClicked(layer, head)``, ``headDoubleClicked(layer, head)`` and ``edgeClicked(kind, l1, h1,
    l2, h2)``; :meth:`set_graph` draws, :meth:`set_selected` highlights one head's edges."""

    headClicked = Signal(int, int)
    headDoubleClicked = Signal(int, int)
    edgeClicked = Signal(str, int, int, int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.x_axis, self.y_axis = ReadableAxis("bottom"), ReadableAxis("left")
        self.plot: pg.PlotItem = self.view.addPlot(
            row=0, col=0, axisItems={"bottom": self.x_axis, "left": self.y_axis}
        )
        p = self.plot
        p.invertY(True)
        p.setMenuEnabled(False)
        p.hideButtons()
        p.setLabel("bottom", "layer")
        p.setLabel("left", "head")
        for axis in (self.x_axis, self.y_axis):
            axis.enableAutoSIPrefix(False)
        self.vb: pg.ViewBox = p.getViewBox()
        self.curves: dict[tuple[str, int, bool], pg.PlotCurveItem] = {}
        self.nodes = pg.ScatterPlotItem(pxMode=True)
        self.ring = pg.ScatterPlotItem(pxMode=True)
        p.addItem(self.nodes)
        p.addItem(self.ring)
        self.names: list[pg.TextItem] = []
        lay.addWidget(self.view, 1)
        self.readout = QLabel(" ")
        self.readout.setObjectName("circuitsReadout")
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        lay.addWidget(self.readout)
        self.shape = (0, 0)
        self.edges: list[tuple[str, tuple[int, int], tuple[int, int], float]] = []
        self.roles: dict[tuple[int, int], str] = {}
        self.selected: tuple[int, int] | None = None
        self.chance = 0.0
        self.describe_head = lambda l, h: f"L{l}H{h}"
        self._segments = np.zeros((0, 4))
        self._last = None
        self._look: tuple | None = None  # (L, H, roles, node size) the nodes were drawn for
        self.view.scene().sigMouseClicked.connect(self._on_click)
        self.view.scene().sigMouseMoved.connect(self._on_move)

    # ---- drawing -------------------------------------------------------------------------------
    def set_graph(self, n_layers: int, n_heads: int, edges, roles: dict, selected, chance: float) -> None:
        """Draw ``n_layers`` × ``n_heads`` nodes, ``edges`` [(kind, writer, reader, score)] (strongest
        first), ``roles`` {(l, h): role name} and the ``selected`` head."""
        L, H = max(1, n_layers), max(1, n_heads)
        new_shape = (L, H) != self.shape
        self.shape, self.edges, self.roles, self.chance = (L, H), list(edges), dict(roles), chance
        if new_shape:
            self.x_axis.set_categories([f"L{l}" for l in range(L)])
            self.y_axis.set_categories([f"H{h}" for h in range(H)])
            self.vb.setLimits(xMin=-1.0, xMax=L, yMin=-1.0, yMax=H)
            self.reset_view()
        size = float(np.clip(0.42 * min(self._px_per_unit()), 6, 14))
        look = (L, H, tuple(sorted(self.roles.items())), round(size, 1))
        if look != self._look:  # the nodes and their names change with the roles, not with the edges
            self._look = look
            x, y = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
            brushes: dict[str | None, QBrush] = {None: pg.mkBrush(236, 236, 236)}
            for colour in ROLE_COLORS.values():
                if colour:
                    brushes[colour] = pg.mkBrush(colour)
            fill = [brushes[ROLE_COLORS.get(self.roles.get((l, h), ""))] for l in range(L) for h in range(H)]
            self.nodes.setData(
                x=x.ravel(), y=y.ravel(), brush=fill, pen=pg.mkPen(70, 70, 70, 220, width=1), size=size
            )
            for item in self.names:
                self.plot.removeItem(item)
            self.names = []
            if L * H <= LABEL_HEADS:
                font = QFont()
                font.setPointSizeF(7.5)
                for (l, h), role in sorted(self.roles.items()):
                    colour = ROLE_COLORS.get(role)
                    if not colour or role not in CELL_NAMES:
                        continue
                    item = pg.TextItem(CELL_NAMES[role], color=colour, anchor=(0.5, 0.0))
                    item.setFont(font)
                    item.setPos(l, h + 0.22)
                    self.plot.addItem(item)
                    self.names.append(item)
        self.set_selected(selected)

    def _px_per_unit(self) -> tuple[float, float]:
        sx, sy = self.vb.viewPixelSize()
        return (1.0 / sx if sx > 0 else 40.0), (1.0 / abs(sy) if sy else 40.0)

    def reset_view(self) -> None:
        L, H = self.shape
        self.vb.setRange(xRange=(-0.5, L - 0.5), yRange=(-0.6, H - 0.4), padding=0.02)

    def set_selected(self, selected) -> None:
        """Highlight ``selected``'s inputs and outputs (every other edge faded)."""
        self.selected = tuple(selected) if selected is not None else None
        groups: dict[tuple[str, int, bool], list[float]] = {}
        scores = [e[3] for e in self.edges]
        lo, hi = (min(scores), max(scores)) if scores else (0.0, 1.0)
        segments = []
        for kind, (l1, h1), (l2, h2), score in self.edges:
            b = 0 if hi <= lo else min(len(WIDTHS) - 1, int((score - lo) / (hi - lo) * len(WIDTHS)))
            strong = self.selected is None or self.selected in ((l1, h1), (l2, h2))
            seg = [l1 + 0.12, h1, l2 - 0.12, h2 + PORTS[kind]]
            segments.append(seg)
            groups.setdefault((kind, b, strong), []).extend(seg)
        self._segments = np.asarray(segments, dtype=np.float64).reshape(-1, 4)
        for key, curve in self.curves.items():
            if key not in groups:
                curve.setData([], [])
        for (kind, b, strong), flat in groups.items():
            key = (kind, b, strong)
            if key not in self.curves:
                alpha = 235 if strong else 45
                pen = pg.mkPen((*KIND_COLORS[kind], alpha), width=WIDTHS[b])
                curve = pg.PlotCurveItem(pen=pen, connect="pairs", antialias=True)
                curve.setZValue(-1 if not strong else 0)
                self.plot.addItem(curve)
                self.curves[key] = curve
            pts = np.asarray(flat, dtype=np.float64).reshape(-1, 2)
            self.curves[key].setData(pts[:, 0], pts[:, 1], connect="pairs")
        if self.selected is None:
            self.ring.setData([], [])
        else:
            size = float(np.clip(0.42 * min(self._px_per_unit()), 6, 14)) + 7
            self.ring.setData(
                x=[self.selected[0]], y=[self.selected[1]], size=size, brush=None,
                pen=pg.mkPen(20, 20, 20, width=2.2),
            )  # fmt: skip

    def clear(self) -> None:
        self.edges, self.roles = [], {}
        self._look = None
        self.nodes.setData([], [])
        self.ring.setData([], [])
        for curve in self.curves.values():
            curve.setData([], [])
        for item in self.names:
            self.plot.removeItem(item)
        self.names = []
        self.readout.setText(" ")

    # ---- pointing ------------------------------------------------------------------------------
    def item_at(self, scene_pos: QPointF):
        """``("head", (l, h))``, ``("edge", index)`` or None under a scene position."""
        if not self.vb.sceneBoundingRect().contains(scene_pos) or self.shape == (0, 0):
            return None
        p = self.vb.mapSceneToView(scene_pos)
        px, py = self._px_per_unit()
        L, H = self.shape
        l, h = round(p.x()), round(p.y())
        if 0 <= l < L and 0 <= h < H and math.hypot((p.x() - l) * px, (p.y() - h) * py) <= 9:
            return ("head", (int(l), int(h)))
        if len(self._segments):
            s = self._segments
            a = np.stack([s[:, 0] * px, s[:, 1] * py], 1)
            b = np.stack([s[:, 2] * px, s[:, 3] * py], 1)
            q = np.array([p.x() * px, p.y() * py])
            ab = b - a
            t = np.clip(((q - a) * ab).sum(1) / np.maximum((ab * ab).sum(1), 1e-9), 0, 1)
            dist = np.linalg.norm(a + t[:, None] * ab - q, axis=1)
            i = int(np.argmin(dist))
            if dist[i] <= 5:
                return ("edge", i)
        return None

    def scene_pos_of_head(self, layer: int, head: int) -> QPointF:
        return self.vb.mapViewToScene(QPointF(layer, head))

    def scene_pos_of_edge(self, index: int) -> QPointF:
        l1, h1, l2, h2 = self._segments[index]
        return self.vb.mapViewToScene(QPointF((l1 + l2) / 2, (h1 + h2) / 2))

    def describe(self, item) -> str:
        if item is None:
            return " "
        if item[0] == "head":
            return self.describe_head(*item[1])
        kind, w, r, score = self.edges[item[1]]
        times = f" ({score / self.chance:.1f}× chance)" if self.chance > 0 else ""
        return (
            f"{head_name(w)} → {head_name(r)}: {kind}-composition {score:.3f}{times} · click to path-patch it"
        )

    def _on_move(self, pos: QPointF) -> None:
        item = self.item_at(pos)
        if item != self._last:
            self._last = item
            self.readout.setText(self.describe(item))

    def click(self, item, *, double: bool = False) -> None:
        """What a click on ``item`` (from :meth:`item_at`) does."""
        if item is None:
            return
        if item[0] == "head":
            (self.headDoubleClicked if double else self.headClicked).emit(*item[1])
            return
        kind, (l1, h1), (l2, h2), _score = self.edges[item[1]]
        self.edgeClicked.emit(kind, l1, h1, l2, h2)

    def _on_click(self, ev) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        self.click(self.item_at(ev.scenePos()), double=ev.double())


__all__ = ["KINDS", "KIND_COLORS", "HeadGraph", "head_name"]
