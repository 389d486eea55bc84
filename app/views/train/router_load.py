"""The Train tab's router load (a mixture-of-experts model only): how the router spreads each training
batch over the experts, per layer, at the newest step.

Each training event carries ``router_load``: per mixture-of-experts layer, each expert's share ``f_e``
of the batch's token-to-expert assignments (``model.nn.moe.router_loads``; ``1/E`` each when the
router is balanced, which the load-balancing loss ``E·Σ f_e·P_e`` pushes towards). Drawn as bars
grouped by layer, with a dashed line at the balanced share ``1/E``; a model with too many bars for
the width (many layers × many experts) gets a layers × experts heat strip instead. Hover a bar (or a
cell) for its numbers. Hidden for a dense model; the newest event of each drain is drawn.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.widgets.axes import style_plot
from app.widgets.levels import lut_levels
from app.widgets.palette import PALETTE, matrix_lut

#: Bars up to this many (layers × experts); beyond, a heat strip
MAX_BARS = 160
#: The two alternating bar colours of neighbouring layers
BAR_COLOURS = (PALETTE[0], (120, 170, 215))
#: Bars are this wide (an expert's slot is 1)
BAR_WIDTH = 0.8
#: Empty slots between two layers' groups of bars
GROUP_GAP = 1
#: The dashed line of the balanced share 1/E
IDEAL_COLOUR = (200, 40, 40)
#: Room over the tallest bar for the layers' names (a fraction of the plot's height)
HEADROOM = 1.3


class RouterLoad(QWidget):
    """The router load per layer and expert (see the module docstring); ``set_config`` takes the model
    (``is_moe``: whether there is a load to show), ``add_events`` / ``reset`` follow the session."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setToolTip(
            "Each bar: the share of the training batch's token-to-expert assignments one expert got, at "
            "the newest step (grouped by layer). Dashed: balanced, 1/E each. A router that sends most "
            "tokens to a few experts leaves the others untrained."
        )
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 4, 0, 0)
        self.view = pg.GraphicsLayoutWidget()
        self.view.setBackground("w")
        self.plot: pg.PlotItem = self.view.addPlot()
        style_plot(self.plot)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.showGrid(y=True, alpha=0.2)
        self.bars = pg.BarGraphItem(x=[], height=[], width=BAR_WIDTH)
        self.plot.addItem(self.bars)
        self.heat = pg.ImageItem(axisOrder="row-major")
        self.heat.setLookupTable(matrix_lut())
        self.plot.addItem(self.heat)
        self.ideal = pg.InfiniteLine(
            angle=0, pen=pg.mkPen(IDEAL_COLOUR, width=1.5, style=Qt.PenStyle.DashLine)
        )
        self.plot.addItem(self.ideal, ignoreBounds=True)
        self.layer_names: list[pg.TextItem] = []  # "L1", ... over each layer's group of bars
        lay.addWidget(self.view, 1)
        self.readout = QLabel(" ")
        self.readout.setObjectName("routerLoadReadout")
        self.readout.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.readout.setWordWrap(True)
        lay.addWidget(self.readout)
        self.setMinimumHeight(120)
        self.n_experts = 0
        self.moe_layers: list[int] = []
        self.load: np.ndarray | None = None  # [M, E] of the newest step drawn
        self.step: int | None = None
        self.mode = "bars"  # or "heat"
        self._hover = False
        self.view.scene().sigMouseMoved.connect(self._on_move)
        self.plot.getViewBox().sigResized.connect(self._bar_ticks)

    # ---- the model ---------------------------------------------------------------------------
    def set_config(self, config) -> None:
        """Show the load for a mixture-of-experts ``config``; hide it for a dense one (or None)."""
        E = config.feed_forward.n_experts if config is not None else None
        if not E:
            self.n_experts, self.moe_layers = 0, []
            self.clear()
            return
        layers = [layer for layer in range(config.core.n_layers) if config.is_moe_layer(layer)]
        if (int(E), layers) != (self.n_experts, self.moe_layers):
            self.n_experts, self.moe_layers = int(E), layers
            self.clear()

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    # ---- events ------------------------------------------------------------------------------
    def reset(self, history: list[dict] | None) -> None:
        """A new record: draw its newest load (or nothing yet)."""
        self.clear()
        self.add_events(history or [])

    def add_events(self, events: list[dict]) -> None:
        """Draw the newest event's ``router_load`` (events without one are skipped)."""
        if not self.is_moe:
            return
        for event in reversed(events):
            load = event.get("router_load")
            if load:
                self.show_load(load, event.get("step"))
                return

    def show_load(self, load, step: int | None = None) -> None:
        """Draw ``load`` [M][E] (one row per mixture-of-experts layer) of training step ``step``."""
        a = np.asarray(load, dtype=np.float64)
        if a.ndim != 2 or a.shape[0] == 0:
            return
        M, E = a.shape
        if E != self.n_experts or M != len(self.moe_layers):  # another model's rows: number them
            self.n_experts = E
            self.moe_layers = self.moe_layers if M == len(self.moe_layers) else list(range(M))
        self.load, self.step = a, step
        if M * E <= MAX_BARS:
            self._draw_bars(a)
        else:
            self._draw_heat(a)
        self._summary()

    def _layout(self, M: int, E: int) -> np.ndarray:
        """x of every bar [M, E]: layer groups of E slots, :data:`GROUP_GAP` empty slots between."""
        return (np.arange(M)[:, None] * (E + GROUP_GAP) + np.arange(E)[None, :]).astype(np.float64)

    def _draw_bars(self, a: np.ndarray) -> None:
        M, E = a.shape
        if self.mode != "bars":
            self.mode = "bars"
            self.heat.clear()
            self.plot.getAxis("left").setTicks(None)
            self.plot.setLabel("left", None)
            self.plot.invertY(False)
        x = self._layout(M, E)
        brushes = [pg.mkBrush(*BAR_COLOURS[m % 2]) for m in range(M) for _ in range(E)]
        self.bars.setOpts(x=x.reshape(-1), height=a.reshape(-1), width=BAR_WIDTH, brushes=brushes, pen=None)
        ideal = 1.0 / E
        self.ideal.setPos(ideal)
        self.ideal.setVisible(True)
        top = max(2.0 * ideal, float(a.max())) * HEADROOM
        self.plot.setXRange(-0.6, x[-1, -1] + 0.6, padding=0.0)
        self.plot.setYRange(0.0, top, padding=0.0)
        self._bar_ticks()
        self._name_layers(x.mean(axis=1), top)

    def _bar_ticks(self, *_) -> None:
        """The experts under their bars: every one while their numbers fit the plot's width, else every
        k-th of each layer (the layers' names are over their groups)."""
        a = self.load
        if a is None or self.mode != "bars":
            return
        M, E = a.shape
        x = self._layout(M, E)
        width = self.plot.getViewBox().width()
        px = (width if width > 1 else 300.0) / max(1.0, float(x[-1, -1]) + 1.2)  # pixels per slot
        need = 8.0 * len(str(E - 1)) + 4  # pixels one expert's number takes
        k = next(k for k in (1, 2, 4, 8, 16, 32, 64, 128, 256, E) if k * px >= need or k >= E)
        ticks = [(float(x[m, e]), str(e)) for m in range(M) for e in range(0, E, k)]
        self.plot.getAxis("bottom").setTicks([ticks])

    def _name_layers(self, centres, top: float) -> None:
        """``L1``, ``L2``, ... at the top of the plot over each group of bars ([] clears them)."""
        names = [f"L{layer}" for layer in self.moe_layers][: len(centres)]
        if [t.textItem.toPlainText() for t in self.layer_names] != names:
            for item in self.layer_names:
                self.plot.removeItem(item)
            self.layer_names = [pg.TextItem(name, color="#333", anchor=(0.5, 0)) for name in names]
            for item in self.layer_names:
                self.plot.addItem(item, ignoreBounds=True)
        for item, c in zip(self.layer_names, centres, strict=True):
            item.setPos(float(c), top)

    def _draw_heat(self, a: np.ndarray) -> None:
        M, E = a.shape
        if self.mode != "heat":
            self.mode = "heat"
            self.bars.setOpts(x=[], height=[])
            self.ideal.setVisible(False)
            self._name_layers([], 0.0)
            self.plot.setLabel("left", "layer")
            self.plot.invertY(True)  # L0 at the top, as in every grid of layers
        lo, top, _grey, _gap = lut_levels(0.0, max(2.0 / E, float(a.max())))
        self.heat.setImage(a.astype(np.float32), levels=(lo, top), autoLevels=False)
        self.heat.setRect(QRectF(0, 0, E, M))
        self.plot.setXRange(0, E, padding=0.0)
        self.plot.setYRange(0, M, padding=0.0)
        step = max(1, M // 8)
        self.plot.getAxis("left").setTicks(
            [[(m + 0.5, f"L{layer}") for m, layer in enumerate(self.moe_layers) if m % step == 0]]
        )
        self.plot.getAxis("bottom").setTicks(None)

    def _summary(self) -> None:
        a, E = self.load, self.n_experts
        if a is None or self._hover:
            return
        m, e = np.unravel_index(int(np.argmax(a)), a.shape)
        lo_m, lo_e = np.unravel_index(int(np.argmin(a)), a.shape)
        step = f"step {self.step}: " if self.step is not None else ""
        how = " (rows: layers, columns: experts; dark = none)" if self.mode == "heat" else " (dashed line)"
        most, least = self.moe_layers[m], self.moe_layers[lo_m]
        self.readout.setText(
            f"{step}most loaded L{most} expert {e} {a[m, e]:.0%}, least L{least} expert {lo_e} "
            f"{a[lo_m, lo_e]:.0%}; balanced {1 / E:.0%} each{how}"
        )

    def clear(self) -> None:
        self.load, self.step = None, None
        self.bars.setOpts(x=[], height=[])
        self.heat.clear()
        self._name_layers([], 0.0)
        self.ideal.setVisible(self.n_experts > 0 and self.mode == "bars")
        if self.n_experts:
            self.ideal.setPos(1.0 / self.n_experts)
            self.plot.setYRange(0.0, HEADROOM * 2.0 / self.n_experts, padding=0.0)
        self.readout.setText(
            "Each expert's share of the training batch's tokens, per layer: it appears with the first "
            "training step."
            if self.n_experts
            else " "
        )

    # ---- hover -------------------------------------------------------------------------------
    def cell_at(self, scene_pos: QPointF) -> tuple[int, int] | None:
        """(row of the load, expert) under a scene position, or None."""
        a = self.load
        vb = self.plot.getViewBox()
        if a is None or not vb.sceneBoundingRect().contains(scene_pos):
            return None
        p = vb.mapSceneToView(scene_pos)
        M, E = a.shape
        if self.mode == "heat":
            m, e = int(np.floor(p.y())), int(np.floor(p.x()))
            return (m, e) if 0 <= m < M and 0 <= e < E else None
        slot = round(p.x())
        m, e = divmod(slot, E + GROUP_GAP)
        if not (0 <= m < M and 0 <= e < E) or abs(p.x() - slot) > BAR_WIDTH / 2:
            return None
        return m, e

    def describe(self, m: int, e: int) -> str:
        a = self.load
        if a is None:  # nothing drawn yet: no cell to describe
            return ""
        return (
            f"layer {self.moe_layers[m]}, expert {e}: {a[m, e]:.1%} of the batch's token-to-expert "
            f"assignments (balanced: {1 / self.n_experts:.1%})"
        )

    def _on_move(self, pos: QPointF) -> None:
        cell = self.cell_at(pos)
        self._hover = cell is not None
        if cell is None:
            self._summary()
            self.view.setToolTip("")
        else:
            text = self.describe(*cell)
            self.readout.setText(text)
            self.view.setToolTip(text)


__all__ = ["RouterLoad"]
