"""Residual stream lab, logit lens page: decode the stream after each layer as if it were the last."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QHeaderView,
    QTableWidget,
    QTableWidgetItem,
)

from app.views.labs.base import LabPage
from app.views.labs.controls import labelled, spin
from app.widgets.layouts import FlowLayout
from app.widgets.table_width import TOKEN_GRID_MAX_WIDTH, keep_columns_whole
from model.interp.analysis.residual import LogitLens, logit_lens
from model.interp.trace import run_with_trace
from model.text.tokens import visible


class LensPage(LabPage):
    slug = "residual-lens"
    short = "Logit lens"
    lab = "Residual stream lab"
    title = "Logit lens: the prediction forming layer by layer"
    explanation = (
        "Decode the stream after each layer as if it were the last: apply the final norm and the unembedding "
        "to it and read off the most likely next token. Each cell shows that top token for one position "
        "(column) at one checkpoint (row); the shade is its probability."
    )
    formula = (
        "lens<sub>l</sub>(x) = softmax(W<sub>U</sub> · Norm<sub>f</sub>(x<sub>l</sub>))   "
        "(Post-LN has no final norm: W<sub>U</sub> · x<sub>l</sub>)"
    )
    notice = (
        "the last row is exactly the model's own prediction (the row below it); early rows are mostly "
        "guesses from the current token alone, and the right answer (bold) appears at some depth and firms "
        "up."
    )

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.tokens = labelled(row, "tokens", spin(2, 256, 16, "How many tokens of the prompt (columns)"))
        self.mids = QCheckBox("also read the stream after each attention (L0.mid, L1.mid, …)")
        row.addWidget(self.mids)
        row.addStretch(1)
        body.addLayout(row)
        self.tokens.valueChanged.connect(lambda *_: self.mark_dirty())
        self.mids.toggled.connect(lambda *_: self.mark_dirty())
        self.table = QTableWidget()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        # a column per token, sharing the page's width; the table scrolls only for a long prompt
        self.table.horizontalHeader().setDefaultSectionSize(46)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.horizontalHeader().setMinimumSectionSize(22)
        keep_columns_whole(self.table, stretch_content=False, at_most=TOKEN_GRID_MAX_WIDTH)
        self.table.verticalHeader().setDefaultSectionSize(34)
        body.addWidget(self.table, 1)

    def compute(self) -> None:
        model, tok = self.require_model()
        ids, labels = self.prompt_ids(self.tokens.value())
        mids = self.mids.isChecked()

        def job() -> tuple[LogitLens, np.ndarray]:
            trace = run_with_trace(model, ids, kinds=("resid_pre", "resid_mid", "resid_post"))
            lens = logit_lens(model, trace, k=3, mids=mids)
            final = trace.logits[0].argmax(-1).numpy()
            return lens, final

        self.submit("lens", job, lambda r: self._draw(*r, ids, labels, tok))

    def _draw(self, lens, final, ids, labels, tok) -> None:
        def name(i: int) -> str:
            return visible(tok.token_strings([int(i)])[0]) if i < tok.vocab_size else f"#{int(i)}"

        P, T = lens.top1.shape
        rows = [*lens.names, "model output", "actual next"]
        self.table.clear()
        self.table.setRowCount(len(rows))
        self.table.setColumnCount(T)
        self.table.setVerticalHeaderLabels(rows)
        self.table.setHorizontalHeaderLabels([f"{t}\n{labels[t]}" for t in range(T)])
        bold = QFont()
        bold.setBold(True)
        nxt = [*ids[1:], None]
        for p in range(P):
            for t in range(T):
                tid = int(lens.top1[p, t])
                prob = float(lens.top_probs[p, t, 0])
                item = QTableWidgetItem(name(tid))
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                shade = int(255 - 150 * prob)
                item.setBackground(QColor(shade, 255, shade))
                if nxt[t] is not None and tid == nxt[t]:
                    item.setFont(bold)
                tips = ", ".join(
                    f"'{name(int(i))}' {float(q):.2f}"
                    for i, q in zip(lens.top_ids[p, t], lens.top_probs[p, t])
                )
                target = (
                    ""
                    if np.isnan(lens.target_prob[p, t])
                    else f"; p(actual next) = {lens.target_prob[p, t]:.3f}"
                )
                item.setToolTip(f"{lens.names[p]}, position {t}: {tips}{target}")
                self.table.setItem(p, t, item)
        for t in range(T):
            item = QTableWidgetItem(name(int(final[t])))
            item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            item.setBackground(QColor(225, 235, 250))
            self.table.setItem(P, t, item)
            actual = QTableWidgetItem(name(nxt[t]) if nxt[t] is not None else "")
            actual.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
            actual.setFont(bold)
            self.table.setItem(P + 1, t, actual)
        same = int((lens.top1[-1] == final).sum())
        hits = [int(sum(1 for t in range(T - 1) if lens.top1[p, t] == nxt[t])) for p in range(P)]
        self.say(
            f"Top token of the last checkpoint = the model's prediction at {same} of {T} positions. "
            "Correct next tokens per row: "
            + ", ".join(f"{n} {h}" for n, h in zip(lens.names, hits))
            + ". Hover a cell for the top 3."
        )

    def cell(self, row: int, col: int) -> str:
        item = self.table.item(row, col)
        return item.text() if item is not None else ""

    def export_targets(self):
        return {"logit lens": self.table}
