"""What a :class:`~app.widgets.head_grid.grid.HeadMosaic` shows on top of its cells and does under the
pointer: the roles, the selected and the marked cells (:class:`CellMarks` placed on its geometry), the
readout of the token pair under the pointer (:func:`readout_text`) and the clicks that open a head or its
menu. :class:`MosaicMarksAndPointer` is a base of ``HeadMosaic``; it uses the mosaic's ``marks``,
``geom``, ``vb``, ``readout``, ``values`` and signals.
"""

from __future__ import annotations

from PySide6.QtCore import QPointF, Qt


class MosaicMarksAndPointer:
    """Roles, selection, marks and the pointer of a :class:`~app.widgets.head_grid.grid.HeadMosaic`."""

    def set_roles(
        self,
        short: list[list[str]],
        tips: list[list[str]] | None = None,
        colors: list[list[str | None]] | None = None,
    ) -> None:
        """A short name written in the corner of each cell ("" for none; only where it fits in the
        cell); ``tips`` for the readout; ``colors``: a frame of that colour around the cell (None:
        none)."""
        self.marks.roles, self.marks.role_tips = short, tips or short
        self.marks.role_colors = colors or []
        self.marks.place(self.geom)

    def set_selected(self, cell: tuple[int, int] | None) -> None:
        """The cell drawn with an orange frame (the head open elsewhere)."""
        self.marks.selected = cell
        self.marks.place(self.geom)

    def set_marked(self, cells) -> None:
        """Cells drawn with a red dashed frame and "OFF" (e.g. switched-off heads)."""
        self.marks.marked = set(cells)
        self.marks.place(self.geom)

    @property
    def marked(self) -> set[tuple[int, int]]:
        return self.marks.marked

    # ---- pointer -------------------------------------------------------------------------------
    def hover_at(self, r: int, c: int, q: int, k: int) -> None:
        self._last_hover = (r, c, q, k)
        self.readout.setText(" " if r < 0 else readout_text(self, r, c, q, k))
        self.cellHovered.emit(r, c, q, k)

    def _refresh_readout(self) -> None:
        r, c, q, k = self._last_hover
        if r >= 0 and self.values is not None:
            R, C, T, _ = self.values.shape
            if r < R and c < C and q < T and k < T:
                self.readout.setText(readout_text(self, r, c, q, k))
                return
        self.readout.setText(" ")

    def _hit(self, pos: QPointF):
        if self.geom is None or not self.vb.sceneBoundingRect().contains(pos):
            return None
        p = self.vb.mapSceneToView(pos)
        return self.locate(p.x(), p.y())

    def _on_move(self, pos: QPointF) -> None:
        hit = self._hit(pos) or (-1, -1, -1, -1)
        if hit != self._last_hover:
            self.hover_at(*hit)

    def _on_click(self, ev) -> None:
        if ev.button() not in (Qt.MouseButton.LeftButton, Qt.MouseButton.RightButton):
            return
        hit = self._hit(ev.scenePos())
        if hit is None:
            return
        if ev.button() == Qt.MouseButton.LeftButton:
            self.headClicked.emit(hit[0], hit[1])
        else:
            ev.accept()
            self.headMenuRequested.emit(hit[0], hit[1], ev.screenPos().toPoint())


def readout_text(m: MosaicMarksAndPointer, r: int, c: int, q: int, k: int) -> str:
    """The readout sentence for token pair (q, k) of cell (r, c) of ``m`` (a HeadMosaic), from full-resolution
    values."""

    def tok(i: int) -> str:
        return m.tokens[i] if 0 <= i < len(m.tokens) else str(i)

    tip = m.marks.role_tip(r, c)
    head = m.cell_name(r, c) + (f" [{tip}]" if tip else "")
    mask = m.mask_of(r)
    if mask is not None and not mask[q, k]:
        return f"{head}: query {q} '{tok(q)}' cannot see key {k} '{tok(k)}' (masked)"
    v = float(m.values[r, c, q, k])
    pair = f"{head}: query {q} '{tok(q)}' → key {k} '{tok(k)}'"
    if m.mode == "difference":
        text = f"{pair}: {m.names[0]} − {m.names[1]} = {v:+.4f}"
    else:
        text = f"{pair}: weight {v:.3f}"
    if m.block > 1:
        text += f"  (overview: {m.block}×{m.block} tokens per pixel; click to open the head)"
    return text


__all__ = ["MosaicMarksAndPointer", "readout_text"]
