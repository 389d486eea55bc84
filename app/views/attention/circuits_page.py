"""The Circuits page: how heads compose, from the weights alone (Elhage et al., 2021), and path patching
(Wang et al., 2022) of one composition on the Patching page's prompts.

Left, the **head graph**: layers left to right, each head a node (named heads in their role's colour
and labelled), an edge from an earlier head to a later one where the earlier one's OV circuit writes
into what the later one reads, its queries (Q, blue), keys (K, red) or values (V, green), with a
composition score of at least the threshold (by default twice what random matrices of the same shapes
give); width by score, at most the strongest ``N``. Q/K/V edges enter a node at three ports (Q above,
V below). Clicking a head selects it (every page shows it; a double click opens it on the Head page)
and highlights its inputs and outputs; clicking an edge path-patches it.

Right, three tabs. **Head**: the selected head's QK and OV singular values, rank, norms and copying
score, the heads it reads from with their scores (× chance), and the tokens its OV circuit raises for
a chosen source token. **Full circuits**: ``W_E W_OV W_U`` or ``W_E W_QK W_Eᵀ`` over a few tokens. **Path
patching**: a sender and a receiver, the share of the clean − corrupted logit difference the sender
restores through the receiver's q, k and v, directly and in all (plain head patching), and a map of
the sender's effect through each head of the receiver's layer (click a cell to make it the receiver).
A tab on the right is drawn when it comes into view, and the labels keep a fixed height: a new result
never re-lays the page out (no GUI stall over 50 ms while the circuits compute, ``bench/circuits.py``).

Numbers: :func:`model.interp.measures.circuits_of` (once per model or training step),
:func:`~model.interp.measures.circuit_head_of` and :func:`model.interp.causal.path_patching_of`, in the
compute worker, leaving a core to the GUI. What the norms, biases and RoPE do to the circuits is
written under the graph.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt, Signal
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.views.attention.base import AttentionPage, blurb_label
from app.views.attention.grid_controls import CELL_NAMES, ROLE_COLORS
from app.views.attention.patching_page import SMALL_GAP
from app.views.attention.state import CausalFailure
from app.widgets.axes import ReadableAxis, style_plot
from app.widgets.matrix_plot import MatrixPlot, format_cell

#: The composition kinds and their colours (tab10 blue, red, green).
KINDS = ("Q", "K", "V")
KIND_COLORS = {"Q": (31, 119, 180), "K": (214, 39, 40), "V": (44, 160, 44)}
#: Where each kind's edge enters its reader, in heads (Q above the node, V below).
PORTS = {"Q": -0.24, "K": 0.0, "V": 0.24}
#: Edge widths (px) of the four score bins between the threshold and the strongest edge shown.
WIDTHS = (1.2, 2.2, 3.4, 5.0)
#: Default: at most this many edges (the strongest).
MAX_EDGES = 150
#: Default threshold: this many times the chance score.
CHANCE_TIMES = 2.0
#: Rows of the "reads from" table.
READS_ROWS = 8
#: Named heads get a text label up to this many heads (beyond, their colour says it).
LABEL_HEADS = 256
#: The path patching inputs, as the bars and the map name them.
INPUTS = ("q", "k", "v")
#: The tabs on the right.
HEAD_TAB, FULL_TAB, PATH_TAB = 0, 1, 2


def lines_label(lines: int, *, rich: bool = True, colour: str = "") -> QLabel:
    """A word-wrapped label exactly ``lines`` lines tall: new text never moves the plots around it (a
    label that grew or shrank re-laid the page out and repainted every plot, ~40 ms)."""
    lab = QLabel(" ")
    lab.setWordWrap(True)
    if rich:
        lab.setTextFormat(Qt.TextFormat.RichText)
    if colour:
        lab.setStyleSheet(f"color: {colour};")
    lab.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
    lab.setFixedHeight(lab.fontMetrics().lineSpacing() * lines + 4)
    lab.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
    return lab


def head_name(head) -> str:
    return f"L{head[0]}H{head[1]}"


def _rgb(color) -> tuple[int, int, int]:
    c = QColor(color)
    return c.red(), c.green(), c.blue()


class HeadGraph(QWidget):
    """The head graph (module docstring) with a readout line under it.

    ``headClicked(layer, head)``, ``headDoubleClicked(layer, head)`` and ``edgeClicked(kind, l1, h1,
    l2, h2)``; :meth:`set_graph` draws, :meth:`set_selected` highlights one head's edges."""

    headClicked = Signal(int, int)
    headDoubleClicked = Signal(int, int)
    edgeClicked = Signal(str, int, int, int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.x_axis, self.y_axis = ReadableAxis("bottom"), ReadableAxis("left")
        self.plot: pg.PlotItem = self.view.addPlot(
            row=0, col=0, axisItems={"bottom": self.x_axis, "left": self.y_axis}
        )
        p = self.plot
        p.invertY(True)
        p.setMenuEnabled(False)
        p.hideButtons()
        p.setLabel("bottom", "layer")
        p.setLabel("left", "head")
        for axis in (self.x_axis, self.y_axis):
            axis.enableAutoSIPrefix(False)
        self.vb: pg.ViewBox = p.getViewBox()
        self.curves: dict[tuple[str, int, bool], pg.PlotCurveItem] = {}
        self.nodes = pg.ScatterPlotItem(pxMode=True)
        self.ring = pg.ScatterPlotItem(pxMode=True)
        p.addItem(self.nodes)
        p.addItem(self.ring)
        self.names: list[pg.TextItem] = []
        lay.addWidget(self.view, 1)
        self.readout = QLabel(" ")
        self.readout.setObjectName("circuitsReadout")
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        lay.addWidget(self.readout)
        self.shape = (0, 0)
        self.edges: list[tuple[str, tuple[int, int], tuple[int, int], float]] = []
        self.roles: dict[tuple[int, int], str] = {}
        self.selected: tuple[int, int] | None = None
        self.chance = 0.0
        self.describe_head = lambda l, h: f"L{l}H{h}"
        self._segments = np.zeros((0, 4))
        self._last = None
        self._look: tuple | None = None  # (L, H, roles, node size) the nodes were drawn for
        self.view.scene().sigMouseClicked.connect(self._on_click)
        self.view.scene().sigMouseMoved.connect(self._on_move)

    # ---- drawing -------------------------------------------------------------------------------
    def set_graph(self, n_layers: int, n_heads: int, edges, roles: dict, selected, chance: float) -> None:
        """Draw ``n_layers`` × ``n_heads`` nodes, ``edges`` [(kind, writer, reader, score)] (strongest
        first), ``roles`` {(l, h): role name} and the ``selected`` head."""
        L, H = max(1, n_layers), max(1, n_heads)
        new_shape = (L, H) != self.shape
        self.shape, self.edges, self.roles, self.chance = (L, H), list(edges), dict(roles), chance
        if new_shape:
            self.x_axis.set_categories([f"L{l}" for l in range(L)])
            self.y_axis.set_categories([f"H{h}" for h in range(H)])
            self.vb.setLimits(xMin=-1.0, xMax=L, yMin=-1.0, yMax=H)
            self.reset_view()
        size = float(np.clip(0.42 * min(self._px_per_unit()), 6, 14))
        look = (L, H, tuple(sorted(self.roles.items())), round(size, 1))
        if look != self._look:  # the nodes and their names change with the roles, not with the edges
            self._look = look
            x, y = np.meshgrid(np.arange(L), np.arange(H), indexing="ij")
            brushes = {None: pg.mkBrush(236, 236, 236)}
            for colour in ROLE_COLORS.values():
                if colour:
                    brushes[colour] = pg.mkBrush(colour)
            fill = [brushes[ROLE_COLORS.get(self.roles.get((l, h), ""))] for l in range(L) for h in range(H)]
            self.nodes.setData(
                x=x.ravel(), y=y.ravel(), brush=fill, pen=pg.mkPen(70, 70, 70, 220, width=1), size=size
            )
            for item in self.names:
                self.plot.removeItem(item)
            self.names = []
            if L * H <= LABEL_HEADS:
                font = QFont()
                font.setPointSizeF(7.5)
                for (l, h), role in sorted(self.roles.items()):
                    colour = ROLE_COLORS.get(role)
                    if not colour or role not in CELL_NAMES:
                        continue
                    item = pg.TextItem(CELL_NAMES[role], color=colour, anchor=(0.5, 0.0))
                    item.setFont(font)
                    item.setPos(l, h + 0.22)
                    self.plot.addItem(item)
                    self.names.append(item)
        self.set_selected(selected)

    def _px_per_unit(self) -> tuple[float, float]:
        sx, sy = self.vb.viewPixelSize()
        return (1.0 / sx if sx > 0 else 40.0), (1.0 / abs(sy) if sy else 40.0)

    def reset_view(self) -> None:
        L, H = self.shape
        self.vb.setRange(xRange=(-0.5, L - 0.5), yRange=(-0.6, H - 0.4), padding=0.02)

    def set_selected(self, selected) -> None:
        """Highlight ``selected``'s inputs and outputs (every other edge faded)."""
        self.selected = tuple(selected) if selected is not None else None
        groups: dict[tuple[str, int, bool], list[float]] = {}
        scores = [e[3] for e in self.edges]
        lo, hi = (min(scores), max(scores)) if scores else (0.0, 1.0)
        segments = []
        for kind, (l1, h1), (l2, h2), score in self.edges:
            b = 0 if hi <= lo else min(len(WIDTHS) - 1, int((score - lo) / (hi - lo) * len(WIDTHS)))
            strong = self.selected is None or self.selected in ((l1, h1), (l2, h2))
            seg = [l1 + 0.12, h1, l2 - 0.12, h2 + PORTS[kind]]
            segments.append(seg)
            groups.setdefault((kind, b, strong), []).extend(seg)
        self._segments = np.asarray(segments, dtype=np.float64).reshape(-1, 4)
        for key, curve in self.curves.items():
            if key not in groups:
                curve.setData([], [])
        for (kind, b, strong), flat in groups.items():
            key = (kind, b, strong)
            if key not in self.curves:
                alpha = 235 if strong else 45
                pen = pg.mkPen((*KIND_COLORS[kind], alpha), width=WIDTHS[b])
                curve = pg.PlotCurveItem(pen=pen, connect="pairs", antialias=True)
                curve.setZValue(-1 if not strong else 0)
                self.plot.addItem(curve)
                self.curves[key] = curve
            pts = np.asarray(flat, dtype=np.float64).reshape(-1, 2)
            self.curves[key].setData(pts[:, 0], pts[:, 1], connect="pairs")
        if self.selected is None:
            self.ring.setData([], [])
        else:
            size = float(np.clip(0.42 * min(self._px_per_unit()), 6, 14)) + 7
            self.ring.setData(
                x=[self.selected[0]], y=[self.selected[1]], size=size, brush=None,
                pen=pg.mkPen(20, 20, 20, width=2.2),
            )  # fmt: skip

    def clear(self) -> None:
        self.edges, self.roles = [], {}
        self._look = None
        self.nodes.setData([], [])
        self.ring.setData([], [])
        for curve in self.curves.values():
            curve.setData([], [])
        for item in self.names:
            self.plot.removeItem(item)
        self.names = []
        self.readout.setText(" ")

    # ---- pointing ------------------------------------------------------------------------------
    def item_at(self, scene_pos: QPointF):
        """``("head", (l, h))``, ``("edge", index)`` or None under a scene position."""
        if not self.vb.sceneBoundingRect().contains(scene_pos) or self.shape == (0, 0):
            return None
        p = self.vb.mapSceneToView(scene_pos)
        px, py = self._px_per_unit()
        L, H = self.shape
        l, h = round(p.x()), round(p.y())
        if 0 <= l < L and 0 <= h < H and math.hypot((p.x() - l) * px, (p.y() - h) * py) <= 9:
            return ("head", (int(l), int(h)))
        if len(self._segments):
            s = self._segments
            a = np.stack([s[:, 0] * px, s[:, 1] * py], 1)
            b = np.stack([s[:, 2] * px, s[:, 3] * py], 1)
            q = np.array([p.x() * px, p.y() * py])
            ab = b - a
            t = np.clip(((q - a) * ab).sum(1) / np.maximum((ab * ab).sum(1), 1e-9), 0, 1)
            dist = np.linalg.norm(a + t[:, None] * ab - q, axis=1)
            i = int(np.argmin(dist))
            if dist[i] <= 5:
                return ("edge", i)
        return None

    def scene_pos_of_head(self, layer: int, head: int) -> QPointF:
        return self.vb.mapViewToScene(QPointF(layer, head))

    def scene_pos_of_edge(self, index: int) -> QPointF:
        l1, h1, l2, h2 = self._segments[index]
        return self.vb.mapViewToScene(QPointF((l1 + l2) / 2, (h1 + h2) / 2))

    def describe(self, item) -> str:
        if item is None:
            return " "
        if item[0] == "head":
            return self.describe_head(*item[1])
        kind, w, r, score = self.edges[item[1]]
        times = f" ({score / self.chance:.1f}× chance)" if self.chance > 0 else ""
        return (
            f"{head_name(w)} → {head_name(r)}: {kind}-composition {score:.3f}{times} · click to path-patch it"
        )

    def _on_move(self, pos: QPointF) -> None:
        item = self.item_at(pos)
        if item != self._last:
            self._last = item
            self.readout.setText(self.describe(item))

    def click(self, item, *, double: bool = False) -> None:
        """What a click on ``item`` (from :meth:`item_at`) does."""
        if item is None:
            return
        if item[0] == "head":
            (self.headDoubleClicked if double else self.headClicked).emit(*item[1])
            return
        kind, (l1, h1), (l2, h2), _score = self.edges[item[1]]
        self.edgeClicked.emit(kind, l1, h1, l2, h2)

    def _on_click(self, ev) -> None:
        if ev.button() != Qt.MouseButton.LeftButton:
            return
        self.click(self.item_at(ev.scenePos()), double=ev.double())


class CircuitsPage(AttentionPage):
    title = "Circuits"
    key = "circuits"
    needs_circuits = True
    blurb = (
        "How heads compose, from the weights alone: an edge means an earlier head writes into what a later "
        "head reads, its queries (Q), keys (K) or values (V), more than random matrices of the same shapes "
        "would (the chance score). Click a head for its QK and OV circuits and the heads it reads from; "
        "click an edge to path-patch it on the Patching page's prompts."
    )

    def help_html(self) -> str:
        return (
            f"{self.blurb}<br><br>"
            "<b>QK and OV circuits.</b> A head's W_Q W_Kᵀ says which pairs of stream directions it matches "
            "(where it looks); its W_V W_O what it writes when it looks there. Both have the head's rank "
            "d_k: the Head tab shows their singular values.<br>"
            "<b>Composition</b> (Elhage et al., 2021): ‖W_OV¹ W_QK²‖ / (‖W_OV¹‖ ‖W_QK²‖) and its K and V "
            "versions, Frobenius norms, between an earlier head 1 and a later head 2. Random matrices of the "
            "same shapes score about √(1/d) (the chance level beside the threshold): a score well above "
            "it is "
            "composition the weights chose. An induction head's keys read a previous-token head: strong "
            "K-composition.<br>"
            "<b>Copying</b>: the share of the eigenvalues' mass of the full OV circuit W_E W_OV W_U with "
            "positive real part: 1 for a head that raises the logit of the token it attends to.<br>"
            "<b>What is left out</b>: each norm's per-token scale (its gain is folded into the weights, as "
            "TransformerLens's fold_ln), biases, and everything but the direct path for the full circuits. "
            "Under RoPE a QK circuit depends on the query − key offset: it is shown at one offset (0 by "
            "default, the unrotated W_Q W_Kᵀ). Post-LN models and latent attention are refused.<br>"
            "<b>Path patching</b> (Wang et al., 2022), on the Patching page's prompts: the sender's clean "
            "output reaches only the receiver's queries, keys or values (everything else frozen), and the "
            "bar "
            "says how much of the clean − corrupted logit difference that restores. Direct: only the logits "
            "see it; total: plain patching of the sender. When nothing else reads the sender, the paths "
            "together (every receiver's q, k, v and the direct path) are exactly the total."
        )

    def build(self) -> None:
        self.result = None  # the CircuitsResult drawn
        self._auto_threshold = True
        self._auto_focus = False
        self._sender_items: list[tuple[int, int]] = []
        self._receiver_items: list[tuple[int, int]] = []
        self._tokens_for: object = None
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Edges:"))
        self.kind_boxes: dict[str, QCheckBox] = {}
        for kind in KINDS:
            box = QCheckBox(kind)
            box.setChecked(True)
            r, g, b = KIND_COLORS[kind]
            box.setStyleSheet(f"QCheckBox {{ color: rgb({r},{g},{b}); font-weight: bold; }}")
            box.setToolTip(f"{kind}-composition: the writer's output feeds the reader's "
                           f"{ {'Q': 'queries', 'K': 'keys', 'V': 'values'}[kind] }")  # fmt: skip
            box.toggled.connect(lambda _on: self.draw_graph())
            bar.addWidget(box)
            self.kind_boxes[kind] = box
        bar.addWidget(QLabel("score ≥"))
        self.threshold = QDoubleSpinBox()
        self.threshold.setRange(0.0, 1.0)
        self.threshold.setSingleStep(0.01)
        self.threshold.setDecimals(3)
        self.threshold.setToolTip("draw the compositions with at least this score (0 to 1)")
        self.threshold.valueChanged.connect(self._on_threshold)
        bar.addWidget(self.threshold)
        bar.addWidget(QLabel("at most"))
        self.max_edges = QSpinBox()
        self.max_edges.setRange(1, 5000)
        self.max_edges.setValue(MAX_EDGES)
        self.max_edges.setSuffix(" edges")
        self.max_edges.setToolTip("draw only the strongest of the compositions above the threshold")
        self.max_edges.valueChanged.connect(lambda _v: self.draw_graph())
        bar.addWidget(self.max_edges)
        self.offset_label = QLabel("RoPE offset")
        self.offset = QSpinBox()
        self.offset.setRange(0, 0)
        self.offset.setToolTip(
            "RoPE: the QK circuits (and Q/K-composition) of a query this many positions after its key "
            "(0: the same position, the unrotated W_Q W_Kᵀ)"
        )
        self.offset.editingFinished.connect(self._on_offset)
        bar.addWidget(self.offset_label)
        bar.addWidget(self.offset)
        bar.addStretch(1)
        self.chance_label = QLabel(" ")
        self.chance_label.setStyleSheet("color: #444;")
        bar.addWidget(self.chance_label)
        lay.addLayout(bar)

        split = QSplitter(Qt.Orientation.Horizontal)
        self.graph = HeadGraph()
        self.graph.describe_head = self.describe_head
        split.addWidget(self.graph)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self._build_head_tab(), "Head")
        self.tabs.addTab(self._build_full_tab(), "Full circuits")
        self.tabs.addTab(self._build_path_tab(), "Path patching")
        self._dirty = {HEAD_TAB, FULL_TAB, PATH_TAB}  # the tabs to draw when they come into view
        self.tabs.currentChanged.connect(lambda _i: self._panels(set()))
        split.addWidget(self.tabs)
        split.setStretchFactor(0, 5)
        split.setStretchFactor(1, 6)
        lay.addWidget(split, 1)
        self.legend = lines_label(4, colour="#444")
        lay.addWidget(self.legend)
        self.status = lines_label(2)
        lay.addWidget(self.status)
        self.graph.headClicked.connect(self._on_head_clicked)
        self.graph.headDoubleClicked.connect(lambda l, h: self.openHeadRequested.emit(l, h))
        self.graph.edgeClicked.connect(self._on_edge_clicked)

    def _build_head_tab(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        lay.setContentsMargins(4, 4, 4, 4)
        self.head_summary = lines_label(4)
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
        self.reads.setMinimumWidth(200)
        self.reads.cellDoubleClicked.connect(self._on_reads_clicked)
        row.addWidget(self.reads, 1)
        lay.addLayout(row, 1)
        promo = QHBoxLayout()
        promo.addWidget(QLabel("Attending to"))
        self.source_combo = QComboBox()
        self.source_combo.setToolTip("the token this head attends to (its OV circuit's input)")
        self.source_combo.currentIndexChanged.connect(lambda _i: self._draw_promoted())
        promo.addWidget(self.source_combo)
        self.promoted = lines_label(2)
        promo.addWidget(self.promoted, 1)
        lay.addLayout(promo)
        self.open_button = QPushButton("Show it on the Head page")
        self.open_button.setToolTip("open the selected head large (a double click on a node does too)")
        self.open_button.clicked.connect(lambda: self.openHeadRequested.emit(*self.state.selected))
        lay.addWidget(self.open_button, 0, Qt.AlignmentFlag.AlignLeft)
        return w

    def _build_full_tab(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        lay.setContentsMargins(4, 4, 4, 4)
        row = QHBoxLayout()
        self.full_combo = QComboBox()
        self.full_combo.addItem("OV: W_E W_OV W_U (row: token attended to, column: its logit raised)", "ov")
        self.full_combo.addItem("QK: W_E W_QK W_Eᵀ (row: query token, column: key token)", "qk")
        self.full_combo.currentIndexChanged.connect(lambda _i: self._panels({FULL_TAB}))
        self.full_combo.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        row.addWidget(self.full_combo, 1)
        lay.addLayout(row)
        self.full_plot = MatrixPlot(
            diverging=True, legend_label="logit change", row_title="attended to", col_title="logit of",
            numbers=False,
        )  # fmt: skip
        lay.addWidget(self.full_plot, 1)
        self.full_note = lines_label(3, rich=False, colour="#444")
        lay.addWidget(self.full_note)
        return w

    def _build_path_tab(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        lay.setContentsMargins(4, 4, 4, 4)
        row = QHBoxLayout()
        row.addWidget(QLabel("sender"))
        self.sender_combo = QComboBox()
        self.sender_combo.setToolTip("the head whose clean output is routed along one path")
        self.sender_combo.currentIndexChanged.connect(self._on_sender_combo)
        row.addWidget(self.sender_combo)
        row.addWidget(QLabel("→ receiver"))
        self.receiver_combo = QComboBox()
        self.receiver_combo.setToolTip("the later head that reads it, in its queries, keys or values")
        self.receiver_combo.currentIndexChanged.connect(self._on_receiver_combo)
        row.addWidget(self.receiver_combo)
        row.addStretch(1)
        lay.addLayout(row)
        self.path_summary = lines_label(7)
        self.path_summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.path_summary)
        plots = QSplitter(Qt.Orientation.Horizontal)
        self.bars_view = pg.GraphicsLayoutWidget()
        self.bars_view.setBackground("w")
        self.bars = style_plot(self.bars_view.addPlot(row=0, col=0), "", "share of the gap restored", "")
        self.bars.setMenuEnabled(False)
        self.bars.hideButtons()
        self.bars.setMouseEnabled(x=False, y=False)
        self.bars.invertY(True)  # q, k, v, direct, total from the top
        self.bars.addLine(x=0, pen=pg.mkPen(120, 120, 120))
        self.bar_item = pg.BarGraphItem(x0=[], x1=[], y=[], height=0.7)
        self.bars.addItem(self.bar_item)
        plots.addWidget(self.bars_view)
        self.path_map = MatrixPlot(
            diverging=True, legend_label="restored", row_title="receiver input", col_title="head",
            square=False, numbers=None,
        )  # fmt: skip
        self.path_map.describe = self._describe_path_cell
        self.path_map.clicked.connect(self._on_path_cell)
        plots.addWidget(self.path_map)
        plots.setStretchFactor(0, 1)
        plots.setStretchFactor(1, 1)
        lay.addWidget(plots, 1)
        return w

    # ---- the state's news ----------------------------------------------------------------------
    def on_circuits(self, kind: str, result) -> None:
        if not self.in_view() or self.result is None or kind == "circuits":
            self.redraw()
        else:  # one head's full circuits (the Head and Full circuits tabs), or path patching
            self._panels({HEAD_TAB, FULL_TAB} if kind == "head" else {PATH_TAB})
            self._update_stale()

    def on_head_selected(self, layer: int, head: int) -> None:
        if not self.in_view() or self.result is None:
            self.redraw()
            return
        self.graph.set_selected((layer, head))
        self._panels({HEAD_TAB, FULL_TAB})
        self._update_stale()

    def _panels(self, changed: set[int]) -> None:
        """The tabs on the right whose numbers ``changed`` are redrawn when shown: the one in view now
        (a tab out of view costs nothing until it comes into view)."""
        self._dirty |= changed
        i = self.tabs.currentIndex()
        if i in self._dirty and self.result is not None:
            self._dirty.discard(i)
            (self._draw_head, self._draw_full, self._draw_path)[i]()

    def on_metrics(self) -> None:
        if self.in_view() and self.result is not None:
            self.draw_graph()  # the names of the heads
        else:
            self.redraw()

    def prepare_screenshot(self) -> None:
        """Show the strongest composition: its reader selected, its path patched."""
        self._auto_focus = True

    # ---- drawing -------------------------------------------------------------------------------
    @property
    def circuits(self):
        """The :class:`~model.interp.analysis.circuits.Circuits` drawn (None before or without them)."""
        return getattr(self.result, "circuits", None)

    def refresh(self) -> None:
        st = self.state
        insp, res = st.inspection, st.circuits_result
        if insp is None:
            return
        if res is None:
            self.status.setText("<i>Computing every composition score of the weights…</i>")
            return
        self.result = res
        c = res.circuits
        if c is not None and self._auto_focus:
            self._auto_focus = False
            edge = st.strongest_edge()
            if edge is not None:
                st.set_circuit_setup(sender=edge[1], receiver=edge[2])
                st.select(*edge[2])
        self._show_offset(res)
        self.draw_graph()
        self._panels({HEAD_TAB, FULL_TAB, PATH_TAB})
        self._update_stale()

    def _update_stale(self) -> None:
        """Stale until the selected head's full circuits and the path patching are drawn too."""
        st = self.state
        head_ready = self.circuits is None or st.circuit_head_for(self._key(), st.selected) is not None
        self.stale = not (head_ready and st.path_for_current() is not None)

    def _key(self):
        """The state's key of the circuits drawn (that of the latest result)."""
        return self.state.circuits[0] if self.state.circuits is not None else None

    def _on_offset(self) -> None:
        """A new RoPE offset: the circuits are computed again for it."""
        if self.state.set_circuit_setup(rope_offset=int(self.offset.value())):
            self.status.setText(f"<i>Computing the circuits at RoPE offset {self.offset.value()}…</i>")

    def _show_offset(self, res) -> None:
        cfg = res.config
        rope = getattr(cfg, "positions", "") == "rope" and res.circuits is not None
        self.offset_label.setVisible(rope)
        self.offset.setVisible(rope)
        if rope:
            self.offset.blockSignals(True)
            self.offset.setRange(0, max(0, int(cfg.context_length) - 1))
            self.offset.setValue(int(self.state.circuit_setup["rope_offset"]))
            self.offset.blockSignals(False)

    def roles(self) -> dict[tuple[int, int], str]:
        cls = self.state.classification
        if cls is None:
            return {}
        return {(l, h): lab.name for l, row in enumerate(cls.labels) for h, lab in enumerate(row) if lab.name}

    def edges(self) -> list:
        """The edges drawn: (kind, writer, reader, score), strongest first."""
        c = self.circuits
        if c is None:
            return []
        kinds = [k for k in KINDS if self.kind_boxes[k].isChecked()]
        got = c.composition.strongest(minimum=self.threshold.value())
        return [e for e in got if e[0] in kinds][: self.max_edges.value()]

    def _on_threshold(self, _value: float) -> None:
        self._auto_threshold = False
        self.draw_graph()

    def draw_graph(self) -> None:
        res, c = self.result, self.circuits
        insp = self.state.inspection
        if res is None or insp is None:
            return
        if c is None:
            self.graph.clear()
            self.chance_label.setText(" ")
            self.legend.setText(" ")
            self.status.setText(f"<b style='color:#b00'>No circuits:</b> {html.escape(res.failure or '')}")
            return
        comp = c.composition
        if self._auto_threshold:
            self.threshold.blockSignals(True)
            self.threshold.setValue(math.ceil(CHANCE_TIMES * comp.baseline * 1000) / 1000)
            self.threshold.blockSignals(False)
        edges = self.edges()
        self.graph.set_graph(
            comp.n_layers, comp.n_heads, edges, self.roles(), self.state.selected, comp.baseline
        )
        self.chance_label.setText(f"chance {comp.baseline:.3f} (√(1/d) = {comp.baseline_rms:.3f})")
        self.chance_label.setToolTip(
            f"the mean score of {comp.samples} pairs of random Gaussian matrices of these shapes "
            f"(d {comp.d}, d_k {comp.d_k}; seed {comp.seed}); its 95th percentile is "
            f"{comp.baseline_p95:.3f}. Analytically the mean square is exactly 1/d."
        )
        above = len(comp.strongest(minimum=self.threshold.value()))
        swatch = " ".join(f"<span style='color:rgb{KIND_COLORS[k]}'>━</span> {k}" for k in KINDS)
        roles = set(self.roles().values())
        named = (
            ", ".join(
                f"<span style='color:{ROLE_COLORS[r]}'>●</span> {r}"
                for r in ("previous-token", "induction", "self", "sink")
                if ROLE_COLORS.get(r) and r in roles
            )
            or "no previous-token, induction, self or sink head"
        )
        shown = f"{len(edges)} of the {above} compositions ≥ {self.threshold.value():.3f}"
        how = "; ".join(c.notes) + "."
        self.legend.setText(f"{swatch} (width: score) · {shown} · {named}<br>How: {html.escape(how)}")
        self.legend.setToolTip(how)
        if not above:
            self.status.setText(
                f"No composition reaches {self.threshold.value():.3f}: these weights compose no more than "
                f"random matrices of the same shapes would (chance {comp.baseline:.3f}). Lower the "
                "threshold to see the strongest ones."
            )
        else:
            secs = c.seconds.get("total", 0.0)
            self.status.setText(
                f"{comp.n_layers} layers × {comp.n_heads} heads: {np.isfinite(comp.scores).sum():,} "
                f"composition scores and every head's circuits in {secs:.2f} s. Hover an edge or a head "
                "for its numbers."
            )

    # ---- the selected head ---------------------------------------------------------------------
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

    def _draw_full(self) -> None:
        detail = self._detail()
        if detail is None:
            self.full_plot.set_matrix(np.full((1, 1), np.nan))
            self.full_note.setText("<i>computing…</i>" if self.circuits is not None else " ")
            return
        qk = self.full_combo.currentData() == "qk"
        m = detail.full_qk if qk else detail.full_ov
        self.full_plot.set_axis_titles(
            "query token" if qk else "attended to", "key token" if qk else "logit of"
        )
        self.full_plot.set_matrix(
            m, detail.labels, detail.labels, legend_label="score" if qk else "logit change"
        )
        self._title(
            self.full_plot,
            f"{head_name((detail.layer, detail.head))}: " + ("W_E W_QK W_Eᵀ" if qk else "W_E W_OV W_U"),
        )
        rope = f" QK at RoPE offset {detail.rope_offset}." if qk and detail.rope_offset is not None else ""
        self.full_note.setText(
            f"Over {detail.subset}. The direct path only: the token's embedding through the head "
            "(the norms' gains folded, their per-token scale left out; biases and positions left out)"
            + ("" if qk else " into the unembedding")
            + f"; other heads and MLPs are not on it.{rope}"
        )

    @staticmethod
    def _title(plot: MatrixPlot, text: str) -> None:
        """``plot``'s title, set only when it changes (a wrapping title lays itself out again)."""
        if getattr(plot, "_title_text", None) != text:
            plot._title_text = text
            plot.set_title(text)

    # ---- path patching -------------------------------------------------------------------------
    def _fill_combos(self) -> None:
        insp = self.state.inspection
        L, H = insp.n_layers, insp.n_heads
        sender, receiver = self.state.path_heads()
        senders = [(l, h) for l in range(L) for h in range(H)]
        receivers = [(l, h) for l in range(sender[0] + 1, L) for h in range(H)]
        for combo, items, attr, chosen in (
            (self.sender_combo, senders, "_sender_items", sender),
            (self.receiver_combo, receivers, "_receiver_items", receiver),
        ):
            combo.blockSignals(True)
            if getattr(self, attr) != items:
                setattr(self, attr, items)
                combo.clear()
                for head in items:
                    combo.addItem(head_name(head))
            if chosen in items:
                combo.setCurrentIndex(items.index(chosen))
            combo.blockSignals(False)

    def _on_sender_combo(self, i: int) -> None:
        if 0 <= i < len(self._sender_items):
            self._set_path(self._sender_items[i], None)

    def _on_receiver_combo(self, i: int) -> None:
        if 0 <= i < len(self._receiver_items):
            self._set_path(self.state.path_heads()[0], self._receiver_items[i])

    def _set_path(self, sender, receiver) -> None:
        self.state.set_circuit_setup(sender=tuple(sender), receiver=tuple(receiver) if receiver else None)
        self._panels({PATH_TAB})

    def _on_head_clicked(self, layer: int, head: int) -> None:
        self.state.select(layer, head)
        self.tabs.setCurrentIndex(HEAD_TAB)

    def _on_edge_clicked(self, kind: str, l1: int, h1: int, l2: int, h2: int) -> None:
        self._set_path((l1, h1), (l2, h2))
        self.tabs.setCurrentIndex(PATH_TAB)

    def path_result(self):
        """The path patching drawn (a :class:`~model.interp.causal.PathPatchingResult`), or None."""
        res = self.state.path_for_current()
        return None if isinstance(res, CausalFailure) else res

    def _map_rows(self, p) -> tuple[np.ndarray, list[str], list[tuple[int, str]]]:
        """The map's rows: q, k, v of every receiver layer measured (the receiver's)."""
        L, H = p.effects.shape[1:]
        rows, names, keys = [], [], []
        for layer in range(p.sender[0] + 1, L):
            if not np.isfinite(p.effects[:, layer]).any():
                continue
            for c, name in enumerate(INPUTS):
                rows.append(p.restored(p.effects[c, layer]))
                names.append(f"L{layer} {name}")
                keys.append((layer, name))
        return (np.asarray(rows).reshape(-1, H), names, keys)

    def _draw_path(self) -> None:
        insp = self.state.inspection
        if insp is None:
            return
        self._fill_combos()
        res = self.state.path_for_current()
        sender, receiver = self.state.path_heads()
        if res is None:
            self.path_summary.setText(f"<i>Path patching {head_name(sender)}…</i>")
            return
        if isinstance(res, CausalFailure):
            self.path_summary.setText(
                f"<b style='color:#b00'>Cannot path-patch:</b> {html.escape(res.message)}"
            )
            self.bar_item.setOpts(x0=[], x1=[], y=[])
            self.path_map.set_matrix(np.full((1, 1), np.nan))
            return
        p, esc = res.paths, html.escape
        pct = p.restored
        lines = [
            f"Clean: the prompt; corrupted: {esc(res.corruption)}. At position {p.position} "
            f"'{esc(res.labels[p.position])}', logit('{esc(res.answer_label)}') − "
            f"logit('{esc(res.wrong_label)}') = {p.clean_diff:.2f} clean, {p.corrupt_diff:.2f} corrupted "
            f"(gap {p.gap:+.2f}).",
            f"Patching <b>{head_name(sender)}</b> restores <b>{format_cell(pct(p.total))}</b> of the gap; "
            f"directly to the logits {format_cell(pct(p.direct))}; along no single head (MLPs, two-head "
            f"paths, non-linearity) {format_cell(pct(p.interaction))}.",
        ]
        if 0 < abs(p.gap) < SMALL_GAP:
            lines.insert(
                1,
                "<b style='color:#8a4b00'>Small gap:</b> the shares are noisy (they can exceed ±1): choose a "
                "corruption the prompts disagree on (Patching page).",
            )
        names, values, colours = [], [], []
        if receiver is not None:
            l2, h2 = receiver
            via = [pct(p.effects[c, l2, h2]) for c in range(3)]
            lines.append(
                f"Through <b>{head_name(receiver)}</b>: q {format_cell(via[0])}, k {format_cell(via[1])}, "
                f"v {format_cell(via[2])}."
            )
            names += [f"{head_name(receiver)} {n}" for n in INPUTS]
            values += via
            colours += [KIND_COLORS[k] for k in KINDS]
        names += ["direct", "total"]
        values += [pct(p.direct), pct(p.total)]
        colours += [(140, 140, 140), (40, 40, 40)]
        self.path_summary.setText("<br>".join(lines))
        vals = np.nan_to_num(np.asarray(values, dtype=np.float64))
        self.bar_item.setOpts(
            x0=np.zeros(len(vals)), x1=vals, y=np.arange(len(vals)), height=0.7,
            brushes=[pg.mkBrush(*c) for c in colours],
        )  # fmt: skip
        self.bars.getAxis("left").set_categories(names)
        lo, hi = min(0.0, float(vals.min())), max(0.05, float(vals.max()))
        self.bars.setYRange(-0.6, len(vals) - 0.4, padding=0)
        self.bars.setXRange(lo - 0.05 * (hi - lo), hi + 0.08 * (hi - lo), padding=0)
        m, rows, keys = self._map_rows(p)
        if len(rows):
            self.path_map.set_matrix(m, rows, [f"H{h}" for h in range(m.shape[1])], levels=(-1.0, 1.0))
            self._title(self.path_map, f"{head_name(sender)} → each head of layer {keys[0][0]}")
        else:
            self.path_map.set_matrix(np.full((1, 1), np.nan))
            self._title(self.path_map, f"{head_name(sender)} is in the last layer: no later head")

    def _describe_path_cell(self, r: int, c: int) -> str:
        res = self.path_result()
        if res is None:
            return " "
        keys = self._map_rows(res.paths)[2]
        if not 0 <= r < len(keys):
            return " "
        layer, name = keys[r]
        p = res.paths
        v = p.effects[INPUTS.index(name), layer, c]
        return (
            f"{head_name(p.sender)} → L{layer}H{c}'s {name}: Δ logit difference {v:+.3f} "
            f"({format_cell(p.restored(v))} of the gap) · click to make it the receiver"
        )

    def _on_path_cell(self, r: int, c: int) -> None:
        res = self.path_result()
        if res is None:
            return
        keys = self._map_rows(res.paths)[2]
        if 0 <= r < len(keys):
            self._set_path(res.paths.sender, (keys[r][0], c))

    # ---- forgetting, exports -------------------------------------------------------------------
    def clear(self) -> None:
        self.result = None
        self._tokens_for = None
        self._dirty = {HEAD_TAB, FULL_TAB, PATH_TAB}
        self.graph.clear()
        for w in (self.head_summary, self.promoted, self.path_summary, self.legend, self.status):
            w.setText(" ")
        self.reads.setRowCount(0)
        self.source_combo.clear()

    def numbers(self):
        c = self.circuits
        if c is None:
            return None
        comp, hc = c.composition, c.heads
        L, H = comp.n_layers, comp.n_heads
        heads = [head_name((l, h)) for l in range(L) for h in range(H)]
        arrays = dict(c.arrays())
        tables = {
            kind: (comp.scores[i].reshape(L * H, L * H), heads, heads, "writer \\ reader")
            for i, kind in enumerate(KINDS)
        }
        columns = ["copying", "copying Σλ/Σ|λ|", "QK rank", "QK norm", "OV rank", "OV norm"]
        per_head = np.stack(
            [hc.copying, hc.copying_signed, hc.qk_rank, hc.qk_norm, hc.ov_rank, hc.ov_norm], axis=-1
        ).reshape(L * H, len(columns))
        tables["heads"] = (per_head.astype(np.float64), heads, columns, "head")
        detail = self._detail()
        if detail is not None:
            arrays.update(detail.arrays())
        path = self.path_result()
        if path is not None:
            arrays.update(path.arrays())
            p = path.paths
            tables["path"] = (
                p.restored(p.effects).reshape(3, L * H), [f"via {n}" for n in INPUTS], heads,
                f"{head_name(p.sender)} \\ receiver",
            )  # fmt: skip
        return arrays, tables

    def export_targets(self):
        return {
            "graph": self.graph,
            "spectrum": self.spectrum_view,
            "full-circuit": self.full_plot,
            "path-bars": self.bars_view,
            "path-map": self.path_map,
        }


__all__ = ["CircuitsPage", "HeadGraph"]
