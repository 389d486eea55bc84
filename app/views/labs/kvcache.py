"""The KV-cache lab: what one token costs in the cache of this model's heads under each kind of
attention, MHA, GQA, MQA and multi-head latent attention (MLA), by the formula and as the model
really allocates it (``model.nn.measure.measure_kv_cache``)."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QSizePolicy,
    QTableWidget,
    QTableWidgetItem,
)

from app.views.labs.base import LabPage
from app.views.labs.controls import labelled, spin
from app.views.labs.plots import BarPlot
from app.widgets.layouts import FlowLayout
from app.widgets.table_width import keep_columns_whole
from model.budget.arithmetic import human_bytes
from model.nn.measure import measure_kv_cache

COLUMNS = (
    "kind",
    "cached per token\n(values)",
    "bytes/token\nformula",
    "allocated",
    "smaller\nthan MHA",
    "at\ncontext",
)


class KVCachePage(LabPage):
    slug = "kv-cache"
    short = "MHA, GQA, MQA, MLA"
    lab = "KV cache lab"
    title = "What one token costs in the cache: MHA, GQA, MQA, MLA"
    explanation = (
        "To generate, a model keeps the keys and values of every earlier token of every layer. Multi-head "
        "attention (MHA) keeps a key and a value per query head; grouped-query attention (GQA) shares one "
        "pair among a group of query heads; multi-query attention (MQA) keeps one pair for all; multi-head "
        "latent attention (MLA, DeepSeek) keeps one small latent per token and rebuilds every head's key and "
        "value from it, plus one rotary key shared by the heads. Each kind here is allocated for this "
        "model's layers and head size, and its bytes per token read off the allocation."
    )
    formula = (
        "MHA: L·2·h·d<sub>k</sub>   GQA: L·2·h<sub>kv</sub>·d<sub>k</sub>   MQA: L·2·d<sub>k</sub>   "
        "MLA: L·(r + d<sub>R</sub>)   values per token (× 4 bytes in float32)"
    )
    notice = (
        "the allocated bytes equal the formula for every kind; GQA divides MHA's cache by "
        "h / h<sub>kv</sub>, MQA by h, and MLA keeps a latent of r = 4·d<sub>k</sub> (DeepSeek's "
        "choice, unless the model sets kv_lora_rank): about as small as GQA with two K/V heads, while "
        "every head keeps keys of its own."
    )
    follows_training = False

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.context = labelled(
            row, "context", spin(1, 10_000_000, 8192, "Tokens in the cache, for the last column")
        )
        self.context.setSingleStep(1024)
        row.addStretch(1)
        body.addLayout(row)
        self.context.valueChanged.connect(lambda *_: self._draw(self.results.get("rows")))
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)  # the long one takes what is left
        self.table.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        keep_columns_whole(self.table)
        self.table.setFixedHeight(self.table.horizontalHeader().sizeHint().height() + 4 * 38 + 6)
        self.table.verticalHeader().setDefaultSectionSize(38)  # two lines
        body.addWidget(self.table)
        self.bars = BarPlot("Bytes per token, every layer", "bytes")
        body.addWidget(self.bars, 1)

    def compute(self) -> None:
        model, _ = self.require_model()
        cfg = model.config
        self.submit("rows", lambda: measure_kv_cache(cfg), self._draw)

    def _draw(self, rows) -> None:
        if not rows:
            return
        T = self.context.value()
        mha = rows[0].formula_bytes
        self.table.setRowCount(len(rows))
        for i, r in enumerate(rows):
            allocated = "—" if r.measured_bytes is None else f"{r.measured_bytes:,.0f}"
            cells = (
                r.kind,
                r.holds.replace(": ", ":\n", 1),  # the count above what it counts
                f"{r.formula_bytes:,.0f}",
                allocated,
                f"{mha / r.formula_bytes:.1f}×" if r.formula_bytes < mha else "—",
                human_bytes(r.formula_bytes * T),
            )
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c >= 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if c == 3 and r.measured_bytes is None:
                    item.setToolTip(
                        "not built: ordinary attention has keys and values of one size (d_k = d_v)"
                    )
                self.table.setItem(i, c, item)
        kinds = [r.kind for r in rows]
        self.bars.set_groups(
            kinds,
            {
                "formula": np.array([r.formula_bytes for r in rows]),
                "allocated": np.array(
                    [np.nan if r.measured_bytes is None else r.measured_bytes for r in rows]
                ),
            },
        )
        self.message.setText(
            f"float32; the last column is {T:,} tokens of one sequence. Allocated = storage of a KVCache of "
            "16 positions ÷ 16."
        )

    def export_targets(self):
        return {"kv-cache-bars": self.bars.view}


__all__ = ["KVCachePage"]
