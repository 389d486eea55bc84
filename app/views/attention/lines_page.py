"""The Lines page: queries left, keys right, one line per (query, key) with opacity = weight, for
the selected head or the average of chosen heads (``model.interp.analysis.aggregate.mean_over_heads_set``)."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import (
    QButtonGroup,
    QDoubleSpinBox,
    QLabel,
    QPushButton,
    QRadioButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.views.attention.base import AttentionPage, HeadSelector, blurb_label
from app.views.attention.head_picker import HeadPicker
from app.views.attention.lines import AttentionLines
from app.widgets.layouts import FlowLayout, labelled
from model.interp.analysis.aggregate import mean_over_heads_set


class LinesPage(AttentionPage):
    title = "Lines"
    needs_every_pattern = True
    key = "lines"
    blurb = (
        "Each query token on the left sends lines to the keys it reads on the right; the darker the line, "
        "the larger the weight. Hover a query to follow its lines. Wheel zooms, drag scrolls a long prompt."
    )

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = FlowLayout()  # wraps at 1280 px beside the docks instead of widening the tab
        self.one_radio = QRadioButton("One head:")
        self.avg_radio = QRadioButton("Average of the heads chosen on the right")
        self.one_radio.setChecked(True)
        group = QButtonGroup(self)
        group.addButton(self.one_radio)
        group.addButton(self.avg_radio)
        self.selector = HeadSelector()
        bar.addWidget(self.one_radio)
        bar.addWidget(self.selector)
        bar.addWidget(self.avg_radio)
        self.min_spin = QDoubleSpinBox()
        self.min_spin.setRange(0.001, 0.9)
        self.min_spin.setDecimals(3)
        self.min_spin.setSingleStep(0.01)
        self.min_spin.setValue(0.02)
        labelled(bar, "hide lines below weight", self.min_spin)
        self.all_button = QPushButton("Whole prompt")
        self.all_button.setToolTip("zoom out to every token")
        bar.addWidget(self.all_button)
        lay.addLayout(bar)
        split = QSplitter()
        self.lines = AttentionLines()
        split.addWidget(self.lines)
        side = QWidget()
        side_lay = QVBoxLayout(side)
        self.picker = HeadPicker(title="Heads to average")
        side_lay.addWidget(self.picker)
        split.addWidget(side)
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        lay.addWidget(split, 1)
        self.caption = QLabel(" ")
        lay.addWidget(self.caption)
        self.selector.changed.connect(self._on_selector)
        self.one_radio.toggled.connect(lambda _=False: self.refresh())
        self.picker.selectionChanged.connect(self._on_picked)
        self.min_spin.valueChanged.connect(lambda _=0.0: self.refresh())
        self.all_button.clicked.connect(self.lines.show_all)

    def _on_selector(self, layer: int, head: int) -> None:
        self.one_radio.setChecked(True)
        self.state.select(layer, head)

    def _on_picked(self) -> None:
        if self.picker.selected():
            self.avg_radio.setChecked(True)
        self.refresh()

    def pattern(self) -> tuple[np.ndarray, str] | None:
        """The [T, T] pattern drawn and its caption."""
        insp = self.state.inspection
        if insp is None:
            return None
        heads = self.picker.selected()
        if self.avg_radio.isChecked() and heads:
            # only the chosen heads go in: [1, n, T, T] with indices (0, i)
            sub = np.stack([insp.head(l, h) for l, h in heads])[None]
            w = mean_over_heads_set(sub, [(0, i) for i in range(len(heads))])
            names = ", ".join(f"L{l}H{h}" for l, h in heads[:8]) + ("…" if len(heads) > 8 else "")
            return w, f"average of {len(heads)} heads ({names})"
        layer, head = self.state.selected
        return insp.head(layer, head), f"layer {layer}, head {head}"

    def refresh(self) -> None:
        insp = self.state.inspection
        if insp is None:
            return
        self.selector.set_shape(insp.n_layers, insp.n_heads)
        self.selector.set_head(*self.state.selected)
        self.picker.set_shape(insp.n_layers, insp.n_heads)
        self.picker.set_tooltips(self.state.head_tips)
        pat = self.pattern()
        if pat is None:
            return
        w, what = pat
        self.lines.set_weights(w, insp.labels, min_weight=self.min_spin.value())
        self.caption.setText(
            f"{what}: {self.lines.n_lines} lines with weight ≥ {self.min_spin.value():g} over {insp.T} tokens"
        )
        self.stale = False

    def on_head_selected(self, layer: int, head: int) -> None:
        self.selector.set_head(layer, head)
        self.redraw()

    def on_metrics(self) -> None:
        self.picker.set_tooltips(self.state.head_tips)

    def export_targets(self):
        return {"lines": self.lines}


__all__ = ["LinesPage"]
