"""The Head page: one head large, with token axes, hover values (weight, raw and scaled score), a
colour legend and a choice of colour scale (:data:`COLOUR_SCALES`).

The default colours each row over its largest weight: a causal row at query ``i`` spreads its weight
over ``i + 1`` keys, so on a prompt of thousands of tokens the weights of late rows fall like ``1/i``
and a linear map is dark but for its first rows. The legend names the scale shown; the hover gives
the weight itself.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout

from app.views.attention.base import AttentionPage, HeadSelector, blurb_label
from app.widgets.levels import scale_label
from app.widgets.matrix_plot import MatrixPlot

#: The colour scales the page offers, the default first: (scale, tool tip)
COLOUR_SCALES = (
    ("row", "each row over its largest weight: where every query looks, at any prompt length"),
    ("linear", "the weight itself, 0 to 1: rows compare with each other, but a long prompt's are dark"),
    ("log", "log₁₀(weight) from 10⁻⁴ to 1: small weights differ too"),
)


class HeadPage(AttentionPage):
    #: the "Save as CSV…" button was pressed
    csvRequested = Signal()

    title = "Head"
    key = "head"
    needs_head_detail = True
    blurb = (
        "One head: row i shows how query token i spreads its attention over the keys it may see (each "
        "row sums to 1). Colours: each row over its largest weight unless you choose otherwise. Hover a "
        "cell for the weight and the scores before the softmax; wheel zooms, drag pans."
    )

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = QHBoxLayout()
        self.selector = HeadSelector()
        bar.addWidget(self.selector)
        bar.addStretch(1)
        # the head's role on a line of its own, the page's width: beside the controls, at 1024 px it was
        # squeezed into a column of ten lines that took the map's room
        self.role_label = QLabel(" ")
        self.role_label.setStyleSheet("color: #333;")
        self.role_label.setWordWrap(True)
        self.scale_box = QComboBox()
        self.scale_box.setObjectName("colourScale")
        for i, (scale, tip) in enumerate(COLOUR_SCALES):
            self.scale_box.addItem(scale_label(scale, "weight"), scale)
            self.scale_box.setItemData(i, tip, Qt.ItemDataRole.ToolTipRole)
        self.scale_box.setToolTip("colours: how the weights are coloured (the colour bar names it too)")
        self.reset_button = QPushButton("Reset zoom")
        self.csv_button = QPushButton("Save as CSV…")
        self.csv_button.setToolTip("this head's weights as a table with the tokens as row and column names")
        for w in (self.scale_box, self.reset_button, self.csv_button):
            bar.addWidget(w)
        lay.addLayout(bar)
        lay.addWidget(self.role_label)
        self.heatmap = MatrixPlot(legend_label="attention weight", square=False)  # the map fills its plot
        self.heatmap.describe = self.describe
        lay.addWidget(self.heatmap, 1)
        self.selector.changed.connect(self.state.select)
        self.scale_box.currentIndexChanged.connect(lambda _=0: self.refresh())
        self.reset_button.clicked.connect(self.heatmap.reset_view)
        self.csv_button.clicked.connect(self.csvRequested.emit)
        self._detail = None

    # ---- drawing -------------------------------------------------------------------------------
    def refresh(self) -> None:
        insp = self.state.inspection
        if insp is None:
            return
        layer, head = self.state.selected
        self.selector.set_shape(insp.n_layers, insp.n_heads)
        self.selector.set_head(layer, head)
        w = insp.head(layer, head)
        shown = np.where(self.state.layer_mask(layer), w, np.float32(np.nan))  # a local layer: its window
        self.heatmap.set_matrix(shown, insp.labels, insp.labels, levels=(0.0, 1.0), scale=self.scale)
        off = self.state.ablation.get((layer, head))
        title = f"layer {layer}, head {head}: attention weights A = softmax(M)  [{insp.T} × {insp.T}]"
        if not self.state.patterns_held:
            title += ", computed on opening"
        if off:
            title += f"  — switched off ({off}): its output is not used"
        self.heatmap.set_title(title)
        self.role_label.setText(self.state.head_summary(layer, head))
        self.stale = False

    @property
    def scale(self) -> str:
        """The colour scale chosen (:data:`COLOUR_SCALES`)."""
        return str(self.scale_box.currentData())

    def on_head_selected(self, layer: int, head: int) -> None:
        self.selector.set_head(layer, head)
        self.redraw()

    def on_head_detail(self, detail) -> None:
        self._detail = detail
        self.heatmap.refresh_readout()  # the scores under a still pointer

    def on_metrics(self) -> None:
        self.role_label.setText(self.state.head_summary(*self.state.selected))

    def _scores(self, q: int, k: int) -> tuple[float, float] | None:
        d = self.state.head_detail_for_selected()
        if d is None:
            return None
        return float(d["scores_raw"].value[q, k]), float(d["scores"].value[q, k])

    def describe(self, q: int, k: int) -> str:
        """The readout for cell (query q, key k): tokens, weight, raw and scaled score."""
        insp = self.state.inspection
        if insp is None or q < 0:
            return " "
        lab = insp.labels
        layer, head = self.state.selected
        pos = f"query {q} '{lab[q]}' → key {k} '{lab[k]}'"
        scores = self._scores(q, k)
        if not self.state.layer_mask(layer)[q, k]:
            text = f"{pos}: masked (the query may not see this key: score −∞ before softmax, weight 0)"
            if scores is not None:
                text += f"; raw score QKᵀ {scores[0]:.4g} is discarded"
            return text
        w = float(insp.weights[layer, head, q, k])
        text = f"{pos}: weight {w:.4f}"
        if scores is not None:
            text += f"  ·  raw score QKᵀ {scores[0]:.4g}  ·  scaled score {scores[1]:.4g}"
        elif not self.state.patterns_held:
            text += f"  ·  scores: kept for prompts of at most {insp.held_limit:,} tokens"
        else:
            text += "  ·  scores: computing…"
        return text

    def clear(self) -> None:
        self.heatmap.readout.setText(" ")

    def export_targets(self):
        return {"head": self.heatmap}


__all__ = ["COLOUR_SCALES", "HeadPage"]
