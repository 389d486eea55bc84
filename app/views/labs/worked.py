"""Worked example: one query attending over three keys, every intermediate number, editable."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDoubleSpinBox,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
)

from app.views.labs.base import LabPage
from app.views.labs.plots import LinePlot
from app.widgets.axes import PLOT_MIN_HEIGHT
from app.widgets.table_width import set_header_labels
from model.interp.analysis.worked_example import EXAMPLE_KEYS, EXAMPLE_Q, EXAMPLE_VALUES, attention_example

COLUMNS = ["key k_j", "value v_j", "q · k_j", "× 1/√d_k", "exp(·)", "weight w_j", "w_j · v_j"]
KEY_COLORS = [(31, 119, 180), (44, 160, 44), (255, 127, 14)]


def fmt(x: float, digits: int = 3) -> str:
    if np.isneginf(x):
        return "−∞"
    text = f"{x:.{digits}f}"
    return "−" + text[1:] if text.startswith("-") else text


def fmt_vec(v, digits: int = 3) -> str:
    return "(" + ", ".join(fmt(float(x), digits) for x in v) + ")"


class WorkedExamplePage(LabPage):
    slug = "worked-example"
    short = "The three-token example"
    lab = "Worked example"
    title = "Three tokens, one query, every number"
    explanation = (
        "Token 3's query meets the keys of tokens 1–3 (d<sub>k</sub> = 2). Each dot product is scaled by "
        "1/√2, turned into a weight by the softmax, and the output is the weights' mix of the values. Edit "
        "any "
        "vector, hide a key (as a mask would) or drop the scale: every number below is recomputed at once "
        "(<tt>model.analysis.worked_example</tt>)."
    )
    formula = (
        "s<sub>j</sub> = q·k<sub>j</sub>/√d<sub>k</sub>,   w<sub>j</sub> = e<sup>s<sub>j</sub></sup> / "
        "Σ<sub>m</sub> "
        "e<sup>s<sub>m</sub></sup>,   out = Σ<sub>j</sub> w<sub>j</sub> v<sub>j</sub>.   Textbook: q = (1, "
        "0) → scaled "
        "(0.707, 0, 0.707), weights (0.401, 0.198, 0.401), output (1.604, 0.797)"
    )
    notice = (
        "keys 1 and 3 point along the query, so they share most of the weight and the output lands between "
        "their values; the key orthogonal to the query (k₂) scores 0 yet still gets e⁰/Σ = 0.198 of the "
        "weight. "
        "The output always lies inside the triangle of the values (it is a weighted average)."
    )
    uses_model = False
    follows_training = False

    def build(self) -> None:
        body = self.body
        self._defaults = (EXAMPLE_Q, EXAMPLE_KEYS, EXAMPLE_VALUES)
        # inputs, table and plots scroll together when the window is short (1280×800): the plots keep
        # a readable height instead of being squeezed to a line
        top = QHBoxLayout()
        inputs = QGroupBox("Inputs (edit any number)")
        grid = QGridLayout(inputs)
        self.q = [self._spin() for _ in range(2)]
        self.keys = [[self._spin() for _ in range(2)] for _ in range(3)]
        self.values = [[self._spin() for _ in range(2)] for _ in range(3)]
        self.visible = []
        grid.addWidget(QLabel("<b>query q₃</b>"), 0, 0)
        for c, s in enumerate(self.q):
            grid.addWidget(s, 0, 1 + c)
        for j in range(3):
            vis = QCheckBox(f"key k{j + 1}")  # ticked: visible; unticked: masked
            font = vis.font()
            font.setBold(True)
            vis.setFont(font)
            vis.setChecked(True)
            vis.setToolTip(f"Untick to mask key {j + 1} (its score becomes −∞)")
            vis.toggled.connect(lambda *_: self.recompute())
            grid.addWidget(vis, 1 + j, 0)
            self.visible.append(vis)
            for c in range(2):
                grid.addWidget(self.keys[j][c], 1 + j, 1 + c)
            grid.addWidget(QLabel(f"<b>value v{j + 1}</b>"), 1 + j, 3)
            for c in range(2):
                grid.addWidget(self.values[j][c], 1 + j, 4 + c)
        self.scale_box = QCheckBox("divide by √d_k")
        self.scale_box.setChecked(True)
        self.scale_box.toggled.connect(lambda *_: self.recompute())
        grid.addWidget(self.scale_box, 4, 0, 1, 3)
        self.reset_button = QPushButton("Back to the textbook numbers")
        self.reset_button.clicked.connect(self.reset)
        grid.addWidget(self.reset_button, 4, 3, 1, 3)
        top.addWidget(inputs)
        top.addStretch(1)
        body.addLayout(top)
        self.output_label = QLabel()  # under the inputs, across the page (beside them it had ~60 px)
        self.output_label.setStyleSheet("font-size: 14px; padding: 4px;")
        self.output_label.setWordWrap(True)
        body.addWidget(self.output_label)

        self.table = QTableWidget(4, len(COLUMNS))
        set_header_labels(self.table, COLUMNS, width=6)
        # rows named by the formula's own index (j, summed over in the last row): "token 1" and
        # "Σ (output)" took the width the bold weights needed at 1024 px ("0.4…")
        self.table.setVerticalHeaderLabels(["j = 1", "j = 2", "j = 3", "Σ_j"])
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        # the key and value vectors whole ("(1.00, 0.00)" was elided at 1280 px), the bold weights and
        # the output's bold vector, the widest text: their columns take what they need, the rest share
        for c in (0, 1, 5, len(COLUMNS) - 1):
            header.setSectionResizeMode(c, QHeaderView.ResizeMode.ResizeToContents)
        self.table.verticalHeader().setDefaultSectionSize(26)
        self.table.setFixedHeight(self.table.horizontalHeader().sizeHint().height() + 4 * 26 + 6)
        body.addWidget(self.table)

        plots = QHBoxLayout()
        self.qk_plot = LinePlot("Query and keys", "x₁", "x₂", legend=False)
        self.v_plot = LinePlot("Values and the output (bigger dot = more weight)", "x₁", "x₂", legend=False)
        for p in (self.qk_plot, self.v_plot):
            p.plot.setAspectLocked(True)
            p.setMinimumHeight(PLOT_MIN_HEIGHT)
        plots.addWidget(self.qk_plot, 1)
        plots.addWidget(self.v_plot, 1)
        body.addLayout(plots, 1)
        self._texts: list[pg.TextItem] = []
        self.reset()

    def _spin(self) -> QDoubleSpinBox:
        s = QDoubleSpinBox()
        s.setRange(-10.0, 10.0)
        s.setDecimals(2)
        s.setSingleStep(0.1)
        s.valueChanged.connect(lambda *_: self.recompute())
        return s

    def reset(self) -> None:
        q, keys, values = self._defaults
        self._loading = True
        for s, v in zip(self.q, q):
            s.setValue(v)
        for row, vals in zip(self.keys, keys):
            for s, v in zip(row, vals):
                s.setValue(v)
        for row, vals in zip(self.values, values):
            for s, v in zip(row, vals):
                s.setValue(v)
        for box in self.visible:
            box.setChecked(True)
        self.scale_box.setChecked(True)
        self._loading = False
        self.recompute()

    # The example is three multiplications and a softmax of three numbers: computed in the GUI thread.
    def compute(self) -> None:
        self.recompute()

    def inputs(self):
        q = [s.value() for s in self.q]
        keys = [[s.value() for s in row] for row in self.keys]
        values = [[s.value() for s in row] for row in self.values]
        return q, keys, values

    def recompute(self) -> None:
        if getattr(self, "_loading", False) or not hasattr(self, "table"):
            return
        q, keys, values = self.inputs()
        visible = [b.isChecked() for b in self.visible]
        if not any(visible):
            self.say("At least one key must be visible: a softmax over nothing is undefined.", error=True)
            return
        scale = None if self.scale_box.isChecked() else 1.0
        ex = attention_example(q, keys, values, scale=scale, visible=visible)
        self.example = ex
        self._fill(ex)
        self._plot(ex)
        self.say(
            f"d_k = {ex.d_k}, scale = {ex.scale:.4f}. The weights are exp(s_j)/Σexp; masked keys get "
            "exp(−∞) = 0."
        )

    def _fill(self, ex) -> None:
        bold = QFont()
        bold.setBold(True)
        for j in range(3):
            cells = [  # the inputs with 2 decimals (as typed): seven columns fit the page at 1280 px
                fmt_vec(ex.keys[j], 2),
                fmt_vec(ex.values[j], 2),
                fmt(ex.raw[j]),
                fmt(ex.masked[j]),
                fmt(ex.exp[j]),
                fmt(ex.weights[j]),
                fmt_vec(ex.contributions[j]),
            ]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                if c == 5:
                    item.setFont(bold)
                    shade = int(255 - 120 * ex.weights[j])
                    item.setBackground(QColor(shade, shade, 255))
                self.table.setItem(j, c, item)
        totals = [
            "",
            "",
            "",
            "",
            fmt(ex.exp_sum),  # the row is Σ_j: the sums of the softmax's denominator and of the weights
            fmt(float(ex.weights.sum())),
            fmt_vec(ex.output),
        ]
        for c, text in enumerate(totals):
            item = QTableWidgetItem(text)
            item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            item.setFont(bold)
            self.table.setItem(3, c, item)
        self.output_label.setText(
            f"scaled scores {fmt_vec(ex.masked)} &nbsp;·&nbsp; weights {fmt_vec(ex.weights)} &nbsp;·&nbsp; "
            f"<b>output {fmt_vec(ex.output)}</b>"
        )

    def _plot(self, ex) -> None:
        for plot, t in self._texts:
            plot.removeItem(t)
        self._texts = []

        def label(plot, text: str, x: float, y: float, color, anchor=(0, 1)) -> None:
            t = pg.TextItem(text, color=color, anchor=anchor)
            t.setPos(float(x), float(y))
            plot.plot.addItem(t)
            self._texts.append((plot.plot, t))

        for j in range(3):
            k = ex.keys[j]
            self.qk_plot.set_series(f"k{j + 1}", [0, k[0]], [0, k[1]], label="", color=KEY_COLORS[j], width=4)
            label(self.qk_plot, f"k{j + 1}", k[0], k[1], KEY_COLORS[j])
        q = self.qk_plot.set_series(
            "q", [0, ex.q[0]], [0, ex.q[1]], label="", color=(214, 39, 40), width=2, dashed=True
        )
        q.setZValue(10)
        label(self.qk_plot, "q₃ (dashed)", ex.q[0], ex.q[1], (214, 39, 40), anchor=(0, 0))
        V = ex.values
        for j in range(3):
            size = 6 + 30 * float(ex.weights[j])
            curve = self.v_plot.set_series(
                f"v{j + 1}", [V[j, 0]], [V[j, 1]], label="", color=KEY_COLORS[j], symbol="o"
            )
            curve.setSymbolSize(size)
            curve.setPen(None)
            label(
                self.v_plot,
                f" v{j + 1}  (w = {fmt(ex.weights[j])})",
                V[j, 0],
                V[j, 1],
                KEY_COLORS[j],
                (0, 0.5),
            )
        tri = np.vstack([V, V[:1]])
        self.v_plot.set_series(
            "hull", tri[:, 0], tri[:, 1], label="", color=(160, 160, 160), width=1, dashed=True
        )
        out = self.v_plot.set_series(
            "out", [ex.output[0]], [ex.output[1]], label="", color=(0, 0, 0), symbol="star"
        )
        out.setSymbolSize(16)
        out.setPen(None)
        label(self.v_plot, f"output {fmt_vec(ex.output)}", ex.output[0], ex.output[1], (0, 0, 0), (0, 1.2))
        # room on the right and above for the labels
        for plot, pts in (
            (self.qk_plot, np.vstack([ex.q, ex.keys, [0.0, 0.0]])),
            (self.v_plot, np.vstack([V, ex.output])),
        ):
            lo, hi = pts.min(0), pts.max(0)
            span = np.maximum(hi - lo, 1.0)
            plot.plot.setXRange(lo[0] - 0.1 * span[0], hi[0] + 0.45 * span[0], padding=0)
            plot.plot.setYRange(lo[1] - 0.1 * span[1], hi[1] + 0.15 * span[1], padding=0)

    def weights_text(self) -> list[str]:
        """The weight column as shown (for tests and screen readers)."""
        return [self._cell(j, 5) for j in range(3)]

    def output_text(self) -> str:
        return self._cell(3, 6)

    def _cell(self, row: int, col: int) -> str:
        item = self.table.item(row, col)
        return item.text() if item is not None else ""

    def export_targets(self):
        return {"table": self.table, "values": self.v_plot.view}
