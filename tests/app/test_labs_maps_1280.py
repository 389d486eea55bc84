"""The Labs' maps and plots at a 1280×800 laptop's size (1280×750 maximised), beside the setup docks:
every score map is drawn square-ish and at least 250 px a side, with its key ticks, and the
gradient-flow plots fit the page's view (issue 53: a map of 80–95 px without ticks, a plot taller
than the view)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtWidgets import QScrollArea

from tests.app.layout_probe import axis_texts

SIZE = (1280, 750)
#: px: the least side of a map a person reads at this size
MAP_MIN = 250


def _tiny_model(win):
    from model.config import GPTConfig

    s = win.session
    s.set_device("cpu")
    s.set_source("task:copy")
    s.set_config(GPTConfig(context_length=32, n_layers=2, d_model=32, n_heads=2))
    s.build_model(seed=0)


def _drawn(matrix_plot):
    """(width, height) in px of the matrix as drawn: its image, clipped to the plot's view box."""
    panel = matrix_plot.panel
    image = panel.image.mapRectToScene(panel.image.boundingRect())
    box = panel.vb.mapRectToScene(panel.vb.boundingRect())
    shown = image.intersected(box)
    return shown.width(), shown.height()


def _open(qtbot, window_of_one_tab, slug, model: bool):
    win, tab, _ = window_of_one_tab("labs", "app.views.labs.tab:LabsTab", SIZE)
    if model:
        _tiny_model(win)
    page = tab.show_page(slug)
    page.refresh()
    qtbot.waitUntil(lambda: page.idle and page.isVisible(), timeout=60_000)
    return page


@pytest.mark.parametrize(
    ("slug", "maps", "model"),
    [
        ("positions-rope", ("scores_view",), False),
        ("mask-stages", ("scores_view", "mask_view", "weights_view"), True),
    ],
)
def test_a_labs_map_is_square_ish_and_readable_at_1280(qtbot, window_of_one_tab, slug, maps, model):
    page = _open(qtbot, window_of_one_tab, slug, model)
    for name in maps:
        view = getattr(page, name)

        def readable(view=view):
            page.grab()  # lays out what is pending
            w, h = _drawn(view)
            return min(w, h) >= MAP_MIN and max(w, h) <= 1.5 * min(w, h)

        qtbot.waitUntil(readable, timeout=5000)
        assert [t for t, _ in axis_texts(view.panel.top_axis)], name  # the keys are named


def test_the_gradient_flow_plots_fit_the_view_at_1280(qtbot, window_of_one_tab):
    """The page opens with both gradient plots whole in its view (their bottom above the view's), at
    their readable minimum or more; the training comparison under them is a scroll away."""
    page = _open(qtbot, window_of_one_tab, "residual-gradflow", False)
    area = page.findChild(QScrollArea)
    content = area.widget()

    def bottom(plot) -> int:
        return plot.mapTo(content, QPoint(0, plot.height())).y()

    def fits() -> bool:
        page.grab()  # lays out what is pending
        view = area.viewport().height()
        return all(bottom(p) <= view and p.height() >= 170 for p in (page.init_plot, page.train_plot))

    qtbot.waitUntil(fits, timeout=5000)
    assert area.verticalScrollBar().value() == 0
    for plot in (page.panel.loss_plot, page.panel.probe_plot):  # a scroll away, each whole in a view
        assert plot.height() <= area.viewport().height()
