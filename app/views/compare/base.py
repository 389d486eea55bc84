"""What the Compare tab's pages share: :class:`ComparePage` (the tabs' page protocol,
``app.views.page``, over a :class:`~app.views.compare.state.CompareState`) and two table helpers.

A page builds its widgets on first use and draws from the state in ``refresh``; the signals it
follows (:attr:`ComparePage.redraw_on`) redraw it when in view and only mark it ``stale``
otherwise; the tab refreshes a stale page when it comes into view.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QLabel, QTableWidget, QTableWidgetItem

from app.views.page import LazyPage
from app.widgets.palette import run_color


class ComparePage(LazyPage):
    """One page of the Compare tab: it redraws (or becomes stale) on each state signal named in
    ``redraw_on``, whatever the signal carries."""

    #: names of the :class:`~app.views.compare.state.CompareState` signals that redraw the page
    redraw_on: tuple[str, ...] = ("runs_changed",)

    def __init__(self, state, parent=None):
        super().__init__(state, parent)
        for name in self.redraw_on:
            self.follow(getattr(state, name), lambda *_: self.redraw())

    def color(self, run) -> tuple[int, int, int]:
        """The run's colour: the same on every page (its place among the runs)."""
        i = self.state.index(run)
        return run_color(i) if i >= 0 else (0, 0, 0)

    def refresh(self) -> None:
        self.ensure_built()
        self.draw()
        self.stale = False

    def draw(self) -> None:
        """Draw everything from the state (the page is built)."""


def make_table(headers: list[str]) -> QTableWidget:
    """A read-only table with stretching columns and alternating rows."""
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().setVisible(False)
    t.verticalHeader().setDefaultSectionSize(24)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setAlternatingRowColors(True)
    t.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
    return t


def cell(text: str, right: bool = False, color: tuple[int, int, int] | None = None) -> QTableWidgetItem:
    it = QTableWidgetItem(text)
    if right:
        it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    if color is not None:
        it.setForeground(QColor(*color))
    return it


def number_cell(value: float | int, integer: bool) -> QTableWidgetItem:
    """A right-aligned cell that sorts by value (an integer, or a float to 4 decimals)."""
    it = QTableWidgetItem()
    it.setData(Qt.ItemDataRole.DisplayRole, int(value) if integer else round(float(value), 4))
    it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return it


def note(text: str = "", color: str | None = "#555") -> QLabel:
    """A word-wrapped label (grey by default; ``color=None``: the text colour)."""
    lab = QLabel(text)
    lab.setWordWrap(True)
    if color is not None:
        lab.setStyleSheet(f"color: {color};")
    return lab


__all__ = ["ComparePage", "cell", "make_table", "note", "number_cell"]
