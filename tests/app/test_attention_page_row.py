"""The Attention tab's row of page tabs at the two small screens people use (1024×768 and 1280×800,
maximised, beside the setup docks): every page's name whole and in sight at a glance, none elided or
behind scroll arrows (issue 53: "Logit attribution" showed as "Log" at 1280 px, four pages were hidden
at 1024 px), and the pages still reached from the keyboard."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtWidgets import QApplication

SIZES = [(1024, 718), (1280, 750)]


@pytest.fixture
def attention(qtbot, window_of_one_tab):
    """(window, tab): the Attention tab on a tiny model (its pages offered), at the first size."""
    from model.config import GPTConfig

    win, tab, _ = window_of_one_tab("attention", "app.views.attention.tab:AttentionTab", SIZES[0])
    s = win.session
    s.set_device("cpu")
    s.set_source("task:copy")
    s.set_config(GPTConfig(context_length=32, n_layers=2, d_model=32, n_heads=4))
    s.build_model(seed=0)
    qtbot.waitUntil(lambda: tab.page_tabs.isVisible(), timeout=5000)
    qtbot.waitUntil(lambda: s.compute.idle and tab.inspection is not None, timeout=30_000)
    return win, tab


def _shown_rect(widget, window) -> QRect:
    """The part of ``widget`` the window shows: clipped by every ancestor (a scroll area's viewport,
    a tab bar's scrolled strip)."""
    rect = QRect(widget.mapTo(window, QPoint(0, 0)), widget.size())
    p = widget.parentWidget()
    while p is not None and p is not window:
        rect = rect.intersected(QRect(p.mapTo(window, QPoint(0, 0)), p.size()))
        p = p.parentWidget()
    return rect.intersected(window.rect())


@pytest.mark.parametrize("size", SIZES)
def test_every_page_name_is_whole_and_in_sight(qtbot, attention, size):
    win, tab = attention
    win.resize(*size)
    qtbot.waitUntil(lambda: (win.width(), win.height()) == size, timeout=5000)
    bar = tab.page_tabs.tabBar()
    offered = [i for i, page in enumerate(tab.pages.values()) if tab.offers(page)]
    assert len(offered) >= 13  # a dense model: every page but Experts

    def whole(i: int) -> bool:
        rect = bar.tabRect(i)  # in the bar; where the bar itself is shown
        if rect.isEmpty():
            return False
        shown = _shown_rect(bar, win)
        at = QRect(bar.mapTo(win, rect.topLeft()), rect.size())
        text = tab.page_tabs.tabText(i)
        return shown.contains(at) and rect.width() >= bar.fontMetrics().horizontalAdvance(text) + 8

    QApplication.processEvents()
    qtbot.waitUntil(lambda: all(whole(i) for i in offered), timeout=5000)
    # no two names on top of each other, and the pages below the row, not under it
    rects = [bar.tabRect(i) for i in offered]
    assert not any(a.intersects(b) for j, a in enumerate(rects) for b in rects[j + 1 :])
    page = tab.current_page
    assert page.mapTo(win, QPoint(0, 0)).y() >= max(bar.mapTo(win, r.bottomLeft()).y() for r in rects)
    # and the tab as a whole still fits beside the docks
    sideways = win._holders["attention"].scroll_area.horizontalScrollBar()
    qtbot.waitUntil(lambda: sideways.maximum() == 0, timeout=5000)


def test_pages_are_chosen_by_click_and_by_keyboard(qtbot, attention):
    _, tab = attention
    tabs = tab.page_tabs
    bar = tabs.tabBar()
    titles = [tabs.tabText(i) for i in range(tabs.count())]
    assert titles[:2] == ["Heads", "Head"] and "Logit attribution" in titles
    experts = list(tab.pages).index("experts")
    assert not tabs.isTabVisible(experts)  # a dense model has no experts page
    # a click on a page's name shows that page
    patching = list(tab.pages).index("patching")
    with qtbot.waitSignal(tabs.currentChanged):
        qtbot.mouseClick(bar.buttons[patching], Qt.MouseButton.LeftButton)
    assert tab.current_page is tab.pages["patching"]
    # the current page's name is the row's one tab stop; arrows move along the row, over hidden pages
    tab.show_page("metrics")
    button = bar.buttons[list(tab.pages).index("metrics")]
    assert button.focusPolicy() == Qt.FocusPolicy.TabFocus
    assert all(b.focusPolicy() == Qt.FocusPolicy.NoFocus for b in bar.buttons if b is not button)
    qtbot.keyClick(button, Qt.Key.Key_Right)
    assert tab.current_page is tab.pages["ablation"]  # Experts, between them, is hidden
    qtbot.keyClick(bar.buttons[list(tab.pages).index("ablation")], Qt.Key.Key_Left)
    assert tab.current_page is tab.pages["metrics"]
    # Ctrl+Tab / Ctrl+PgUp from inside a page, as in a QTabWidget
    qtbot.keyClick(tab.current_page, Qt.Key.Key_Tab, Qt.KeyboardModifier.ControlModifier)
    assert tab.current_page is tab.pages["ablation"]
    qtbot.keyClick(tab.current_page, Qt.Key.Key_PageUp, Qt.KeyboardModifier.ControlModifier)
    assert tab.current_page is tab.pages["metrics"]
