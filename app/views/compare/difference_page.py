"""The A − B page: the difference of two runs' attention, every head, on symmetric levels, and a
table of how much each head changed."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QHeaderView, QLabel, QSplitter, QVBoxLayout

from app.views.compare import words
from app.views.compare.base import ComparePage, make_table, number_cell
from app.widgets.head_grid import HeadMosaic
from app.widgets.table_width import columns_width
from model.compare.tables import diff_levels
from model.interp.frame import carried_mask


class DifferencePage(ComparePage):
    """Two run pickers (A and B; picking sets the state's pair), the :class:`HeadMosaic` in
    difference mode and the per-head table, sorted by total variation."""

    title = "A − B difference"
    key = "difference"
    redraw_on = ("pair_changed",)
    blurb = (
        "Where two models of the same shape attend differently: red where A attends more, blue where B does."
    )

    def build(self) -> None:
        dl = QVBoxLayout(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("A"))
        self.a_combo = QComboBox()
        self.a_combo.setObjectName("compareA")
        row.addWidget(self.a_combo, 1)
        row.addWidget(QLabel("−  B"))
        self.b_combo = QComboBox()
        self.b_combo.setObjectName("compareB")
        row.addWidget(self.b_combo, 1)
        self.a_combo.currentIndexChanged.connect(self._picked)
        self.b_combo.currentIndexChanged.connect(self._picked)
        dl.addLayout(row)
        self.diff_status = QLabel()
        self.diff_status.setObjectName("compareDiffStatus")
        self.diff_status.setWordWrap(True)
        dl.addWidget(self.diff_status)
        split = QSplitter(Qt.Orientation.Horizontal)
        self.split = split  # side by side when there is room, else the grid above the table
        self.diff_grid = HeadMosaic(interactive=False, compact=True)
        self.diff_grid.clear("no difference to show yet")
        split.addWidget(self.diff_grid)
        self.diff_table = make_table(["layer", "head", "max |Δ|", "mean |Δ|", "TV"])
        self.diff_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.diff_table.setObjectName("compareDiffTable")
        self.diff_table.setToolTip(
            "Per head: the largest and mean absolute difference Δ = A − B of the weights, and TV, the "
            "mean over queries of the total-variation distance ½ Σ_j |A_ij − B_ij| "
            "(0 = same pattern, 1 = disjoint)"
        )
        self.diff_table.setSortingEnabled(True)
        split.addWidget(self.diff_table)
        split.setSizes([640, 480])
        dl.addWidget(split, 1)

    def _picked(self, *_) -> None:
        self.state.set_pair(self.a_combo.currentText(), self.b_combo.currentText())

    def _fill_combos(self) -> None:
        names = [r.name for r in self.state.with_attention()]
        for combo, current in zip((self.a_combo, self.b_combo), self.state.pair, strict=True):
            combo.blockSignals(True)
            combo.clear()
            combo.addItems(names)
            combo.setCurrentText(current)
            combo.blockSignals(False)

    def draw(self) -> None:
        self._fill_combos()
        st = self.state
        (a, b), diff = st.pair, st.diff
        if diff is None:
            if st.pair_problem:
                self.diff_status.setText(st.pair_problem)
                self.diff_grid.clear("A − B needs two models of the same shape on the same tokens")
            else:
                self.diff_status.setText("Run a prompt through two or more models to compare their heads.")
                self.diff_grid.clear("no difference to show yet")
            self.diff_table.setRowCount(0)
            return
        tokens = st.run(a).record.attention.labels
        levels = diff_levels(diff)
        self.diff_grid.set_difference(
            diff, tokens, levels, names=(a, b), title=f"{a}  −  {b}", mask=self._seen_by_either(a, b)
        )
        summ = st.diff_summary
        self.diff_status.setText(words.diff_verdict(a, b, diff, summ.row_tv, len(tokens)))
        L, H = summ.max_abs.shape
        t = self.diff_table
        t.setSortingEnabled(False)
        t.setRowCount(L * H)
        for i, (li, hi) in enumerate((li, hi) for li in range(L) for hi in range(H)):
            values = (li, hi, summ.max_abs[li, hi], summ.mean_abs[li, hi], summ.row_tv[li, hi])
            for c, v in enumerate(values):
                t.setItem(i, c, number_cell(v, integer=c < 2))
        t.setSortingEnabled(True)
        t.sortItems(4, Qt.SortOrder.DescendingOrder)  # the heads that changed most first
        # every column stays readable: the splitter gives the grid only what the table leaves
        t.setMinimumWidth(columns_width(t))
        self._orient()

    #: the narrowest the grid is drawn beside the table (px): below it, the table goes under the grid
    GRID_MIN_WIDTH = 360

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._orient()

    def _orient(self) -> None:
        split = getattr(self, "split", None)
        if split is None:
            return
        room = self.width() - self.diff_table.minimumWidth() - split.handleWidth()
        want = Qt.Orientation.Horizontal if room >= self.GRID_MIN_WIDTH else Qt.Orientation.Vertical
        if split.orientation() != want:
            split.setOrientation(want)

    def _seen_by_either(self, a: str, b: str):
        """The pairs A or B may see (the rest grey, as in every grid), or None when both see all."""
        ma, mb = (carried_mask(self.state.run(n).record.attention.weights) for n in (a, b))
        if ma is None or mb is None:
            return None
        return ma | mb

    def export_targets(self):
        return {"difference": self.diff_grid.view} if self.built else {}


__all__ = ["DifferencePage"]
