"""What a person sees cut off in a window, found from widget geometry (tests' helper).

:func:`fit_problems` looks at every visible widget of a window and reports, one line each:

- a horizontal scroll bar that can scroll (the page is wider than the room it has);
- a widget that extends past its parent (outside a scroll area's viewport, where that is scrolling);
- a button or check box narrower than its text needs, or not wholly inside what shows it (the window,
  or the viewport of the scroll area it lies in);
- a drop-down narrower than its minimum (its arrow or its text cut);
- a one-line label whose text is wider than the label (cut at its edge; an eliding label is fine);
- a table column narrower than its header's text (the header cut or elided), or than a word of a
  cell in view (Qt elides a word it cannot wrap: "0.401" shown as "0.4…").
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QComboBox,
    QHeaderView,
    QLabel,
    QMainWindow,
    QScrollBar,
    QStyle,
    QTabBar,
    QTableView,
    QWidget,
)

SLACK = 1  # px: rounding


def _name(w: QWidget) -> str:
    text = ""
    if isinstance(w, QAbstractButton):
        text = w.text()
    elif isinstance(w, QComboBox):
        text = w.currentText()
    label = f"{type(w).__name__}"
    if w.objectName():
        label += f"#{w.objectName()}"
    if text:
        label += f" {text[:30]!r}"
    return label


def _where(w: QWidget, top: QWidget) -> str:
    """The widget's chain of named ancestors, for a message a person can find."""
    parts = []
    p = w.parentWidget()
    while p is not None and p is not top:
        if p.objectName() and not p.objectName().startswith("qt_"):
            parts.append(p.objectName())
        p = p.parentWidget()
    return "/".join(reversed(parts[:3]))


def _in_scroll_viewport(w: QWidget) -> QAbstractScrollArea | None:
    """The scroll area whose viewport ``w`` lies in (its content may be bigger than the viewport)."""
    p = w.parentWidget()
    while p is not None:
        area = p.parentWidget()
        if isinstance(area, QAbstractScrollArea) and area.viewport() is p:
            return area
        p = p.parentWidget()
    return None


def _shown(w: QWidget) -> bool:
    return w.isVisible() and w.width() > 0 and w.height() > 0


def _put_away(w: QWidget, window: QMainWindow) -> bool:
    """Whether ``w`` lies in something Qt put away outside the window rather than hide it (a tabbed
    dock not in front, a dock tab bar no longer used)."""
    frame = QRect(QPoint(0, 0), window.size())
    while w is not None and w is not window:
        if w.parentWidget() is window and not frame.intersects(w.geometry()):
            return True
        w = w.parentWidget()
    return False


def _past_parent(w: QWidget) -> str | None:
    parent = w.parentWidget()
    if parent is None or isinstance(parent, QTabBar):
        return None
    if isinstance(parent.parentWidget(), QAbstractScrollArea):  # a viewport's content: it scrolls
        return None
    g, room = w.geometry(), parent.rect()
    if room.adjusted(-SLACK, -SLACK, SLACK, SLACK).contains(g):
        return None
    over = max(g.right() - room.right(), g.bottom() - room.bottom(), -g.left(), -g.top())
    return f"extends {over} px past its parent"


def _cut_text(w: QWidget) -> str | None:
    if isinstance(w, QAbstractButton) and w.text() and w.width() + SLACK < w.sizeHint().width():
        return f"is {w.width()} px wide, its text needs {w.sizeHint().width()}"
    if isinstance(w, QComboBox) and w.width() + SLACK < w.minimumSizeHint().width():
        return f"is {w.width()} px wide, below its minimum {w.minimumSizeHint().width()}"
    if isinstance(w, QLabel) and w.wordWrap() and w.text().strip():
        need = w.heightForWidth(w.width())  # the lines it wraps onto at its width
        if need > 0 and w.height() + SLACK < need:
            return f"shows {w.height()} px of its {need} px of wrapped text {w.text()[:40]!r}"
    if isinstance(w, QLabel) and not w.wordWrap() and w.textFormat() != Qt.TextFormat.RichText:
        text = w.text()
        if text and "<" not in text and not w.property("elides"):
            m = w.contentsMargins()
            need = max(w.fontMetrics().horizontalAdvance(line) for line in text.splitlines() or [""])
            room = w.width() - m.left() - m.right()
            if room + SLACK < need:
                return f"cuts its text {text[:40]!r} ({room} px for {need})"
    return None


def _cut_headers(table: QTableView) -> list[str]:
    """Columns narrower than their header's text (its widest line, the style's margins on both
    sides, and the sort arrow on the column it marks): Qt elides such a header."""
    header = table.horizontalHeader()
    model = table.model()
    if not header.isVisible() or model is None:
        return []
    margin = header.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMargin, None, header)
    arrow = header.style().pixelMetric(QStyle.PixelMetric.PM_HeaderMarkSize, None, header)
    metrics = header.fontMetrics()
    out = []
    for c in range(header.count()):
        text = model.headerData(c, Qt.Orientation.Horizontal)
        if header.isSectionHidden(c) or not isinstance(text, str) or not text:
            continue
        if header.sectionResizeMode(c) == QHeaderView.ResizeMode.ResizeToContents:
            continue  # Qt sizes it to its header and cells itself
        need = max(metrics.horizontalAdvance(line) for line in text.splitlines()) + 2 * margin
        if header.isSortIndicatorShown() and header.sortIndicatorSection() == c:
            need += arrow + margin
        if header.sectionSize(c) + SLACK < need:
            first = text.splitlines()[0][:30]
            out.append(f"column {first!r} is {header.sectionSize(c)} px, its header needs {need}")
    return out


def _cut_cells(table: QTableView) -> list[str]:
    """Columns narrower than a word of a cell in view (its font, the item margins on both sides): a
    word cannot wrap, so Qt elides it. One line per column, naming its widest such cell."""
    model = table.model()
    if model is None or model.rowCount() == 0:
        return []
    margin = table.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, table) + 1
    first = max(0, table.rowAt(0))
    last = table.rowAt(table.viewport().height() - 1)
    last = model.rowCount() - 1 if last < 0 else last
    out = []
    for c in range(model.columnCount()):
        if table.isColumnHidden(c):
            continue
        room = table.columnWidth(c) - 2 * margin
        worst: tuple[int, str] = (0, "")
        for r in range(first, min(last, first + 200) + 1):
            index = model.index(r, c)
            text = index.data(Qt.ItemDataRole.DisplayRole)
            if not isinstance(text, str) or not text.strip():
                continue
            font = index.data(Qt.ItemDataRole.FontRole)
            metrics = QFontMetrics(font) if isinstance(font, QFont) else table.fontMetrics()
            words = text.split() if table.wordWrap() else [text]
            need = max(metrics.horizontalAdvance(word) for word in words)
            if need > room + SLACK and need > worst[0]:
                worst = (need, text)
        if worst[0]:
            out.append(f"column {c} is {room} px inside, its cell {worst[1][:30]!r} needs {worst[0]}")
    return out


def _out_of_sight(w: QWidget, window: QWidget) -> str | None:
    """A control not wholly inside what shows it: the window, or its scroll area's viewport (a
    vertical scroller may hold it below the fold; sideways it must show)."""
    if not isinstance(w, QAbstractButton | QComboBox):
        return None
    area = _in_scroll_viewport(w)
    holder = area.viewport() if area is not None else window
    box = QRect(w.mapTo(holder, QPoint(0, 0)), w.size())
    room = holder.rect().adjusted(-SLACK, -SLACK, SLACK, SLACK)
    if area is not None and area.verticalScrollBar().maximum() > 0:
        room.setTop(-(10**6))
        room.setBottom(10**6)
    return None if room.contains(box) else f"is not wholly visible ({box} outside {room})"


def fit_problems(window: QMainWindow) -> list[str]:
    """One line per problem the module doc lists, for every widget ``window`` shows now."""
    out: list[str] = []
    for w in window.findChildren(QWidget):
        if not _shown(w) or w.isWindow() or _put_away(w, window):
            continue
        where = f"{_name(w)} in {_where(w, window)}"
        if isinstance(w, QAbstractScrollArea):
            bar = w.horizontalScrollBar()
            if bar.isVisible() and bar.maximum() > 0:
                out.append(f"{where} scrolls sideways by {bar.maximum()} px")
            if isinstance(w, QTableView):
                out += [f"{where} {p}" for p in _cut_headers(w) + _cut_cells(w)]
            continue
        if (
            isinstance(w, QScrollBar)
            or w.objectName().startswith("qt_")
            or isinstance(w.parentWidget(), QTabBar)
        ):
            continue
        out += [f"{where} {p}" for p in (_past_parent(w), _cut_text(w), _out_of_sight(w, window)) if p]
    return out
