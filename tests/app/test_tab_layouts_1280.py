"""Every tab as a 1280×800 laptop shows it, maximised (1280×750), beside the setup docks: no tick,
title, legend entry or axis title cut at a view's edge or lying on another text, and no tab wider
than the window. (The Attention tab's pages: tests/app/test_attention_layout.py.)"""

from __future__ import annotations

import pytest
from PySide6.QtGui import QFontMetrics

from tests.app.layout_probe import text_problems

SIZE = (1280, 750)


def _tiny_model(win):
    from model.config import GPTConfig

    s = win.session
    s.set_device("cpu")
    s.set_source("task:copy")
    s.set_config(GPTConfig(context_length=32, n_layers=4, d_model=32, n_heads=4))
    s.build_model(seed=0)


#: (page, what was wrong there at 1280×750: the kinds of problem that must be gone)
LABS_PAGES = [
    ("softmax-theory", ("cut",)),  # four small plots: their legends took all their height
    ("softmax-model", ("overlaps tick",)),  # 16 bar names 10 px apart
    ("residual-norms", ("overlaps tick",)),  # the sublayer names on the x axis
    ("residual-gradflow", ("overlaps tick", "overlaps title")),  # log-axis minor ticks, a long y title
    ("positions-sinusoidal", ("cut",)),  # a legend entry wider than its plot
    ("worked-example", ("cut", "overlaps")),  # plots squeezed to a line, the table's vectors cut
]


@pytest.mark.slow
@pytest.mark.parametrize(("slug", "kinds"), LABS_PAGES)
def test_a_labs_page_at_1280_has_nothing_cut_or_overlapping(qtbot, window_of_one_tab, slug, kinds):
    win, tab, scroll = window_of_one_tab("labs", "app.views.labs.tab:LabsTab", SIZE)
    _tiny_model(win)
    page = tab.show_page(slug)
    page.refresh()
    qtbot.waitUntil(lambda: page.idle and page.isVisible(), timeout=60_000)

    def problems():
        page.grab()  # lays out what is pending
        return [p for p in text_problems(page) if any(k in p for k in kinds)]

    qtbot.waitUntil(lambda: not problems(), timeout=5000)  # once laid out, nothing left
    assert scroll.horizontalScrollBar().maximum() == 0
    if slug == "softmax-theory":
        for p in (page.std_plot, page.max_plot, page.ent_plot, page.jac_plot):
            assert p.plot.getViewBox().height() >= 80  # the curves, not a stack of legends
    if slug == "worked-example":
        for p in (page.qk_plot, page.v_plot):  # the plots keep a readable height (the page scrolls)
            assert p.height() >= 200
        table = page.table
        for r in range(table.rowCount()):
            for c in range(table.columnCount()):
                item = table.item(r, c)
                if item is not None and item.text():
                    width = QFontMetrics(item.font()).horizontalAdvance(item.text())
                    assert width <= table.columnWidth(c), (r, c, item.text())  # no "(1.000, …"


def test_compare_fits_at_1280_and_its_difference_grid_keeps_room(qtbot, window_of_one_tab):
    win, tab, scroll = window_of_one_tab("compare", "app.views.compare.tab:CompareTab", SIZE)
    _tiny_model(win)
    assert scroll.horizontalScrollBar().maximum() == 0  # the loss page's hint widened it by 153 px
    tab.add_current_model("A")
    tab.add_current_model("B")
    with qtbot.waitSignal(tab.attentionReady, timeout=60_000):
        tab.run_prompt("abcabcab")
    tab.set_pair("A", "B")
    page = tab.pages["difference"]
    qtbot.waitUntil(lambda: page.diff_grid.isVisible(), timeout=5000)
    page.grab()
    # beside the table the heads had ~130 px (invisible): the table goes under the grid instead
    qtbot.waitUntil(lambda: page.diff_grid.width() >= page.GRID_MIN_WIDTH, timeout=5000)
    assert scroll.horizontalScrollBar().maximum() == 0

    def problems():
        page.grab()
        return text_problems(page)

    qtbot.waitUntil(lambda: not problems(), timeout=5000)


def test_the_generated_text_and_the_chat_transcript_get_room_at_1280(qtbot, window_of_one_tab):
    """At 1280×800 (maximised: 1280×750) the Generate box's output shows at least 6 lines, as text and
    as a chat transcript (it was 3), while the curves and the heads keep their least height."""
    from tests.app.test_chat_gui import _with_template

    win, tab, scroll = window_of_one_tab("train", "app.views.train.tab:TrainTab", SIZE)
    _tiny_model(win)
    box = tab.generate_box
    line = box.output.fontMetrics().lineSpacing()
    top = tab.main_splitter.widget(0)

    def lines() -> float:
        win.grab()  # lays out what is pending
        return box.output.viewport().height() / line

    qtbot.waitUntil(lambda: lines() >= 6, timeout=5000)
    _with_template(win.session)
    box.chat.toggle.setChecked(True)
    assert not box.chat.isHidden()
    qtbot.waitUntil(lambda: lines() >= 6, timeout=5000)
    assert top.height() >= top.minimumSizeHint().height()
    assert scroll.verticalScrollBar().maximum() == 0  # all of it in the window, nothing scrolled away
