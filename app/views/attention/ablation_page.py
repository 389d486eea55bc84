"""The Ablation page: switch heads off and see what changes (``model.interp.analysis.ablation``).

Switched-off heads apply to the whole tab: the grid, every page and the next-token panel show the
model without them (their output replaced by zeros, or by its mean over positions), until Restore.
Nothing in the model is modified (an intervention on the heads' ``attn.z`` hook points,
``model.nn.hooks.ablate_heads``), so Restore gives back the original logits bit for bit.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.attention.base import AttentionPage, blurb_label
from app.views.attention.head_picker import HeadPicker
from app.widgets.table_width import keep_columns_whole, set_header_labels
from app.widgets.token_axis import TokenAxis

MODE_TEXT = {
    "zero": "zero: the head's output A·V is replaced by zeros",
    "mean": "mean: the head's output is replaced by its mean over the prompt's positions",
}


class AblationPage(AttentionPage):
    title = "Ablation"
    key = "ablation"
    own_jobs = ("ablation",)
    blurb = (
        "Switch heads off to see what they are for. The bars show, at each position, how far the model's "
        "next-token distribution moved (KL divergence); the loss line says how much worse it predicts "
        "held-out text. The whole tab shows the model without these heads until you press Restore."
    )

    def build(self) -> None:
        self.position = -1
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        split = QSplitter()
        left = QWidget()
        llay = QVBoxLayout(left)
        self.picker = HeadPicker(title="Heads to switch off", check_color="#d23c3c")
        llay.addWidget(self.picker)
        row = QHBoxLayout()
        row.addWidget(QLabel("Replace their output by"))
        self.mode_combo = QComboBox()
        self.mode_combo.addItem("zeros", "zero")
        self.mode_combo.addItem("its mean", "mean")
        row.addWidget(self.mode_combo)
        llay.addLayout(row)
        self.mode_help = QLabel(MODE_TEXT["zero"])
        self.mode_help.setWordWrap(True)
        self.mode_help.setStyleSheet("color: #555;")
        llay.addWidget(self.mode_help)
        self.restore_button = QPushButton("Restore all heads")
        self.restore_button.setToolTip("switch every head back on: the original model, exactly")
        llay.addWidget(self.restore_button)
        llay.addStretch(1)
        split.addWidget(left)
        right = QWidget()
        rlay = QVBoxLayout(right)
        rlay.setContentsMargins(0, 0, 0, 0)
        self.summary = QLabel(" ")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        rlay.addWidget(self.summary)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.axis = TokenAxis("bottom", offset=0.5)
        self.plot = self.view.addPlot(row=0, col=0, axisItems={"bottom": self.axis})
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(x=True, y=False)
        self.plot.getAxis("left").enableAutoSIPrefix(False)
        self.plot.setLabel("left", "KL(before ‖ after), nats")
        self.plot.setLabel("bottom", "position (the token whose next token is predicted)")
        self.plot.setTitle("How far each prediction moved", color="#222")
        self.bars = pg.BarGraphItem(x0=[], x1=[], y0=[], y1=[], brush=pg.mkBrush(210, 60, 60), pen=None)
        self.plot.addItem(self.bars)
        self.flips = pg.ScatterPlotItem(size=8, symbol="t", brush=pg.mkBrush(20, 20, 20), pen=None)
        self.plot.addItem(self.flips)
        self.position_line = pg.InfiniteLine(angle=90, pen=pg.mkPen((255, 140, 0), width=2))
        self.plot.addItem(self.position_line)
        rlay.addWidget(self.view, 2)
        self.pos_label = QLabel(" ")
        self.pos_label.setTextFormat(Qt.TextFormat.PlainText)  # token texts: <s> is no tag
        self.pos_label.setWordWrap(True)  # a long line wraps instead of widening the tab past 1280 px
        rlay.addWidget(self.pos_label)
        self.table = QTableWidget(0, 5)
        set_header_labels(self.table, ["rank", "before: next token", "p", "after: next token", "p"], width=10)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        keep_columns_whole(self.table)  # no column narrower than its header or its tokens
        rlay.addWidget(self.table, 1)
        split.addWidget(right)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 3)
        lay.addWidget(split, 1)
        self.result = None
        self.picker.selectionChanged.connect(self._apply)
        self.mode_combo.currentIndexChanged.connect(self._on_mode)
        self.restore_button.clicked.connect(lambda: self.state.set_ablation({}))
        self.view.scene().sigMouseClicked.connect(self._on_click)

    @property
    def mode(self) -> str:
        return self.mode_combo.currentData()

    def _on_mode(self, _i: int) -> None:
        self.mode_help.setText(MODE_TEXT[self.mode])
        self._apply()

    def _apply(self) -> None:
        self.position = -1
        self.state.set_ablation({lh: self.mode for lh in self.picker.selected()})

    def sync_from_state(self) -> None:
        """Show the switched-off heads in the picker (after Restore, or a change elsewhere)."""
        insp = self.state.inspection
        if insp is not None:
            self.picker.set_shape(insp.n_layers, insp.n_heads)
            self.picker.set_tooltips(self.state.head_tips)
        self.picker.set_selected(list(self.state.ablation), emit=False)
        modes = set(self.state.ablation.values())
        if len(modes) == 1:
            self.mode_combo.blockSignals(True)
            self.mode_combo.setCurrentIndex(0 if modes == {"zero"} else 1)
            self.mode_help.setText(MODE_TEXT[self.mode])
            self.mode_combo.blockSignals(False)

    def refresh(self) -> None:
        insp = self.state.inspection
        if insp is None:
            return
        self.sync_from_state()
        self.axis.set_labels(insp.labels)
        res = self.state.ablation_result
        if not self.state.ablation:
            self.result = None
            self.summary.setText(
                "<b>Every head is on.</b> Choose heads on the left to switch them off; "
                "<i>Restore all heads</i> brings the model back exactly."
            )
            self.bars.setOpts(x0=[], x1=[], y0=[], y1=[])
            self.flips.setData([], [])
            self.table.setRowCount(0)
            self.pos_label.setText(" ")
        elif res is None or res.heads != self.state.ablation:
            self.summary.setText("<b>Measuring the effect…</b>")
        else:
            self._draw(res, insp)
        self.stale = False

    def on_ablation(self, heads: dict) -> None:
        self.sync_from_state()
        self.redraw()

    def on_ablation_result(self, result) -> None:
        self.redraw()

    def on_metrics(self) -> None:
        self.picker.set_tooltips(self.state.head_tips)

    def prepare_screenshot(self) -> None:
        """Switch off the most previous-token-like head of layer 0 (the first head before metrics)."""
        if self.state.ablation or self.state.inspection is None:
            return
        m = self.state.metrics.metrics if self.state.metrics is not None else None
        head = int(m.prev_token[0].argmax()) if m is not None else 0
        self.state.set_ablation({(0, head): "zero"})

    def _draw(self, res, insp) -> None:
        self.result = res
        e = res.effect
        T = len(e.kl)
        heads = ", ".join(f"L{l}H{h}" for l, h in sorted(res.heads))
        modes = sorted(set(res.heads.values()))
        worst = int(np.argmax(e.max_prob_change))
        lines = [
            f"<b>{len(res.heads)} head{'s' if len(res.heads) != 1 else ''} switched off</b> "
            f"({' / '.join(modes)}): {html.escape(heads)}. Every page now shows the model without them.",
            f"On this prompt: mean KL {e.mean_kl:.3g} nats per position; the most likely next token changed "
            f"at {int(e.top1_changed.sum())} of {T} positions (▼); largest probability change "
            f"{float(e.max_prob_change[worst]):.3f} at position {worst} '{html.escape(insp.labels[worst])}'.",
        ]
        if res.loss is not None:
            lc = res.loss
            lines.append(
                f"Validation loss: {lc.before:.4f} → {lc.after:.4f} "
                f"(<b>{lc.delta:+.4f}</b> nats per token) on {html.escape(res.loss_note)}."
            )
        else:
            lines.append(f"Validation loss: not measured ({html.escape(res.loss_note)}).")
        self.summary.setText("<br>".join(lines))
        x = np.arange(T, dtype=np.float32)
        self.bars.setOpts(x0=x + 0.1, x1=x + 0.9, y0=np.zeros(T), y1=e.kl)
        flips = np.nonzero(e.top1_changed)[0]
        top = float(e.kl.max()) if T else 1.0
        self.flips.setData(flips + 0.5, np.full(len(flips), top * 1.08 if top > 0 else 0.01))
        self.plot.setXRange(0, T, padding=0.0)
        self.plot.setYRange(0, max(top * 1.15, 1e-3), padding=0.0)
        # the position chosen before, else where the prediction moved most
        self.show_position(self.position if 0 <= self.position < T else int(np.argmax(e.kl)))

    def show_position(self, t: int) -> None:
        """Fill the table with the top next tokens at position ``t`` before and after."""
        res, insp = self.result, self.state.inspection
        if res is None or insp is None:
            return
        self.position = t
        self.position_line.setPos(t + 0.5)
        e = res.effect
        k = e.top_before.ids.shape[1]
        self.table.setRowCount(k)
        for r in range(k):
            vals = [
                str(r + 1),
                res.before_labels[t][r],
                f"{e.top_before.probs[t, r]:.3f}",
                res.after_labels[t][r],
                f"{e.top_after.probs[t, r]:.3f}",
            ]
            for c, v in enumerate(vals):
                self.table.setItem(r, c, QTableWidgetItem(v))
        nxt = insp.target_labels[t]
        self.pos_label.setText(
            f"Position {t} '{insp.labels[t]}'"
            + (f" (the prompt continues with '{nxt}')" if nxt else "")
            + f": KL {float(e.kl[t]):.3g} nats"
            + ("; top-1 changed" if e.top1_changed[t] else "")
            + ". Click a bar for another position."
        )

    def _on_click(self, ev) -> None:
        if self.result is None or ev.button() != Qt.MouseButton.LeftButton:
            return
        vb = self.plot.getViewBox()
        if not vb.sceneBoundingRect().contains(ev.scenePos()):
            return
        t = int(np.floor(vb.mapSceneToView(ev.scenePos()).x()))
        if 0 <= t < len(self.result.effect.kl):
            self.show_position(t)

    def export_targets(self):
        return {"ablation": self}


__all__ = ["MODE_TEXT", "AblationPage"]
