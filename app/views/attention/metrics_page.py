"""The Metrics page: per-head numbers in a sortable table and as small L×H heatmaps, and the names
they give heads ("previous-token", "induction", ...) with the thresholds used, which can be changed.

Numbers from ``model.interp.analysis.heads``: entropy, previous-token, first-token (sink) and self scores
on the prompt, induction on a repeated random sequence; names from ``classify_heads``. A model with
learned attention sinks (``attn_sinks``) gets one more map and column, the sink's share
(``learned_sink`` = mean over queries of ``1 − Σ_j w_ij``: what went to no key), not to be confused
with the first-token "sink" score.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDoubleSpinBox,
    QGroupBox,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.attention.base import AttentionPage, blurb_label, holder
from app.widgets.layouts import FlowLayout, labelled
from app.widgets.matrix_plot import MatrixPanel
from app.widgets.titles import WrapLabel
from model.interp.analysis.heads import HEAD_ROLES, HeadThresholds, role_title

#: (metric field, heatmap title) of the small L×H maps; every one lies in [0, 1].
MAPS = (
    ("entropy_norm", "<b>spread</b><br>entropy / ln(keys seen): 1 even, 0 one key"),
    ("prev_token", "<b>previous-token</b><br>mean weight on key i − 1"),
    ("sink", "<b>first-token (sink)</b><br>mean weight on key 0"),
    ("self_score", "<b>self</b><br>mean weight on key i (diagonal)"),
    ("induction", "<b>induction</b> (random repeat)<br>weight on the token after the last copy"),
)
#: The map added for a model with learned sinks (``attn_sinks``)
SINK_MAP = ("learned_sink", "<b>learned sink</b><br>1 − Σ weights: share to no key")
#: Width of the "Named heads" column beside the maps, px.
NAMED_WIDTH = 150
#: Table columns: (header, metric field or special, tooltip)
COLUMNS = (
    ("layer", "layer", ""),
    ("head", "head", ""),
    (
        "role",
        "role",
        "the name the thresholds below give this head, and its rank among the heads of that name "
        "(#1 = the highest score)",
    ),
    ("entropy", "entropy", "mean over queries of −Σ w ln w, in nats"),
    ("spread", "entropy_norm", "entropy / ln(number of keys the query sees): 1 = uniform, 0 = one-hot"),
    ("prev-token", "prev_token", "mean weight on the previous token"),
    ("sink", "sink", "mean weight on the first token"),
    ("self", "self_score", "mean weight on the query's own token"),
    (
        "induction",
        "induction",
        "mean weight on the token after the previous occurrence, on a repeated sequence",
    ),
    (
        "learned sink",
        "learned_sink",
        "share of the attention the head's learned sink took (no key's): mean over queries of 1 − Σ_j w_ij "
        "(models with attn_sinks only)",
    ),
)
#: Threshold spin boxes: (HeadThresholds field, label)
THRESHOLDS = (
    ("induction", "induction ≥"),
    ("previous_token", "previous-token ≥"),
    ("self", "self ≥"),
    ("sink", "sink ≥"),
    ("uniform", "broad: spread ≥"),
)


def _num_item(v: float | int | None, decimals: int = 3) -> QTableWidgetItem:
    item = QTableWidgetItem()
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        item.setData(Qt.ItemDataRole.DisplayRole, None)
    elif isinstance(v, int):
        item.setData(Qt.ItemDataRole.DisplayRole, v)
    else:
        item.setData(Qt.ItemDataRole.DisplayRole, round(float(v), decimals))
    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
    return item


class RoleItem(QTableWidgetItem):
    """A head's name with its rank (``sink #3``), sorted by name, then by rank as a number (#2 before
    #10); unnamed heads sort last."""

    def __init__(self, name: str, rank: int):
        super().__init__(f"{name} #{rank}" if name and rank else name)
        self.key = (not name, name, rank)
        self.setFlags(self.flags() & ~Qt.ItemFlag.ItemIsEditable)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        if isinstance(other, RoleItem):
            return self.key < other.key
        return super().__lt__(other)


class MetricsPage(AttentionPage):
    title = "Metrics"
    needs_every_pattern = True
    key = "metrics"
    own_jobs = ("metrics",)
    blurb = (
        "What each head does, in numbers: spread, previous-token, sink and self measured on your prompt; "
        "induction on a random sequence repeated twice (it needs a repeat, which the prompt may lack). "
        "Click a column to sort; double-click a row or click a map cell to open that head. The names come "
        "from the thresholds below: change them and the names follow."
    )

    def build(self) -> None:
        """The maps in one row (equal sizes, one colour bar: every score is in [0, 1]) with the named
        heads beside them; under them the table across the page's whole width (every column
        readable at 1280 px) and the thresholds; a splitter between the two."""
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        split = QSplitter(Qt.Orientation.Vertical)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.view.setMinimumHeight(150)
        self.maps: dict[str, MatrixPanel] = {}
        self._title_h: dict[str, float] = {}
        self.named = WrapLabel(" ", justify="left", color="#222", size="8pt")
        self._layout_maps(MAPS)
        self.canvas = holder(self.view)
        split.addWidget(self.canvas)
        below = QWidget()
        blay = QVBoxLayout(below)
        blay.setContentsMargins(0, 0, 0, 0)
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels([c[0] for c in COLUMNS])
        for i, (_, _, tip) in enumerate(COLUMNS):
            header = self.table.horizontalHeaderItem(i)  # made by the labels just set
            if tip and header is not None:
                header.setToolTip(tip)
        self.table.setSortingEnabled(True)
        self.table.horizontalHeader().setSortIndicator(0, Qt.SortOrder.AscendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setColumnHidden(len(COLUMNS) - 1, True)  # the learned sink: shown for a model with sinks
        blay.addWidget(self.table, 1)
        box = QGroupBox("Names and their thresholds")
        tlay = QVBoxLayout(box)
        row = FlowLayout()
        self.spins: dict[str, QDoubleSpinBox] = {}
        for field, label in THRESHOLDS:
            spin = QDoubleSpinBox()
            spin.setRange(0.0, 1.0)
            spin.setSingleStep(0.05)
            spin.setDecimals(2)
            spin.setValue(getattr(self.state.thresholds, field))
            spin.valueChanged.connect(self._on_threshold)
            labelled(row, label, spin)
            self.spins[field] = spin
        tlay.addLayout(row)
        self.rules = QLabel(" ")
        self.rules.setWordWrap(True)
        tlay.addWidget(self.rules)
        blay.addWidget(box)
        split.addWidget(below)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        split.setSizes([220, 330])
        self.split, self._fitted_layers = split, 0
        lay.addWidget(split, 1)
        self.status = QLabel(" ")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.table.cellDoubleClicked.connect(self._on_row)
        self.view.scene().sigMouseClicked.connect(self._on_map_click)

    def _layout_maps(self, maps) -> None:
        """Lay the maps ``maps`` ((metric, title), ...) out in one row, the colour bar after the last
        and the named heads beside them (again from scratch when the set of maps changes)."""
        ci = self.view.ci
        if self.maps:
            ci.removeItem(self.named)
            ci.clear()
        self.maps, self._title_h = {}, {}
        last = len(maps) - 1
        for i, (name, title) in enumerate(maps):
            hp = MatrixPanel(
                ci,
                0,
                i,
                title=title,
                square=True,
                legend=i == last,  # one colour bar for all: every map is a score in [0, 1]
                interactive=False,
                row_title="",  # L0, L1, … and H0, H1, … say it: no room to spare on the maps
                col_title="",
                legend_label="score",
                number_pt=8,
            )
            hp.set_title(title, size="8pt")
            self.maps[name] = hp
        for name, hp in self.maps.items():  # the maps side by side at one height: titles of one height
            hp.plot.titleLabel.set_on_height(lambda h, name=name: self._align_titles(name, h))
        grid = ci.layout
        for i in range(len(maps)):
            grid.setColumnStretchFactor(i, 1)
        grid.setColumnStretchFactor(len(maps), 0)  # the colour bar
        ci.addItem(self.named, row=0, col=len(maps) + 1)
        grid.setColumnFixedWidth(len(maps) + 1, NAMED_WIDTH)

    def _fit_maps(self, L: int) -> None:
        """Once per depth: the maps' share of the splitter grows with the layers (about 6 px a layer
        under their titles, up to 3/5 of it), so a 30-layer model's rows stay rows and the table keeps
        the rest; the user's own dragging of the splitter is kept until the depth changes."""
        if L == self._fitted_layers:
            return
        self._fitted_layers = L
        total = sum(self.split.sizes())
        if total > 0:
            maps = min(int(total * 0.6), max(220, 110 + 6 * L))
            self.split.setSizes([maps, total - maps])

    def _align_titles(self, name: str, h: float) -> None:
        """Give every map's title the height of the tallest (the maps then start on one line)."""
        self._title_h[name] = h
        top = max(self._title_h.values())
        for hp in self.maps.values():
            hp.plot.layout.setRowFixedHeight(0, top)
            hp.plot.titleLabel.setMaximumHeight(top)

    def _on_threshold(self, _v: float) -> None:
        self.state.set_thresholds(HeadThresholds(**{f: s.value() for f, s in self.spins.items()}))

    def _on_row(self, row: int, _col: int) -> None:
        layer, head = self.table.item(row, 0), self.table.item(row, 1)
        if layer is None or head is None:
            return  # an empty row (none is: every row is filled)
        role = Qt.ItemDataRole.DisplayRole
        self.openHeadRequested.emit(int(layer.data(role)), int(head.data(role)))

    def _on_map_click(self, ev) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        for hp in self.maps.values():
            cell = hp.cell_at(ev.scenePos())
            if cell is not None:
                self.openHeadRequested.emit(*cell)
                return

    def on_metrics(self) -> None:
        self.redraw()

    def refresh(self) -> None:
        res, cls = self.state.metrics, self.state.classification
        insp = self.state.inspection
        if res is None or cls is None or insp is None:
            self.status.setText("measuring the heads…" if insp is not None else " ")
            return
        m = res.metrics
        L, H = m.shape
        sinks = bool(getattr(insp.config, "attn_sinks", False)) and m.learned_sink is not None
        maps = (*MAPS, SINK_MAP) if sinks else MAPS
        if tuple(self.maps) != tuple(name for name, _ in maps):
            self._layout_maps(maps)
        self._fit_maps(L)
        self.table.setColumnHidden([c[1] for c in COLUMNS].index("learned_sink"), not sinks)
        self.table.setSortingEnabled(False)
        self.table.setRowCount(L * H)
        for i, row in enumerate(m.rows()):
            layer, head = row["layer"], row["head"]
            for j, (_, field, _) in enumerate(COLUMNS):
                item: QTableWidgetItem
                if field == "role":
                    lab = cls.labels[layer][head]
                    item = RoleItem(lab.name, lab.rank if lab.of > 1 else 0)
                    item.setToolTip(str(lab))
                else:
                    item = _num_item(row[field])
                self.table.setItem(i, j, item)
        self.table.setSortingEnabled(True)
        rows = [f"L{l}" for l in range(L)]
        cols = [f"H{h}" for h in range(H)]
        for name, hp in self.maps.items():
            arr = getattr(m, name)
            if arr is None:
                arr = np.full((L, H), np.nan)
            values = np.asarray(arr, dtype=np.float32)
            hp.set_matrix(values, rows, cols, levels=(0.0, 1.0), numbers=L * H <= 64)
        rules = self.state.role_rules_text(long=True, period=res.period)
        if sinks:
            rules += (
                " The <b>learned sink</b> map is not a name: it is the share of each head's attention that "
                "went to its learned sink logit (no key at all), where the first-token <b>sink</b> score "
                "is the weight on the first token."
            )
        self.rules.setText(rules)
        induction_col = [c[1] for c in COLUMNS].index("induction")
        header = self.table.horizontalHeaderItem(induction_col)
        if header is not None:  # not the prompt's: its own sequence, in the tooltip
            header.setText("induction (random)")
            header.setToolTip(f"{COLUMNS[induction_col][2]} (2 × {res.period} random tokens, not the prompt)")
        by_role = {role: cls.heads_named(role) for role in HEAD_ROLES if cls.heads_named(role)}
        lines = ["<b>Named heads</b>, strongest first"]

        bos = insp.labels[0] if 0 in insp.special else ""  # the prompt starts with BOS
        for role, heads in by_role.items():
            names = [f"L{l}H{h}" for l, h in heads]
            shown = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
            first = cls.labels[heads[0][0]][heads[0][1]]
            bar = f" (top quarter, ≥ {first.threshold:.2f})" if first.relative else ""
            lines.append(f"{html.escape(role_title(role, bos))}{bar}: {shown}")  # a BOS like <|im_start|>
        if not by_role:
            lines += ["none yet: no head", "passes a threshold"]
        self.named.setText("<br>".join(lines))
        named = sum(1 for row in cls.labels for lab in row if lab.name)
        self.status.setText(
            f"{named} of {L * H} heads named · entropy etc. on the prompt's {insp.T} tokens; induction on "
            f"2 × {res.period} random tokens · measured in {res.seconds * 1e3:.0f} ms"
        )
        self.stale = False

    def export_targets(self):
        return {"metrics-maps": self.canvas, "metrics-table": self.table}


__all__ = ["COLUMNS", "MAPS", "SINK_MAP", "THRESHOLDS", "MetricsPage"]
