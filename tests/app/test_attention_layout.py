"""The Attention tab's pages as a new user meets them: the starter model in a 1280×750 window (a
1280×800 laptop, maximised) with the setup docks beside the tab. Every title whole, no text on the
data or under a colour bar, every text readable on what is behind it, matrices of a usable size."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRectF
from PySide6.QtGui import QColor

from app.widgets.palette import contrast_ratio

TIMEOUT = 30_000
PROMPT = "vsqyrnmezgcovsqyrnmezgco"  # the starter's own probe prompt (24 tokens)


@pytest.fixture
def attention_at(window_of_one_tab, qtbot):
    """``open(size=(1280, 750)) -> (window, tab)``: the Attention tab on the starter model, the prompt
    inspected."""

    def open_(size=(1280, 750)):
        win, tab, _ = window_of_one_tab("attention", "app.views.attention.tab:AttentionTab", size)
        assert win.session.open_starter()
        with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
            tab.set_prompt(PROMPT)
        return win, tab

    return open_


def _pipeline(qtbot, tab):
    with qtbot.waitSignal(tab.headDetailReady, timeout=TIMEOUT):
        tab.select_head(1, 3)
        tab.show_page("pipeline")
    page = tab.pages["pipeline"]
    qtbot.waitUntil(lambda: page.view.isVisible() and not page.stale, timeout=TIMEOUT)
    page.arrange(force=True)
    qtbot.waitUntil(lambda: page.titles["pattern"].item.boundingRect().height() > 30, timeout=5000)
    return page


def _image_rect(panel) -> QRectF:
    """The scene rectangle the matrix is painted in (the image, clipped to its view box)."""
    return panel.image.sceneBoundingRect().intersected(panel.vb.sceneBoundingRect())


def _text_rect(label) -> QRectF:
    """The scene rectangle a LabelItem's text takes (its text item, not the box the layout gave it)."""
    return label.item.sceneBoundingRect()


@pytest.mark.parametrize("size", [(1280, 750), (1500, 940)])
def test_pipeline_titles_are_whole_off_the_data_and_beside_no_colour_bar(qtbot, attention_at, size):
    _, tab = attention_at(size)
    page = _pipeline(qtbot, tab)
    view_w = page.view.viewport().width()
    data = {k: _image_rect(p) for k, p in page.plots.items()}
    bars = {k: p.legend.sceneBoundingRect() for k, p in page.plots.items()}
    titles = {k: _text_rect(label) for k, label in page.titles.items()}
    titles["summary"] = _text_rect(page.summary)
    for key, rect in titles.items():
        assert rect.left() >= 0 and rect.right() <= view_w, (key, "title cut at the side")
        box = page.titles.get(key, page.summary).sceneBoundingRect()
        assert rect.height() <= box.height() + 1, (key, "title runs out of its row")
        for other, d in data.items():
            assert not rect.intersects(d), (key, "title over the data of", other)
        for other, b in bars.items():
            assert not rect.intersects(b), (key, "title under the colour bar of", other)
    for key, p in page.plots.items():
        for axis in (p.left_axis, p.top_axis):  # row and column labels beside the matrix, not on it
            assert not axis.sceneBoundingRect().intersects(data[key]), key
        for other, b in bars.items():
            assert not b.intersects(data[key]), (key, "colour bar over", other)


def test_pipeline_matrices_are_a_usable_size_at_1280(qtbot, attention_at):
    _, tab = attention_at()
    page = _pipeline(qtbot, tab)
    keys = ("scores_raw", "scores", "scores_masked", "pattern")

    def smallest() -> float:
        return min(min(_image_rect(page.plots[k]).width(), _image_rect(page.plots[k]).height()) for k in keys)

    # the page re-arranges when its view settles (a scroll bar appearing narrows it): wait for that
    qtbot.waitUntil(lambda: smallest() >= 200, timeout=5000)
    for key in keys:
        rect = _image_rect(page.plots[key])
        assert min(rect.width(), rect.height()) >= 200, (key, rect)  # was about 60 px
        assert abs(rect.width() - rect.height()) <= 2, key  # square cells
    # the page scrolls down through the stages instead of shrinking them
    assert page.scroll_area.verticalScrollBar().maximum() > 0


def test_every_text_of_panel_7_reads_on_what_is_behind_it(qtbot, attention_at):
    _, tab = attention_at()
    page = _pipeline(qtbot, tab)
    label = page.titles["pattern"]
    ink = QColor(label.opts.get("color", "#222"))
    ink = (ink.red(), ink.green(), ink.blue())
    rect = _text_rect(label)
    label.hide()  # what the title is painted on
    behind = page.view.grab().toImage()
    label.show()
    r = page.view.mapFromScene(rect).boundingRect()
    pixels = {
        QColor(behind.pixel(x, y)).getRgb()[:3]
        for x in range(max(0, r.left()), min(behind.width(), r.right()), 2)
        for y in range(max(0, r.top()), min(behind.height(), r.bottom()), 2)
    }
    assert pixels and min(contrast_ratio(ink, p) for p in pixels) >= 4.5
    # the masked weights are grey (the colour of "masked" everywhere), not the colour of 0
    panel = page.plots["pattern"]
    assert panel.hidden is not None and panel.hidden[0, -1] and panel.legend.hidden_text == "masked"


def _metrics(qtbot, tab):
    page = tab.show_page("metrics")
    qtbot.waitUntil(lambda: tab.metrics is not None and page.table.rowCount() > 0, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: page.view.isVisible() and not page.stale, timeout=TIMEOUT)
    return page


def test_metrics_maps_are_one_size_and_every_table_column_is_readable_at_1280(qtbot, attention_at):
    _, tab = attention_at()
    page = _metrics(qtbot, tab)

    def sizes() -> set[tuple[int, int]]:
        return {(round(r.width()), round(r.height())) for r in [_image_rect(p) for p in page.maps.values()]}

    def one_size() -> bool:  # the layout settles a few events after the first draw
        widths = [w for w, _ in sizes()]
        return min(widths) > 20 and max(widths) - min(widths) <= 1

    qtbot.waitUntil(one_size, timeout=5_000)  # one size for every map (fails if they never agree)
    rects = [_image_rect(p) for p in page.maps.values()]
    assert max(r.top() for r in rects) - min(r.top() for r in rects) <= 1  # and on one line
    table, header = page.table, page.table.horizontalHeader()
    fm = header.fontMetrics()
    for c in range(table.columnCount()):
        if table.isColumnHidden(c):  # (the learned sink's share: a model with attn_sinks only)
            continue
        text = table.horizontalHeaderItem(c).text()
        assert header.sectionSize(c) >= fm.horizontalAdvance(text), text  # was: two columns at 1280
    # every column in view at once, without scrolling sideways
    assert header.length() <= table.viewport().width() + 1
    assert table.horizontalScrollBar().maximum() == 0


@pytest.mark.parametrize("size", [(1280, 750), (1024, 718)])
def test_metrics_maps_fill_their_room_and_the_table_shows_every_row(qtbot, attention_at, size):
    """Issue 53: the maps were small with ~100 px empty under them, and the table showed 4 of the
    starter's 8 rows. The maps' view is as tall as their square cells (no empty band), the table as
    tall as its rows, and the page scrolls as a whole where that is more than the window."""
    _, tab = attention_at(size)
    page = _metrics(qtbot, tab)

    def fitted() -> bool:  # each map's cells take its whole plot: its width, and its height too
        page.grab()
        return all(
            abs(_image_rect(p).width() - p.vb.width()) <= 2
            and abs(_image_rect(p).height() - p.vb.height()) <= 2
            for p in page.maps.values()
        )

    qtbot.waitUntil(fitted, timeout=5000)  # was: ~100 px of the plots under the cells empty
    for p in page.maps.values():
        assert _image_rect(p).width() >= 60  # and the cells readable (at 1024 px: two rows of maps)
    table = page.table
    assert table.rowCount() == 8
    qtbot.waitUntil(lambda: table.verticalScrollBar().maximum() == 0, timeout=5000)
    rows = sum(table.rowHeight(r) for r in range(table.rowCount()))
    assert table.viewport().height() >= rows  # every row at once
    # the page scrolls as a whole, the wheel over the maps too (they do not zoom)
    bar = page.scroll_area.verticalScrollBar()
    assert bar.value() == 0 and bar.maximum() > 0
    _wheel_down(page.view.viewport())
    assert bar.value() > 0
    # scrolled to the table, every row is on screen together
    page.scroll_area.ensureWidgetVisible(table, 0, 0)
    shown = page.scroll_area.viewport().rect()
    top = table.viewport().mapTo(page.scroll_area.viewport(), table.viewport().rect().topLeft())
    assert shown.top() <= top.y() and top.y() + rows <= shown.bottom() + 1


def test_token_focus_titles_are_whole_at_1280(qtbot, attention_at):
    from tests.app.layout_probe import text_problems

    _, tab = attention_at()
    page = tab.show_page("focus")
    qtbot.waitUntil(lambda: page.focus is not None and page.view.isVisible(), timeout=TIMEOUT)
    plots = [page.bars_out, page.bars_in, page.heat_out.plot, page.heat_in.plot]

    def inside(p):  # the title's text within its own plot (they were cut: "… per hea")
        return p.sceneBoundingRect().adjusted(-1, -1, 1, 1).contains(p.titleLabel.item.sceneBoundingRect())

    page.grab()
    qtbot.waitUntil(lambda: all(inside(p) for p in plots), timeout=5000)
    for p in plots:
        text = p.titleLabel.item.toPlainText()
        assert text.endswith(("per head", "heads")), text  # the whole text is there
    assert text_problems(page) == []


@pytest.mark.parametrize(
    "key",
    [
        *("heads", "head", "pipeline", "lines", "focus", "aggregates", "metrics", "patching", "circuits"),
        *("next", "ablation", "rollout"),
    ],
)
@pytest.mark.slow
def test_nothing_is_cut_or_overlapping_on_an_attention_page_at_1280(qtbot, attention_at, key):
    from tests.app.layout_probe import text_problems

    win, tab = attention_at()
    page = tab.show_page(key)
    assert tab.wait_ready(timeout=30)
    qtbot.waitUntil(lambda: not page.stale, timeout=TIMEOUT)
    page.grab()  # lays out what is pending
    assert text_problems(page) == []
    # and the tab fits beside the docks: no scrolling sideways
    assert win._holders["attention"].scroll_area.horizontalScrollBar().maximum() == 0


def _wheel_down(viewport) -> None:
    """Turn the wheel one notch down over the middle of ``viewport``."""
    from PySide6.QtCore import QPoint, QPointF, Qt
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    at = QPointF(viewport.rect().center())
    wheel = QWheelEvent(
        at,
        QPointF(viewport.mapToGlobal(at.toPoint())),
        QPoint(),
        QPoint(0, -120),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(viewport, wheel)


def test_the_wheel_over_the_pipeline_scrolls_through_its_stages(qtbot, attention_at):
    _, tab = attention_at()
    page = _pipeline(qtbot, tab)
    bar = page.scroll_area.verticalScrollBar()
    assert bar.value() == 0 and bar.maximum() > 0
    _wheel_down(page.view.viewport())
    assert bar.value() > 0  # over a matrix the wheel went to the view, and nothing moved
