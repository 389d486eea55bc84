"""The Logit attribution page: direct logit attribution at one position
(``model.interp.causal.attribution_of``).

The stream leaving the last block is a sum of writes (the embedding, every head's output, every
MLP's); with the final norm's scale frozen from this run, the logit of a token is the sum of what each
write adds to it. The page shows every head's part as an L×H map (click a head to open it) and the
embedding, each layer's attention and MLP as bars, and checks on screen that the parts add up to the
model's own logit.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QSplitter, QVBoxLayout

from app.views.attention.base import blurb_label
from app.views.attention.patching_page import CausalPage, layer_labels
from app.widgets.matrix_plot import MatrixPlot, format_cell
from app.widgets.palette import UP_BLUE_CMAP
from app.widgets.token_axis import TokenAxis

POSITIVE, NEGATIVE = pg.mkBrush(40, 110, 200), pg.mkBrush(210, 70, 60)  # blue up, red down


def bar_parts(attr) -> list[tuple[str, float]]:
    """(name, value) of the bars: the embedding, each layer's attention (its heads and output bias)
    and MLP, and the final norm's shift when it has one."""
    parts = [("embed", float(attr.embed))]
    for layer in range(attr.heads.shape[0]):
        parts.append((f"L{layer} attn", float(attr.heads[layer].sum() + attr.attn_bias[layer])))
        parts.append((f"L{layer} MLP", float(attr.mlp[layer])))
    if attr.norm_bias != 0:
        parts.append(("norm β", float(attr.norm_bias)))
    return parts


class AttributionPage(CausalPage):
    title = "Logit attribution"
    key = "attribution"
    needs_causal = "attribution"
    blurb = (
        "Where does a prediction come from? The logit of a token is a sum: what the embedding, each head and "
        "each MLP write into the residual stream, read through the final norm. Blue parts push the token up, "
        "red down. Only direct effects: what a head writes that later layers transform counts where it lands."
    )

    def build(self) -> None:
        self.result = None
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        row = QHBoxLayout()
        self.token_edit = self._input(row, "Token", "token", "the top prediction", 160)
        self.other_edit = self._input(row, "minus", "other", "optional second token", 160)
        row.addWidget(QLabel("at position"))
        self.position_spin = QSpinBox()
        self.position_spin.setMinimum(-1)
        self.position_spin.setSpecialValueText("last")
        self.position_spin.editingFinished.connect(
            lambda: self.state.set_causal_setup("attribution", position=self.position_spin.value())
        )
        row.addWidget(self.position_spin)
        row.addStretch(1)
        lay.addLayout(row)
        self.summary = self._summary_label()
        lay.addWidget(self.summary)
        split = QSplitter(Qt.Orientation.Horizontal)
        self.heads_plot = MatrixPlot(  # blue up, red down: as the bars and the text say
            diverging=True,
            cmap=UP_BLUE_CMAP,
            legend_label="logit part",
            row_title="layer",
            col_title="head",
            numbers=None,
        )
        self.heads_plot.set_title("each head's direct part")
        self.heads_plot.describe = self._describe_head
        self.heads_plot.clicked.connect(lambda l, h: self.openHeadRequested.emit(l, h))
        split.addWidget(self.heads_plot)
        self.bar_view = pg.GraphicsLayoutWidget()
        self.bar_view.setBackground("w")
        self.bar_axis = TokenAxis("bottom", offset=0.0)
        self.bar_plot = self.bar_view.addPlot(axisItems={"bottom": self.bar_axis})
        self.bar_plot.setMenuEnabled(False)
        self.bar_plot.hideButtons()
        self.bar_plot.setMouseEnabled(x=False, y=False)
        self.bar_plot.getAxis("left").enableAutoSIPrefix(False)
        self.bar_plot.setLabel("left", "part of the logit")
        self.bar_plot.setTitle("each layer's parts", color="#222")
        self.bar_plot.addItem(pg.InfiniteLine(pos=0, angle=0, pen=pg.mkPen("#888")))
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.7)
        self.bar_plot.addItem(self.bars)
        split.addWidget(self.bar_view)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        lay.addWidget(split, 1)
        self.results = split  # with the summary: what is greyed while it is another input's

    def show_inputs(self) -> None:
        setup = self.state.causal_setup["attribution"]
        for edit, text in ((self.token_edit, setup["token"]), (self.other_edit, setup["other"])):
            if not edit.hasFocus() and edit.text() != text:
                edit.setText(text)
        insp = self.state.inspection
        if insp is not None:
            self.position_spin.setMaximum(insp.T - 1)
        if not self.position_spin.hasFocus():
            self.position_spin.setValue(setup["position"])

    def clear_plots(self) -> None:
        self.heads_plot.set_matrix(np.full((1, 1), np.nan))
        self.bars.setOpts(x=[], height=[])

    def draw(self, res) -> None:
        a = res.attr
        L, H = a.heads.shape
        esc = html.escape
        norm = "LayerNorm σ" if res.norm == "layernorm" else "RMSNorm rms"
        value = (
            f"<b>{a.logit:.4f}</b>"
            if a.capped is None
            else f"<b>{a.logit:.4f}</b> before the final soft-cap {a.softcap:g}·tanh(z/{a.softcap:g}) "
            f"(the model's capped value: {a.capped:.4f})"
        )
        after = (
            " Each sublayer's own output norm is frozen the same way, so a head's part is its write "
            "through both."
            if a.sublayer_norms
            else ""
        )
        self.summary.setText(
            f"<b>{esc(res.target)}</b> at position {a.position} '{esc(res.labels[a.position])}' = "
            f"{value}; the parts below add up to {a.total:.4f} "
            f"(difference {abs(a.total - a.logit):.1e}). The final norm's scale ({norm} = {a.scale:.4g}) is "
            f"<b>frozen from this run</b>, which makes the norm linear in the writes.{after}"
        )
        self.heads_plot.set_matrix(a.heads, layer_labels(L), [f"H{i}" for i in range(H)])
        parts = bar_parts(a)
        names, values = [p[0] for p in parts], np.array([p[1] for p in parts])
        x = np.arange(len(parts), dtype=float)
        brushes = [POSITIVE if v >= 0 else NEGATIVE for v in values]
        self.bars.setOpts(x=x, height=values, width=0.7, brushes=brushes, pen=None)
        self.bar_axis.set_labels(names)
        self.bar_plot.setXRange(-0.6, len(parts) - 0.4, padding=0)
        lo, hi = min(0.0, float(values.min())), max(0.0, float(values.max()))
        pad = 0.08 * (hi - lo or 1.0)
        self.bar_plot.setYRange(lo - pad, hi + pad, padding=0)

    def _describe_head(self, l: int, h: int) -> str:
        if self.result is None:
            return " "
        return (
            f"L{l}H{h} adds {format_cell(self.result.attr.heads[l, h])} to the logit · click to open the head"
        )

    def numbers(self):
        res = self.result
        if res is None:
            return None
        a = res.attr
        L, H = a.heads.shape
        parts = a.parts()
        tables = {
            "heads": (a.heads, layer_labels(L), [f"H{i}" for i in range(H)], "layer \\ head"),
            "parts": (np.array([[v] for _, v in parts]), [n for n, _ in parts], ["logit part"], "part"),
        }
        return res.arrays(), tables

    def export_targets(self):
        return {"heads": self.heads_plot, "parts": self.bar_view}


__all__ = ["AttributionPage", "bar_parts"]
