"""A table that asks for the width its columns need, so a layout gives it that room rather than
scroll it sideways by a few pixels (a column sized to its contents beside one that stretches:
Qt keeps the stretching one at its own minimum and scrolls)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QHeaderView, QTableView, QTableWidget

#: px: the most a grid with a column per token asks for (past it, a long prompt scrolls the table)
TOKEN_GRID_MAX_WIDTH = 480


def columns_width(table: QTableView, *, stretch_content: bool = True) -> int:
    """px: every shown column at the width of its header and its widest shown cell (a stretching
    column at its minimum section size only, without ``stretch_content``), the row header, the
    vertical scroll bar and the frame."""
    header = table.horizontalHeader()
    shown = [c for c in range(header.count()) if not header.isSectionHidden(c)]
    need = 0
    for c in shown:
        if not stretch_content and header.sectionResizeMode(c) == QHeaderView.ResizeMode.Stretch:
            need += header.minimumSectionSize()
            continue
        content = max(header.sectionSizeHint(c), table.sizeHintForColumn(c), header.minimumSectionSize())
        if header.stretchLastSection() and c == shown[-1]:
            content = max(content, header.defaultSectionSize())  # Qt's floor for a stretched last section
        need += content
    vertical = table.verticalHeader()
    if not vertical.isHidden():
        need += max(vertical.width(), vertical.sizeHint().width())
    # + 2 px: the grid line and rounding Qt adds when it shares out stretching sections
    return need + table.verticalScrollBar().sizeHint().width() + 2 * table.frameWidth() + 2


def rows_height(table: QTableView) -> int:
    """px: every row shown, with the header, the horizontal scroll bar when shown and the frame: the
    height at which ``table`` needs no vertical scroll bar."""
    rows = sum(table.rowHeight(r) for r in range(table.model().rowCount()) if not table.isRowHidden(r))
    header = table.horizontalHeader()
    head = 0 if header.isHidden() else max(header.height(), header.sizeHint().height())
    bar = table.horizontalScrollBar()
    below = bar.sizeHint().height() if bar.isVisible() else 0
    return rows + head + below + 2 * table.frameWidth()


def keep_columns_whole(
    table: QTableView, *, stretch_content: bool = True, at_most: int | None = None
) -> None:
    """Hold ``table``'s minimum width at :func:`columns_width` as its contents change, but not above
    ``at_most`` px (a grid with a column per token: past that, a long prompt scrolls the table)."""
    timer = QTimer(table)
    timer.setSingleShot(True)
    timer.setInterval(0)

    def update() -> None:
        need = columns_width(table, stretch_content=stretch_content)
        table.setMinimumWidth(need if at_most is None else min(need, at_most))

    timer.timeout.connect(update)
    model = table.model()
    for signal in (model.modelReset, model.rowsInserted, model.columnsInserted, model.dataChanged):
        signal.connect(timer.start)
    model.headerDataChanged.connect(timer.start)
    timer.start()


#: characters: a header longer than this is broken onto more lines (at spaces)
HEADER_LINE = 16


def set_header_labels(table: QTableWidget, labels: Sequence[str], *, width: int = HEADER_LINE) -> None:
    """``table``'s column headers, each longer than ``width`` characters broken at spaces onto more
    lines (so a narrow column shows its header whole, not elided to "…"); each keeps its one-line
    text as its tooltip."""
    table.setHorizontalHeaderLabels(
        [text if "\n" in text else textwrap.fill(text, width, break_long_words=False) for text in labels]
    )
    for c, text in enumerate(labels):
        item = table.horizontalHeaderItem(c)
        if item is not None:
            item.setToolTip(text.replace("\n", " "))
