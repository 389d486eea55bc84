"""HeadPicker: choose a set of (layer, head) pairs on an L×H grid of toggle buttons.

Used to pick heads to average (lines view, aggregates) or to switch off (ablation). A layer's label
button toggles the whole layer; "All" and "None" do what they say. ``selectionChanged`` fires once
per user action (not once per button).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QGridLayout, QHBoxLayout, QLabel, QPushButton, QToolButton, QVBoxLayout, QWidget


class HeadPicker(QWidget):
    """An L×H grid of checkable buttons; ``selected()`` → sorted list of (layer, head)."""

    selectionChanged = Signal()

    def __init__(self, parent: QWidget | None = None, *, title: str = "", check_color: str = "#3b6fd4"):
        super().__init__(parent)
        self._check_color = check_color
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        top = QHBoxLayout()
        self.title = QLabel(title)
        top.addWidget(self.title)
        top.addStretch(1)
        self.all_button = QPushButton("All")
        self.none_button = QPushButton("None")
        for b in (self.all_button, self.none_button):
            b.setAutoDefault(False)
            top.addWidget(b)
        self.all_button.clicked.connect(lambda: self._set_all(True))
        self.none_button.clicked.connect(lambda: self._set_all(False))
        outer.addLayout(top)
        self._grid_host = QWidget()
        self._grid = QGridLayout(self._grid_host)
        self._grid.setSpacing(2)
        self._grid.setContentsMargins(0, 0, 0, 0)
        outer.addWidget(self._grid_host)
        outer.addStretch(1)
        self._buttons: dict[tuple[int, int], QToolButton] = {}
        self._row_buttons: list[QToolButton] = []
        self._shape = (0, 0)
        self._quiet = False

    @property
    def shape(self) -> tuple[int, int]:
        return self._shape

    def set_shape(self, n_layers: int, n_heads: int) -> None:
        """Rebuild for ``n_layers`` × ``n_heads`` (keeps the selection that still fits)."""
        if (n_layers, n_heads) == self._shape:
            return
        keep = [lh for lh in self.selected() if lh[0] < n_layers and lh[1] < n_heads]
        while self._grid.count():
            item = self._grid.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self._buttons, self._row_buttons = {}, []
        self._shape = (n_layers, n_heads)
        side = 26 if n_heads <= 16 else 20
        style = (
            "QToolButton { border: 1px solid #aaa; border-radius: 3px; background: #f4f4f4; }"
            f"QToolButton:checked {{ background: {self._check_color}; color: white; border-color: #333; }}"
        )
        for h in range(n_heads):
            lab = QLabel(f"H{h}")
            lab.setAlignment(Qt.AlignmentFlag.AlignCenter)
            self._grid.addWidget(lab, 0, h + 1)
        for layer in range(n_layers):
            rb = QToolButton()
            rb.setText(f"L{layer}")
            rb.setToolTip(f"toggle every head of layer {layer}")
            rb.clicked.connect(lambda _=False, layer=layer: self._toggle_layer(layer))
            self._grid.addWidget(rb, layer + 1, 0)
            self._row_buttons.append(rb)
            for h in range(n_heads):
                b = QToolButton()
                b.setCheckable(True)
                b.setFixedSize(side, side)
                b.setText(str(h))
                b.setStyleSheet(style)
                b.setToolTip(f"layer {layer}, head {h}")
                b.toggled.connect(self._on_toggled)
                self._grid.addWidget(b, layer + 1, h + 1)
                self._buttons[(layer, h)] = b
        self.set_selected(keep, emit=False)

    def button(self, layer: int, head: int) -> QToolButton:
        return self._buttons[(layer, head)]

    def set_tooltips(self, tips: dict[tuple[int, int], str]) -> None:
        for (layer, h), b in self._buttons.items():
            extra = tips.get((layer, h), "")
            b.setToolTip(f"layer {layer}, head {h}" + (f": {extra}" if extra else ""))

    def selected(self) -> list[tuple[int, int]]:
        return sorted(lh for lh, b in self._buttons.items() if b.isChecked())

    def set_selected(self, heads, *, emit: bool = True) -> None:
        wanted = {(int(l), int(h)) for l, h in heads}
        before = self.selected()
        self._quiet = True
        try:
            for lh, b in self._buttons.items():
                b.setChecked(lh in wanted)
        finally:
            self._quiet = False
        if emit and self.selected() != before:
            self.selectionChanged.emit()

    def _set_all(self, on: bool) -> None:
        self.set_selected(list(self._buttons) if on else [])

    def _toggle_layer(self, layer: int) -> None:
        heads = [lh for lh in self._buttons if lh[0] == layer]
        current = set(self.selected())
        if all(lh in current for lh in heads):
            current -= set(heads)
        else:
            current |= set(heads)
        self.set_selected(current)

    def _on_toggled(self, _checked: bool) -> None:
        if not self._quiet:
            self.selectionChanged.emit()


__all__ = ["HeadPicker"]
