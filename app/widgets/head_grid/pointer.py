"""What the head grid does under the pointer: :class:`MosaicPointer`.

The readout line names the token pair under the pointer (:func:`readout_text`, from the full-resolution
values, whatever the pooling drawn), ``hovered(r, c, query, key)`` follows it (``-1`` everywhere when it
leaves the cells), a left click opens a head and a right click asks for its menu. The pair under a
still pointer changes when the view moves beneath it (the wheel scrolls the rows, a key brings a head
into view, a zoom): the readout follows the view too. It reads the grid through :class:`PointerHost`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QPoint, QPointF, Qt
from PySide6.QtWidgets import QLabel

from app.widgets.head_grid.geometry import Drawn
from app.widgets.head_grid.marks import CellMarks

#: (r, c, query, key) of a token pair in a cell; all -1 for none
Hit = tuple[int, int, int, int]
NO_HIT: Hit = (-1, -1, -1, -1)


class ReadoutSource(Protocol):
    """What :func:`readout_text` reads of a grid: what it shows and how it names its cells."""

    @property
    def values(self) -> np.ndarray | None: ...

    @property
    def tokens(self) -> list[str]: ...

    @property
    def mode(self) -> str: ...

    @property
    def names(self) -> tuple[str, str]: ...

    @property
    def block(self) -> int: ...

    @property
    def marks(self) -> CellMarks: ...

    @property
    def cell_name(self) -> Callable[[int, int], str]: ...

    def mask_of(self, r: int) -> np.ndarray | None: ...


class PointerHost(ReadoutSource, Drawn, Protocol):
    """What a :class:`MosaicPointer` reads of its grid: the readout's source and where its cells are."""

    def locate(self, x: float, y: float) -> Hit | None: ...


class MosaicPointer(QObject):
    """The readout, hover and clicks of one grid (see the module docstring); ``hovered``, ``clicked``
    and ``menu`` are called with what the pointer is over (the grid's signals). Installed as an event
    filter of the view's viewport, it learns when the pointer leaves it."""

    def __init__(
        self,
        grid: PointerHost,
        vb: pg.ViewBox,
        readout: QLabel,
        hovered: Callable[[int, int, int, int], None],
        clicked: Callable[[int, int], None],
        menu: Callable[[int, int, QPoint], None],
    ):
        super().__init__()
        self.grid, self.vb, self.readout = grid, vb, readout
        self._hovered, self._clicked, self._menu = hovered, clicked, menu
        self.last: Hit = NO_HIT  # the token pair the readout names
        self.pos: QPointF | None = None  # the pointer's scene position while it is over the view
        vb.sigRangeChanged.connect(self.on_view_moved)

    def hover_at(self, r: int, c: int, q: int, k: int) -> None:
        """Name (r, c, q, k) in the readout and say so (``r`` < 0: nothing)."""
        self.last = (r, c, q, k)
        self.readout.setText(" " if r < 0 else readout_text(self.grid, r, c, q, k))
        self._hovered(r, c, q, k)

    def refresh(self) -> None:
        """Name the last pair again (new values or rows), or nothing when it is no longer drawn."""
        r, c, q, k = self.last
        values = self.grid.values
        if r >= 0 and values is not None:
            R, C, T, _ = values.shape
            if r < R and c < C and q < T and k < T:
                self.readout.setText(readout_text(self.grid, r, c, q, k))
                return
        self.readout.setText(" ")

    def hit(self, pos: QPointF) -> Hit | None:
        """The token pair at scene position ``pos``, or None off the cells."""
        if self.grid.geom is None or not self.vb.sceneBoundingRect().contains(pos):
            return None
        p = self.vb.mapSceneToView(pos)
        return self.grid.locate(p.x(), p.y())

    def on_move(self, pos: QPointF) -> None:
        self.pos = QPointF(pos)
        hit = self.hit(pos) or NO_HIT
        if hit != self.last:
            self.hover_at(*hit)

    def on_view_moved(self, *_: object) -> None:
        """The view scrolled or zoomed under a still pointer: read out what is under it now."""
        if self.pos is not None:
            self.on_move(self.pos)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Leave:
            self.pos = None  # off the view: a later scroll is not under the pointer
        return False

    def on_click(self, ev: Any) -> None:
        """A click of pyqtgraph's scene (a ``MouseClickEvent``, which ships no types)."""
        if ev.button() not in (Qt.MouseButton.LeftButton, Qt.MouseButton.RightButton):
            return
        hit = self.hit(ev.scenePos())
        if hit is None:
            return
        if ev.button() == Qt.MouseButton.LeftButton:
            self._clicked(hit[0], hit[1])
        else:
            ev.accept()
            self._menu(hit[0], hit[1], ev.screenPos().toPoint())


def readout_text(m: ReadoutSource, r: int, c: int, q: int, k: int) -> str:
    """The readout sentence for token pair (q, k) of cell (r, c) of ``m`` (a HeadMosaic), from
    full-resolution values."""

    def tok(i: int) -> str:
        return m.tokens[i] if 0 <= i < len(m.tokens) else str(i)

    tip = m.marks.role_tip(r, c)
    head = m.cell_name(r, c) + (f" [{tip}]" if tip else "")
    mask = m.mask_of(r)
    if mask is not None and not mask[q, k]:
        return f"{head}: query {q} '{tok(q)}' cannot see key {k} '{tok(k)}' (masked)"
    assert m.values is not None  # a pair is read from values shown
    v = float(m.values[r, c, q, k])
    pair = f"{head}: query {q} '{tok(q)}' → key {k} '{tok(k)}'"
    if m.mode == "difference":
        text = f"{pair}: {m.names[0]} − {m.names[1]} = {v:+.4f}"
    else:
        text = f"{pair}: weight {v:.3f}"
    if m.block > 1:
        text += f"  (overview: {m.block}×{m.block} tokens per pixel; click to open the head)"
    return text


__all__ = ["NO_HIT", "Hit", "MosaicPointer", "PointerHost", "ReadoutSource", "readout_text"]
