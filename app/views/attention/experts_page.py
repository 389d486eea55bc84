"""The Experts page (a mixture-of-experts model only): which expert each token went to, layer by layer.

A grid of layers (rows, ``L0`` at the top) × the prompt's tokens (columns): each cell is coloured by
the expert the router chose for that token in that layer (the top choice by default; ``Colour by``
picks the second, ...), its number written in the cell when it fits, and the colour lighter the less
weight that expert gets in the token's output. Hover a cell for every chosen expert with its weight
(readout line and tool tip). A dense layer (one MLP, no router: DeepSeek's first layers) is a grey
row named ``· dense``. Under the grid, each expert's share of this prompt's token-to-expert
assignments per router layer (``1/E`` each when balanced): the Train tab's router load, for this
prompt alone.

Numbers from :func:`model.interp.measures.expert_choice_of` (the hook points ``blocks.l.mlp.chosen``
and ``blocks.l.mlp.gates``), computed in the compute worker after each run, with the run's
switched-off heads. The tab shows the page only for a model with ``n_experts``.
"""

from __future__ import annotations

import colorsys
import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.views.attention.base import AttentionPage, blurb_label
from app.widgets.cell_numbers import CellNumbers
from app.widgets.matrix_plot import MatrixPlot
from app.widgets.matrix_view import matrix_axes
from app.widgets.palette import HIDDEN_COLOR, PALETTE, text_color_on
from app.widgets.token_axis import TokenAxis

#: Rows of the grid are at most this many pixels tall (a shallow model's rows do not fill the page)
ROW_PX = 30
#: Expert numbers are written in the cells up to this many cells (beyond: hover)
NUMBERS_MAX = 6000
#: Experts named one by one in the legend up to this many
LEGEND_EXPERTS = 16
#: Weight → how much of the expert's colour a cell shows (the rest white): ``FLOOR + (1 − FLOOR)·w``
SHADE_FLOOR = 0.3


def expert_colors(n: int) -> list[tuple[int, int, int]]:
    """A colour per expert: the run colours (tab10 without its grey, which reads as "dense") for up to
    nine experts, else ``n`` hues round the wheel."""
    base = [c for i, c in enumerate(PALETTE) if i != 7]
    if n <= len(base):
        return base[:n]
    out = []
    for i in range(n):
        r, g, b = colorsys.hls_to_rgb(i / n, 0.5 if i % 2 else 0.42, 0.7)
        out.append((int(r * 255), int(g * 255), int(b * 255)))
    return out


def ordinal(i: int) -> str:
    """1 → "1st", 2 → "2nd", ..."""
    suffix = "th" if 10 <= i % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(i % 10, "th")
    return f"{i}{suffix}"


def layer_row_labels(n_layers: int, moe_layers: list[int]) -> list[str]:
    """``L0 · dense``, ``L1``, ...: a dense layer (no router) says so."""
    moe = set(moe_layers)
    return [f"L{layer}" if layer in moe else f"L{layer} · dense" for layer in range(n_layers)]


class ExpertGrid(QWidget):
    """Layers × tokens, each cell an RGB colour with an optional number; a readout line under it.

    ``hovered(row, col)`` (``-1, -1`` outside); ``describe(row, col) -> str`` writes the readout and
    the tool tip. The cells fill the width (the wheel zooms along the tokens, a drag pans); a row is at
    most :data:`ROW_PX` tall, the rows starting at the top."""

    hovered = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.left_axis, self.top_axis = TokenAxis("left"), TokenAxis("top")
        self.plot: pg.PlotItem = self.view.addPlot(
            row=0, col=0, axisItems={"left": self.left_axis, "top": self.top_axis}
        )
        matrix_axes(self.plot)
        self.plot.setLabel("top", "token")
        self.plot.getAxis("left").showLabel(False)  # the row names say "L0", "L1 · dense"
        self.vb: pg.ViewBox = self.plot.getViewBox()
        self.vb.setDefaultPadding(0.0)
        self.vb.setMouseEnabled(x=True, y=False)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.plot.addItem(self.image)
        font = QFont()
        font.setPointSizeF(7.5)
        self.numbers = CellNumbers(font)
        self.plot.addItem(self.numbers, ignoreBounds=True)
        lay.addWidget(self.view, 1)
        self.readout = QLabel(" ")
        self.readout.setTextFormat(Qt.TextFormat.PlainText)  # token texts: <s> is no tag
        self.readout.setObjectName("expertsReadout")
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        lay.addWidget(self.readout)
        self.rgb: np.ndarray | None = None  # uint8 [R, C, 3], what the cells show
        self.row_labels: list[str] = []
        self.col_labels: list[str] = []
        self.describe = lambda r, c: f"row {r}, column {c}"
        self._last = (-1, -1)
        self.vb.sigResized.connect(self._fit_rows)
        self.view.scene().sigMouseMoved.connect(self._on_move)

    @property
    def shape(self) -> tuple[int, int]:
        return (0, 0) if self.rgb is None else self.rgb.shape[:2]

    def set_cells(
        self,
        rgb: np.ndarray,
        row_labels: list[str],
        col_labels: list[str],
        texts: list[tuple[int, int, str, QColor]],
    ) -> None:
        """Draw ``rgb`` uint8 [R, C, 3] with ``texts`` (row, col, text, colour) in the cells."""
        R, C = rgb.shape[:2]
        new_shape = self.rgb is None or self.rgb.shape[:2] != (R, C)
        self.rgb = rgb
        self.row_labels, self.col_labels = list(row_labels), list(col_labels)
        self.image.setImage(rgb, levels=(0, 255), autoLevels=False)
        self.image.setRect(QRectF(0, 0, C, R))
        self.left_axis.set_labels(self.row_labels)
        self.top_axis.set_labels(self.col_labels)
        self.numbers.set_cells(texts, (R, C))
        if new_shape:
            self.vb.setLimits(xMin=0, xMax=C, yMin=0, yMax=max(R, 1e6), minXRange=min(C, 4))
            self.reset_view()
        self.refresh_readout()

    def reset_view(self) -> None:
        """Every token in view."""
        if self.rgb is None:
            return
        self.vb.setXRange(0, self.rgb.shape[1], padding=0.0)
        self._fit_rows()

    def _fit_rows(self, *_):
        """Rows at most :data:`ROW_PX` tall, from the top (white below when the page is taller)."""
        if self.rgb is None:
            return
        R = self.rgb.shape[0]
        h = self.vb.height()
        self.vb.setYRange(0, max(R, h / ROW_PX) if h > 1 else R, padding=0.0)

    def clear(self) -> None:
        self.rgb = None
        self.image.clear()
        self.numbers.set_cells([], (0, 0))
        self.left_axis.set_labels([])
        self.top_axis.set_labels([])
        self.readout.setText(" ")
        self.view.setToolTip("")

    def cell_at(self, scene_pos: QPointF) -> tuple[int, int] | None:
        if self.rgb is None or not self.vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = self.vb.mapSceneToView(scene_pos)
        r, c = int(np.floor(p.y())), int(np.floor(p.x()))
        R, C = self.rgb.shape[:2]
        return (r, c) if 0 <= r < R and 0 <= c < C else None

    def scene_pos_of(self, r: int, c: int) -> QPointF:
        return self.vb.mapViewToScene(QPointF(c + 0.5, r + 0.5))

    def hover_at(self, r: int, c: int) -> None:
        self._last = (r, c)
        text = self.describe(r, c) if r >= 0 else " "
        self.readout.setText(text)
        self.view.setToolTip(html.escape(text) if r >= 0 else "")
        self.hovered.emit(r, c)

    def refresh_readout(self) -> None:
        r, c = self._last
        R, C = self.shape
        self.hover_at(r, c) if 0 <= r < R and 0 <= c < C else self.hover_at(-1, -1)

    def _on_move(self, pos: QPointF) -> None:
        cell = self.cell_at(pos) or (-1, -1)
        if cell != self._last:
            self.hover_at(*cell)


class ExpertsPage(AttentionPage):
    title = "Experts"
    key = "experts"
    blurb = (
        "Which expert each token went to, layer by layer (a mixture of experts: a router sends each token "
        "to k of E expert MLPs). Rows are layers, columns your prompt's tokens; a cell's colour and number "
        "name the expert, lighter when it gets less weight; grey rows are dense layers. Hover a cell for "
        "every chosen expert and its weight. Below: each expert's share of this prompt's tokens."
    )
    needs_experts = True

    @staticmethod
    def applies_to(config) -> bool:
        return config is not None and config.feed_forward.n_experts is not None

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Colour by"))
        self.rank_box = QComboBox()
        self.rank_box.setToolTip("colour each token by its 1st (highest-weight) expert, or its 2nd, ...")
        self.rank_box.addItem("1st choice")
        bar.addWidget(self.rank_box)
        self.shade_box = QCheckBox("Lighter when less weight")
        self.shade_box.setToolTip(
            f"a cell shows {SHADE_FLOOR:.0%} of its expert's colour at weight 0 and all of it at weight 1"
        )
        self.shade_box.setChecked(True)
        bar.addWidget(self.shade_box)
        bar.addStretch(1)
        self.fit_button = QPushButton("Fit")
        self.fit_button.setToolTip("every token in view again after zooming")
        bar.addWidget(self.fit_button)
        lay.addLayout(bar)
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.grid = ExpertGrid()
        self.grid.describe = self.describe
        self.split.addWidget(self.grid)
        below = QWidget()
        blay = QHBoxLayout(below)
        blay.setContentsMargins(0, 0, 0, 0)
        self.load_plot = MatrixPlot(
            title="This prompt's load: each expert's share of the tokens (1/E each when balanced)",
            legend_label="share",
            interactive=False,
            row_title="",
            col_title="expert",
            numbers=None,
            digits=2,
        )
        self.load_plot.setMinimumWidth(260)
        blay.addWidget(self.load_plot, 2)
        self.legend = QLabel(" ")
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.legend.setStyleSheet("color: #333;")
        blay.addWidget(self.legend, 3)
        self.split.addWidget(below)
        self.split.setStretchFactor(0, 3)
        self.split.setStretchFactor(1, 2)
        lay.addWidget(self.split, 1)
        self.status = QLabel(" ")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)
        self._sized_for: int | None = None  # the layer count the splitter was last sized for
        self.rank_box.currentIndexChanged.connect(lambda _i: self.redraw())
        self.shade_box.toggled.connect(lambda _on: self.redraw())
        self.fit_button.clicked.connect(self.grid.reset_view)

    # ---- what is shown -------------------------------------------------------------------------
    def on_experts(self, choice) -> None:
        self.redraw()

    @property
    def choice(self):
        """The :class:`~model.interp.measures.ExpertChoice` drawn (None before it is measured)."""
        return self.state.experts_for_current()

    def rank(self) -> int:
        return max(0, self.rank_box.currentIndex())

    def refresh(self) -> None:
        insp, ec = self.state.inspection, self.choice
        if insp is None:
            return
        if ec is None:
            self.status.setText("finding each token's experts…")
            return
        if ec.T != insp.T:
            return  # (not this run's)
        self._set_ranks(ec.k)
        rank = self.rank()
        L, T, E = ec.n_layers, ec.T, ec.n_experts
        top, weight = ec.top(rank), ec.top_weight(rank)
        colours = np.asarray(expert_colors(max(1, E)), dtype=np.float32)
        rgb = np.empty((L, T, 3), dtype=np.float32)
        rgb[:] = np.asarray(HIDDEN_COLOR, dtype=np.float32)
        moe = ec.moe_layers
        if moe:
            ids = top[moe].astype(np.int64)
            shade = SHADE_FLOOR + (1 - SHADE_FLOOR) * np.clip(weight[moe], 0, 1)
            if not self.shade_box.isChecked():
                shade = np.ones_like(shade)
            rgb[moe] = 255.0 - shade[..., None] * (255.0 - colours[ids])
        rgb8 = np.round(rgb).astype(np.uint8)
        texts = []
        if L * T <= NUMBERS_MAX and moe:
            inks: dict[tuple[int, ...], QColor] = {}  # black or white on each colour, found once
            for layer in moe:
                for t in range(T):
                    rgb_t = tuple(int(v) for v in rgb8[layer, t])
                    if rgb_t not in inks:
                        inks[rgb_t] = QColor(*text_color_on(rgb_t))
                    texts.append((layer, t, str(int(top[layer, t])), inks[rgb_t]))
        self.grid.set_cells(rgb8, layer_row_labels(L, moe), list(insp.labels), texts)
        self._size_split(L)
        load = ec.load()
        if moe:
            self.load_plot.set_matrix(
                load,
                [f"L{layer}" for layer in moe],
                [str(e) for e in range(E)],
                levels=(0.0, max(2.0 / max(E, 1), float(load.max()))),
            )
        self.legend.setText(self.legend_html(ec, rank))
        shared = f" + {ec.n_shared} shared" if ec.n_shared else ""
        self.status.setText(
            f"router {ec.router}: {ec.k} of {E} experts per token{shared} · {len(moe)} router layers"
            f"{f', {L - len(moe)} dense' if L > len(moe) else ''} · {T} tokens · measured in "
            f"{ec.seconds * 1e3:.0f} ms"
        )
        self.stale = False

    def _set_ranks(self, k: int) -> None:
        if self.rank_box.count() == max(1, k):
            return
        self.rank_box.blockSignals(True)
        current = self.rank()
        self.rank_box.clear()
        for i in range(1, max(1, k) + 1):
            self.rank_box.addItem(f"{ordinal(i)} choice")
        self.rank_box.setCurrentIndex(min(current, self.rank_box.count() - 1))
        self.rank_box.blockSignals(False)

    def _size_split(self, n_layers: int) -> None:
        """Give the grid the height its rows need (at most :data:`ROW_PX` each) once per layer count;
        the splitter stays where the user drags it afterwards."""
        if self._sized_for == n_layers:
            return
        total = sum(self.split.sizes())
        if total <= 0:
            return
        self._sized_for = n_layers
        want = n_layers * ROW_PX + 90  # the rows, the token axis and the readout
        grid = int(min(max(want, total * 0.4), total * 0.7))
        self.split.setSizes([grid, total - grid])

    @staticmethod
    def legend_html(ec, rank: int) -> str:
        E = ec.n_experts
        what = "top" if rank == 0 else f"{ordinal(rank + 1)}"
        lines = [
            f"<b>Colour</b>: each token's {what} expert (by weight in its output), its number in the cell."
        ]
        if E <= LEGEND_EXPERTS:
            swatches = " ".join(
                f'<span style="color:rgb{c}">■</span>&nbsp;{e}' for e, c in enumerate(expert_colors(E))
            )
            lines.append(f"Experts: {swatches}")
        else:
            lines.append(f"{E} experts: their colours go round the colour wheel; the number names each one.")
        lines.append(
            f'<span style="color:rgb{HIDDEN_COLOR}">■</span> grey row: a dense layer (one MLP, no router).'
        )
        if ec.n_shared:
            lines.append(f"Every token also goes through {ec.n_shared} shared expert(s), not drawn.")
        lines.append(
            "<b>Load</b> (left): the share of this prompt's token-to-expert assignments each expert got "
            f"per router layer; balanced is 1/{E} = {1 / max(E, 1):.2f} each. The Train tab shows the "
            "same share over each training batch."
        )
        return "<br>".join(lines)

    def describe(self, r: int, t: int) -> str:
        """The readout of layer ``r``, token ``t``: every chosen expert with its weight."""
        insp, ec = self.state.inspection, self.choice
        if insp is None or ec is None or not (0 <= t < ec.T and 0 <= r < ec.n_layers):
            return " "
        tok = f"token {t} '{insp.labels[t]}'"
        if r not in ec.moe_layers:
            return f"layer {r} is dense: {tok} goes through its one MLP (no router)"
        m = ec.moe_layers.index(r)
        ids, weights = ec.ranked()
        parts = [
            f"expert {int(e)} (weight {float(w):.3f})" for e, w in zip(ids[m, t], weights[m, t], strict=True)
        ]
        shared = f" + {ec.n_shared} shared" if ec.n_shared else ""
        return f"layer {r}, {tok}: " + ", ".join(parts) + shared

    def clear(self) -> None:
        self.grid.clear()
        self.legend.setText(" ")
        self.status.setText(" ")

    # ---- exports -------------------------------------------------------------------------------
    def numbers(self):
        insp, ec = self.state.inspection, self.choice
        if insp is None or ec is None or ec.T != insp.T:
            return None
        rows = layer_row_labels(ec.n_layers, ec.moe_layers)
        cols = [f"{t}:{lab}" for t, lab in enumerate(insp.labels)]
        arrays = {**ec.arrays(), "labels": np.asarray(insp.labels, dtype=str)}
        moe_rows, experts = [f"L{layer}" for layer in ec.moe_layers], [f"e{e}" for e in range(ec.n_experts)]
        tables = {
            "expert": (ec.top(0), rows, cols, "layer \\ token"),
            "weight": (ec.top_weight(0), rows, cols, "layer \\ token"),
            "load": (ec.load(), moe_rows, experts, "layer \\ expert"),
        }
        return arrays, tables

    def export_targets(self):
        return {"experts": self.grid, "experts-load": self.load_plot}


__all__ = ["ExpertGrid", "ExpertsPage", "expert_colors", "layer_row_labels"]
