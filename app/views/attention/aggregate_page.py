"""The Aggregates page: mean attention over heads per layer, over layers per head index, over every
head, or over a chosen set of heads (``model.interp.analysis.aggregate``); computed off the GUI thread.
Attention rollout, which multiplies the layer means together, has its own page (``rollout_page``)."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSplitter,
    QVBoxLayout,
)

from app.views.attention.base import AttentionPage, blurb_label
from app.views.attention.head_picker import HeadPicker
from app.widgets.head_grid import HeadMosaic
from app.widgets.matrix_plot import MatrixPlot
from app.widgets.page_stack import CurrentPageStack

MODES = (
    ("layers", "Mean over the heads of each layer"),
    ("heads", "Mean over the layers, per head index"),
    ("all", "Mean over every head"),
    ("chosen", "Mean of the heads I choose"),
)


class AggregatePage(AttentionPage):
    title = "Aggregates"
    needs_every_pattern = True
    key = "aggregates"
    needs_aggregates = True
    blurb = (
        "Averages of attention patterns: what a layer does as a whole, what the same head position does "
        "across layers, the whole model, or any set of heads you pick. Averages of rows that sum to 1 still "
        "sum to 1."
    )

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Show:"))
        self.mode_combo = QComboBox()
        for key, text in MODES:
            self.mode_combo.addItem(text, key)
        bar.addWidget(self.mode_combo)
        bar.addStretch(1)
        self.log_box = QCheckBox("Log colours")
        self.log_box.setToolTip("colour log₁₀(weight) from 10⁻⁴ to 1: averages are faint on a linear scale")
        bar.addWidget(self.log_box)
        lay.addLayout(bar)
        split = QSplitter()
        self.stack = CurrentPageStack()
        self.mosaic = HeadMosaic(row_name="layer", col_name="")
        self.heatmap = MatrixPlot(legend_label="mean weight")
        self.stack.addWidget(self.mosaic)
        self.stack.addWidget(self.heatmap)
        split.addWidget(self.stack)
        self.picker = HeadPicker(title="Heads to average")
        split.addWidget(self.picker)
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        lay.addWidget(split, 1)
        self.result = None
        self.mode_combo.currentIndexChanged.connect(self._on_mode)
        self.picker.selectionChanged.connect(self._on_picked)
        self.picker.setVisible(False)
        self.log_box.toggled.connect(self._on_log)

    @property
    def mode(self) -> str:
        return self.mode_combo.currentData()

    def set_mode(self, mode: str) -> None:
        self.mode_combo.setCurrentIndex([k for k, _ in MODES].index(mode))

    def _on_mode(self, _i: int) -> None:
        self.picker.setVisible(self.mode == "chosen")
        self._draw()

    def _on_log(self, on: bool) -> None:
        self.mosaic.set_log(on)
        self._draw()

    def _on_picked(self) -> None:
        self.state.set_chosen_heads(self.picker.selected())

    def refresh(self) -> None:
        insp = self.state.inspection
        if insp is None:
            return
        self.picker.set_shape(insp.n_layers, insp.n_heads)
        self.picker.set_tooltips(self.state.head_tips)
        if not self.picker.selected():
            self.picker.set_selected([(layer, 0) for layer in range(insp.n_layers)], emit=False)
        self.state.set_chosen_heads(self.picker.selected())
        res = self.state.aggregates_for_current()
        if res is None:
            return  # the tab computes them for the page in view; on_aggregates draws them
        self.result = res
        self._draw()
        self.stale = False

    def on_aggregates(self, result) -> None:
        if self.in_view():
            self.refresh()

    def on_metrics(self) -> None:
        self.picker.set_tooltips(self.state.head_tips)

    def _draw(self) -> None:
        insp, res = self.state.inspection, self.result
        if insp is None or res is None:
            return
        labels = insp.labels
        mode = self.mode
        if mode == "layers":
            L = res.per_layer.shape[0]
            self.mosaic.cell_name = lambda r, c: f"layer {c}, mean of its {insp.n_heads} heads"
            self.mosaic.set_data(
                res.per_layer[None],
                labels,
                mask=insp.mask,
                row_labels=[f"mean of {insp.n_heads} heads"],
                col_labels=[f"layer {l}" for l in range(L)],
                flow=True,
                title=f"mean of the {insp.n_heads} heads of each layer",
            )
            self.stack.setCurrentWidget(self.mosaic)
        elif mode == "heads":
            H = res.per_head.shape[0]
            self.mosaic.cell_name = lambda r, c: f"head {c}, mean over the {insp.n_layers} layers"
            self.mosaic.set_data(
                res.per_head[None],
                labels,
                mask=insp.mask,
                row_labels=[f"mean of {insp.n_layers} layers"],
                col_labels=[f"head {h}" for h in range(H)],
                flow=True,
                title=f"mean over the {insp.n_layers} layers, per head index",
            )
            self.stack.setCurrentWidget(self.mosaic)
        else:
            if mode == "all":
                m = res.overall
                title = f"mean of all {insp.n_layers * insp.n_heads} heads"
            else:
                if res.chosen is None:
                    self.heatmap.set_title("choose at least one head on the right")
                    self.stack.setCurrentWidget(self.heatmap)
                    return
                m = res.chosen
                names = ", ".join(f"L{l}H{h}" for l, h in res.chosen_heads[:10])
                more = "…" if len(res.chosen_heads) > 10 else ""
                title = f"mean of {len(res.chosen_heads)} heads: {names}{more}"

            self.heatmap.set_matrix(
                np.where(insp.mask, m, np.float32(np.nan)),
                labels,
                labels,
                levels=(0.0, 1.0),
                scale="log" if self.log_box.isChecked() else "linear",
            )
            self.heatmap.set_title(title)
            self.stack.setCurrentWidget(self.heatmap)

    def export_targets(self):
        return {"aggregates": self.stack.currentWidget()}


__all__ = ["MODES", "AggregatePage"]
