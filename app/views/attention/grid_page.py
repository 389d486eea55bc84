"""The Heads page: every layer × head of the prompt at once; click a head to open it large.

Deep models stay readable: rows are labelled ``L0``, ``L1``, …; with grouped-query attention the top
axis names each key/value head over the query heads that share it (and a blue frame holds them); when
every layer fitted in the page would make a head smaller than :data:`FIT_PX` pixels, heads are drawn
:data:`SCROLL_PX` wide and the layers scroll (30 layers at 1280×800); ``Layers`` folds the grid to
a block or a range of layers (:class:`~app.views.attention.grid_controls.LayerFold`). Named heads
are framed in their role's colour (:data:`~app.views.attention.grid_controls.ROLE_COLORS`, the line
under the grid says which), their name written in the corner when it fits, and ``Find`` jumps from
one to the next (:class:`~app.views.attention.grid_controls.HeadFinder`). The arrow keys move the
selected head (the grid scrolls to it), Enter opens it.

Local and global layers (``sliding_window`` with a ``window_pattern``, Gemma 2/3): a local layer's
row is named ``L3 · local`` (the axis's tool tip and the line under the grid say how far it looks
back), its hover readout says so, and its cells grey out what its window hides, each layer under
its own mask (:meth:`~app.views.attention.state.AttentionState.layer_masks`: the inspection's mask,
narrowed in a local layer; one array shared by every local layer).
"""

from __future__ import annotations

import html
from collections.abc import Callable

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QMenu, QToolButton, QVBoxLayout

from app.views.attention.base import AttentionPage, blurb_label
from app.views.attention.grid_controls import CELL_NAMES, ROLE_COLORS, HeadFinder, LayerFold
from app.views.attention.state import ROLE_SHORT
from app.widgets.head_grid import FIT_PX, MAX_BANDS, SCROLL_PX, HeadMosaic
from model.interp.analysis.heads import HEAD_ROLES


class GridPage(AttentionPage):
    title = "Heads"
    key = "heads"
    blurb = (
        "Every head of the model on your prompt: rows are layers (L0 first), columns heads. In each cell "
        "a row is a query token (top = first), a column a key it may read; bright = much attention, grey "
        "= hidden by the mask. Click a head to open it, right-click to switch it off; arrow keys move the "
        "selection, Enter opens it; hover for values; the wheel zooms, or scrolls layers that do not fit "
        "(Ctrl + wheel zooms)."
    )

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = QHBoxLayout()
        self.fold = LayerFold()
        self.finder = HeadFinder()
        self.log_box = QCheckBox("Log colours")
        self.log_box.setToolTip("colour log₁₀(weight) from 10⁻⁴ to 1, so small weights differ too")
        self.fit_button = QToolButton()  # as wide as its word: the row fits a 1024-px window
        self.fit_button.setText("Fit")
        self.fit_button.setToolTip(
            "every head of the layers shown in view at once, however small (no scrolling)"
        )
        bar.addWidget(self.fold)
        bar.addSpacing(12)
        bar.addWidget(self.finder)
        bar.addStretch(1)
        bar.addWidget(self.log_box)
        bar.addWidget(self.fit_button)
        lay.addLayout(bar)
        self.mosaic = HeadMosaic(keys=True)
        self.mosaic.set_scrolling(FIT_PX, SCROLL_PX, bands=MAX_BANDS)
        lay.addWidget(self.mosaic, 1)
        self.roles_label = QLabel(" ")
        self.roles_label.setWordWrap(True)
        self.roles_label.setStyleSheet("color: #444;")
        lay.addWidget(self.roles_label)
        self.mosaic.cell_name = self.cell_name
        self.mosaic.headClicked.connect(self.openHeadRequested.emit)
        self.mosaic.headMenuRequested.connect(self._head_menu)
        self.mosaic.headStepped.connect(lambda layer, head: self.state.select(layer, head))
        self.log_box.toggled.connect(self.mosaic.set_log)
        self.fit_button.clicked.connect(self.mosaic.fit_all)
        self.fold.changed.connect(self._on_fold)
        self.finder.jump.connect(self.jump_to)

    def head_menu_actions(self, layer: int, head: int) -> list[tuple[str, Callable[[], object]]]:
        """(text, action) of the right-click menu of head (layer, head)."""
        state = self.state
        items: list[tuple[str, Callable[[], object]]] = [
            (f"Open layer {layer}, head {head}", lambda: self.openHeadRequested.emit(layer, head))
        ]
        off = dict(state.ablation)
        if (layer, head) in off:
            rest = {lh: m for lh, m in off.items() if lh != (layer, head)}
            items.append(("Switch this head back on", lambda: state.set_ablation(rest)))
        else:

            def switch_off(mode: str) -> Callable[[], object]:
                return lambda: state.set_ablation({**off, (layer, head): mode})

            items.append(("Switch this head off (output × 0)", switch_off("zero")))
            items.append(("Switch this head off (output → its mean)", switch_off("mean")))
        if off:
            items.append(("Switch every head back on", lambda: state.set_ablation({})))
        return items

    def _head_menu(self, layer: int, head: int, pos) -> None:
        menu = QMenu(self)
        for text, action in self.head_menu_actions(layer, head):
            menu.addAction(text).triggered.connect(lambda _=False, action=action: action())
        menu.exec(pos)

    def refresh(self) -> None:
        insp = self.state.inspection
        if insp is None:
            return
        self.fold.set_layers(insp.n_layers)
        self.mosaic.set_rows(self.fold.rows())
        local = set(self.state.local_layers())
        self.mosaic.set_data(
            insp.weights,
            insp.labels,
            mask=self.state.layer_masks() if local else insp.mask,
            overview=insp.overview,
            block=insp.block,
            row_labels=self.row_labels(insp.n_layers, local),
            kv_group=getattr(insp.config, "n_rep", 1),
        )
        window = insp.config.attention.sliding_window
        self.mosaic.plot.getAxis("left").setToolTip(
            f"local layers (· local) attend through a sliding window of {window} keys: a query sees "
            f"itself and the {window - 1} keys before it; the others are global"
            if local and window
            else ""
        )
        self.mosaic.set_marked(self.state.ablation.keys())
        self.mosaic.set_selected(self.state.selected)  # (the fold stays as the user set it)
        self.mosaic.ensure_visible(*self.state.selected)
        self.finder.set_current(self.state.selected)
        self._update_roles()
        self.stale = False

    @staticmethod
    def row_labels(n_layers: int, local: set[int]) -> list[str]:
        """``L0``, ``L1 · local``, ...: a local layer (sliding window) says so."""
        return [f"L{layer} · local" if layer in local else f"L{layer}" for layer in range(n_layers)]

    def cell_name(self, layer: int, head: int) -> str:
        """The head's name in the grid's readout (a local layer's window, a GQA head's K/V head)."""
        insp = self.state.inspection
        name = f"layer {layer}, head {head}"
        n_rep = self.mosaic.kv_group
        if n_rep > 1:
            name += f" (K/V head {head // n_rep})"
        if insp is not None and layer in self.state.local_layers():
            name += f" [local: sliding window of {insp.config.attention.sliding_window} keys]"
        return name

    def local_html(self) -> str:
        """The sentence about local layers under the grid ('' without a sliding window)."""
        insp, local = self.state.inspection, self.state.local_layers()
        if insp is None or not local:
            return ""
        W = insp.config.attention.sliding_window
        if len(local) == insp.n_layers:
            which = "every layer"
        else:
            which = ", ".join(f"L{layer}" for layer in local) + " (the others are global: every earlier key)"
        return (
            f'<span style="color:#2a7a6a">Local layers</span>: {which}, a sliding window of {W} keys: a '
            f"query sees itself and the {W - 1} before it; grey is what the window hides."
        )

    def on_head_selected(self, layer: int, head: int) -> None:
        self._show_selected((layer, head))

    def _show_selected(self, cell: tuple[int, int]) -> None:
        """Frame the selected head; unfold and scroll so it is in view."""
        self.fold.reveal(cell[0])
        self.mosaic.set_selected(cell)
        self.mosaic.ensure_visible(*cell)
        self.finder.set_current(cell)

    def jump_to(self, layer: int, head: int) -> None:
        """Select (layer, head) and bring it into view, the grid focused so the arrow keys go on."""
        if not self.state.select(layer, head):
            self._show_selected((layer, head))
        self.mosaic.view.setFocus()

    def _on_fold(self, _range) -> None:
        self.mosaic.set_rows(self.fold.rows())
        self.mosaic.ensure_visible(*self.state.selected)

    def on_metrics(self) -> None:
        self._update_roles()

    def _update_roles(self) -> None:
        cls = self.state.classification
        insp = self.state.inspection
        local = self.local_html()
        if cls is None or insp is None or len(cls.labels) != insp.n_layers:
            self.mosaic.set_roles([])
            self.finder.set_heads({})
            roles = (
                "Head roles appear here once the metrics are measured (Metrics page)."
                if self.state.patterns_held
                else self.state.shorter_prompt_note("Naming the heads")
            )
            self.roles_label.setText(roles + (f"<br>{local}" if local else "") if insp is not None else " ")
            self.roles_label.setToolTip("")
            return
        short = [[CELL_NAMES.get(lab.name, lab.name) for lab in row] for row in cls.labels]
        tips = [[str(lab) for lab in row] for row in cls.labels]
        colors = [[ROLE_COLORS.get(lab.name) for lab in row] for row in cls.labels]
        self.mosaic.set_roles(short, tips, colors)
        heads: dict[str, list[tuple[int, int]]] = {}
        for layer, row in enumerate(cls.labels):
            for head, lab in enumerate(row):
                if lab.name:
                    heads.setdefault(lab.name, []).append((layer, head))
        self.finder.set_heads(heads)
        self.finder.set_current(self.state.selected)
        legend = self.legend_html(heads, getattr(insp.config, "n_rep", 1))
        self.roles_label.setText(legend + (f"<br>{local}" if local else ""))
        rules = html.escape(self.state.role_rules_text())
        self.roles_label.setToolTip(f"Names, first rule that holds: {rules}")

    @staticmethod
    def legend_html(heads: dict[str, list[tuple[int, int]]], n_rep: int) -> str:
        """The line under the grid: each role's frame colour and count, then the other frames."""
        parts = []
        for role in HEAD_ROLES:
            n = len(heads.get(role, []))
            colour = ROLE_COLORS.get(role)
            mark = f'<span style="color:{colour}">■</span> ' if colour else ""
            parts.append(f"{mark}{ROLE_SHORT.get(role, role)} {n}" + ("" if colour else " (no frame)"))
        frames = "orange: the head open on the Head page"
        if n_rep > 1:
            frames += f"; blue: the {n_rep} query heads sharing a key/value head"
        frames += "; red dashed: switched off"
        named = sum(len(v) for v in heads.values())
        lead = "Named heads: " if named else "No head passes a naming threshold yet: "
        return lead + " · ".join(parts) + f". Frames: {frames}. (Rules: hover here, or the Metrics page.)"

    def clear(self) -> None:
        self.mosaic.clear()

    def export_targets(self):
        return {"heads": self.mosaic}


__all__ = ["FIT_PX", "ROLE_SHORT", "SCROLL_PX", "GridPage"]
