"""Heads that behave alike (:class:`HeadsAlikePlot`, the Heads-over-a-corpus page's plane): every head
at its place in the first two principal components of its standardised scores
(:class:`model.interp.corpus.HeadClusters`: ``coords`` [L, H, 2]), coloured by its cluster, each
cluster named by its dominant score under the plot; hovering a head names it, a click emits
``headClicked(layer, head)``, and the selected head is ringed."""

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
    from model.interp.corpus import HeadScores

HOVER_HINT = "Hover: a head's name; click: its card."
#: How near (pixels) the pointer must be to a head to name it.
NEAR_PX = 8


class HeadsAlikePlot(QWidget):
    """The plane of heads (see the module docstring)."""

    headClicked = Signal(int, int)

    def __init__(self) -> None:
        super().__init__()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.view = pg.PlotWidget()
        self.view.setBackground("w")
        self.view.setMenuEnabled(False)
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

    def show_result(self, result: HeadScores | None) -> None:
        """Place every head of ``result`` (nothing for None)."""
        self.result = result
        for item in self.items:
            self.view.removeItem(item)
        self.items = []
        self.ring_item.setData([], [])
        if result is None:
            self.clusters_label.setText(" ")
            return
        c = result.clusters
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
        plot.setTitle("Heads that behave alike", size="9pt")
        plot.setLabel("bottom", f"PC1 ({100 * float(c.explained[0]):.0f}% of the variance)")
        plot.setLabel("left", f"PC2 ({100 * float(c.explained[1]):.0f}%)")

    def ring(self, layer: int, head: int) -> None:
        """Ring the selected head."""
        if self.result is not None:
            self.ring_item.setData(pos=self.result.clusters.coords[layer, head][None])

    def head_near(self, scene_pos: QPointF) -> tuple[int, int] | None:
        """The (layer, head) within :data:`NEAR_PX` of ``scene_pos``, or None."""
        res = self.result
        if res is None:
            return None
        vb = self.view.getPlotItem().vb
        p, px = vb.mapSceneToView(scene_pos), vb.viewPixelSize()
        xy = res.clusters.coords.reshape(-1, 2)
        d = np.hypot((xy[:, 0] - p.x()) / px[0], (xy[:, 1] - p.y()) / px[1])
        i = int(np.argmin(d))
        return divmod(i, res.shape[1]) if d[i] <= NEAR_PX else None

    def describe(self, layer: int, head: int) -> str:
        """A head of the plane in words: its name, its cluster and its place."""
        assert self.result is not None
        c = self.result.clusters
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
