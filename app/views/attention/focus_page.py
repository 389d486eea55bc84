"""The Token focus page: click a token, see across every head where it looks and who looks at it.

``model.interp.analysis.aggregate.TokenFocus``: ``looks_at`` [L, H, T] is token t's query row in every head,
``looked_at_by`` [L, H, T] its key column. Drawn as two heatmaps with one row per head (L·H rows), and
above them the mean over all heads as bars. Titles wrap within their plot (two plots side by side
at 1280 px).
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QSize, Qt
from PySide6.QtWidgets import QLabel, QListView, QListWidget, QListWidgetItem, QSizePolicy, QVBoxLayout

from app.views.attention.base import AttentionPage, blurb_label, holder
from app.widgets.matrix_plot import MatrixPanel
from app.widgets.titles import wrapping_title
from app.widgets.token_axis import TokenAxis
from model.interp.measures import token_focus_of


class FocusPage(AttentionPage):
    title = "Token focus"
    needs_every_pattern = True
    key = "focus"
    blurb = (
        "Click a token of the prompt. Left: where it looks — its attention over earlier tokens in every "
        "head (one row per head). Right: who looks at it — how much every later token attends to it. "
        "The bars on top average all heads."
    )

    def build(self) -> None:
        self.token = -1
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        self.strip = QListWidget()
        self.strip.setFlow(QListView.Flow.LeftToRight)
        self.strip.setWrapping(True)
        self.strip.setResizeMode(QListView.ResizeMode.Adjust)
        self.strip.setSpacing(1)
        self.strip.setUniformItemSizes(False)
        self.strip.setMaximumHeight(86)
        self.strip.setStyleSheet(
            "QListWidget::item { border: 1px solid #ccc; border-radius: 3px; padding: 1px 4px; }"
            "QListWidget::item:selected { background: #ff8c00; color: white; }"
        )
        lay.addWidget(self.strip)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.bars_out = self._bar_plot(0, 0, "where it looks (mean over heads)")
        self.bars_in = self._bar_plot(0, 2, "who looks at it (mean over heads)")
        self.heat_out = MatrixPanel(self.view.ci, 1, 0, square=False, row_title="head", col_title="")
        self.heat_in = MatrixPanel(self.view.ci, 1, 2, square=False, row_title="head", col_title="")
        self.view.ci.layout.setRowStretchFactor(0, 1)
        self.view.ci.layout.setRowStretchFactor(1, 4)
        for hp in (self.heat_out, self.heat_in):
            hp.left_axis.index = False
        self.canvas = holder(self.view)
        lay.addWidget(self.canvas, 1)
        self.readout = QLabel(" ")
        self.readout.setTextFormat(Qt.TextFormat.PlainText)  # token texts: <s> is no tag
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        lay.addWidget(self.readout)
        self.focus = None
        self.strip.currentRowChanged.connect(self._on_row)
        self.view.scene().sigMouseMoved.connect(self._on_move)

    def _bar_plot(self, row: int, col: int, title: str):
        axis = TokenAxis("bottom", offset=0.5)
        p = self.view.addPlot(row=row, col=col, axisItems={"bottom": axis})
        wrapping_title(p)  # two plots side by side: a title wraps within its own
        p.setTitle(title, color="#222")
        p.setMenuEnabled(False)
        p.hideButtons()
        p.setMouseEnabled(x=False, y=False)
        p.getAxis("left").enableAutoSIPrefix(False)
        p.setLabel("left", "weight")
        bars = pg.BarGraphItem(x0=[], x1=[], y0=[], y1=[], brush=pg.mkBrush(59, 111, 212), pen=None)
        p.addItem(bars)
        p._bars, p._axis = bars, axis
        return p

    def set_token(self, t: int) -> None:
        """Focus on position ``t`` (what clicking its chip does)."""
        if self.strip.currentRow() != t:
            self.strip.setCurrentRow(t)
        else:
            self._on_row(t)

    def _on_row(self, t: int) -> None:
        if t < 0:
            return
        self.token = t
        self._draw()

    def refresh(self) -> None:
        insp = self.state.inspection
        if insp is None:
            return
        labels = insp.labels
        if [self.strip.item(i).text() for i in range(self.strip.count())] != labels:
            self.strip.blockSignals(True)
            self.strip.clear()
            for i, lab in enumerate(labels):
                item = QListWidgetItem(lab)
                item.setToolTip(f"token {i}: '{lab}'")
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                item.setSizeHint(QSize(max(18, 9 * len(lab) + 8), 20))
                self.strip.addItem(item)
            self.strip.blockSignals(False)
        if not 0 <= self.token < insp.T:
            self.token = insp.T // 2  # the middle: both earlier and later tokens to look at
        self.strip.blockSignals(True)
        self.strip.setCurrentRow(self.token)
        self.strip.blockSignals(False)
        self._draw()
        self.stale = False

    def _draw(self) -> None:
        insp = self.state.inspection
        if insp is None or not 0 <= self.token < insp.T:
            return
        t = self.token
        f = token_focus_of(insp.weights, t)
        self.focus = f
        L, H, T = f.looks_at.shape
        heads = [f"L{l} H{h}" for l in range(L) for h in range(H)]
        # colours from 0 to the largest weight shown (the legend says which), so faint heads still show
        # what the mask hides (keys after t as a query, queries before t as a key) is grey, as everywhere
        seen = {self.heat_out: insp.mask[t], self.heat_in: insp.mask[:, t]}
        for hp, m in ((self.heat_out, f.looks_at), (self.heat_in, f.looked_at_by)):
            top = max(0.05, float(m.max()))
            mask = np.broadcast_to(seen[hp], (L * H, T))
            hp.set_matrix(m.reshape(L * H, T), heads, insp.labels, levels=(0.0, top), mask=mask)
        lab = html.escape(insp.labels[t])
        self.heat_out.set_title(f"'{lab}' as a query: its weight on each key, per head", size="10pt")
        self.heat_in.set_title(f"'{lab}' as a key: each query's weight on it, per head", size="10pt")
        x = np.arange(T, dtype=np.float32)
        for p, vals in ((self.bars_out, f.looks_at_mean), (self.bars_in, f.looked_at_by_mean)):
            p._bars.setOpts(x0=x + 0.1, x1=x + 0.9, y0=np.zeros(T), y1=vals)
            p._axis.set_labels(insp.labels)
            p.setXRange(0, T, padding=0.0)
            p.setYRange(0, max(0.05, float(vals.max()) * 1.15), padding=0.0)
        n = L * H
        style = {"color": "#222", "size": "10pt"}
        self.bars_out.setTitle(f"where '{lab}' (token {t}) looks: mean of the {n} heads", **style)
        self.bars_in.setTitle(f"who looks at '{lab}' (token {t}): mean of the {n} heads", **style)

    def _on_move(self, pos: QPointF) -> None:
        insp, f = self.state.inspection, self.focus
        if insp is None or f is None:
            return
        H = f.looks_at.shape[1]
        for hp, what in ((self.heat_out, "looks at key"), (self.heat_in, "is looked at by query")):
            cell = hp.cell_at(pos)
            if cell is not None:
                r, c = cell
                t = f.token
                self.readout.setText(
                    f"layer {r // H}, head {r % H}: token {t} '{insp.labels[t]}' {what} {c} "
                    f"'{insp.labels[c]}' with weight {hp.value(r, c):.3f}"
                )
                return

    def export_targets(self):
        return {"focus": self.canvas}


__all__ = ["FocusPage"]
