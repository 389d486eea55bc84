"""The scroll area a tab lives in (app.shell.tab_host.TabScroll): it scrolls only while the tab's
minimum is more than the window gives it, and stops as soon as it no longer is."""

from __future__ import annotations

from PySide6.QtWidgets import QWidget


def test_the_sideways_scroll_bar_goes_when_the_tab_shrinks_back(qtbot):
    from app.shell.tab_host import TabScroll

    tab = QWidget()
    scroll = TabScroll(tab)
    qtbot.addWidget(scroll)
    scroll.resize(600, 400)
    scroll.show()
    qtbot.waitExposed(scroll)
    bar = scroll.horizontalScrollBar()
    tab.setMinimumWidth(700)  # a wide page in front (issue 53: the Heads page of a 30-layer model)
    qtbot.waitUntil(lambda: tab.width() == 700 and bar.maximum() > 0, timeout=5000)
    tab.setMinimumWidth(100)  # a narrow page in front: the tab fits again
    qtbot.waitUntil(lambda: tab.width() == scroll.viewport().width(), timeout=5000)
    qtbot.waitUntil(lambda: bar.maximum() == 0 and not bar.isVisible(), timeout=5000)
