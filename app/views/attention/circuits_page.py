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

The graph is :mod:`~app.views.attention.head_graph`, the Head tab :mod:`~app.views.attention.circuits_head`
and the path-patching tab :mod:`~app.views.attention.circuits_path` (the page's bases); this module
holds the page: its layout, the state's news, the graph's controls and the full circuits.

Numbers: :func:`model.interp.measures.circuits_of` (once per model or training step),
:func:`~model.interp.measures.circuit_head_of` and :func:`model.interp.causal.path_patching_of`, in the
compute worker, leaving a core to the GUI. What the norms, biases and RoPE do to the circuits is
written under the graph.
"""

from __future__ import annotations

import html
import math

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSpinBox,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.views.attention.base import blurb_label, lines_label
from app.views.attention.circuits_head import SelectedHeadTab
from app.views.attention.circuits_path import FULL_TAB, HEAD_TAB, INPUTS, PATH_TAB, PathPatchingTab
from app.views.attention.grid_controls import ROLE_COLORS
from app.views.attention.head_graph import KIND_COLORS, KINDS, HeadGraph, head_name
from app.widgets.matrix_plot import MatrixPlot

#: Default: at most this many edges (the strongest).
MAX_EDGES = 150
#: Default threshold: this many times the chance score.
CHANCE_TIMES = 2.0


def composition_counts(drawn: int, above: int, total: int, threshold: float) -> str:
    """The legend's count in the words the page's footer uses: of ``total`` composition scores (one
    per Q, K and V composition of a pair of heads in different layers), ``above`` reach the threshold
    and ``drawn`` of them are drawn (the edge limit)."""
    return f"{drawn:,} drawn of the {above:,} composition scores ≥ {threshold:.3f} (of {total:,})"


class CircuitsPage(SelectedHeadTab, PathPatchingTab):
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
        self.result = None
        self._auto_threshold = True
        self._auto_focus = False
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
        self.legend = lines_label(5, colour="#444")  # five at 1024 px
        lay.addWidget(self.legend)
        self.status = lines_label(2)
        lay.addWidget(self.status)
        self.graph.headClicked.connect(self._on_head_clicked)
        self.graph.headDoubleClicked.connect(lambda l, h: self.openHeadRequested.emit(l, h))
        self.graph.edgeClicked.connect(self._on_edge_clicked)

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

    def _on_offset(self) -> None:
        """A new RoPE offset: the circuits are computed again for it."""
        if self.state.set_circuit_setup(rope_offset=int(self.offset.value())):
            self.status.setText(f"<i>Computing the circuits at RoPE offset {self.offset.value()}…</i>")

    def _show_offset(self, res) -> None:
        cfg = res.config
        rope = cfg.positional.positions == "rope" and res.circuits is not None
        self.offset_label.setVisible(rope)
        self.offset.setVisible(rope)
        if rope:
            self.offset.blockSignals(True)
            self.offset.setRange(0, max(0, int(cfg.core.context_length) - 1))
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
        total = int(np.isfinite(comp.scores).sum())
        shown = composition_counts(len(edges), above, total, self.threshold.value())
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
                f"{comp.n_layers} layers × {comp.n_heads} heads: {total:,} composition scores (Q, K and V "
                f"for each pair of heads in different layers; {above:,} ≥ {self.threshold.value():.3f}) and "
                f"every head's circuits in {secs:.2f} s. Hover an edge or a head for its numbers."
            )

    # ---- the full circuits ---------------------------------------------------------------------
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

    # ---- the graph's clicks ----------------------------------------------------------------------
    def _on_head_clicked(self, layer: int, head: int) -> None:
        self.state.select(layer, head)
        self.tabs.setCurrentIndex(HEAD_TAB)

    def _on_edge_clicked(self, kind: str, l1: int, h1: int, l2: int, h2: int) -> None:
        self._set_path((l1, h1), (l2, h2))
        self.tabs.setCurrentIndex(PATH_TAB)

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


__all__ = ["CircuitsPage"]
