"""The Budget tab's memory pages: the KV cache (vs context and batch, beside MHA and MQA) and training
memory per precision mode, each drawing its part of a :func:`model.budget.arithmetic.report`.

Same interface as :mod:`app.views.budget.pages` (``update_report(cfg, settings, rep, rows)``); plots are
created once and updated with ``setData``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import QHBoxLayout, QHeaderView, QLabel, QSplitter, QVBoxLayout, QWidget

from app.views.budget.common import HIGHLIGHT, GiB, fill, make_table, plot_widget
from app.views.page import PushedPage
from app.widgets.legend import legend_row
from model.budget import arithmetic as budget
from model.budget.table import BudgetSettings, Row
from model.config import GPTConfig


# ---------------------------------------------------------------------------------------------
class KVPage(PushedPage):
    """KV cache vs context length and vs batch, beside multi-head (h_kv = h) and multi-query
    (h_kv = 1) attention of the same shape: the GQA/MQA saving at a glance."""

    title = "KV cache"
    key = "kv-cache"

    def export_targets(self) -> dict[str, QWidget]:
        return {"kv-vs-context": self.ctx_plot, "kv-vs-batch": self.batch_plot}

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        self.summary = QLabel()
        self.summary.setObjectName("budgetKVSummary")
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        layout.addWidget(self.summary)
        row = QHBoxLayout()
        self.ctx_plot = plot_widget("KV cache vs context T", "KV cache (GiB)", "context length T (tokens)")
        self.batch_plot = plot_widget("KV cache vs batch B", "KV cache (GiB)", "batch B (sequences)")
        self.legends = {}
        for p in (self.ctx_plot, self.batch_plot):
            self.legends[id(p)] = legend_row(p.getPlotItem())
            row.addWidget(p)
        layout.addLayout(row, 1)
        self.pens = {
            "this": pg.mkPen(31, 119, 180, width=3),
            "mha": pg.mkPen(214, 39, 40, width=2, style=Qt.PenStyle.DashLine),
            "mqa": pg.mkPen(44, 160, 44, width=2, style=Qt.PenStyle.DotLine),
        }
        self.ctx_curves = {k: self.ctx_plot.plot([], [], pen=pen) for k, pen in self.pens.items()}
        self.b_curves = {k: self.batch_plot.plot([], [], pen=pen) for k, pen in self.pens.items()}
        self.ctx_marker = pg.InfiniteLine(
            angle=90,
            pen=pg.mkPen(90, 90, 90),
            movable=False,
            label="",
            labelOpts={"position": 0.5, "color": (60, 60, 60)},
        )
        self.b_marker = pg.InfiniteLine(
            angle=90,
            pen=pg.mkPen(90, 90, 90),
            movable=False,
            label="",
            labelOpts={"position": 0.95, "color": (60, 60, 60)},
        )
        self.ctx_plot.addItem(self.ctx_marker, ignoreBounds=True)
        self.b_marker.label.setPosition(0.5)
        self.batch_plot.addItem(self.b_marker, ignoreBounds=True)

    def _legend(self, plot, curves: dict, names: dict[str, str]) -> None:
        legend = self.legends[id(plot)]
        legend.clear()
        for k, curve in curves.items():
            curve.setVisible(k in names)
            if k in names:
                legend.addItem(curve, names[k])

    def update_report(
        self, cfg: GPTConfig, settings: BudgetSettings, rep: dict[str, Any], rows: list[Row]
    ) -> None:
        kv = rep["kv_cache"]
        T, B, bpv = kv["seq_len"], kv["batch"], kv["bytes_per_value"]
        per_tok = kv["per_token_bytes"]
        by_kind = kv.get("per_token_by_kind") or {}
        h, h_kv, L = cfg.attention.n_heads, cfg.kv_heads, cfg.core.n_layers
        # bytes per token of this config, and of MHA and MQA of the same heads
        per_token = {"this": per_tok, "mha": by_kind.get("MHA", per_tok), "mqa": by_kind.get("MQA", per_tok)}
        if cfg.mla:
            r = int(cfg.attention.kv_lora_rank or 0)
            formula = f"L·(r + d_R)·T·B·bytes = {L}·({r} + {cfg.qk_rope_dim})·T·B·{bpv:g}"
            kind = (
                "multi-head latent attention (MLA): the cache holds one latent of r values and one rotary "
                "key per token and layer, and every head's keys and values are rebuilt from them"
            )
        else:
            formula = f"2·L·h_kv·d_k·T·B·bytes = 2·{L}·{h_kv}·{cfg.d_head}·T·B·{bpv:g}"
            kind = (
                "multi-head attention (MHA)"
                if h_kv == h
                else "multi-query attention (MQA)"
                if h_kv == 1
                else f"grouped-query attention (GQA: {cfg.n_rep} query heads share each K/V head)"
            )
            kind = f"{h_kv} K/V head(s) for {h} query heads: {kind}"
        if kv["saving_factor"] != 1:
            saving = (
                "<br>Multi-head attention of the same shape would need "
                f"{budget.human_bytes(kv['mha_bytes'])}: "
                f"this is <b>{kv['saving_factor']:g}× smaller</b> and saves "
                f"<b>{budget.human_bytes(kv['saved_bytes'])}</b>."
            )
        else:
            saving = (
                f"<br>Multi-query attention (one K/V head) would need "
                f"{budget.human_bytes(per_token['mqa'] * T * B)}, {h}× less; GQA with 8 K/V heads "
                f"{budget.human_bytes(kv['bytes'] * 8 / h)}."
                if h > 1
                else ""
            )
        if kv.get("windowed_bytes") is not None and kv["windowed_bytes"] < kv["bytes"]:
            saving += (
                f"<br>Local layers that kept only their last {cfg.attention.sliding_window:,} tokens would "
                "bring it to "
                f"{budget.human_bytes(kv['windowed_bytes'])} (the model's own cache keeps every token)."
            )
        self.summary.setText(
            f"KV cache = {formula}: <b>{budget.human_bytes(per_tok)} per token</b>; at T = {T:,}, B = {B}: "
            f"<b>{budget.human_bytes(kv['bytes'])}</b>. {kind}." + saving
        )
        names = {"this": "this config" + ("" if cfg.mla else f" (h_kv = {h_kv})")}
        if per_token["mha"] != per_tok:
            names["mha"] = f"multi-head, h_kv = {h}"
        if per_token["mqa"] != per_tok:
            names["mqa"] = "multi-query, h_kv = 1"
        Ts = np.array([0.0, float(max(cfg.core.context_length, 2 * T))])  # the cache is linear in T and B
        for k, c in self.ctx_curves.items():
            c.setData(Ts, per_token[k] * Ts * B / GiB)
        self._legend(self.ctx_plot, self.ctx_curves, names)
        self.ctx_marker.setPos(T)
        self.ctx_marker.label.setFormat(f"T = {T:,}")
        Bs = np.array([0.0, float(max(64, 2 * B))])
        for k, c in self.b_curves.items():
            c.setData(Bs, per_token[k] * T * Bs / GiB)
        self._legend(self.batch_plot, self.b_curves, names)
        self.b_marker.setPos(B)
        self.b_marker.label.setFormat(f"B = {B}")
        for p in (self.ctx_plot, self.batch_plot):
            p.enableAutoRange()


# ---------------------------------------------------------------------------------------------
class MemoryPage(PushedPage):
    """Training memory per precision mode (weights, gradients, master weights, AdamW, activations)."""

    title = "Memory"
    key = "memory"

    def export_targets(self) -> dict[str, QWidget]:
        return {"memory": self.plot}

    PARTS = (
        ("weights", "weights", (31, 119, 180)),
        ("gradients", "gradients", (255, 127, 14)),
        ("master_weights", "fp32 master weights", (148, 103, 189)),
        ("optimizer", "AdamW m and v", (44, 160, 44)),
        ("activations", "activations", (214, 39, 40)),
    )

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        #: the page's column (the tab puts its memory inputs at the top)
        self.body = layout = QVBoxLayout(self)
        self.note = QLabel()
        self.note.setWordWrap(True)
        layout.addWidget(self.note)
        split = QSplitter(Qt.Orientation.Vertical)
        self.table = make_table(["memory", *budget.PRECISIONS])
        self.table.setObjectName("budgetMemoryTable")
        for c in range(1, self.table.columnCount()):
            self.table.horizontalHeader().setSectionResizeMode(c, QHeaderView.ResizeMode.Stretch)
        split.addWidget(self.table)
        self.plot = plot_widget("Training memory by precision mode (one device, AdamW)", "GiB", "")
        legend_row(self.plot.getPlotItem())
        self.bars: list[pg.BarGraphItem] = []
        split.addWidget(self.plot)
        split.setSizes([330, 450])
        layout.addWidget(split, 1)

    def update_report(
        self, cfg: GPTConfig, settings: BudgetSettings, rep: dict[str, Any], rows: list[Row]
    ) -> None:
        T = rep["memory"]["seq_len"]
        B = rep["memory"]["batch"]
        ests = {name: budget.memory(cfg, name, T, B, settings.recompute) for name in budget.PRECISIONS}
        cells = [
            ["bytes per parameter"]
            + [
                " + ".join(str(v) for v in e.bytes_per_param.values())
                + f" = {sum(e.bytes_per_param.values())}"
                for e in ests.values()
            ],
            ["weights"] + [budget.human_bytes(e.weights) for e in ests.values()],
            ["gradients"] + [budget.human_bytes(e.gradients) for e in ests.values()],
            ["fp32 master weights"] + [budget.human_bytes(e.master_weights) for e in ests.values()],
            ["AdamW m and v"] + [budget.human_bytes(e.optimizer) for e in ests.values()],
            [f"activations ({'full recompute' if settings.recompute else 'no recompute'})"]
            + [budget.human_bytes(e.activations) for e in ests.values()],
            ["  without recompute"] + [budget.human_bytes(e.activations_no_recompute) for e in ests.values()],
            ["  with full recompute"] + [budget.human_bytes(e.activations_recompute) for e in ests.values()],
            ["training total"] + [budget.human_bytes(e.training_total) for e in ests.values()],
            ["inference: weights"] + [budget.human_bytes(e.inference_weights) for e in ests.values()],
            [f"inference: KV cache (T={T:,}, B={B})"]
            + [budget.human_bytes(e.kv_cache) for e in ests.values()],
            ["inference total"] + [budget.human_bytes(e.inference_total) for e in ests.values()],
        ]
        items = fill(self.table, cells, right_from=1, bold_rows=(8, 11))
        col = list(budget.PRECISIONS).index(settings.precision) + 1
        for row_items in items:
            row_items[col].setBackground(QBrush(HIGHLIGHT))
        self.table.setHorizontalHeaderLabels(
            ["memory"] + [f"{n} ◀" if n == settings.precision else n for n in budget.PRECISIONS]
        )
        pr = budget.PRECISIONS[settings.precision]
        self.note.setText(
            f"Selected: {settings.precision} — {pr.description}. Activations at T = {T:,}, batch {B} "
            "(Korthikanti et al.'s count, fused attention); framework workspaces and fragmentation are "
            "not counted. One device, no sharding: divide the states by the number of devices for "
            "ZeRO-3/FSDP."
        )
        for b in self.bars:
            self.plot.removeItem(b)
        self.bars = []
        names = list(ests)
        x = np.arange(len(names), dtype=np.float64)
        bottom = np.zeros(len(names))
        for part, label, color in self.PARTS:
            h = np.array([getattr(e, part) for e in ests.values()], dtype=np.float64) / GiB
            bar = pg.BarGraphItem(
                x=x,
                height=h,
                y0=bottom.copy(),
                width=0.5,
                brush=pg.mkBrush(*color),
                pen=pg.mkPen(255, 255, 255),
                name=label,
            )
            self.plot.addItem(bar)
            self.bars.append(bar)
            bottom += h
        self.plot.getAxis("bottom").setTicks([[(i, n) for i, n in enumerate(names)]])
        self.plot.setXRange(-0.6, len(names) - 0.4, padding=0)
        self.plot.setYRange(0, float(bottom.max()) * 1.05 or 1, padding=0)


# ---------------------------------------------------------------------------------------------

# ---------------------------------------------------------------------------------------------
__all__ = ["KVPage", "MemoryPage"]
