"""What the Budget tab's pages share: read-only tables filled from rows, plots, log-axis ticks."""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem

from app.widgets.palette import PALETTE
from model.budget import arithmetic as budget

GiB = 1024**3
BOLD = QFont()
BOLD.setBold(True)
HIGHLIGHT = QColor(255, 236, 170)
#: Colours of the four FLOP parts (from the one palette).
PART_COLORS = {
    "attention scores": PALETTE[1],
    "attention projections": PALETTE[3],
    "mlp": PALETTE[0],
    "output head": PALETTE[2],
}


def make_table(headers: list[str], *, stretch_last: bool = False, stretch: int | None = None) -> QTableWidget:
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().setVisible(False)
    t.verticalHeader().setDefaultSectionSize(24)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setAlternatingRowColors(True)
    h = t.horizontalHeader()
    h.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    if stretch_last:
        h.setStretchLastSection(True)
    if stretch is not None:
        h.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
    return t


def item(text: Any, *, right: bool = False, bold: bool = False, tip: str = "") -> QTableWidgetItem:
    it = QTableWidgetItem(str(text))
    if right:
        it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    if bold:
        it.setFont(BOLD)
    if tip:
        it.setToolTip(tip)
    return it


def fill(
    table: QTableWidget,
    rows: list[list[Any]],
    *,
    right_from: int = 1,
    bold_rows: Collection[int] = (),
    tips: list[list[str]] | None = None,
) -> list[list[QTableWidgetItem]]:
    """Put ``rows`` in ``table``, one item a cell; the items, row by row (to colour some)."""
    table.setRowCount(len(rows))
    items: list[list[QTableWidgetItem]] = []
    for r, row in enumerate(rows):
        items.append([])
        for c, v in enumerate(row):
            tip = tips[r][c] if tips else ""
            it = item(v, right=c >= right_from, bold=r in bold_rows, tip=tip)
            table.setItem(r, c, it)
            items[r].append(it)
    return items


def plot_widget(title: str, left: str, bottom: str) -> pg.PlotWidget:
    w = pg.PlotWidget()
    w.setBackground("w")
    w.setTitle(title, color="#222", size="10pt")
    w.setLabel("left", left)
    w.setLabel("bottom", bottom)
    w.showGrid(x=True, y=True, alpha=0.25)
    w.setMenuEnabled(False)
    return w


def headline(title: str, rep: dict[str, Any]) -> str:
    """The tab's headline for a :func:`model.budget.arithmetic.report`: ``title`` and its totals."""
    p, f, kv = rep["params"], rep["flops"], rep["kv_cache"]
    t = rep.get("training")
    cost = ""
    if t and t.get("gpu_hours") is not None:
        cost = f" · <b>{t['gpu_hours']:,.0f}</b> GPU-hours for {budget.human_count(t['tokens'])} tokens"
    active = ""
    if p.get("active") is not None and p["active"] != p["total"]:  # a mixture of experts
        active = (
            f", <b>{budget.human_count(p['active'])}</b> active per token "
            f"({budget.human_count(p['active_without_embedding'])} without the embedding)"
        )
    return (
        f"<span style='font-size:13pt'><b>{title}</b>: "
        f"<b>{p['total']:,}</b> parameters ({budget.human_count(p['total'])}){active}</span><br>"
        f"non-embedding {p['non_embedding']:,} · "
        f"forward {budget.human_flops(f['forward_total_per_token'])}"
        f"/token at T = {f['seq_len']:,} · KV cache {budget.human_bytes(kv['per_token_bytes'])}/token"
        f"{cost}"
    )


def share_text(x: float) -> str:
    return "0" if x == 0 else "< 0.01%" if x < 1e-4 else f"{x:.2%}"


def geom(lo: float, hi: float, n: int = 96) -> np.ndarray:
    return np.unique(np.round(np.geomspace(max(1.0, lo), max(lo + 1, hi), n)).astype(np.int64))


def pow2_ticks(lo: float, hi: float) -> list[list[tuple[float, str]]]:
    """Log-axis ticks at powers of two, labelled 128, 1k, 32k, 1M ..."""
    out = []
    e = math.floor(math.log2(max(lo, 1)))
    while 2**e <= hi * 1.0001:
        v = 2**e
        label = f"{v // 2**20}M" if v >= 2**20 else f"{v // 2**10}k" if v >= 2**10 else str(v)
        out.append((math.log10(v), label))
        e += 1
    step = max(1, len(out) // 9)
    return [out[::step]]


__all__ = [
    "BOLD",
    "HIGHLIGHT",
    "PART_COLORS",
    "GiB",
    "fill",
    "geom",
    "headline",
    "item",
    "make_table",
    "plot_widget",
    "pow2_ticks",
    "share_text",
]
