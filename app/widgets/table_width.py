"""A table that asks for the width its columns need, so a layout gives it that room rather than
scroll it sideways by a few pixels (a column sized to its contents beside one that stretches:
Qt keeps the stretching one at its own minimum and scrolls)."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QAbstractItemView, QTableView


def columns_width(table: QTableView) -> int:
    """px: every shown column at the width of its header and its widest shown cell, the row header,
    the vertical scroll bar and the frame."""
    header = table.horizontalHeader()
    need = 0
    for c in range(header.count()):
        if not header.isSectionHidden(c):
            need += max(header.sectionSizeHint(c), table.sizeHintForColumn(c), header.minimumSectionSize())
    vertical = table.verticalHeader()
    if vertical.isVisible():
        need += vertical.width()
    return need + table.verticalScrollBar().sizeHint().width() + 2 * table.frameWidth()


def keep_columns_whole(table: QAbstractItemView) -> None:
    """Hold ``table``'s minimum width at :func:`columns_width` as its contents change."""
    timer = QTimer(table)
    timer.setSingleShot(True)
    timer.setInterval(0)

    def update() -> None:
        table.setMinimumWidth(columns_width(table))

    timer.timeout.connect(update)
    model = table.model()
    for signal in (model.modelReset, model.rowsInserted, model.columnsInserted, model.dataChanged):
        signal.connect(timer.start)
    model.headerDataChanged.connect(timer.start)
    timer.start()
