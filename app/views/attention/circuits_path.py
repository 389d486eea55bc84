"""The Circuits page's path-patching tab (:mod:`app.views.attention.circuits_page`): a sender and a
receiver, the share of the clean − corrupted logit difference the sender restores through the
receiver's q, k and v, directly and in all (plain head patching), and a map of the sender's effect
through each head of the receiver's layer (click a cell to make it the receiver). Numbers:
:func:`model.interp.causal.path_patching_of` in the compute worker (the tab's job ``attention.path``).
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from app.views.attention.base import lines_label
from app.views.attention.circuits_base import CircuitsPart
from app.views.attention.head_graph import KIND_COLORS, KINDS, head_name
from app.views.attention.patching_page import SMALL_GAP
from app.views.attention.state import CausalFailure
from app.views.attention.state_records import Head
from app.widgets.axes import style_plot
from app.widgets.matrix_plot import MatrixPlot, format_cell

#: The path patching inputs, as the bars and the map name them.
INPUTS = ("q", "k", "v")
#: The Circuits page's tabs on the right.
HEAD_TAB, FULL_TAB, PATH_TAB = 0, 1, 2


class PathPatchingTab(CircuitsPart):
    """The path-patching tab's widgets and drawing, for :class:`~app.views.attention.circuits_page.
    CircuitsPage` (which builds the tab with :meth:`_build_path_tab` and draws it when it is in view)."""

    def _build_path_tab(self) -> QWidget:
        #: the heads in the sender and receiver boxes
        self._sender_items: list[Head] = []
        self._receiver_items: list[Head] = []
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

    def _fill_combos(self) -> None:
        insp = self.state.inspection
        L, H = insp.n_layers, insp.n_heads
        sender, receiver = self.state.path_heads()
        senders = [(l, h) for l in range(L) for h in range(H)]
        receivers = [(l, h) for l in range(sender[0] + 1, L) for h in range(H)]
        if senders != self._sender_items:
            self._sender_items = senders
            self._fill_combo(self.sender_combo, senders)
        if receivers != self._receiver_items:
            self._receiver_items = receivers
            self._fill_combo(self.receiver_combo, receivers)
        for combo, items, chosen in (
            (self.sender_combo, senders, sender),
            (self.receiver_combo, receivers, receiver),
        ):
            if chosen in items:
                combo.blockSignals(True)
                combo.setCurrentIndex(items.index(chosen))
                combo.blockSignals(False)

    @staticmethod
    def _fill_combo(combo: QComboBox, items: list[Head]) -> None:
        combo.blockSignals(True)
        combo.clear()
        for head in items:
            combo.addItem(head_name(head))
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


__all__ = ["FULL_TAB", "HEAD_TAB", "INPUTS", "PATH_TAB", "PathPatchingTab"]
