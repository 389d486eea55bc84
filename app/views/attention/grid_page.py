"""The Heads page: every layer × head of the prompt at once; click a head to open it large."""

from __future__ import annotations

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QMenu, QPushButton, QVBoxLayout

from app.views.attention.base import AttentionPage, blurb_label
from app.views.attention.state import ROLE_SHORT
from app.widgets.head_mosaic import HeadMosaic


class GridPage(AttentionPage):
    title = "Heads"
    key = "heads"
    blurb = (
        "Every head of the model on your prompt: rows are layers, columns heads. In each cell a row is a "
        "query token (top = first), a column a key it may read; bright = much attention, grey = hidden by "
        "the mask. Click a head to open it, right-click to switch it off; hover for values; wheel to zoom."
    )

    def build(self) -> None:
        lay = QVBoxLayout(self)
        top = QHBoxLayout()
        top.addWidget(blurb_label(self.blurb), 1)
        self.log_box = QCheckBox("Log colours")
        self.log_box.setToolTip("colour log₁₀(weight) from 10⁻⁴ to 1, so small weights differ too")
        self.fit_button = QPushButton("Fit")
        self.fit_button.setToolTip("show every head again after zooming")
        top.addWidget(self.log_box)
        top.addWidget(self.fit_button)
        lay.addLayout(top)
        self.mosaic = HeadMosaic()
        lay.addWidget(self.mosaic, 1)
        self.roles_label = QLabel(" ")
        self.roles_label.setWordWrap(True)
        self.roles_label.setStyleSheet("color: #444;")
        lay.addWidget(self.roles_label)
        self.mosaic.headClicked.connect(self.openHeadRequested.emit)
        self.mosaic.headMenuRequested.connect(self._head_menu)
        self.log_box.toggled.connect(self.mosaic.set_log)
        self.fit_button.clicked.connect(self.mosaic.reset_view)

    def head_menu_actions(self, layer: int, head: int) -> list[tuple[str, object]]:
        """(text, action) of the right-click menu of head (layer, head)."""
        state = self.state
        items = [(f"Open layer {layer}, head {head}", lambda: self.openHeadRequested.emit(layer, head))]
        off = dict(state.ablation)
        if (layer, head) in off:
            rest = {lh: m for lh, m in off.items() if lh != (layer, head)}
            items.append(("Switch this head back on", lambda: state.set_ablation(rest)))
        else:
            for mode, text in (
                ("zero", "Switch this head off (output × 0)"),
                ("mean", "Switch this head off (output → its mean)"),
            ):
                items.append((text, lambda mode=mode: state.set_ablation({**off, (layer, head): mode})))
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
        self.mosaic.set_data(
            insp.weights,
            insp.labels,
            mask=insp.mask,
            overview=insp.overview,
            block=insp.block,
            kv_group=getattr(insp.config, "n_rep", 1),
        )
        self.mosaic.set_marked(self.state.ablation.keys())
        self.mosaic.set_selected(self.state.selected)
        self._update_roles()
        self.stale = False

    def on_head_selected(self, layer: int, head: int) -> None:
        self.mosaic.set_selected((layer, head))

    def on_metrics(self) -> None:
        self._update_roles()

    def _update_roles(self) -> None:
        cls = self.state.classification
        insp = self.state.inspection
        if cls is None or insp is None or len(cls.labels) != insp.n_layers:
            self.mosaic.set_roles([])
            self.roles_label.setText(
                "Head roles appear here once the metrics are measured (Metrics page)."
                if insp is not None
                else " "
            )
            return
        short = [[ROLE_SHORT.get(lab.name, lab.name) for lab in row] for row in cls.labels]
        tips = [[str(lab) for lab in row] for row in cls.labels]
        self.mosaic.set_roles(short, tips)
        named = any(lab.name for row in cls.labels for lab in row)
        self.roles_label.setText(
            "Orange frame: the head open on the Head and Pipeline pages. "
            + (
                f"Blue frames: the {insp.config.n_rep} query heads that share one key/value head (GQA). "
                if getattr(insp.config, "n_rep", 1) > 1
                else ""
            )
            + ("Names in the corners: " if named else "No head passes a naming threshold yet: ")
            + self.state.role_rules_text()
            + ("" if named else ". See the Metrics page for every head's scores.")
        )

    def clear(self) -> None:
        self.mosaic.clear()

    def export_targets(self):
        return {"heads": self.mosaic}


__all__ = ["ROLE_SHORT", "GridPage"]
