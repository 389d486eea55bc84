"""The window at the three screens people use — 1024×768, 1280×800 and 1920×1080 (maximised: less the
title bar and panel) — shows every tab, every page a tab lists and every setup dock whole: no
horizontal scroll bar, no widget past its parent, every button and drop-down wholly visible with its
text (the probe: tests/app/fit_probe.py), and on every plot in sight no title, axis text or guide
label cut or overlapping another (tests/app/layout_probe.py).

One window walks every page once (each page computes once) and is resized to each size on it, so
the walk stays a fraction of the suite's time.
"""

from __future__ import annotations

import time

import pyqtgraph as pg
import pytest
from PySide6.QtWidgets import QApplication

from tests.app.fit_probe import fit_problems
from tests.app.layout_probe import view_problems

#: (width, height) the window gets on each screen, maximised
SIZES = [(1024, 718), (1280, 750), (1920, 1030)]


def _settle(qtbot, win, size) -> None:
    """Resize to ``size`` and let the layouts (and the docks' deferred fit) run."""
    win.resize(*size)
    qtbot.waitUntil(lambda: win.width() == size[0] and win.height() == size[1], timeout=5000)
    s = win.session
    qtbot.waitUntil(lambda: s._compute is None or s.compute.idle, timeout=60_000)
    end = time.monotonic() + 0.05
    qtbot.waitUntil(lambda: time.monotonic() > end, timeout=5000)  # the queued layout passes
    for _ in range(3):
        QApplication.processEvents()


@pytest.mark.slow
def test_every_tab_page_and_dock_fits_at_each_screen_size(qtbot, app_settings):
    from app.shell.window import MainWindow
    from model.config import GPTConfig

    win = MainWindow(settings=app_settings, confirm_close=False, restore=False)
    qtbot.addWidget(win)
    win.resize(*SIZES[0])
    win.show()
    s = win.session
    s.set_device("cpu")
    s.set_source("task:copy")
    s.set_config(GPTConfig(context_length=32, n_layers=2, d_model=32, n_heads=4))
    s.build_model(seed=0)
    problems: dict[str, list[str]] = {}
    walked = 0

    def check(where: str) -> None:
        nonlocal walked
        for size in SIZES:
            _settle(qtbot, win, size)
            found = fit_problems(win)
            # and on the plots in sight: no title, axis label or guide label cut or overlapping
            # (each drawn first: a guide label takes its place when the view is painted)
            views = [v for v in win.findChildren(pg.GraphicsView) if v.isVisible()]
            for v in views:
                v.grab()
            QApplication.processEvents()  # what the paint scheduled (an axis re-laid after its ticks)
            found += [p for v in views if not v.grab().isNull() for p in view_problems(v)]
            walked += 1
            if found:
                problems[f"{size[0]}×{size[1]} {where}"] = found

    try:
        for key, dock in win.docks.items():
            dock.raise_()
            check(f"dock {key}")
        win.docks["model"].raise_()
        for index, (title, tab) in enumerate(win.tabs.items()):
            win.tab_widget.setCurrentIndex(index)
            pages = tab.screenshot_pages() or [(title, lambda: None)]
            for name, show in pages:
                show()
                check(f"{title} / {name}")
    finally:
        s.shutdown(timeout=30)
    # every tab was walked, with its pages (the Attention and Labs tabs list a dozen each)
    assert walked >= 3 * 40
    assert problems == {}, "\n".join(f"{k}:\n  " + "\n  ".join(v) for k, v in problems.items())
