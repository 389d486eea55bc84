"""Heads that behave alike (:class:`HeadsAlikePlot`, the Heads-over-a-corpus page's plane): every head
at its place (:class:`model.interp.corpus.HeadClusters`: ``coords`` [L, H, 2]) by what the user chose
(:meth:`~model.interp.corpus.HeadScores.alike`): the first two principal components of its
standardised scores, or the classical MDS of its patterns' Jensen–Shannon distances to every other
head's on the shared prompts; coloured by its cluster, each cluster named by its dominant score under
the plot. Hovering a head names it, a click emits ``headClicked(layer, head)``, the selected head is
ringed, and each drawing emits ``placed(basis)``."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.views.attention.base import lines_label
from app.widgets.palette import run_color

if TYPE_CHECKING:
    from model.interp.corpus import HeadClusters, HeadScores

HOVER_HINT = "Hover: a head's name; click: its card."
#: How near (pixels) the pointer must be to a head to name it.
NEAR_PX = 8


class HeadsAlikePlot(QWidget):
    """The plane of heads (see the module docstring)."""

    headClicked = Signal(int, int)
    #: (basis): every head was placed anew, by ``"scores"`` or ``"patterns"``
    placed = Signal(str)

    def __init__(self) -> None:
        super().__init__()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.view = pg.PlotWidget()
        self.view.setBackground("w")
        self.view.setMenuEnabled(False)
        for side in ("left", "bottom"):  # MDS places can be 0.001 apart: ticks as they are, never "(x0.001)"
            self.view.getPlotItem().getAxis(side).enableAutoSIPrefix(False)
        # the left axis's values left out: a plane's units are arbitrary (the bottom's give the scale, the
        # hover a head's place), and "−0.004" would take the room of a plane that can be ~230 px wide
        self.view.getPlotItem().getAxis("left").setStyle(showValues=False)
        self.items: list[pg.ScatterPlotItem] = []
        self.ring_item = pg.ScatterPlotItem(size=16, pen=pg.mkPen("k", width=2), brush=None)
        self.view.addItem(self.ring_item)
        self.view.scene().sigMouseMoved.connect(self._hover)
        self.view.scene().sigMouseClicked.connect(self._clicked)
        self.clusters_label = lines_label(3)
        self.hover_label = lines_label(1)
        self.hover_label.setText(HOVER_HINT)
        lay.addWidget(self.view, 1)
        lay.addWidget(self.clusters_label)
        lay.addWidget(self.hover_label)
        self.result: HeadScores | None = None
        self.clusters: HeadClusters | None = None  # the grouping and places drawn
        self.basis = "scores"

    def show_result(self, result: HeadScores | None, basis: str = "scores") -> None:
        """Place every head of ``result`` by ``basis`` (``"scores"`` or ``"patterns"``; nothing for
        None)."""
        self.result, self.basis = result, basis
        self.clusters = result.alike(basis) if result is not None else None
        for item in self.items:
            self.view.removeItem(item)
        self.items = []
        self.ring_item.setData([], [])
        if result is None or self.clusters is None:
            self.clusters_label.setText(" ")
            return
        c = self.clusters
        counts = []
        for i, name in enumerate(c.names):
            where = np.argwhere(c.labels == i)
            counts.append(len(where))
            item = pg.ScatterPlotItem(
                pos=c.coords[c.labels == i], size=9, pen=pg.mkPen("w"), brush=pg.mkBrush(*run_color(i)),
                name=name, data=[(int(a), int(b)) for a, b in where],
            )  # fmt: skip
            self.view.addItem(item)
            self.items.append(item)
        self.clusters_label.setText(
            "Clusters: "
            + " ".join(
                f'<span style="color:rgb{run_color(i)}">●</span>&nbsp;{html.escape(n)}&nbsp;({k})'
                for i, (n, k) in enumerate(zip(c.names, counts, strict=True))
            )
        )
        plot = self.view.getPlotItem()
        axis = "PC" if basis == "scores" else "MDS "
        # each axis's share of the variance, both under the plane: it can be ~80 px tall and ~230 wide
        first, second = (100 * float(v) for v in c.explained)
        plot.setLabel("bottom", f"{axis}1 ({first:.0f}%) · {axis}2 ({second:.0f}%)")
        plot.setLabel("left", f"{axis}2")
        self.view.autoRange()
        self.placed.emit(basis)

    def ring(self, layer: int, head: int) -> None:
        """Ring the selected head."""
        if self.clusters is not None:
            self.ring_item.setData(pos=self.clusters.coords[layer, head][None])

    def head_near(self, scene_pos: QPointF) -> tuple[int, int] | None:
        """The (layer, head) within :data:`NEAR_PX` of ``scene_pos``, or None."""
        c = self.clusters
        if c is None:
            return None
        vb = self.view.getPlotItem().vb
        p, px = vb.mapSceneToView(scene_pos), vb.viewPixelSize()
        xy = c.coords.reshape(-1, 2)
        d = np.hypot((xy[:, 0] - p.x()) / px[0], (xy[:, 1] - p.y()) / px[1])
        i = int(np.argmin(d))
        return divmod(i, c.labels.shape[1]) if d[i] <= NEAR_PX else None

    def describe(self, layer: int, head: int) -> str:
        """A head of the plane in words: its name, its cluster and its place."""
        assert self.clusters is not None
        c = self.clusters
        x, y = (float(v) for v in c.coords[layer, head])
        name = html.escape(c.names[int(c.labels[layer, head])])
        return f"<b>L{layer}H{head}</b>: cluster {name}, at ({x:+.2f}, {y:+.2f})".replace("-", "−")

    def _hover(self, pos: QPointF) -> None:
        near = self.head_near(pos)
        self.hover_label.setText(self.describe(*near) if near else HOVER_HINT)

    def _clicked(self, ev) -> None:
        near = self.head_near(ev.scenePos())
        if near is not None:
            self.headClicked.emit(*near)


__all__ = ["HeadsAlikePlot"]
