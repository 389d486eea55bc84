"""The Q–K map page: one head's queries and keys over a corpus in one 2-D map, as AttentionViz (Yeh et
al., IEEE VIS 2023) draws them, the prompt's own queries and keys placed into it, and every head's
map as a thumbnail (AttentionViz's first view: click one to open it).

Left, the **thumbnails**: layers down, heads across, each head's PCA map of a few queries (blue) and
keys (red) of the corpus, the chosen head framed. Right, the **map** of the chosen head: the corpus's
queries (circles) and keys (squares), coloured by query/key, by position or by the head's attention
(a query's largest weight, a key's mean weight received); the prompt's points large, outlined and
labelled with their tokens. Hovering a point shows its token in its window's text. Under the map, how
well distance tracks the dot product there: the Pearson correlation over pairs of one window with the
key at or before the query, in d_k and in the map.

Numbers: :mod:`model.interp.analysis.qk_map`, in the compute worker (:mod:`~app.views.attention.qk_map_jobs`).
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QSplitter, QVBoxLayout, QWidget

from app.views.attention.base import AttentionPage, blurb_label, lines_label
from app.widgets.corpus_box import corpus_box
from app.widgets.palette import lookup_table
from model.text.tokens import visible

if TYPE_CHECKING:
    from app.views.attention.qk_map_jobs import QKMapJobs
    from model.interp.analysis.qk_map import QKMap, Thumbnails

QUERY_RGB, KEY_RGB = (31, 119, 180), (214, 39, 40)
COLOURS = {"kind": "query / key", "position": "position", "weight": "the head's attention"}
METHOD_NAMES = {"pca": "PCA", "tsne": "t-SNE (openTSNE)"}
HOVER_HINT = "Hover over a point: its token in the text of its window."
#: the prompt's tokens labelled in the map when it has at most this many
MAX_LABELS = 40


def correlation_text(corr_full: float, corr_map: float) -> str:
    """The page's line for how well distance tracks the dot product."""

    def r(c: float) -> str:
        return "n/a" if math.isnan(c) else f"{c:+.3f}".replace("-", "−")

    return (
        f"<b>Distance vs dot product</b> (Pearson r over pairs of a window, key ≤ query): "
        f"<b>{r(corr_full)}</b> in d_k after the normalisation, <b>{r(corr_map)}</b> in the map "
        "(−1: the nearer a key, the larger q·k, exactly)"
    )


def _colours(values: np.ndarray, alpha: int = 200) -> list:
    lut = lookup_table()
    lo, hi = float(values.min()), float(values.max())
    idx = np.zeros(len(values), int) if hi <= lo else ((values - lo) / (hi - lo) * 255).astype(int)
    return [pg.mkBrush(*lut[i], alpha) for i in idx]


class QKMapPage(AttentionPage):
    title = "Q–K map"
    key = "qkmap"
    needs_qk_map = True
    blurb = (
        "One head's queries and keys over many windows of a corpus, laid out together in 2-D (AttentionViz): "
        "keys moved and queries scaled against keys so that every softmax is unchanged and a query lies near "
        "the keys it attends to. Your prompt's queries and keys are placed into the map. Left: every head; "
        "click one to map it."
    )

    def help_html(self) -> str:
        return (
            f"{self.blurb}<br><br>"
            "<b>The two free parameters</b> (Yeh et al., 2023). Adding one vector t to every key adds q·t to "
            "every score of a query's row, which its softmax does not see; scaling the queries by α and the "
            "keys by 1/α leaves q·k as it is. The keys are moved onto the queries' centroid and α makes "
            "their mean norms equal; then ‖q − k‖² = ‖q‖² + ‖k‖² − 2 q·k, so near means a large dot "
            "product.<br>"
            "<b>The correlation</b> says how true that is here: Pearson's r of ‖q_i − k_j‖ with q_i·k_j "
            "over pairs of one window with the key at or before the query, in d_k and in the map "
            "(−1 is exact).<br>"
            "<b>The vectors</b> are those the softmax multiplies: after QK-norm and RoPE, with 1/√d_k folded "
            "into the queries, and under grouped-query attention the key head the query head reads.<br>"
            "<b>PCA or t-SNE.</b> PCA keeps the two directions of largest spread, and places your prompt on "
            "the same axes. t-SNE (openTSNE) keeps neighbours, not distances; your prompt is placed by its "
            "<i>transform</i>, the map as fitted."
        )

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = QHBoxLayout()
        s = self.state.qk_setup
        self.layer_spin, self.head_spin = QSpinBox(), QSpinBox()
        self.prompts_spin, self.tokens_spin = QSpinBox(), QSpinBox()
        self.prompts_spin.setRange(1, 4096)
        self.tokens_spin.setRange(2, 4096)
        self.corpus_box = corpus_box()
        self.method_box, self.colour_box = QComboBox(), QComboBox()
        for name, text in METHOD_NAMES.items():
            self.method_box.addItem(text, name)
        for name, text in COLOURS.items():
            self.colour_box.addItem(text, name)
        second = QHBoxLayout()
        for row, label, w in (
            (bar, "Layer", self.layer_spin), (bar, "Head", self.head_spin), (bar, "Method", self.method_box),
            (bar, "Colour", self.colour_box), (second, "Corpus", self.corpus_box),
            (second, "Windows", self.prompts_spin), (second, "Tokens", self.tokens_spin),
        ):  # fmt: skip
            row.addWidget(QLabel(label + ":"))
            row.addWidget(w)
        for row in (bar, second):
            row.addStretch(1)
            lay.addLayout(row)
        self._set_inputs(s)
        for spin in (self.layer_spin, self.head_spin, self.prompts_spin, self.tokens_spin):
            spin.valueChanged.connect(self._inputs_changed)
        self.corpus_box.currentTextChanged.connect(self._inputs_changed)
        self.method_box.currentIndexChanged.connect(self._inputs_changed)
        self.colour_box.currentIndexChanged.connect(self._inputs_changed)

        split = QSplitter(Qt.Orientation.Horizontal)
        self.thumbs_view = pg.PlotWidget()
        self.thumbs_view.setBackground("w")
        self.thumbs_view.setMenuEnabled(False)
        self.thumbs_view.setMouseEnabled(False, False)
        self.thumbs_view.getPlotItem().setTitle("Every head: click one to map it", size="9pt")
        self.thumbs_view.invertY(True)
        self.thumb_q = pg.ScatterPlotItem(size=2, pen=None, brush=pg.mkBrush(*QUERY_RGB, 160))
        self.thumb_k = pg.ScatterPlotItem(size=2, pen=None, brush=pg.mkBrush(*KEY_RGB, 160))
        self.thumb_frame = pg.QtWidgets.QGraphicsRectItem(0, 0, 1, 1)
        self.thumb_frame.setPen(pg.mkPen("k", width=2))
        for item in (self.thumb_q, self.thumb_k, self.thumb_frame):
            self.thumbs_view.addItem(item)
        self.thumbs_view.scene().sigMouseClicked.connect(self._thumb_clicked)
        self.map_view = pg.PlotWidget()
        self.map_view.setBackground("w")
        self.map_view.setAspectLocked(True)
        self.map_view.addLegend(offset=(8, 8))
        self.points_item = pg.ScatterPlotItem(pen=None, hoverable=False)
        outline = pg.mkPen("k", width=1.5)
        self.prompt_q = pg.ScatterPlotItem(
            symbol="o", size=12, pen=outline, brush=pg.mkBrush(*QUERY_RGB), name="your prompt: queries"
        )
        self.prompt_k = pg.ScatterPlotItem(
            symbol="s", size=12, pen=outline, brush=pg.mkBrush(*KEY_RGB), name="your prompt: keys"
        )
        for item in (self.points_item, self.prompt_q, self.prompt_k):
            self.map_view.addItem(item)
        self.labels: list[pg.TextItem] = []
        self.map_view.scene().sigMouseMoved.connect(self._hover)
        split.addWidget(self.thumbs_view)
        split.addWidget(self.map_view)
        split.setSizes([420, 800])
        lay.addWidget(split, 1)
        self.corr_label = lines_label(2)
        self.hover_label = lines_label(1)
        self.hover_label.setText(HOVER_HINT)
        self.note_label = lines_label(1, colour="#555")
        for line in (self.corr_label, self.hover_label, self.note_label):
            lay.addWidget(line)

    # ---- inputs ----------------------------------------------------------------------------------
    def _set_inputs(self, s: dict) -> None:
        insp = self.state.inspection
        if insp is not None:
            self.layer_spin.setRange(0, insp.n_layers - 1)
            self.head_spin.setRange(0, insp.n_heads - 1)
        self.layer_spin.setValue(s["layer"])
        self.head_spin.setValue(s["head"])
        self.prompts_spin.setValue(s["prompts"])
        self.tokens_spin.setValue(s["seq_len"])
        self.corpus_box.setCurrentText(s["corpus"])
        self.method_box.setCurrentIndex(max(0, self.method_box.findData(s["method"])))
        self.colour_box.setCurrentIndex(max(0, self.colour_box.findData(s["colour"])))

    def _inputs_changed(self, *_args) -> None:
        changed = self.state.set_qk_setup(
            layer=self.layer_spin.value(), head=self.head_spin.value(),
            corpus=self.corpus_box.currentText().strip(),
            prompts=self.prompts_spin.value(), seq_len=self.tokens_spin.value(),
            method=self.method_box.currentData(), colour=self.colour_box.currentData(),
        )  # fmt: skip
        if changed:
            self.refresh()

    def prepare_screenshot(self) -> None:
        """Map the first head the Metrics page names previous-token, if any: AttentionViz's clearest
        picture, each query beside the key one position back."""
        c = self.state.classification
        heads = c.heads_named("previous-token") if c is not None else []
        if heads:
            self.choose_head(*heads[0])

    def choose_head(self, layer: int, head: int) -> None:
        """Map (``layer``, ``head``): what clicking its thumbnail does."""
        self.layer_spin.setValue(layer)
        self.head_spin.setValue(head)

    def _thumb_clicked(self, ev) -> None:
        th = self._thumbs
        if th is None:
            return
        p = self.thumbs_view.getPlotItem().vb.mapSceneToView(ev.scenePos())
        row, head = math.floor(p.y()), math.floor(p.x())
        if 0 <= row < len(th.layers) and 0 <= head < th.points.shape[1]:
            self.choose_head(th.layers[row], head)

    # ---- drawing ---------------------------------------------------------------------------------
    def stale_covers(self) -> list[QWidget]:
        return [self.thumbs_view, self.map_view]

    def refresh(self) -> None:
        st = self.state
        insp = st.inspection
        if insp is not None and self.layer_spin.maximum() != insp.n_layers - 1:
            self._set_inputs(st.qk_setup)
        key = self.map_key()
        edit = self.corpus_box.lineEdit()
        if self._host is not None and edit is not None:
            edit.setPlaceholderText(f"the data: {self._host.corpus()}")
        self._thumbs = st.qk_thumbs_for(self.map_key(thumbs=True))
        self._draw_thumbs()
        qmap = st.qk_map_for(key)
        self._map = qmap
        self._draw_map(qmap, st.qk_prompt_for(key, st.request) if qmap is not None else None)
        self.stale = qmap is None
        error = st.qk_error_for(key)
        if error:
            self.corr_label.setText(
                f'<span style="color:#a33">No map: {html.escape(error, quote=False)}</span>'
            )
            self.stale = False
        elif qmap is None and self._host is not None and self._host.map_cancelled():
            self.corr_label.setText("Cancelled: change an input to map the head again.")
            self.stale = False
        elif qmap is None and insp is not None:
            self.corr_label.setText("Mapping the head over the corpus…")

    def map_key(self, *, thumbs: bool = False):
        """The state's key of what the inputs shown ask for (the tab's jobs' own rule)."""
        host = self._host
        return host.key(thumbs=thumbs) if host is not None else None

    _host: QKMapJobs | None = None  # the tab's Q–K map jobs (``use_tab_jobs``)
    _thumbs: Thumbnails | None = None
    _map: QKMap | None = None

    def use_tab_jobs(self, jobs) -> None:
        """The tab's Q–K map jobs, whose keys say which map belongs to the inputs shown."""
        self._host = jobs.qk

    def _draw_thumbs(self) -> None:
        th = self._thumbs
        if th is None:
            self.thumb_q.setData([], [])
            self.thumb_k.setData([], [])
            return
        L, H, P2, _ = th.points.shape
        P = P2 // 2
        cx = np.arange(H)[None, :, None] + 0.5
        cy = np.arange(L)[:, None, None] + 0.5
        xy = th.points * 0.45
        x, y = xy[..., 0] + cx, xy[..., 1] + cy
        self.thumb_q.setData(x[:, :, :P].ravel(), y[:, :, :P].ravel())
        self.thumb_k.setData(x[:, :, P:].ravel(), y[:, :, P:].ravel())
        plot = self.thumbs_view.getPlotItem()
        plot.getAxis("bottom").setTicks([[(h + 0.5, f"H{h}") for h in range(H)]])
        plot.getAxis("left").setTicks([[(r + 0.5, f"L{layer}") for r, layer in enumerate(th.layers)]])
        plot.setRange(xRange=(0, H), yRange=(0, L), padding=0.02)
        s = self.state.qk_setup
        row = th.layers.index(s["layer"]) if s["layer"] in th.layers else -1
        self.thumb_frame.setRect(s["head"], row, 1, 1)
        self.thumb_frame.setVisible(row >= 0)

    def _draw_map(self, qmap, placed) -> None:
        for label in self.labels:
            self.map_view.removeItem(label)
        self.labels = []
        if qmap is None:
            self.points_item.setData([], [])
            self.prompt_q.setData([], [])
            self.prompt_k.setData([], [])
            return
        colour = self.state.qk_setup["colour"]
        if colour == "kind":
            q_brush, k_brush = pg.mkBrush(*QUERY_RGB, 110), pg.mkBrush(*KEY_RGB, 110)
            brushes = [q_brush if q else k_brush for q in qmap.is_query]
        else:
            brushes = _colours(qmap.position.astype(float) if colour == "position" else qmap.weight)
        symbols = ["o" if q else "s" for q in qmap.is_query]
        self.points_item.setData(pos=qmap.points, brush=brushes, symbol=symbols, size=5)
        plot = self.map_view.getPlotItem()
        plot.setTitle(
            f"L{qmap.layer}H{qmap.head}: {int(qmap.is_query.sum()):,} queries (○) and keys (□), "
            f"{METHOD_NAMES[qmap.method]}",
            size="10pt",
        )
        self.corr_label.setText(correlation_text(qmap.corr_full, qmap.corr_map))
        note = "; ".join(qmap.notes)
        if qmap.method == "tsne":
            note += "; t-SNE: your prompt placed by openTSNE's transform"
        self.note_label.setText(note)
        if placed is None:
            self.prompt_q.setData([], [])
            self.prompt_k.setData([], [])
            return
        q = placed.is_query
        self.prompt_q.setData(pos=placed.points[q])
        self.prompt_k.setData(pos=placed.points[~q])
        if q.sum() <= MAX_LABELS:
            for (x, y), text, is_q in zip(placed.points, placed.token, q, strict=True):
                label = pg.TextItem(visible(text), color=QUERY_RGB if is_q else KEY_RGB, anchor=(0, 1))
                label.setPos(float(x), float(y))
                self.map_view.addItem(label)
                self.labels.append(label)

    def _hover(self, pos: QPointF) -> None:
        qmap = self._map
        if qmap is None or len(qmap.points) == 0:
            return
        vb = self.map_view.getPlotItem().vb
        p = vb.mapSceneToView(pos)
        px = vb.viewPixelSize()
        d = np.hypot((qmap.points[:, 0] - p.x()) / px[0], (qmap.points[:, 1] - p.y()) / px[1])
        i = int(np.argmin(d))
        if d[i] > 8:
            self.hover_label.setText(HOVER_HINT)
            return
        self.hover_label.setText(self.describe_point(i))

    def describe_point(self, i: int) -> str:
        """Point ``i`` of the map in words: query or key, its token in its window's text, position."""
        qmap, tok = self._map, self._host.session.tokenizer if self._host is not None else None
        assert qmap is not None
        w, t = int(qmap.window[i]), int(qmap.position[i])
        kind = "query" if qmap.is_query[i] else "key"
        ids = [int(x) for x in qmap.windows[w]]
        texts = tok.token_strings(ids) if tok is not None else [str(x) for x in ids]
        lo, hi = max(0, t - 12), min(len(ids), t + 6)
        context = "".join(
            f"<b><u>{html.escape(s)}</u></b>" if j == t else html.escape(s)
            for j, s in zip(range(lo, hi), texts[lo:hi], strict=True)
        ).replace("\n", "⏎")
        token = html.escape(visible(qmap.token[i]))
        return f"{kind} of “{token}” at position {t} of window {w}: …{context}… (weight {qmap.weight[i]:.2f})"
