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
from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDoubleSpinBox,
    QGroupBox,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from app.views.attention.base import AttentionPage, blurb_label, holder, wheel_scrolls_page
from app.widgets.layouts import FlowLayout, labelled, vertical_scroll
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
#: The least height of the maps' view and of the table, px (before anything is measured).
MIN_CANVAS_PX = 150
MIN_TABLE_PX = 120
#: What a map takes beside its cells, px: across, its row labels; down, its title and column labels.
#: The colour bar takes LEGEND_PX across. (Estimates for choosing the arrangement; the view's height
#: is then measured, :meth:`MetricsPage._fit_canvas`.)
MAP_AXIS_PX, MAP_TITLE_PX, LEGEND_PX = 45, 80, 70
#: The share of the page's height the maps may take in more than one row (the table gets the rest).
MAPS_SHARE = 0.6


def map_cell_px(cols: int, heads: int, width: float) -> float:
    """The side of a square cell when maps of ``heads`` columns go ``cols`` to a row of ``width`` px:
    ``(width − named − colour bar − cols · axis) / (cols · heads)``."""
    return (width - NAMED_WIDTH - LEGEND_PX - cols * MAP_AXIS_PX) / (cols * max(1, heads))


def maps_height_px(n_maps: int, cols: int, layers: int, heads: int, width: float) -> float:
    """About how tall ``n_maps`` maps of ``layers × heads`` square cells are, ``cols`` to a row of
    ``width`` px: ``rows · (title + layers · cell)``."""
    rows = math.ceil(n_maps / max(1, cols))
    return rows * (MAP_TITLE_PX + layers * max(1.0, map_cell_px(cols, heads, width)))


def map_columns(n_maps: int, layers: int, heads: int, width: float, height: float) -> int:
    """How many of ``n_maps`` maps of ``layers × heads`` square cells go in a row of ``width`` px:
    all of them (one row), unless fewer in more rows make the cells bigger (:func:`map_cell_px`) and
    the rows still fit in ``height`` px (:func:`maps_height_px`): a shallow model's wide maps on a
    narrow page go in two rows of three, not five slivers. Only the fewest columns for each number of
    rows are tried (five maps: 5, 3, 2, 1)."""
    best = n_maps
    for rows in range(2, n_maps + 1):
        cols = math.ceil(n_maps / rows)
        if cols == best or map_cell_px(cols, heads, width) <= map_cell_px(best, heads, width):
            continue
        if maps_height_px(n_maps, cols, layers, heads, width) <= height:
            best = cols
    return best


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
        """One column that scrolls as a whole: the maps in a row, or in two rows when that makes their
        cells bigger (:func:`map_columns`; equal sizes, one colour bar: every score is in [0, 1]) with
        the named heads beside them, as tall as their square cells need at
        the page's width (:meth:`_fit_canvas`: no empty band under them); under them the table across
        the page's whole width (every column readable at 1280 px), tall enough for every row (up to
        the page's height: a deep model's table scrolls inside), and the thresholds."""
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.scroll_area, body = vertical_scroll(frame=False)
        # the bar always there: the maps' width (which sets their height) never depends on their height
        self.scroll_area.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOn)
        lay.addWidget(self.scroll_area, 1)
        body.addWidget(blurb_label(self.blurb))
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.view.setFixedHeight(MIN_CANVAS_PX)
        self.maps: dict[str, MatrixPanel] = {}
        self._title_h: dict[str, float] = {}
        self.named = WrapLabel(" ", justify="left", color="#222", size="8pt")
        self.columns = 0
        self._arranged: tuple | None = None  # (maps, columns, layers, heads) the height was set for
        # what the page's size sets, each done once the layout it changed has settled
        self._rearrange, self._refit = QTimer(self), QTimer(self)
        for timer, slot in ((self._rearrange, self._on_room_changed), (self._refit, self._fit_canvas)):
            timer.setSingleShot(True)
            timer.timeout.connect(slot)
        self._layout_maps(MAPS, len(MAPS))
        self.canvas = holder(self.view)
        body.addWidget(self.canvas)
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
        body.addWidget(self.table)
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
        body.addWidget(box)
        body.addStretch(1)
        self.status = QLabel(" ")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self.table.cellDoubleClicked.connect(self._on_row)
        # a sideways scroll bar coming or going, or a row's new height: the table's height follows
        self.table.horizontalScrollBar().rangeChanged.connect(lambda *_: self._fit_table())
        self.table.verticalHeader().sectionResized.connect(lambda *_: self._fit_table())
        self.view.scene().sigMouseClicked.connect(self._on_map_click)
        wheel_scrolls_page(self.view, self.scroll_area)  # the maps do not zoom: the wheel scrolls
        self.scroll_area.viewport().installEventFilter(self)  # a new height: the table's may change

    def _layout_maps(self, maps, cols: int) -> None:
        """Lay the maps ``maps`` ((metric, title), ...) out ``cols`` to a row, the colour bar after the
        first row and the named heads beside them all (again from scratch when the set of maps or
        their arrangement changes)."""
        ci = self.view.ci
        if self.maps:
            ci.removeItem(self.named)
            ci.clear()
        self.maps, self._title_h, self.columns, self._map_defs = {}, {}, cols, tuple(maps)
        for i, (name, title) in enumerate(maps):
            hp = MatrixPanel(
                ci,
                i // cols,
                i % cols,
                title=title,
                square=True,
                legend=i == cols - 1,  # one colour bar for all: every map is a score in [0, 1]
                interactive=False,
                row_title="",  # L0, L1, … and H0, H1, … say it: no room to spare on the maps
                col_title="",
                legend_label="score",
                number_pt=8,
            )
            hp.set_title(title, size="8pt")
            self.maps[name] = hp
        for name, hp in self.maps.items():  # the maps at one height: titles of one height
            hp.plot.titleLabel.set_on_height(lambda h, name=name: self._align_titles(name, h))
            hp.vb.sigResized.connect(lambda *_: self._refit.start())  # a new width: new cells, a new height
        grid = ci.layout
        for i in range(cols):
            grid.setColumnStretchFactor(i, 1)
        grid.setColumnStretchFactor(cols, 0)  # the colour bar
        ci.addItem(self.named, row=0, col=cols + 1, rowspan=math.ceil(len(maps) / cols))
        grid.setColumnFixedWidth(cols + 1, NAMED_WIDTH)

    def _arrange(self, maps, layers: int, heads: int) -> bool:
        """Lay ``maps`` out in the columns :func:`map_columns` chooses for the page's width and height
        now, at about the height they need; returns whether they were laid out anew (their matrices
        are then to be drawn)."""
        width = self.scroll_area.viewport().width() or self.view.width()
        height = MAPS_SHARE * (self.scroll_area.viewport().height() or 400)
        cols = map_columns(len(maps), layers, heads, width, height)
        names = tuple(name for name, _ in maps)
        anew = (names, cols) != (tuple(self.maps), self.columns)
        if anew:
            self._layout_maps(maps, cols)
        if (names, cols, layers, heads) != self._arranged:
            self._arranged = (names, cols, layers, heads)
            # about the height they need (measured and corrected by _fit_canvas once drawn): a new
            # model's 30 layers are never drawn squeezed into the last model's height first
            estimate = maps_height_px(len(maps), cols, layers, heads, width) + 30
            self.view.setFixedHeight(max(MIN_CANVAS_PX, round(estimate)))
        return anew

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.Resize and obj is self.scroll_area.viewport():
            self._fit_table()
            self._rearrange.start()  # once the resizing is over
        return False

    def _on_room_changed(self) -> None:
        """A new width or height of the page: the maps in the arrangement it calls for."""
        m = self.state.metrics
        if m is not None and self._arrange(self._map_defs, *m.metrics.shape):
            self.redraw()  # the maps anew, in their new arrangement

    def _fit_canvas(self) -> None:
        """Make the maps' view as tall as its maps need: a map of ``L × H`` square cells ``w`` px wide
        is ``w · L / H`` px tall, so the view's height becomes what is around the data plus that, for
        each row of maps (never less than the named heads or the colour bar need). The width decides;
        a change of height changes no width, so this settles in one step (again after each change of
        width)."""
        if not self.maps:
            return
        panel = next(iter(self.maps.values()))
        if panel.matrix is None or panel.vb.width() <= 1:
            return
        R, C = panel.matrix.shape
        rows = math.ceil(len(self.maps) / max(1, self.columns))
        around = self.view.height() - rows * panel.vb.height()
        floor = self.view.ci.effectiveSizeHint(Qt.SizeHint.MinimumSize).height() + 4
        want = max(MIN_CANVAS_PX, math.ceil(floor), math.ceil(around + rows * panel.vb.width() * R / C))
        if want != self.view.height():
            self.view.setFixedHeight(want)

    def _fit_table(self) -> None:
        """Make the table as tall as its rows (every row in sight as the page scrolls), up to the
        page's own height, where a deep model's table scrolls inside instead."""
        t = self.table
        rows = sum(t.rowHeight(r) for r in range(t.rowCount())) if t.rowCount() else 3 * 30
        frame = 2 * t.frameWidth() + t.horizontalHeader().height()
        bar = t.horizontalScrollBar()
        frame += bar.sizeHint().height() if bar.maximum() > 0 else 0
        room = max(MIN_TABLE_PX, self.scroll_area.viewport().height() - 8)
        want = min(rows + frame, room)
        if want != t.height():
            t.setFixedHeight(want)

    def _align_titles(self, name: str, h: float) -> None:
        """Give every map's title the height of the tallest (the maps then start on one line)."""
        self._title_h[name] = h
        top = max(self._title_h.values())
        for hp in self.maps.values():
            hp.plot.layout.setRowFixedHeight(0, top)
            hp.plot.titleLabel.setMaximumHeight(top)
        self._refit.start()

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
        sinks = bool(insp.config.attention.attn_sinks) and m.learned_sink is not None
        maps = (*MAPS, SINK_MAP) if sinks else MAPS
        self._arrange(maps, L, H)
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
        self._fit_table()
        rows = [f"L{l}" for l in range(L)]
        cols = [f"H{h}" for h in range(H)]
        for name, hp in self.maps.items():
            arr = getattr(m, name)
            if arr is None:
                arr = np.full((L, H), np.nan)
            values = np.asarray(arr, dtype=np.float32)
            hp.set_matrix(values, rows, cols, levels=(0.0, 1.0), numbers=L * H <= 64)
        self._refit.start()
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
