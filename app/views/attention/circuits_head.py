"""The Circuits page's Head tab (:mod:`app.views.attention.circuits_page`): the selected head's QK and
OV singular values, rank, norms and copying score, the heads it reads from with their scores (× chance),
and the tokens its OV circuit raises for a chosen source token (:func:`~model.interp.measures.
circuit_head_of`, in the compute worker).
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.attention.base import lines_label
from app.views.attention.circuits_base import CircuitsPart
from app.views.attention.head_graph import KIND_COLORS, head_name
from app.widgets.axes import style_plot
from app.widgets.table_width import keep_columns_whole

#: Rows of the "reads from" table.
READS_ROWS = 8


class SelectedHeadTab(CircuitsPart):
    """The Head tab's widgets and drawing, for :class:`~app.views.attention.circuits_page.CircuitsPage`
    (which builds the tab with :meth:`_build_head_tab` and draws it when it is in view)."""

    def _build_head_tab(self) -> QWidget:
        self._tokens_for: list[int] | None = None  # the tokens in the source-token box
        w = QWidget()
        lay = QVBoxLayout(w)
        lay.setContentsMargins(4, 4, 4, 4)
        self.head_summary = lines_label(5)  # five at 1024 px
        lay.addWidget(self.head_summary)
        row = QHBoxLayout()
        self.spectrum_view = pg.GraphicsLayoutWidget()
        self.spectrum_view.setBackground("w")
        self.spectrum = style_plot(self.spectrum_view.addPlot(row=0, col=0), "", "index", "singular value")
        self.spectrum.setMenuEnabled(False)
        self.spectrum.hideButtons()
        self.spectrum.setMouseEnabled(x=False, y=False)
        self.spectrum.setLogMode(y=True)
        self.qk_curve = self.spectrum.plot([], [], pen=pg.mkPen(KIND_COLORS["Q"], width=2))
        self.ov_curve = self.spectrum.plot([], [], pen=pg.mkPen((255, 127, 14), width=2))
        self.spectrum_view.setMinimumWidth(180)
        row.addWidget(self.spectrum_view, 1)
        self.reads = QTableWidget(0, 4)
        self.reads.setHorizontalHeaderLabels(["reads from", "via", "score", "× chance"])
        self.reads.verticalHeader().setVisible(False)
        self.reads.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.reads.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.reads.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        keep_columns_whole(self.reads)
        self.reads.cellDoubleClicked.connect(self._on_reads_clicked)
        row.addWidget(self.reads, 1)
        lay.addLayout(row, 1)
        promo = QHBoxLayout()
        promo.addWidget(QLabel("Attending to"))
        self.source_combo = QComboBox()
        self.source_combo.setToolTip("the token this head attends to (its OV circuit's input)")
        self.source_combo.currentIndexChanged.connect(lambda _i: self._draw_promoted())
        promo.addWidget(self.source_combo)
        self.promoted = lines_label(3)  # three at 1024 px
        promo.addWidget(self.promoted, 1)
        lay.addLayout(promo)
        self.open_button = QPushButton("Show it on the Head page")
        self.open_button.setToolTip("open the selected head large (a double click on a node does too)")
        self.open_button.clicked.connect(lambda: self.openHeadRequested.emit(*self.state.selected))
        lay.addWidget(self.open_button, 0, Qt.AlignmentFlag.AlignLeft)
        return w

    def describe_head(self, layer: int, head: int) -> str:
        c = self.circuits
        text = self.state.head_summary(layer, head)
        if c is None:
            return text
        reads = c.composition.reads_from(layer, head, 3)
        sources = ", ".join(f"{head_name(w)} {k} {s:.2f}" for k, w, s in reads) or "the embeddings only"
        return f"{text} · copying {c.heads.copying[layer, head]:.2f} · reads from {sources} · click to select"

    def _draw_head(self) -> None:
        c = self.circuits
        if c is None:
            self.head_summary.setText(" ")
            self.reads.setRowCount(0)
            self.qk_curve.setData([], [])
            self.ov_curve.setData([], [])
            return
        layer, head = self.state.selected
        comp, hc = c.composition, c.heads
        if not (layer < comp.n_layers and head < comp.n_heads):
            return
        cls = self.state.classification
        role = cls.labels[layer][head].name if cls is not None else ""
        k = hc.qk_svals.shape[-1]
        qk_col, ov_col = "rgb(31,119,180)", "rgb(255,127,14)"
        copy_note = (
            f"over all {hc.copying_tokens} tokens"
            if hc.copying_tokens == hc.vocab
            else f"over {hc.copying_tokens} random tokens of {hc.vocab}"
        )
        feeds = comp.writes_to(layer, head, 1)
        feed = (
            f" · its output feeds most: {head_name(feeds[0][1])} ({feeds[0][0]} {feeds[0][2]:.3f})"
            if feeds
            else ""
        )
        self.head_summary.setText(
            f"<b>{head_name((layer, head))}</b>{' · ' + html.escape(role) if role else ''} · copying "
            f"<b>{hc.copying[layer, head]:.2f}</b> (share of the OV eigenvalues' mass with Re λ > 0; "
            f"Σλ/Σ|λ| = {hc.copying_signed[layer, head]:.2f}, {copy_note}){feed}<br>"
            f"<span style='color:{qk_col}'>━ QK</span> W_Q W_Kᵀ: rank {hc.qk_rank[layer, head]} of {k}, "
            f"‖·‖ {hc.qk_norm[layer, head]:.3g} · "
            f"<span style='color:{ov_col}'>━ OV</span> W_V W_O: rank {hc.ov_rank[layer, head]}, "
            f"‖·‖ {hc.ov_norm[layer, head]:.3g}"
        )
        x = np.arange(1, k + 1, dtype=np.float64)
        floor = 1e-12
        self.qk_curve.setData(x, np.maximum(hc.qk_svals[layer, head], floor))
        self.ov_curve.setData(x, np.maximum(hc.ov_svals[layer, head][:k], floor))
        reads = comp.reads_from(layer, head, READS_ROWS)
        self.reads.setRowCount(max(1, len(reads)))
        if not reads:
            self.reads.setItem(0, 0, QTableWidgetItem("the embeddings only"))
            for col in (1, 2, 3):
                self.reads.setItem(0, col, QTableWidgetItem(""))
        for r, (kind, w, score) in enumerate(reads):
            cells = [head_name(w), kind, f"{score:.3f}", f"{score / comp.baseline:.1f}×"]
            for col, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if col == 1:
                    item.setForeground(QColor(*KIND_COLORS[kind]))
                if col >= 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.reads.setItem(r, col, item)
        self._reads = reads
        self._draw_tokens()

    def _on_reads_clicked(self, row: int, _col: int) -> None:
        reads = getattr(self, "_reads", [])
        if 0 <= row < len(reads):
            self.state.select(*reads[row][1])

    def _detail(self):
        return self.state.circuit_head_for(self._key(), self.state.selected)

    def _draw_tokens(self) -> None:
        """The source-token box: the detail's tokens (kept when they are the same)."""
        detail = self._detail()
        tokens = detail.tokens if detail is not None else None
        if tokens != self._tokens_for:
            self._tokens_for = tokens
            self.source_combo.blockSignals(True)
            current = self.source_combo.currentData()
            self.source_combo.clear()
            for t, lab in zip(tokens or [], detail.labels if detail is not None else []):
                self.source_combo.addItem(f"'{lab}'", t)
            insp = self.state.inspection
            want = current if current is not None else (insp.ids[-1] if insp is not None else None)
            i = self.source_combo.findData(want)
            self.source_combo.setCurrentIndex(max(0, i))
            self.source_combo.blockSignals(False)
        self._draw_promoted()

    def _draw_promoted(self) -> None:
        detail = self._detail()
        if detail is None:
            self.promoted.setText("<i>finding what it raises…</i>" if self.circuits is not None else " ")
            return
        i = self.source_combo.currentIndex()
        if not 0 <= i < len(detail.tokens):
            return
        mean, std = float(detail.row_mean[i]), float(detail.row_std[i]) or 1.0

        def z(v: float) -> str:
            return f"{(v - mean) / std:+.1f}σ"

        own = detail.full_ov[i, i]
        parts = [
            f"'{html.escape(lab)}' {z(v)}"
            for lab, v in zip(detail.promoted_labels[i], detail.promoted_values[i])
        ]
        self.promoted.setText(f"raises {' · '.join(parts)} · its own logit {z(own)}")
        self.promoted.setToolTip(
            "the logits its OV circuit raises most when it attends to this token, the direct path "
            "W_E W_OV W_U (the norms' gains folded, their per-token scales left out), each as standard "
            f"deviations of its row over the vocabulary (row std {std:.3g}, raw own value {own:+.3g})"
        )


__all__ = ["READS_ROWS", "SelectedHeadTab"]
