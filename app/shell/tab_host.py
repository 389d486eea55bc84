"""Where a tab lives in the window: built from its registry entry (or a :class:`TabError` saying why
it could not be), inside a holder that shows "Loading…" until a lazy tab exists, and a scroll area
that scrolls a tab only when the window is smaller than the tab's minimum size."""

from __future__ import annotations

import importlib
import traceback

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from app.views.tab import TabBase


def load_tab(title: str, spec: str, session) -> TabBase:
    """Build the tab ``spec`` ("module:Class", a :class:`~app.views.tab.TabBase`), or a
    :class:`TabError` that says what went wrong."""
    module_name, _, class_name = spec.partition(":")
    try:
        tab = getattr(importlib.import_module(module_name), class_name)(session)
    except Exception as exc:
        traceback.print_exc()
        return TabError(title, f"{type(exc).__name__}: {exc}")
    if not isinstance(tab, TabBase):
        return TabError(title, f"{spec} is not a tab (it does not derive from TabBase)")
    return tab


class TabError(TabBase):
    """Stands in for a tab that could not be built, and says why (selectable, so it can be reported)."""

    def __init__(self, title: str, error: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = title
        layout = QVBoxLayout(self)
        layout.setContentsMargins(40, 40, 40, 40)
        escaped = error.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        self.message = QLabel(
            f"<h2>{title}</h2><p>This tab could not be loaded:</p><p><tt>{escaped}</tt></p>"
        )
        self.message.setWordWrap(True)
        self.message.setMaximumWidth(720)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addStretch(1)
        layout.addWidget(self.message, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addStretch(2)


class TabScroll(QScrollArea):
    """Shows a tab at the page's size, scrolling only when the page is smaller than its minimum.

    (``QScrollArea.setWidgetResizable`` would size a tab holding word-wrapped labels to its
    height-for-width, i.e. its preferred height, and scroll a tab that fits.)
    """

    def __init__(self, tab: QWidget):
        super().__init__()
        self.setFrameShape(QScrollArea.Shape.NoFrame)
        self.setWidgetResizable(False)
        self.setWidget(tab)
        tab.installEventFilter(self)

    def _fit(self) -> None:
        tab = self.widget()
        if tab is None:
            return
        minimum = tab.minimumSizeHint().expandedTo(tab.minimumSize())
        available = self.contentsRect().size()
        size = available.expandedTo(minimum)
        # a scroll bar in one direction takes room from the other
        if size.width() > available.width():
            available.setHeight(available.height() - self.horizontalScrollBar().sizeHint().height())
        if size.height() > available.height():
            available.setWidth(available.width() - self.verticalScrollBar().sizeHint().width())
        size = available.expandedTo(minimum)
        if tab.size() != size:
            tab.resize(size)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    def eventFilter(self, obj, event) -> bool:
        if obj is self.widget() and event.type() == QEvent.Type.LayoutRequest:
            QTimer.singleShot(0, self, self._fit)  # not after the scroll area is gone
        # QScrollArea's own filter sets the scroll bars' ranges when the tab is resized: without it a
        # tab that shrank back into the window kept the scroll bar of its wider page
        return super().eventFilter(obj, event)


class TabHolder(TabBase):
    """The page a tab lives in: "Loading…" until a lazy tab is built, then the tab. Until then it
    stands in the window's ``tabs`` for the tab, which has nothing yet to save, export or show.

    The tab sits in a :class:`TabScroll`, so one wide tab's minimum size cannot force the whole
    window wider than the screen: below its minimum the tab scrolls instead.
    """

    def __init__(self, tab_id: str, title: str):
        super().__init__()
        self.tab_id = tab_id
        self.title = title
        self.tab: TabBase | None = None
        self._layout = QVBoxLayout(self)
        self._layout.setContentsMargins(0, 0, 0, 0)
        self._loading = QLabel(f"Loading the {title} tab…")
        self._loading.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self._layout.addWidget(self._loading)

    def set_tab(self, tab: TabBase) -> None:
        self._layout.removeWidget(self._loading)
        self._loading.deleteLater()
        self.scroll_area = TabScroll(tab)
        self.scroll_area.setObjectName(f"tabScroll_{self.tab_id}")
        self._layout.addWidget(self.scroll_area)
        self.tab = tab


__all__ = ["TabError", "TabHolder", "TabScroll", "load_tab"]
