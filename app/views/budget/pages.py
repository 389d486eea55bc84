"""The Budget tab's count pages (Parameters, FLOPs, Cost), each drawing one part of a
:func:`model.budget.arithmetic.report`.

Every page has ``update_report(cfg, settings, rep, rows)``, ``rows`` being the report's
:func:`model.budget.table.budget_table` (the table the text and the exports render too): the
Parameters, FLOPs and Cost tables show their section of it. The KV cache and Memory pages are in
:mod:`app.views.budget.memory_pages`. Plots are created once and updated with
``setData``. Nothing here computes more than reading the report and calling the calculator for a
curve's points (pure arithmetic).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QLabel,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.views.budget.common import (
    PART_COLORS,
    fill,
    geom,
    make_table,
    plot_widget,
    pow2_ticks,
    share_text,
)
from app.views.page import PushedPage
from app.widgets.axes import PLOT_MIN_HEIGHT
from app.widgets.legend import legend_row
from app.widgets.side_by_side import SideBySide
from app.widgets.table_width import keep_columns_whole, rows_height
from app.widgets.wrapped_label import WrappedLabel
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
            + f"   ({cfg.feed_forward.mlp}, {cfg.normalization.norm} "
            f"{cfg.normalization.norm_position}-norm, {cfg.positional.positions} positions, "
            f"bias {cfg.core.bias}, {'tied' if cfg.core.tie_embeddings else 'untied'} output head)"
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
        items = fill(self.table, cells, right_from=2, bold_rows=bold, tips=tips)
        for r, row_items in zip(mine, items, strict=True):
            if not r.value:  # muted: drawn as disabled, so it greys with the table, not darker than it
                for it in row_items:
                    it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsEnabled)


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
        self.table = make_table(["per token", "formula", "FLOPs", "exact"], stretch=0)
        self.table.setObjectName("budgetFlopTable")
        keep_columns_whole(self.table)  # no column squeezed below its header
        # as tall as its rows (update_report), no taller: the plot below gets the rest
        self.note = WrappedLabel()
        self.note.setStyleSheet("color: #444;")
        self.note.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.note.setMinimumWidth(260)
        # the note beside the table where there is room, under it on a small screen
        top = SideBySide(self.table, self.note, first_min=540, stretch=(3, 2))
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
            labelOpts={"position": 0.8, "color": (60, 60, 60), "fill": (255, 255, 255, 200)},
        )
        self.beyond = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(0, 0, 0, 18), pen=pg.mkPen(None))
        self.beyond_text = pg.TextItem("beyond the context length", color=(110, 110, 110), anchor=(0, 0))
        for it in (self.beyond, self.cross_line, self.t_line, self.beyond_text):
            self.plot.addItem(it, ignoreBounds=True)
        # its guide labels stay apart, and at 1280×800 the page still fits without scrolling
        self.plot.setMinimumHeight(PLOT_MIN_HEIGHT - 40)
        split.addWidget(self.plot)
        split.setChildrenCollapsible(False)
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
        self.table.setFixedHeight(rows_height(self.table))
        shares = ", ".join(f"{k} {v:.1%}" for k, v in f["shares"].items())
        cross = f["attention_crossover_seq_len"]  # None: windows keep the scores below the MLP
        routed = (
            f" (per token: the active ones, {f['active_params']:,}; each token goes to "
            f"{cfg.feed_forward.n_experts_per_token} of {cfg.feed_forward.n_experts} experts)"
            if cfg.feed_forward.n_experts and f.get("active_params")
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
        hi = max(4 * (cross or 0), 4 * cfg.core.context_length, 2 * T, 4096)
        lo = min(64, T)
        Ts = geom(lo, hi)
        plot_cfg = cfg.replace(context_length=int(max(hi, cfg.core.context_length)))  # FLOPs ignore the table
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
        ctx = cfg.core.context_length
        self.beyond.setRegion((math.log10(ctx), math.log10(hi)))
        self.beyond.setVisible(ctx < hi)
        self.beyond_text.setVisible(ctx < hi)
        self.beyond_text.setText(f"beyond the context\nlength ({ctx:,})")
        self.beyond_text.setPos(math.log10(ctx), 99)
        self.plot.getAxis("bottom").setTicks(pow2_ticks(x[0], x[-1]))
        self.plot.setXRange(math.log10(x[0]), math.log10(x[-1]), padding=0.01)


class CostPage(PushedPage):
    """Training cost: total FLOPs for D tokens, GPU-hours and wall-clock, and what the authors report."""

    title = "Cost"
    key = "cost"

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        #: the page's column (the tab puts its cost inputs at the top)
        self.body = layout = QVBoxLayout(self)
        self.table = make_table(["training cost", "how", "value"], stretch=1)
        self.table.setObjectName("budgetCostTable")
        layout.addWidget(self.table, 1)
        self.note = WrappedLabel()
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
__all__ = ["CostPage", "FlopsPage", "ParamsPage"]
