"""While the Patching page's numbers are pending, nothing on it is redrawn or laid out again (on
SmolLM2 the GUI thread once used as much CPU as the patching itself, re-laying out axes and labels);
when they arrive each plot is drawn once."""

from __future__ import annotations

import threading

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication

from app.widgets.matrix_plot import MatrixPlot

TIMEOUT = 30_000


class _LayoutCounter(QObject):
    """Counts the layout requests and resizes of the widgets under one page."""

    def __init__(self):
        super().__init__()
        self.events = 0

    def eventFilter(self, obj, event):
        if event.type() in (QEvent.Type.LayoutRequest, QEvent.Type.Resize):
            self.events += 1
        return False


def test_nothing_on_the_patching_page_changes_while_its_numbers_are_pending(
    qtbot, attention_tab, monkeypatch
):
    from model.interp import causal

    tab = attention_tab
    entered, release = threading.Event(), threading.Event()
    real = causal.patching_of

    def held(*args, **kwargs):  # the patching job waits in its worker until the test lets it go
        entered.set()
        release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(causal, "patching_of", held)
    drawn = []
    real_set = MatrixPlot.set_matrix
    monkeypatch.setattr(
        MatrixPlot, "set_matrix", lambda self, *a, **k: (drawn.append(self), real_set(self, *a, **k))[1]
    )
    page = tab.show_page("patching")
    qtbot.waitUntil(entered.is_set, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: "Measuring" in page.summary.text(), timeout=TIMEOUT)
    for _ in range(3):  # everything the request itself caused is laid out now
        QApplication.processEvents()

    counter = _LayoutCounter()
    widgets = [page, *page.findChildren(QObject)]
    for w in widgets:
        w.installEventFilter(counter)
    before = len(drawn)
    for _ in range(20):  # the event loop keeps running while the job is pending
        QApplication.processEvents()
    assert counter.events == 0 and len(drawn) == before  # nothing relaid out or redrawn meanwhile
    for w in widgets:
        w.removeEventFilter(counter)

    with qtbot.waitSignal(
        tab.causalReady, timeout=TIMEOUT, check_params_cb=lambda kind, _r: kind == "patching"
    ):
        release.set()
    qtbot.waitUntil(lambda: not page.stale and page.result is not None, timeout=TIMEOUT)
    mine = [p for p in drawn[before:] if p in (page.heads_plot, page.resid_plot)]
    assert sorted(map(id, mine)) == sorted(map(id, (page.heads_plot, page.resid_plot)))  # each once
