"""The keys of a head grid made with ``keys=True``: :class:`GridKeys`.

The arrows ask for the neighbour of the selected head (:func:`step_from`: Left/Right through the heads,
on to the next or previous drawn row at the ends, Up/Down through the drawn rows), Enter opens the
selected head and Page Up/Down scroll. :class:`KeyFilter` hands the keys pressed on the view to them.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import QWidget

from app.widgets.head_grid.fit import MosaicFit
from app.widgets.head_grid.geometry import Drawn, MosaicGeometry
from app.widgets.head_grid.marks import CellMarks
from app.widgets.head_grid.scroll import RowScroll


def step_from(geom: MosaicGeometry, cell: tuple[int, int] | None, key: int) -> tuple[int, int] | None:
    """The head an arrow ``key`` moves to from ``cell`` in ``geom`` (within its drawn rows), or None for
    another key. From no cell (or one folded away), the first drawn head."""
    if key not in (Qt.Key.Key_Left, Qt.Key.Key_Right, Qt.Key.Key_Up, Qt.Key.Key_Down):
        return None
    drawn = geom.drawn
    if cell is None or not geom.shows(cell[0]):
        return drawn[0], 0
    r, c = cell
    i, last = drawn.index(r), len(drawn) - 1
    if key == Qt.Key.Key_Left:
        return (r, c - 1) if c > 0 else (drawn[i - 1], geom.C - 1) if i > 0 else (r, c)
    if key == Qt.Key.Key_Right:
        return (r, c + 1) if c + 1 < geom.C else (drawn[i + 1], 0) if i < last else (r, c)
    if key == Qt.Key.Key_Up:
        return drawn[max(0, i - 1)], c
    return drawn[min(last, i + 1)], c


class KeyFilter(QObject):
    """Gives the keys pressed on ``view`` to ``on_key(key) -> handled`` (the view then takes the
    focus by click or Tab)."""

    def __init__(self, view: QWidget, on_key: Callable[[int], bool]):
        super().__init__(view)
        self.on_key = on_key
        view.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        view.installEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if not isinstance(event, QKeyEvent) or event.type() != QEvent.Type.KeyPress:
            return False
        if event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            return False
        return bool(self.on_key(event.key()))


class GridKeys:
    """The keys pressed on a grid's ``view`` (see the module docstring): the arrows call ``on_step(r, c)``
    with the head they ask for (the grid's owner selects it), Enter calls ``on_open(r, c)`` with the
    selected head, Page Up/Down scroll the rows by a page."""

    def __init__(
        self,
        view: QWidget,
        grid: Drawn,
        fit: MosaicFit,
        scroll: RowScroll,
        marks: CellMarks,
        on_open: Callable[[int, int], None],
        on_step: Callable[[int, int], None],
    ):
        self.grid, self.fit, self.scroll, self.marks = grid, fit, scroll, marks
        self._open, self._step = on_open, on_step
        self.filter = KeyFilter(view, self.on_key)

    def on_key(self, key: int) -> bool:
        """Whether ``key`` was one of the grid's (False for any other key, or before the first data)."""
        geom = self.grid.geom
        if geom is None:
            return False
        if key in (Qt.Key.Key_PageUp, Qt.Key.Key_PageDown):
            if self.scroll.active:
                rows = max(1, int(self.scroll.vb.height() / max(1.0, self.fit.cell_px())) - 1)
                self.scroll.scroll_rows(-rows if key == Qt.Key.Key_PageUp else rows)
            return True
        cell = self.marks.selected
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            if cell is not None and geom.shows(cell[0]):
                self._open(*cell)
            return True
        to = step_from(geom, cell, key)
        if to is None:
            return False
        self._step(*to)
        return True


__all__ = ["GridKeys", "KeyFilter", "step_from"]
