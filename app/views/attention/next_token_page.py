"""The Next token page: at every position of the prompt, the model's top-k next tokens with their
probabilities (``model.interp.analysis.next_token``), beside the token that actually comes next.

The ranking over the whole vocabulary (49k tokens × every position for a real model) is a job of its
own, run when the page is shown (``AttentionJobs.next_tokens``), so the grid never waits for it."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from app.views.attention.base import AttentionPage, blurb_label
from app.widgets.table_width import keep_columns_whole
from model.interp.measures import K_MAX

FIXED = ("pos", "token", "actually\nnext", "p(actual)", "rank", "entropy\n(nats)")


class NextTokenPage(AttentionPage):
    title = "Next token"
    key = "next"
    needs_next_tokens = True
    blurb = (
        "After reading the prompt up to each position, what does the model expect next? The top guesses "
        "with their probabilities (darker = likelier; bold = the token that really follows), beside that "
        "token, its probability and its rank (1 = the model's first guess)."
    )

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = QHBoxLayout()
        bar.addWidget(QLabel("guesses shown"))
        self.k_spin = QSpinBox()
        self.k_spin.setRange(1, K_MAX)
        self.k_spin.setValue(5)
        bar.addWidget(self.k_spin)
        self.summary = QLabel(" ")
        self.summary.setWordWrap(True)
        bar.addWidget(self.summary, 1)
        lay.addLayout(bar)
        self.table = QTableWidget(0, 0)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        keep_columns_whole(self.table)
        lay.addWidget(self.table, 1)
        self.k_spin.valueChanged.connect(lambda _=0: self.refresh())

    def on_next_tokens(self, table) -> None:
        self.redraw()

    def refresh(self) -> None:
        insp = self.state.inspection
        if insp is None:
            return
        table = self.state.next_tokens_for_current()
        if table is None:  # ranked in the background: the page follows next_tokens_changed
            self.table.setRowCount(0)
            self.summary.setText("<i>Ranking the next tokens…</i>")
            return
        nt, guesses = table.tokens, table.labels
        k = min(self.k_spin.value(), nt.ids.shape[1])
        T = insp.T
        headers = list(FIXED) + [f"guess\n{j + 1}" for j in range(k)]
        self.table.setUpdatesEnabled(False)
        try:
            self.table.clear()
            self.table.setColumnCount(len(headers))
            self.table.setHorizontalHeaderLabels(headers)
            self.table.setRowCount(T)
            for t in range(T):
                tp = nt.target_prob[t] if nt.target_prob is not None else np.nan
                rank = int(nt.target_rank[t]) if nt.target_rank is not None else -1
                cells = [
                    str(t),
                    insp.labels[t],
                    insp.target_labels[t] or "(end)",
                    f"{tp:.3f}" if np.isfinite(tp) else "–",
                    str(rank + 1) if rank >= 0 else "–",
                    f"{float(nt.entropy[t]):.2f}",
                ]
                for c, text in enumerate(cells):
                    item = QTableWidgetItem(text)
                    if c in (1, 2):
                        item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                    self.table.setItem(t, c, item)
                for j in range(k):
                    p = float(nt.probs[t, j])
                    item = QTableWidgetItem(
                        f"{guesses[t][j]}   {p:.0%}" if p >= 0.01 else f"{guesses[t][j]}   {p:.1%}"
                    )
                    shade = int(255 - 150 * min(1.0, p))
                    item.setBackground(QBrush(QColor(shade, shade + (255 - shade) // 3, 255)))
                    if p > 0.6:
                        item.setForeground(QBrush(QColor("white")))
                    if t + 1 < T and int(nt.ids[t, j]) == insp.ids[t + 1]:
                        font = item.font()
                        font.setBold(True)
                        item.setFont(font)
                        item.setToolTip("this is the token that actually follows")
                    self.table.setItem(t, len(FIXED) + j, item)
            self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        finally:
            self.table.setUpdatesEnabled(True)
        if nt.target_rank is not None and T > 1:
            ranks = nt.target_rank[:-1]
            top1 = float((ranks == 0).mean())
            mean_p = float(np.nanmean(nt.target_prob[:-1]))
            self.summary.setText(
                f"   the next token was the model's first guess at {top1:.0%} of {T - 1} positions; "
                f"mean probability of the real next token {mean_p:.3f}"
                + ("   (with switched-off heads)" if self.state.ablation else "")
            )
        self.stale = False

    def export_targets(self):
        return {"next-token": self.table}


__all__ = ["NextTokenPage"]
