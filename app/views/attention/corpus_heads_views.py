"""What the Heads-over-a-corpus page draws its result with, apart from the page: the heads × scores
table (:class:`ScoresTable`, sortable by any column: the numbers sort, not their text; each cell the
mean, its tooltip "mean [low, high]", :func:`interval_text`, as the head's card shows it), and a top
example as HTML with its key and query tokens highlighted (:func:`example_html`, from the example's
own line of text, whose key is in «» and query in ⟦⟧: :meth:`model.interp.corpus.TopExamples.texts`)."""

from __future__ import annotations

import html
import math
import re
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from model.interp.corpus import ALIKE_BASES

if TYPE_CHECKING:
    from model.interp.corpus import HeadScores

#: The table's sort role (numbers, not texts) and the role that holds a row's (layer, head).
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
HEAD_ROLE = Qt.ItemDataRole.UserRole + 2
#: The highlights of an example: its key and its query (the Q–K map page's key red and query blue).
KEY_STYLE = "background:#f6c9c9; color:#000; font-weight:bold"
QUERY_STYLE = "background:#c6dbf0; color:#000; font-weight:bold"
#: a query that is its own key
SELF_STYLE = "background:#ddc6f0; color:#000; font-weight:bold"


#: Each score's column header: short, so that every column shows at 1024 px without the table
#: scrolling sideways (the header's tooltip and the head's card give the full name and the interval).
SHORT = {
    "prev_token": "prev",
    "induction": "ind",
    "induction_random": "ind\nrand",
    "duplicate_token": "dup",
    "sink": "sink",
    "entropy": "ent",
    "distance": "dist",
    "local": "loc",
    "self_score": "self",
}
#: the header's role holding the score's full name
NAME_ROLE = Qt.ItemDataRole.UserRole + 3


def interval_text(mean: float, low: float, high: float) -> str:
    """``mean [low, high]`` to two decimals ("n/a" for a score no prompt defines)."""
    if math.isnan(mean):
        return "n/a"
    return f"{mean:.2f} [{low:.2f}, {high:.2f}]".replace("-", "−")


def router_text(result, layer: int, most: int = 8) -> str:
    """A mixture of experts' router load in ``layer`` for the head's card: each expert's mean share of
    the choices over prompts with its 95% interval, the most chosen first (at most ``most``); "" for a
    dense model or a dense layer."""
    load = getattr(result, "router_load", None)
    if load is None or layer >= len(load) or not np.isfinite(load[layer]).any():
        return ""
    low, high = result.router_low[layer], result.router_high[layer]
    order = [int(e) for e in np.argsort(-np.nan_to_num(load[layer], nan=-1.0))[:most]]
    cells = " · ".join(
        f"e{e} <b>{100 * load[layer][e]:.0f}%</b> [{100 * low[e]:.0f}, {100 * high[e]:.0f}]" for e in order
    )
    more = len(load[layer]) - len(order)
    return f"layer {layer}'s router, share of choices: {cells}" + (f" · {more} more" if more > 0 else "")


def example_html(line: str) -> str:
    """An example's line (key in «», query in ⟦⟧) as HTML: the key and query tokens highlighted (a query
    that is its own key in a third colour)."""
    text = html.escape(line, quote=False).replace("\n", "⏎")
    text = re.sub("⟦«(.*?)»⟧", lambda m: f'<span style="{SELF_STYLE}">{m.group(1)}</span>', text)
    text = re.sub("«(.*?)»", lambda m: f'<span style="{KEY_STYLE}">{m.group(1)}</span>', text)
    return re.sub("⟦(.*?)⟧", lambda m: f'<span style="{QUERY_STYLE}">{m.group(1)}</span>', text)


class ScoresTable(QTableView):
    """The heads × scores table of a :class:`~model.interp.corpus.HeadScores`: head, cluster, then each
    score as :func:`interval_text`; a click on a header sorts by that column (by the mean, NaN last),
    a click on a row emits ``headClicked(layer, head)``."""

    headClicked = Signal(int, int)

    def __init__(self) -> None:
        super().__init__()
        self.table = QStandardItemModel(self)
        self.table.setSortRole(SORT_ROLE)
        self.setModel(self.table)
        self.setSortingEnabled(True)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(20)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.clicked.connect(lambda index: self.headClicked.emit(*self.head_at(index.row())))

    def show_result(self, result: HeadScores | None) -> None:
        """Fill the table with ``result``'s heads (empty for None), kept sorted as it was."""
        self.table.clear()
        if result is None:
            return
        names = ["head", *result.names]
        self.table.setHorizontalHeaderLabels([SHORT.get(n, n) for n in names])
        for c, n in enumerate(names):
            self.table.horizontalHeaderItem(c).setData(n, NAME_ROLE)
            self.table.horizontalHeaderItem(c).setToolTip(n if c else "layer and head")
        L, H = result.shape
        for layer in range(L):
            for head in range(H):
                name = QStandardItem(f"L{layer}H{head}")
                name.setData(layer * H + head, SORT_ROLE)
                name.setData((layer, head), HEAD_ROLE)
                name.setToolTip(
                    " · ".join(
                        f"cluster by {words}: {c.names[int(c.labels[layer, head])]}"
                        for words, c in ((w, result.alike(b)) for b, w in ALIKE_BASES.items())
                    )
                )
                row = [name]
                for i, score in enumerate(result.names):
                    m, lo, hi = (float(a[i, layer, head]) for a in (result.mean, result.low, result.high))
                    item = QStandardItem("n/a" if math.isnan(m) else f"{m:.2f}".replace("-", "−"))
                    item.setToolTip(f"{score}: {interval_text(m, lo, hi)} (95% over prompts)")
                    item.setData(-math.inf if math.isnan(m) else m, SORT_ROLE)
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                    row.append(item)
                self.table.appendRow(row)
        header = self.horizontalHeader()
        if header.sortIndicatorSection() >= 0 and header.sortIndicatorSection() < self.table.columnCount():
            self.table.sort(header.sortIndicatorSection(), header.sortIndicatorOrder())

    def sort_by(self, score: str, descending: bool = True) -> None:
        """Sort by column ``score`` ("head" or a score's name), as a click on its header."""
        labels = [self.table.horizontalHeaderItem(c).data(NAME_ROLE) for c in range(self.table.columnCount())]
        order = Qt.SortOrder.DescendingOrder if descending else Qt.SortOrder.AscendingOrder
        self.sortByColumn(labels.index(score), order)

    def head_at(self, row: int) -> tuple[int, int]:
        """The (layer, head) of row ``row`` as the table is sorted now."""
        layer, head = self.table.item(row, 0).data(HEAD_ROLE)
        return int(layer), int(head)

    def select_head(self, layer: int, head: int) -> None:
        """Select the row of (layer, head), scrolled into view."""
        for row in range(self.table.rowCount()):
            if self.head_at(row) == (layer, head):
                self.selectRow(row)
                self.scrollTo(self.table.index(row, 0))
                return


__all__ = ["ScoresTable", "example_html", "interval_text", "router_text"]
