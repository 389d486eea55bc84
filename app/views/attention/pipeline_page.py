"""The Pipeline page: one head taken apart stage by stage, with formulas and tensor shapes.

Stages (``model.analysis.pipeline.head_pipeline``, read from a trace of the model itself, so they are
exactly what it computed): Q, K, V → S = QKᵀ → S' (the model's scale rule) → M (mask: −∞) →
A = softmax(M) → O = AV. All eight share one scene, so the page exports as one SVG.
"""

from __future__ import annotations

import html
import textwrap

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSizePolicy, QVBoxLayout

from app.views.attention.base import AttentionPage, HeadSelector, blurb_label, holder
from app.widgets.matrix_plot import MatrixPanel, describe_value

#: (stage key, grid row, grid column) of each panel; a panel takes two columns (plot + colour bar).
LAYOUT = (
    ("q", 0, 0),
    ("k", 0, 2),
    ("v", 0, 4),
    ("scores_raw", 1, 0),
    ("scores_scaled", 1, 2),
    ("scores_masked", 1, 4),
    ("weights", 2, 0),
    ("head_out", 2, 2),
)
VECTOR_STAGES = ("q", "k", "v", "head_out")


class PipelinePage(AttentionPage):
    title = "Pipeline"
    key = "pipeline"
    needs_head_detail = True
    blurb = (
        "How one head turns its inputs into attention, stage by stage: ① queries, ② keys and ③ values "
        "(one row per token); ④ every query-key dot product; ⑤ scaled; ⑥ the mask hides the future "
        "(grey = −∞); ⑦ softmax makes each row sum to 1; ⑧ each token's output is its weights × V. "
        "Blue < 0 < red."
    )

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = QHBoxLayout()
        self.selector = HeadSelector()
        bar.addWidget(self.selector)
        self.info = QLabel(" ")
        self.info.setStyleSheet("color: #333;")
        bar.addWidget(self.info, 1)
        lay.addLayout(bar)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.plots: dict[str, MatrixPanel] = {}
        for key, row, col in LAYOUT:
            vec = key in VECTOR_STAGES
            self.plots[key] = MatrixPanel(
                self.view.ci,
                row,
                col,
                diverging=key != "weights",
                square=not vec,
                legend_label="weight" if key == "weights" else "value",
                row_title="",
                col_title="",
            )
        self.summary = pg.LabelItem(" ", justify="left", color="#222", size="9pt")
        self.view.ci.addItem(self.summary, row=2, col=4, colspan=2)
        self.canvas = holder(self.view)
        lay.addWidget(self.canvas, 1)
        self.readout = QLabel(" ")
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        lay.addWidget(self.readout)
        self.detail = None
        self.view.scene().sigMouseMoved.connect(self._on_move)
        self.selector.changed.connect(self.state.select)

    def refresh(self) -> None:
        insp = self.state.inspection
        if insp is None:
            return
        self.selector.set_shape(insp.n_layers, insp.n_heads)
        self.selector.set_head(*self.state.selected)
        detail = self.state.head_detail_for_selected()
        if detail is None:
            self.info.setText("computing this head's stages…")
            return
        self._draw(detail, insp)
        self.stale = False

    def on_head_selected(self, layer: int, head: int) -> None:
        self.selector.set_head(layer, head)
        self.redraw()

    def on_head_detail(self, detail) -> None:
        if self.in_view():
            self.refresh()

    def _draw(self, detail, insp) -> None:
        self.detail = detail
        labels = insp.labels
        dims = [str(i) for i in range(detail.d_k)]
        for n, (key, _, _) in enumerate(LAYOUT, start=1):
            stage = detail[key]
            hp = self.plots[key]
            if key == "weights":
                levels = (0.0, 1.0)
            elif key in ("scores_scaled", "scores_masked"):
                levels = None  # both on the scale of the scaled scores
                finite = detail["scores_scaled"].value[insp.mask]
                a = float(np.abs(finite).max()) if finite.size else 1.0
                levels = (-a or -1.0, a or 1.0)
            else:
                levels = None
            hp.set_matrix(stage.value, labels, dims if key in VECTOR_STAGES else labels, levels=levels)
            lines = [f"<b>{_CIRCLED[n]} {html.escape(stage.title)}</b>"]
            lines += [html.escape(t) for t in textwrap.wrap(stage.formula, 56)]
            if stage.shape == stage.shape_numeric:
                lines.append(html.escape(stage.shape))
            elif len(stage.shape) + len(stage.shape_numeric) < 52:
                lines.append(html.escape(f"{stage.shape}  =  {stage.shape_numeric}"))
            else:  # the numbers on a line of their own, never broken
                lines += [html.escape(stage.shape), html.escape(f"= {stage.shape_numeric}")]
            hp.set_title("<br>".join(lines), lines=max(4, len(lines)), color="#222", size="8pt")
        cfg = insp.config
        rule = {
            "sqrt_dk": f"S' = S / √d_k with d_k = {detail.d_k}",
            "none": "no scaling (S' = S)",
            "learned": f"a learned scale τ_h = {detail.scale:.3g} per head",
            "qk_norm": f"cosine attention, gain g_h = {detail.scale:.3g}",
        }.get(detail.attn_scale, detail.attn_scale)
        kv = (
            f"; keys/values shared: K/V head {detail.kv_head} serves {cfg.n_rep} query heads"
            if cfg.n_rep > 1
            else ""
        )
        off = self.state.ablation.get((detail.layer, detail.head))
        self.info.setText(
            f"layer {detail.layer}, head {detail.head}: T = {detail.T} tokens, d_k = {detail.d_k}; "
            f"scale rule: {rule}{kv}" + (f"  — this head is switched off ({off})" if off else "")
        )
        hidden = int((~insp.mask).sum())
        self.summary.setText(
            "<b>Reading the stages</b><br>"
            f"④ → ⑤: every score × {detail.scale:.3g}<br>"
            f"⑥: {hidden} of {detail.T * detail.T} pairs hidden (grey)<br>"
            "⑦: e^M / Σ e^M along each row<br>"
            "⑧: O row i = Σ_j A_ij V_j"
        )

    def _on_move(self, pos: QPointF) -> None:
        d = self.detail
        insp = self.state.inspection
        if d is None or insp is None:
            return
        for n, (key, _, _) in enumerate(LAYOUT, start=1):
            cell = self.plots[key].cell_at(pos)
            if cell is None:
                continue
            r, c = cell
            v = describe_value(float(self.plots[key].value(r, c)))
            lab = insp.labels
            if key in VECTOR_STAGES:
                where = f"token {r} '{lab[r]}', dimension {c}"
            else:
                where = f"query {r} '{lab[r]}', key {c} '{lab[c]}'"
            self.readout.setText(f"{_CIRCLED[n]} {d[key].title}: {where}: {v}")
            return

    def clear(self) -> None:
        self.detail = None
        self.readout.setText(" ")

    def export_targets(self):
        return {"pipeline": self.canvas}


_CIRCLED = " ①②③④⑤⑥⑦⑧"

__all__ = ["LAYOUT", "PipelinePage"]
