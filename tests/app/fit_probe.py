"""What a person sees cut off in a window, found from widget geometry (tests' helper).

:func:`fit_problems` looks at every visible widget of a window and reports, one line each:

- a horizontal scroll bar that can scroll (the page is wider than the room it has);
- a widget that extends past its parent (outside a scroll area's viewport, where that is scrolling);
- a button or check box narrower than its text needs, or not wholly inside what shows it (the window,
  or the viewport of the scroll area it lies in);
- a drop-down narrower than its minimum (its arrow or its text cut).
"""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractScrollArea,
    QComboBox,
    QMainWindow,
    QScrollBar,
    QTabBar,
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


def fit_problems(window: QMainWindow) -> list[str]:
    out: list[str] = []
    frame = QRect(QPoint(0, 0), window.size())
    for w in window.findChildren(QWidget):
        if not _shown(w) or w.isWindow() or _put_away(w, window):
            continue
        if isinstance(w, QAbstractScrollArea):
            bar = w.horizontalScrollBar()
            if bar.isVisible() and bar.maximum() > 0:
                out.append(f"{_name(w)} in {_where(w, window)} scrolls sideways by {bar.maximum()} px")
            continue
        if isinstance(w, QScrollBar) or w.objectName().startswith("qt_"):
            continue
        parent = w.parentWidget()
        viewport_child = isinstance(parent, QWidget) and isinstance(parent.parentWidget(), QAbstractScrollArea)
        if parent is not None and not viewport_child and not isinstance(parent, QTabBar):
            g = w.geometry()
            room = parent.rect().adjusted(-SLACK, -SLACK, SLACK, SLACK)
            if not room.contains(g):
                over = max(g.right() - parent.rect().right(), g.bottom() - parent.rect().bottom(), -g.left(), -g.top())
                out.append(f"{_name(w)} in {_where(w, window)} extends {over} px past its parent")
        if isinstance(w, QAbstractButton) and not isinstance(parent, QTabBar) and w.text():
            if w.width() + SLACK < w.sizeHint().width():
                out.append(
                    f"{_name(w)} in {_where(w, window)} is {w.width()} px wide, its text needs {w.sizeHint().width()}"
                )
        if isinstance(w, QAbstractButton | QComboBox) and not isinstance(parent, QTabBar):
            area = _in_scroll_viewport(w)
            holder = area.viewport() if area is not None else window
            box = QRect(w.mapTo(holder, QPoint(0, 0)), w.size())
            room = (holder.rect() if area is not None else frame).adjusted(-SLACK, -SLACK, SLACK, SLACK)
            # inside a vertical scroller a button may lie below the fold; sideways it must show
            if area is not None and area.verticalScrollBar().maximum() > 0:
                room.setTop(-10**6)
                room.setBottom(10**6)
            if not room.contains(box):
                out.append(f"{_name(w)} in {_where(w, window)} is not wholly visible ({box} outside {room})")
        if isinstance(w, QComboBox) and w.width() + SLACK < w.minimumSizeHint().width():
            out.append(
                f"{_name(w)} in {_where(w, window)} is {w.width()} px wide, below its minimum "
                f"{w.minimumSizeHint().width()}"
            )
    return out
