"""The pages of the Budget tab, each drawing one part of a :func:`model.budget.arithmetic.report`.

Every page has ``update_report(cfg, settings, rep, rows)``, ``rows`` being the report's
:func:`model.budget.table.budget_table` (the table the text and the exports render too): the
Parameters, FLOPs and Cost tables show their section of it. Plots are created once and updated with
``setData``. Nothing here computes more than reading the report and calling the calculator for a
curve's points (pure arithmetic).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.views.budget.common import (
    HIGHLIGHT,
    MUTED,
    PART_COLORS,
    GiB,
    fill,
    geom,
    make_table,
    plot_widget,
    pow2_ticks,
    share_text,
)
from app.views.page import PushedPage
from app.widgets.legend import legend_row
from model.budget import arithmetic as budget
from model.budget.table import COST, FLOPS, PARAMETERS, BudgetSettings, Row, display_value, section
from model.config import GPTConfig


# ---------------------------------------------------------------------------------------------
class ParamsPage(PushedPage):
    """The per-component parameter table with formulas, then the source chapter's summary rows."""

    title = "Parameters"
    key = "parameters"

    HEADERS: ClassVar[list[str]] = ["component", "formula (whole model)", "per layer", "total", "share"]

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        self.symbols_label = QLabel()
        self.symbols_label.setWordWrap(True)
        self.symbols_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.symbols_label)
        self.table = make_table(self.HEADERS, stretch=1)
        self.table.setObjectName("budgetParamTable")
        layout.addWidget(self.table, 1)
        note = QLabel(
            "Counted exactly as the app's GPT creates them (buffers such as RoPE tables are not parameters; "
            "a tied output head is the token embedding, counted once). Non-embedding follows Kaplan et al.: "
            "no token or position table and no untied output head."
        )
        note.setWordWrap(True)
        note.setStyleSheet("color: #555;")
        layout.addWidget(note)

    def update_report(
        self, cfg: GPTConfig, settings: BudgetSettings, rep: dict[str, Any], rows: list[Row]
    ) -> None:
        p = rep["params"]
        sy = rep["symbols"]
        self.symbols_label.setText(
            "Symbols: "
            + ", ".join(f"{k} = {v:,}" for k, v in sy.items())
            + f"   ({cfg.mlp}, {cfg.norm} {cfg.norm_position}-norm, {cfg.positions} positions, "
            f"bias {cfg.bias}, {'tied' if cfg.tie_embeddings else 'untied'} output head)"
        )
        total = p["total"] or 1
        mine = section(rows, PARAMETERS)
        cells, tips = [], []
        for r in mine:
            if "per layer" in r.quantity:  # one block's count goes in the per-layer column
                cells.append([r.quantity, r.formula, f"{r.value:,}", "", ""])
            else:
                per = f"{r.per_layer:,}" if r.per_layer else ""
                cells.append([r.quantity, r.formula, per, f"{r.value:,}", share_text(r.value / total)])
            tips.append(["", r.per_layer_formula, "", budget.human_count(r.value), ""])
        bold = [i for i, r in enumerate(mine) if r.total]
        fill(self.table, cells, right_from=2, bold_rows=bold, tips=tips)
        for i, r in enumerate(mine):
            if not r.value:
                for c in range(self.table.columnCount()):
                    self.table.item(i, c).setForeground(QBrush(MUTED))


# ---------------------------------------------------------------------------------------------
class FlopsPage(PushedPage):
    """FLOPs per token (forward, training, textbook 2N/6N) and the share of each part vs context."""

    title = "FLOPs"
    key = "flops"

    def export_targets(self) -> dict[str, QWidget]:
        return {"flop-shares": self.plot}

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        split = QSplitter(Qt.Orientation.Vertical)
        top = QWidget()
        tl = QHBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        self.table = make_table(["per token", "formula", "FLOPs", "exact"], stretch=0)
        self.table.setObjectName("budgetFlopTable")
        tl.addWidget(self.table, 3)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #444;")
        self.note.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        tl.addWidget(self.note, 2)
        split.addWidget(top)
        self.plot = plot_widget(
            "Share of forward FLOPs per token vs context length T",
            "share of forward FLOPs (%)",
            "context length T (tokens, log scale)",
        )
        self.plot.setLogMode(x=True, y=False)
        self.plot.setYRange(0, 100, padding=0.02)
        legend_row(self.plot.getPlotItem())  # above the curves, never on them
        self.curves = {
            k: self.plot.plot([], [], pen=pg.mkPen(*c, width=2.5), name=k) for k, c in PART_COLORS.items()
        }
        self.cross_line = pg.InfiniteLine(
            angle=90,
            pen=pg.mkPen(120, 0, 120, width=2, style=Qt.PenStyle.DashLine),
            movable=False,
            label="",
            labelOpts={"position": 0.55, "color": (120, 0, 120), "fill": (255, 255, 255, 200)},
        )
        self.t_line = pg.InfiniteLine(
            angle=90,
            pen=pg.mkPen(90, 90, 90, width=1),
            movable=False,
            label="",
            labelOpts={"position": 0.93, "color": (60, 60, 60), "fill": (255, 255, 255, 200)},
        )
        self.beyond = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(0, 0, 0, 18), pen=pg.mkPen(None))
        self.beyond_text = pg.TextItem("beyond the context length", color=(110, 110, 110), anchor=(0, 0))
        for it in (self.beyond, self.cross_line, self.t_line, self.beyond_text):
            self.plot.addItem(it, ignoreBounds=True)
        split.addWidget(self.plot)
        split.setStretchFactor(0, 0)
        split.setStretchFactor(1, 1)
        split.setSizes([230, 600])
        layout.addWidget(split)

    def update_report(
        self, cfg: GPTConfig, settings: BudgetSettings, rep: dict[str, Any], rows: list[Row]
    ) -> None:
        f = rep["flops"]
        T = f["seq_len"]
        mine = [r for r in section(rows, FLOPS) if r.unit.startswith("FLOP")]
        fill(
            self.table,
            [[r.quantity, r.formula, display_value(r), f"{r.value:,}"] for r in mine],
            right_from=2,
            bold_rows=[i for i, r in enumerate(mine) if r.total],
            tips=[["", r.note, r.unit, ""] for r in mine],
        )
        shares = ", ".join(f"{k} {v:.1%}" for k, v in f["shares"].items())
        cross = f["attention_crossover_seq_len"]  # None: windows keep the scores below the MLP
        routed = (
            f" (per token: the active ones, {f['active_params']:,}; each token goes to "
            f"{cfg.n_experts_per_token} of {cfg.n_experts} experts)"
            if cfg.n_experts and f.get("active_params")
            else ""
        )
        crossing = (
            f"Attention scores overtake the MLP at T ≈ {cross:,.0f}"
            + (" (with the causal halving)." if f["causal_halving"] else ".")
            if cross is not None
            else "Attention scores never overtake the MLP: every layer's window keeps the keys it reads "
            "below the size where they would."
        )
        self.note.setText(
            f"N_mm = {f['matmul_params']:,} weights multiply every token{routed} (attention, MLP or experts, "
            "output head); 2 FLOPs per multiply-add; norms, softmax and activations are not counted. "
            "Training = 3 × forward (the backward pass costs two forwards).\n\n"
            f"At T = {T:,}: {shares}.\n\n{crossing}"
        )
        hi = max(4 * (cross or 0), 4 * cfg.context_length, 2 * T, 4096)
        lo = min(64, T)
        Ts = geom(lo, hi)
        plot_cfg = cfg.replace(context_length=int(max(hi, cfg.context_length)))  # FLOPs ignore the table
        sh = budget.flop_shares(plot_cfg, [int(t) for t in Ts], settings.causal_halving)
        x = np.asarray(sh["seq_len"], dtype=np.float64)
        for k, curve in self.curves.items():
            curve.setData(x, 100 * np.asarray(sh[k]), skipFiniteCheck=True)
        self.cross_line.setVisible(cross is not None)
        if cross is not None:
            self.cross_line.setPos(math.log10(cross))
            self.cross_line.label.setFormat(f"attention = MLP\nat T ≈ {cross:,.0f}")
        self.t_line.setPos(math.log10(T))
        self.t_line.label.setFormat(f"T = {T:,}")
        ctx = cfg.context_length
        self.beyond.setRegion((math.log10(ctx), math.log10(hi)))
        self.beyond.setVisible(ctx < hi)
        self.beyond_text.setVisible(ctx < hi)
        self.beyond_text.setText(f"beyond the context\nlength ({ctx:,})")
        self.beyond_text.setPos(math.log10(ctx), 99)
        self.plot.getAxis("bottom").setTicks(pow2_ticks(x[0], x[-1]))
        self.plot.setXRange(math.log10(x[0]), math.log10(x[-1]), padding=0.01)


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
        self.ctx_plot = plot_widget(
            "KV cache vs context length (batch B)", "KV cache (GiB)", "context length T (tokens)"
        )
        self.batch_plot = plot_widget(
            "KV cache vs batch size (context T)", "KV cache (GiB)", "batch B (sequences)"
        )
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
        h, h_kv, L = cfg.n_heads, cfg.kv_heads, cfg.n_layers
        # bytes per token of this config, and of MHA and MQA of the same heads
        per_token = {"this": per_tok, "mha": by_kind.get("MHA", per_tok), "mqa": by_kind.get("MQA", per_tok)}
        if cfg.mla:
            r = int(cfg.kv_lora_rank or 0)
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
                f"<br>Local layers that kept only their last {cfg.sliding_window:,} tokens would bring it to "
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
        Ts = np.array([0.0, float(max(cfg.context_length, 2 * T))])  # the cache is linear in T and B
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
        layout = QVBoxLayout(self)
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
        rows = [
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
        fill(self.table, rows, right_from=1, bold_rows=(8, 11))
        col = list(budget.PRECISIONS).index(settings.precision) + 1
        for r in range(self.table.rowCount()):
            self.table.item(r, col).setBackground(QBrush(HIGHLIGHT))
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
class CostPage(PushedPage):
    """Training cost: total FLOPs for D tokens, GPU-hours and wall-clock, and what the authors report."""

    title = "Cost"
    key = "cost"

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        self.table = make_table(["training cost", "how", "value"], stretch=1)
        self.table.setObjectName("budgetCostTable")
        layout.addWidget(self.table, 1)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setStyleSheet("color: #555;")
        layout.addWidget(self.note)

    def update_report(
        self, cfg: GPTConfig, settings: BudgetSettings, rep: dict[str, Any], rows: list[Row]
    ) -> None:
        mine = section(rows, COST)
        if not mine:
            fill(self.table, [["training cost", "enter the number of training tokens D", "–"]])
            self.note.setText("")
            return
        fill(
            self.table,
            [[r.quantity, r.formula or r.note, display_value(r, with_unit=True)] for r in mine],
            right_from=2,
            bold_rows=[i for i, r in enumerate(mine) if r.total],
            tips=[[r.note, _how(r), f"{r.value!r} {r.unit}"] for r in mine],
        )
        self.note.setText(
            "MFU (model FLOPs utilisation) counts the model's FLOPs only, not recomputation: 35–50% is "
            "typical of large dense training runs."
        )


def _how(r: Row) -> str:
    return "\n".join(t for t in (r.formula, r.note) if t)


# ---------------------------------------------------------------------------------------------
__all__ = ["CostPage", "FlopsPage", "KVPage", "MemoryPage", "ParamsPage"]
