"""The Attention page: one prompt through every model, their head grids side by side."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from app.views.compare.base import ComparePage, note
from app.views.compare.state import CompareState
from app.widgets.head_grid import HeadMosaic


class GridsPage(ComparePage):
    """The prompt box and a :class:`HeadMosaic` per run; ``runRequested`` asks the tab to run the
    prompt through every model."""

    title = "Attention side by side"
    key = "attention"
    blurb = "The same prompt through every model: each run's heads, on the same tokens."

    redraw_on = ("runs_changed", "attention_changed")
    runRequested = Signal()

    def __init__(self, state: CompareState, parent: QWidget | None = None):
        super().__init__(state, parent)
        self.grids: dict[str, HeadMosaic] = {}
        self.follow(state.prompt_changed, self._show_prompt)
        self.follow(state.message, self._on_message)

    def build(self) -> None:
        al = QVBoxLayout(self)
        row = QHBoxLayout()
        row.addWidget(QLabel("Prompt"))
        self.prompt_edit = QLineEdit()
        self.prompt_edit.setObjectName("comparePrompt")
        self.prompt_edit.setPlaceholderText("the same prompt goes through every model")
        self.prompt_edit.returnPressed.connect(self.runRequested.emit)
        self.prompt_edit.textEdited.connect(self.state.set_prompt)
        row.addWidget(self.prompt_edit, 1)
        self.prompt_button = QPushButton("Run through every model")
        self.prompt_button.clicked.connect(self.runRequested.emit)
        row.addWidget(self.prompt_button)
        al.addLayout(row)
        self.prompt_status = note(
            self.state.messages.get("prompt", "Add runs, then run a prompt through them.")
        )
        al.addWidget(self.prompt_status)
        self.grid_scroll = QScrollArea()
        self.grid_scroll.setWidgetResizable(True)
        self.grid_body = QWidget()
        self.grid_layout = QGridLayout(self.grid_body)
        self.grid_layout.setContentsMargins(0, 0, 0, 0)
        self.grid_scroll.setWidget(self.grid_body)
        al.addWidget(self.grid_scroll, 1)
        self._show_prompt(self.state.prompt)

    def _show_prompt(self, text: str) -> None:
        if self.prompt_edit.text() != text:  # not while the user types it
            self.prompt_edit.setText(text)

    def _on_message(self, where: str, text: str) -> None:
        if where == "prompt":
            self.prompt_status.setText(text)

    def draw(self) -> None:
        with_att = self.state.with_attention()
        names = [r.name for r in with_att]
        for name in list(self.grids):
            if name not in names:
                gone = self.grids.pop(name)
                self.grid_layout.removeWidget(gone)
                gone.deleteLater()
        for r in with_att:
            g = self.grids.get(r.name)
            if g is None:
                g = HeadMosaic(title=r.name, interactive=False, compact=True)
                g.setMinimumSize(260, 220)
                self.grids[r.name] = g
            snap = r.record.attention
            g.set_data(
                snap.weights.astype(np.float32),
                snap.labels,
                title=f"<span style='color:rgb{self.color(r)}'>■</span> {r.name}",
            )
        self.arrange()

    def arrange(self) -> None:
        """Side by side in a row or stacked in a column, whichever gives each head the larger cell."""
        grids = [self.grids[n] for n in self.state.names() if n in self.grids]
        if not grids:
            return
        L = max(g.shape[0] for g in grids) or 1
        H = max(g.shape[1] for g in grids) or 1
        n = len(grids)
        vp = self.grid_scroll.viewport().size()
        W, Hh = max(vp.width(), 400), max(vp.height(), 300)
        row_cell = min(W / (n * (H + 1)), Hh / (L + 1))
        col_cell = min(W / (H + 1), Hh / (n * (L + 1)))
        vertical = col_cell > row_cell and n > 1
        for g in grids:
            self.grid_layout.removeWidget(g)
        for i, g in enumerate(grids):
            self.grid_layout.addWidget(g, i if vertical else 0, 0 if vertical else i)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.built:
            self.arrange()

    def clear(self) -> None:
        for g in self.grids.values():
            g.clear()


__all__ = ["GridsPage"]
