"""The fit probe itself: it reports a table cell whose word is elided, and only that."""

from __future__ import annotations

from PySide6.QtGui import QFont
from PySide6.QtWidgets import QMainWindow, QTableWidget, QTableWidgetItem

from tests.app.fit_probe import fit_problems


def _window(shown, width: int) -> QMainWindow:
    win = QMainWindow()
    table = QTableWidget(2, 2)
    table.setHorizontalHeaderLabels(["w", "note"])
    bold = QFont(table.font())
    bold.setBold(True)
    for r, (weight, note) in enumerate([("0.401", "keys one and three"), ("0.198", "the orthogonal key")]):
        item = QTableWidgetItem(weight)
        item.setFont(bold)
        table.setItem(r, 0, item)
        table.setItem(r, 1, QTableWidgetItem(note))
    table.setColumnWidth(0, width)
    table.setColumnWidth(1, 90)  # wraps onto two lines of whole words: not a problem
    table.verticalHeader().setDefaultSectionSize(40)
    win.setCentralWidget(table)
    return shown(win, (400, 300))


def test_an_elided_cell_word_is_reported(shown):
    problems = [p for p in fit_problems(_window(shown, 24)) if "cell" in p]
    assert len(problems) == 1 and "'0.401'" in problems[0] and "column 0" in problems[0], problems


def test_a_column_wide_enough_for_its_words_is_not(shown):
    assert [p for p in fit_problems(_window(shown, 80)) if "cell" in p] == []
