"""Stacks of pages that ask for the room of the page in front only.

Qt sizes a ``QStackedWidget`` or a ``QTabWidget`` to the largest minimum of all its pages, shown or
not: once a wide page has been built, every other page of the tab is held at that width and the tab
scrolls sideways on a small screen. These report the current page's minimum (and size hint)
instead, and ask their parent to lay out again when the page changes.

:class:`WrappingPageTabs` is the one for a tab of many pages (the Attention tab's dozen): its row of
page tabs wraps onto a second row where a ``QTabBar`` would elide names and hide pages behind arrows.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QRect, QSize, Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QSizePolicy,
    QStackedWidget,
    QStyle,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.widgets.layouts import FlowLayout


def _minimum(page: QWidget) -> QSize:
    return page.minimumSizeHint().expandedTo(page.minimumSize())


class CurrentPageStack(QStackedWidget):
    """A ``QStackedWidget`` whose minimum and preferred size are its current page's."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.currentChanged.connect(lambda _i: self.updateGeometry())

    def minimumSizeHint(self) -> QSize:
        page = self.currentWidget()
        return super().minimumSizeHint() if page is None else _minimum(page)

    def sizeHint(self) -> QSize:
        page = self.currentWidget()
        return super().sizeHint() if page is None else page.sizeHint().expandedTo(_minimum(page))


class CurrentPageTabs(QTabWidget):
    """A ``QTabWidget`` whose minimum size is its tab bar above its current page's minimum."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.currentChanged.connect(lambda _i: self.updateGeometry())

    def _around(self, inner: QSize) -> QSize:
        frame = (
            0
            if self.documentMode()
            else 2 * self.style().pixelMetric(QStyle.PixelMetric.PM_DefaultFrameWidth)
        )
        bar = self.tabBar().minimumSizeHint() if self.tabBar().isVisible() else QSize(0, 0)
        return QSize(max(bar.width(), inner.width() + frame), bar.height() + inner.height() + frame)

    def minimumSizeHint(self) -> QSize:
        page = self.currentWidget()
        return super().minimumSizeHint() if page is None else self._around(_minimum(page))


class PageTabRow(QWidget):
    """The tabs of a :class:`WrappingPageTabs`: one checkable button per page, laid out like words in
    a line (:class:`~app.widgets.layouts.FlowLayout`), wrapping onto a second row rather than eliding
    a name or hiding pages behind scroll arrows. ``clicked(index)`` when a tab is chosen.

    Keyboard: one tab stop (the current page's tab); ←/→ (↑/↓) move to the previous/next page shown,
    Home/End to the first/last, as in a ``QTabBar``.
    """

    clicked = Signal(int)

    STYLE = (
        "QToolButton { border: 1px solid transparent; border-radius: 3px; padding: 3px 8px; }"
        "QToolButton:hover { background: palette(midlight); }"
        "QToolButton:checked { background: palette(base); border: 1px solid palette(mid);"
        " border-bottom: 2px solid palette(highlight); }"
        "QToolButton:focus { border: 1px dotted palette(highlight); }"
    )

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.flow = FlowLayout(self, spacing=2)
        self.buttons: list[QToolButton] = []
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self.setStyleSheet(self.STYLE)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

    def add(self, text: str) -> int:
        button = QToolButton()
        button.setText(text)
        button.setCheckable(True)
        button.setAutoRaise(True)
        button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        button.installEventFilter(self)
        index = len(self.buttons)
        self.group.addButton(button, index)
        button.clicked.connect(lambda _=False, i=index: self.clicked.emit(i))
        self.buttons.append(button)
        self.flow.addWidget(button)
        return index

    def set_current(self, index: int) -> None:
        """Check tab ``index`` and make it the row's one tab stop (-1: none)."""
        had_focus = any(b.hasFocus() for b in self.buttons)
        for i, b in enumerate(self.buttons):
            b.setChecked(i == index)
            b.setFocusPolicy(Qt.FocusPolicy.TabFocus if i == index else Qt.FocusPolicy.NoFocus)
        if had_focus and 0 <= index < len(self.buttons):
            self.buttons[index].setFocus(Qt.FocusReason.TabFocusReason)

    def tabRect(self, index: int) -> QRect:
        """Tab ``index``'s rectangle in the row (an empty one while hidden)."""
        b = self.buttons[index]
        return QRect() if b.isHidden() else b.geometry()

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self.flow.heightForWidth(width)

    def minimumSizeHint(self) -> QSize:
        """As narrow as its widest tab; as tall as the rows its present width wraps onto."""
        least = self.flow.minimumSize()
        return QSize(least.width(), self.flow.heightForWidth(max(self.width(), least.width())))

    def sizeHint(self) -> QSize:
        return QSize(self.flow.sizeHint().width(), self.minimumSizeHint().height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self.flow.heightForWidth(self.width()) != self.height():
            self.updateGeometry()  # more or fewer rows: ask for their height

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.KeyPress and obj in self.buttons:
            step = {
                Qt.Key.Key_Left: -1,
                Qt.Key.Key_Up: -1,
                Qt.Key.Key_Right: 1,
                Qt.Key.Key_Down: 1,
                Qt.Key.Key_Home: -len(self.buttons),
                Qt.Key.Key_End: len(self.buttons),
            }.get(Qt.Key(event.key()))
            if step is not None:
                target = self._shown_from(self.buttons.index(obj), step)
                if target is not None:
                    self.clicked.emit(target)
                return True
        return False

    def _shown_from(self, index: int, step: int) -> int | None:
        """The shown tab ``step`` tabs from ``index`` (clamped to the first and last shown)."""
        shown = [i for i, b in enumerate(self.buttons) if not b.isHidden()]
        if not shown:
            return None
        at = shown.index(index) if index in shown else 0
        return shown[max(0, min(len(shown) - 1, at + step))]


class WrappingPageTabs(QWidget):
    """Pages under a :class:`PageTabRow` that wraps onto more rows: every page's name whole and in
    sight at every window width, where a ``QTabBar`` elides names and hides pages behind arrows.

    It answers the part of ``QTabWidget``'s interface the tabs use (``addTab``, ``count``,
    ``tabText``, ``setTabToolTip``, ``setTabVisible``/``isTabVisible``, ``indexOf``, ``widget``,
    ``currentIndex``/``setCurrentIndex``, ``currentWidget``/``setCurrentWidget``, ``currentChanged``,
    ``tabBar``), and Ctrl+Tab / Ctrl+Shift+Tab and Ctrl+PgDown / Ctrl+PgUp move to the next or
    previous page shown. Its minimum size is the row above the current page's minimum
    (:class:`CurrentPageStack`).
    """

    currentChanged = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.row = PageTabRow()
        self.stack = CurrentPageStack()
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        lay.addWidget(self.row)
        lay.addWidget(self.stack, 1)
        self.row.clicked.connect(self.setCurrentIndex)
        self.stack.currentChanged.connect(self._on_current)

    def addTab(self, page: QWidget, title: str) -> int:
        index = self.row.add(title)
        self.stack.addWidget(page)
        if index == 0:
            self._on_current(0)
        return index

    def count(self) -> int:
        return self.stack.count()

    def tabBar(self) -> PageTabRow:
        return self.row

    def tabText(self, index: int) -> str:
        return self.row.buttons[index].text()

    def setTabToolTip(self, index: int, tip: str) -> None:
        self.row.buttons[index].setToolTip(tip)

    def setTabVisible(self, index: int, visible: bool) -> None:
        self.row.buttons[index].setHidden(not visible)
        self.row.updateGeometry()

    def isTabVisible(self, index: int) -> bool:
        return not self.row.buttons[index].isHidden()

    def indexOf(self, page: QWidget) -> int:
        return self.stack.indexOf(page)

    def widget(self, index: int) -> QWidget | None:
        return self.stack.widget(index)

    def currentIndex(self) -> int:
        return self.stack.currentIndex()

    def setCurrentIndex(self, index: int) -> None:
        self.stack.setCurrentIndex(index)

    def currentWidget(self) -> QWidget | None:
        return self.stack.currentWidget()

    def setCurrentWidget(self, page: QWidget) -> None:
        self.stack.setCurrentWidget(page)

    def _on_current(self, index: int) -> None:
        self.row.set_current(index)
        self.updateGeometry()
        self.currentChanged.emit(index)

    def keyPressEvent(self, event) -> None:
        """Ctrl+Tab / Ctrl+PgDown: the next page shown; with Shift / Ctrl+PgUp: the previous one."""
        ctrl = event.modifiers() & Qt.KeyboardModifier.ControlModifier
        key = Qt.Key(event.key())
        step = 0
        if ctrl and key in (Qt.Key.Key_Tab, Qt.Key.Key_PageDown):
            step = 1
        elif ctrl and key in (Qt.Key.Key_Backtab, Qt.Key.Key_PageUp):
            step = -1
        if not step:
            super().keyPressEvent(event)
            return
        shown = [i for i in range(self.count()) if self.isTabVisible(i)]
        if shown:
            at = shown.index(self.currentIndex()) if self.currentIndex() in shown else 0
            self.setCurrentIndex(shown[(at + step) % len(shown)])
        event.accept()
