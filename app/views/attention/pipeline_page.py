"""The Pipeline page: one head taken apart stage by stage, with formulas and tensor shapes.

Stages (``model.interp.analysis.pipeline.head_pipeline``, read from a trace of the model itself, so they are
exactly what it computed): Q, K, V → S = QKᵀ → S' (the model's scale rule) → M (mask: −∞) →
A = softmax(M) → O = AV. All eight share one scene, so the page exports as one SVG.

Laid out for reading at any width: as many stages to a row as leave each at least
:data:`STAGE_MIN_WIDTH` px (one to three), each title on lines of its own above its matrix and colour
bar, wrapped to the stage's width, the matrices as large as the row allows; the page scrolls down.
"""

from __future__ import annotations

import html
import re

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QFont, QFontMetricsF
from PySide6.QtWidgets import QHBoxLayout, QLabel, QScrollArea, QSizePolicy, QVBoxLayout

from app.views.attention.base import AttentionPage, HeadSelector, blurb_label, holder, wheel_scrolls_page
from app.widgets.matrix_plot import MatrixPanel, describe_value

#: The stages in reading order (① … ⑧), laid out left to right, then down, as many per row as fit.
STAGES = ("q", "k", "v", "scores_raw", "scores", "scores_masked", "pattern", "z")
VECTOR_STAGES = ("q", "k", "v", "z")
#: The narrowest a stage is drawn (matrix, its axes and its colour bar), px: fewer per row below it.
STAGE_MIN_WIDTH = 400
#: At most this many stages per row; a matrix between these many pixels tall.
MAX_COLUMNS, MATRIX_MIN, MATRIX_MAX = 3, 160, 380
#: Room for the column labels above a matrix, px (to size a row to the visible page).
COLUMN_AXIS_HEIGHT = 22
TITLE_PT = 8.5


def stage_columns(width: float) -> int:
    """How many stages a row of ``width`` px holds (1 to :data:`MAX_COLUMNS`)."""
    return max(1, min(MAX_COLUMNS, int(width // STAGE_MIN_WIDTH)))


def wrap_px(text: str, width: float, metrics: QFontMetricsF) -> list[str]:
    """``text`` broken at spaces into lines at most ``width`` px wide in ``metrics``' font; a
    bracketed shape (``[T, d_k]``) is never broken (a single word wider than ``width`` gets a line)."""
    words = re.findall(r"\[[^\]]*\]|\S+", text)
    lines: list[str] = []
    for w in words:
        if lines and metrics.horizontalAdvance(f"{lines[-1]} {w}") <= width:
            lines[-1] = f"{lines[-1]} {w}"
        else:
            lines.append(w)
    return lines or [""]


class PipelinePage(AttentionPage):
    title = "Pipeline"
    needs_every_pattern = True
    key = "pipeline"
    needs_head_detail = True
    blurb = (
        "How one head turns its inputs into attention, stage by stage: ① queries, ② keys and ③ values "
        "(one row per token); ④ every query-key dot product; ⑤ scaled; ⑥ the mask hides the future "
        "(grey = −∞); ⑦ softmax makes each row sum to 1; ⑧ each token's output is its weights × V. "
        "Blue < 0 < red. Scroll for every stage."
    )

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = QHBoxLayout()
        self.selector = HeadSelector()
        bar.addWidget(self.selector)
        self.info = QLabel(" ")
        self.info.setStyleSheet("color: #333;")
        self.info.setWordWrap(True)
        self.info.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        bar.addWidget(self.info, 1)
        lay.addLayout(bar)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.view.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.view.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        ci = self.view.ci
        ci.setContentsMargins(8, 8, 8, 8)
        ci.setSpacing(6)
        self.title_font = QFont()
        self.title_font.setPointSizeF(TITLE_PT)
        self.plots: dict[str, MatrixPanel] = {}
        #: each stage's title, a text of its own above the matrix and its colour bar (never beside them)
        self.titles: dict[str, pg.LabelItem] = {}
        self._title_lines: dict[str, list[tuple[str, bool]]] = {}
        for i, key in enumerate(STAGES):
            vec = key in VECTOR_STAGES
            self.plots[key] = MatrixPanel(
                ci,
                2 * i + 1,
                0,
                diverging=key != "pattern",
                square=not vec,
                legend_label="weight" if key == "pattern" else "value",
                row_title="",
                col_title="",
                interactive=False,
            )
            self.plots[key].plot.setMinimumSize(40, 40)
            label = pg.LabelItem(" ", justify="left", color="#222", size=f"{TITLE_PT}pt")
            ci.addItem(label, row=2 * i, col=0, colspan=2)
            self.titles[key] = label
        self.summary = pg.LabelItem(" ", justify="left", color="#222", size=f"{TITLE_PT}pt")
        ci.addItem(self.summary, row=2 * len(STAGES), col=0, colspan=2)
        self._summary_lines: list[tuple[str, bool]] = []
        self._arranged: tuple | None = None
        self.canvas = holder(self.view)
        self.canvas.column.addStretch(1)
        self.scroll_area = QScrollArea()
        self.scroll_area.setWidgetResizable(True)
        self.scroll_area.setFrameShape(QScrollArea.Shape.NoFrame)
        self.scroll_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.scroll_area.setWidget(self.canvas)
        self.scroll_area.viewport().installEventFilter(self)
        wheel_scrolls_page(self.view, self.scroll_area)  # the stages do not zoom: the wheel scrolls
        lay.addWidget(self.scroll_area, 1)
        self.readout = QLabel(" ")
        self.readout.setTextFormat(Qt.TextFormat.PlainText)  # token texts: <s> is no tag
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        lay.addWidget(self.readout)
        self.detail = None
        self.view.scene().sigMouseMoved.connect(self._on_move)
        self.selector.changed.connect(self.state.select)
        self.arrange()

    # ---- layout --------------------------------------------------------------------------------
    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.Resize and obj is self.scroll_area.viewport():
            self.arrange()
        return False

    def _width(self) -> float:
        """The width the stages are laid out in: the scroll area's, less room for its scroll bar (so
        the bar coming or going never changes the layout)."""
        bar = self.scroll_area.verticalScrollBar().sizeHint().width()
        return max(200.0, float(self.scroll_area.width() - bar - 2 * self.scroll_area.frameWidth()))

    def arrange(self, *, force: bool = False) -> None:
        """Place the stages ``stage_columns`` to a row, every title wrapped to its stage's width and
        given the lines it needs, the matrices as large as a row allows (up to :data:`MATRIX_MAX`, and
        no taller than the visible page); the canvas is as tall as that and scrolls."""
        width = self._width()
        cols = stage_columns(width)
        ci, grid = self.view.ci, self.view.ci.layout
        margins, gap = 16.0, grid.horizontalSpacing()
        stage_w = (width - margins - gap * (2 * cols - 1)) / cols
        legend_w = max(self._legend_width(self.plots[k]) for k in STAGES)
        plot_w = max(80.0, stage_w - gap - legend_w)
        bold = QFont(self.title_font)
        bold.setBold(True)
        fm = {False: QFontMetricsF(self.title_font), True: QFontMetricsF(bold)}
        line_h = max(m.lineSpacing() for m in fm.values())
        room = self.scroll_area.viewport().height() - 3 * line_h - COLUMN_AXIS_HEIGHT - 40
        wrapped = {k: self._wrapped(self._title_lines.get(k, []), stage_w, fm) for k in STAGES}
        wrapped["summary"] = self._wrapped(self._summary_lines, stage_w, fm)
        axes = tuple((self.plots[k].left_axis.width(), self.plots[k].top_axis.height()) for k in STAGES)
        key = (cols, round(stage_w), round(room), legend_w, axes, tuple(wrapped.values()))
        if key == self._arranged and not force:
            return
        self._arranged = key
        for item in (*self.titles.values(), *(p.plot for p in self.plots.values()), self.summary):
            if item in ci.items:
                ci.removeItem(item)
        for p in self.plots.values():
            if p.legend in ci.items:
                ci.removeItem(p.legend)
        for r in range(grid.rowCount()):
            grid.setRowMinimumHeight(r, 0)
            grid.setRowMaximumHeight(r, 1e6)
        for i, k in enumerate((*STAGES, "summary")):
            r, c = divmod(i, cols)
            if k == "summary":
                ci.addItem(self.summary, row=2 * r, col=2 * c, rowspan=2, colspan=2)
                self.summary.setText(wrapped[k] or " ", size=f"{TITLE_PT}pt", color="#222")
                continue
            label, panel = self.titles[k], self.plots[k]
            ci.addItem(label, row=2 * r, col=2 * c, colspan=2)
            label.setText(wrapped[k] or " ", size=f"{TITLE_PT}pt", color="#222")
            ci.addItem(panel.plot, row=2 * r + 1, col=2 * c)
            ci.addItem(panel.legend, row=2 * r + 1, col=2 * c + 1)
        total = margins
        rows = (len(STAGES) + 1 + cols - 1) // cols
        for r in range(rows):
            in_row = STAGES[r * cols : (r + 1) * cols]
            # the summary spans a title and a matrix row; alone in its row, its lines decide
            n_lines = max(wrapped[k].count("<br>") + 1 for k in (in_row or ("summary",)))
            title_h = n_lines * line_h + 10  # the text item's margins: 4 px above and below
            plot_h = 0.0
            if in_row:
                axis_w = max(self.plots[k].left_axis.width() for k in in_row)
                side = max(MATRIX_MIN, min(MATRIX_MAX, plot_w - axis_w - 2, room))
                plot_h = side + max(self.plots[k].top_axis.height() for k in in_row) + 2
            grid.setRowFixedHeight(2 * r, title_h)
            grid.setRowFixedHeight(2 * r + 1, plot_h)
            total += title_h + plot_h + 2 * grid.verticalSpacing()
        for c in range(MAX_COLUMNS):
            grid.setColumnFixedWidth(2 * c, plot_w if c < cols else 0)
            grid.setColumnFixedWidth(2 * c + 1, legend_w if c < cols else 0)
        self.view.setFixedHeight(int(total + 4))

    @staticmethod
    def _legend_width(panel: MatrixPanel) -> float:
        """What a stage's colour bar takes: the bar, its axis (fixed to its widest tick) and margins."""
        legend = panel.legend
        if legend is None:
            return 0.0  # (every stage has its colour bar)
        swatch = legend.swatch.sizeHint(Qt.SizeHint.PreferredSize).width() if legend.hidden_text else 0
        return max(legend.bar.minimumWidth() + legend.axis.width(), swatch) + 6

    @staticmethod
    def _wrapped(lines: list[tuple[str, bool]], width: float, fm) -> str:
        """HTML of ``lines`` ((text, bold) pairs), each broken to fit ``width`` px."""
        out = []
        for text, bold in lines:
            for part in wrap_px(text, width - 4, fm[bold]):
                part = html.escape(part)
                out.append(f"<b>{part}</b>" if bold else part)
        return "<br>".join(out)

    def title_of(self, key: str) -> str:
        """The text of a stage's title, as drawn (HTML, lines joined by ``<br>``)."""
        return self.titles[key].text

    def refresh(self) -> None:
        insp = self.state.inspection
        if insp is None:
            return
        self.selector.set_shape(insp.n_layers, insp.n_heads)
        self.selector.set_head(*self.state.selected)
        detail = self.state.head_detail_for_selected()
        if detail is None:
            self.info.setText("computing this head's stages…")
            return
        self._draw(detail, insp)
        self.stale = False

    def on_head_selected(self, layer: int, head: int) -> None:
        self.selector.set_head(layer, head)
        self.redraw()

    def on_head_detail(self, detail) -> None:
        if self.in_view():
            self.refresh()

    def _draw(self, detail, insp) -> None:
        self.detail = detail
        labels = insp.labels
        dims = [str(i) for i in range(detail.d_k)]
        for n, key in enumerate(STAGES, start=1):
            stage = detail[key]
            hp = self.plots[key]
            mask = None
            if key == "pattern":
                levels = (0.0, 1.0)
                mask = insp.mask  # what the mask hid is grey here too, not the colour of 0
            elif key in ("scores", "scores_masked"):
                finite = detail["scores"].value[insp.mask]
                a = float(np.abs(finite).max()) if finite.size else 1.0
                levels = (-a or -1.0, a or 1.0)  # both on the scale of the scaled scores
            else:
                levels = None
            hp.set_matrix(
                stage.value, labels, dims if key in VECTOR_STAGES else labels, levels=levels, mask=mask
            )
            lines = [(f"{_CIRCLED[n]} {stage.title}", True), (stage.formula, False)]
            if stage.shape == stage.shape_numeric:
                lines.append((stage.shape, False))
            else:
                lines.append((f"{stage.shape}  =  {stage.shape_numeric}", False))
            self._title_lines[key] = lines
        cfg = insp.config
        rule = {
            "sqrt_dk": f"S' = S / √d_k with d_k = {detail.d_k}",
            "none": "no scaling (S' = S)",
            "learned": f"a learned scale τ_h = {detail.scale:.3g} per head",
            "qk_norm": f"cosine attention, gain g_h = {detail.scale:.3g}",
        }.get(detail.attn_scale, detail.attn_scale)
        kv = (
            f"; keys/values shared: K/V head {detail.kv_head} serves {cfg.n_rep} query heads"
            if cfg.n_rep > 1
            else ""
        )
        off = self.state.ablation.get((detail.layer, detail.head))
        self.info.setText(
            f"layer {detail.layer}, head {detail.head}: T = {detail.T} tokens, d_k = {detail.d_k}; "
            f"scale rule: {rule}{kv}" + (f"  — this head is switched off ({off})" if off else "")
        )
        hidden = int((~insp.mask).sum())
        self._summary_lines = [
            ("Reading the stages", True),
            (f"④ → ⑤: every score × {detail.scale:.3g}", False),
            (f"⑥: {hidden} of {detail.T * detail.T} pairs hidden (grey)", False),
            ("⑦: e^M / Σ e^M along each row", False),
            ("⑧: O row i = Σ_j A_ij V_j", False),
        ]
        self.arrange()

    def _on_move(self, pos: QPointF) -> None:
        d = self.detail
        insp = self.state.inspection
        if d is None or insp is None:
            return
        for n, key in enumerate(STAGES, start=1):
            cell = self.plots[key].cell_at(pos)
            if cell is None:
                continue
            r, c = cell
            v = describe_value(float(self.plots[key].value(r, c)))
            lab = insp.labels
            if key in VECTOR_STAGES:
                where = f"token {r} '{lab[r]}', dimension {c}"
            else:
                where = f"query {r} '{lab[r]}', key {c} '{lab[c]}'"
            self.readout.setText(f"{_CIRCLED[n]} {d[key].title}: {where}: {v}")
            return

    def clear(self) -> None:
        self.detail = None
        self.readout.setText(" ")

    def export_targets(self):
        return {"pipeline": self.canvas}


_CIRCLED = " ①②③④⑤⑥⑦⑧"

__all__ = ["STAGES", "PipelinePage", "stage_columns", "wrap_px"]
