"""The Heads page's controls for deep models: which layers the grid shows, and finding named heads.

:class:`LayerFold`: "Layers [all 30 ▾] [0]–[29]": every layer, a block of them (0–9, 10–19, …) or any
range typed in; the rows outside are folded away. Hidden for models of at most :data:`FOLD_FROM`
layers, where every row is readable anyway.

:class:`HeadFinder`: "Find [induction · 2 ▾] ◀ ▶": the roles the heads were given (with how many
heads have each); choosing one jumps to its first head, ◀ ▶ to the previous / next one, and a line
says which one it is ("L4 h2 · 1 of 2").

Both hold widgets only and say what the user asked (``changed``, ``jump``); the page does the rest.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QSpinBox, QToolButton, QWidget

from app.views.attention.state import ROLE_SHORT
from app.widgets.layouts import compact_combo
from app.widgets.wheel_guard import guard_wheel
from model.interp.analysis.heads import HEAD_ROLES

#: Models with more layers than this get the layer fold.
FOLD_FROM = 8
#: A block of the fold has about this many layers (30 layers: 0–9, 10–19, 20–29).
BLOCK = 10

#: The frame colour of each role in the grid (none for broad heads: in an untrained model every head
#: is, and a frame on each would hide the ones that matter).
ROLE_COLORS: dict[str, str | None] = {
    "induction": "#e6007e",
    "previous-token": "#12a150",
    "self": "#00a3cc",
    "sink": "#8a4fff",
    "broad": None,
}

#: The name written in a head's corner (where it fits in the cell; the frame's colour says it anyway).
CELL_NAMES = {
    "induction": "ind",
    "previous-token": "prev",
    "self": "self",
    "sink": "sink",
    "broad": "broad",
}

Head = tuple[int, int]


def fold_blocks(n_layers: int) -> list[tuple[int, int]]:
    """The fold's blocks of layers, ``(first, last)``: as even as they come, about :data:`BLOCK` each."""
    n = max(1, -(-n_layers // BLOCK))
    size = -(-n_layers // n)
    return [(lo, min(n_layers, lo + size) - 1) for lo in range(0, n_layers, size)]


class LayerFold(QWidget):
    """Which layers the grid draws (see the module docstring); ``changed(range)``: ``(first, last)``
    or None for every layer."""

    changed = Signal(object)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(QLabel("Layers"))
        self.combo = compact_combo(QComboBox(), 4)  # "all 30", "10–19": the open list shows them whole
        self.combo.setToolTip("fold the grid to a block of layers, so each head is drawn larger")
        self.first = QSpinBox()
        self.last = QSpinBox()
        self.first.setToolTip("the first layer shown")
        self.last.setToolTip("the last layer shown")
        lay.addWidget(self.combo)
        lay.addWidget(self.first)
        lay.addWidget(QLabel("–"))
        lay.addWidget(self.last)
        guard_wheel(self.combo, self.first, self.last)
        self.n_layers = 0
        self._quiet = False
        self.combo.activated.connect(self._on_combo)
        self.first.valueChanged.connect(lambda _v: self._on_spin(self.first))
        self.last.valueChanged.connect(lambda _v: self._on_spin(self.last))
        self.set_layers(0)

    def set_layers(self, n_layers: int) -> None:
        """A model of ``n_layers``: every layer shown again (nothing to fold up to :data:`FOLD_FROM`)."""
        if n_layers == self.n_layers:
            return
        self.n_layers = n_layers
        self._quiet = True
        try:
            self.combo.clear()
            self.combo.addItem(f"all {n_layers}", None)
            for lo, hi in fold_blocks(n_layers) if n_layers > FOLD_FROM else []:
                self.combo.addItem(f"{lo}–{hi}", (lo, hi))
            self.combo.addItem("range", "range")
            top = max(0, n_layers - 1)
            for spin in (self.first, self.last):
                spin.setRange(0, top)
            self.first.setValue(0)
            self.last.setValue(top)
            self.combo.setCurrentIndex(0)
        finally:
            self._quiet = False
        self.setVisible(n_layers > FOLD_FROM)

    def range(self) -> tuple[int, int] | None:
        """``(first, last)`` shown, or None for every layer."""
        lo, hi = self.first.value(), self.last.value()
        return None if self.n_layers <= 0 or (lo, hi) == (0, self.n_layers - 1) else (lo, hi)

    def rows(self) -> list[int] | None:
        """The layers shown (None: all)."""
        r = self.range()
        return None if r is None else list(range(r[0], r[1] + 1))

    def set_range(self, rng: tuple[int, int] | None) -> bool:
        """Show ``(first, last)`` (None: every layer); returns whether that changed (``changed``
        follows)."""
        before = self.range()
        top = self.n_layers - 1
        lo, hi = (0, top) if rng is None else (max(0, min(rng)), min(top, max(rng)))
        self._quiet = True
        try:
            self.first.setValue(lo)
            self.last.setValue(hi)
            self._match_combo()
        finally:
            self._quiet = False
        if self.range() != before:
            self.changed.emit(self.range())
            return True
        return False

    def reveal(self, layer: int) -> bool:
        """Move the fold (keeping its length) so ``layer`` is shown; returns whether it moved."""
        r = self.range()
        if r is None or r[0] <= layer <= r[1]:
            return False
        blocks = fold_blocks(self.n_layers)
        n = r[1] - r[0] + 1
        if r in blocks:  # a block: the block holding the layer
            return self.set_range(next(b for b in blocks if b[0] <= layer <= b[1]))
        lo = max(0, min(layer - layer % n, self.n_layers - n))
        return self.set_range((lo, lo + n - 1))

    def _match_combo(self) -> None:
        """The combo's entry for the range shown ("range" for one of no block)."""
        r = self.range()
        datas = [self.combo.itemData(i) for i in range(self.combo.count())]
        self.combo.setCurrentIndex(datas.index(r) if r in datas else self.combo.count() - 1)

    def _on_combo(self, index: int) -> None:
        data = self.combo.itemData(index)
        if data == "range":  # the spin boxes say which
            self.first.setFocus()
            return
        self.set_range(data)

    def _on_spin(self, spin: QSpinBox) -> None:
        if self._quiet:
            return
        lo, hi = self.first.value(), self.last.value()
        if lo > hi:  # the other end follows the one changed
            self._quiet = True
            try:
                (self.last if spin is self.first else self.first).setValue(spin.value())
            finally:
                self._quiet = False
        self._quiet = True
        try:
            self._match_combo()
        finally:
            self._quiet = False
        self.changed.emit(self.range())


class HeadFinder(QWidget):
    """Find the heads of a role (see the module docstring); ``jump(layer, head)``."""

    jump = Signal(int, int)

    PROMPT = "named heads…"

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(QLabel("Find"))
        self.combo = compact_combo(QComboBox(), 7)  # the open list shows every role whole
        self.combo.setToolTip("jump to the heads of a role (measured on the Metrics page's rules)")
        self.prev_button = QToolButton()
        self.prev_button.setText("◀")
        self.prev_button.setToolTip("the previous head of this role")
        self.next_button = QToolButton()
        self.next_button.setText("▶")
        self.next_button.setToolTip("the next head of this role")
        self.where = QLabel("")
        self.where.setStyleSheet("color: #444;")
        for w in (self.combo, self.prev_button, self.next_button, self.where):
            lay.addWidget(w)
        guard_wheel(self.combo)
        self.heads: dict[str, list[Head]] = {}
        self.current: Head | None = None
        self.combo.activated.connect(self._on_combo)
        self.prev_button.clicked.connect(lambda: self.step(-1))
        self.next_button.clicked.connect(lambda: self.step(1))
        self.set_heads({})

    def set_heads(self, heads: dict[str, list[Head]]) -> None:
        """The heads of each role (``{role: [(layer, head), …]}``, roles of ``HEAD_ROLES``); the role
        chosen stays chosen while it still has heads."""
        role = self.role()
        self.heads = {r: sorted(heads[r]) for r in HEAD_ROLES if heads.get(r)}
        self.combo.blockSignals(True)
        self.combo.clear()
        self.combo.addItem(self.PROMPT if self.heads else "no named heads yet", None)
        for r, hs in self.heads.items():
            self.combo.addItem(f"{ROLE_SHORT.get(r, r)} · {len(hs)}", r)
        i = self.combo.findData(role) if role in self.heads else 0
        self.combo.setCurrentIndex(max(0, i))
        self.combo.blockSignals(False)
        self.combo.setEnabled(bool(self.heads))
        self._update()

    def role(self) -> str | None:
        """The role chosen (None: none yet)."""
        return self.combo.currentData()

    def choose(self, role: str) -> bool:
        """Choose ``role`` and jump to its first head; False when no head has it."""
        i = self.combo.findData(role)
        if i < 0:
            return False
        self.combo.setCurrentIndex(i)
        self._on_combo(i)
        return True

    def set_current(self, head: Head | None) -> None:
        """The head selected now (where ◀ ▶ step from)."""
        self.current = head
        self._update()

    def step(self, d: int) -> None:
        """Jump to the next (``d`` = 1) or previous (−1) head of the chosen role."""
        heads = self.heads.get(self.role() or "", [])
        if not heads:
            return
        cur = self.current
        if cur in heads:
            target = heads[(heads.index(cur) + d) % len(heads)]
        elif d > 0:
            target = next((h for h in heads if cur is None or h > cur), heads[0])
        else:
            target = next((h for h in reversed(heads) if cur is None or h < cur), heads[-1])
        self.jump.emit(*target)

    def _on_combo(self, index: int) -> None:
        heads = self.heads.get(self.combo.itemData(index) or "", [])
        if heads:
            self.jump.emit(*heads[0])
        self._update()

    def _update(self) -> None:
        heads = self.heads.get(self.role() or "", [])
        for b in (self.prev_button, self.next_button):
            b.setEnabled(len(heads) > 1 or (len(heads) == 1 and self.current not in heads))
        if heads and self.current in heads:
            layer, head = self.current
            self.where.setText(f"L{layer} h{head} · {heads.index(self.current) + 1} of {len(heads)}")
        else:
            self.where.setText("")


__all__ = ["CELL_NAMES", "FOLD_FROM", "ROLE_COLORS", "HeadFinder", "LayerFold", "fold_blocks"]
