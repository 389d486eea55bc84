"""``launch()``: the desktop app — QApplication, the window on the default model and corpus, exec.

The window is shown first; the panels that need torch, the default corpus and model, and the tabs
other than Train are built right after the first paint, so the window appears at once.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

# Qt, pyqtgraph, the window and the crash reporter are imported inside the functions, after _T0: the
# seconds launch() reports at the first paint count every import that paint waits for
_T0 = time.perf_counter()

#: How long a thread may hold the GIL before the GUI thread gets a turn (Python's default is 5 ms).
SWITCH_INTERVAL_S = 0.001


def make_app(argv: list[str] | None = None):
    """The QApplication (created once) with the app's names and pyqtgraph's options."""
    from PySide6.QtWidgets import QApplication

    # The GUI thread takes the GIL back from a worker's Python-side work within 1 ms instead of 5 ms
    # (measured: the longest stall while inspecting a 12×12 model fell from ~70 to ~45 ms).
    sys.setswitchinterval(min(sys.getswitchinterval(), SWITCH_INTERVAL_S))
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else None
    if app is None:
        app = QApplication(list(argv) if argv is not None else sys.argv[:1])
    app.setApplicationName("attention-lab")
    app.setApplicationDisplayName("Attention Lab")
    app.setOrganizationName("AttentionLab")
    import pyqtgraph as pg

    pg.setConfigOptions(antialias=False, useOpenGL=False, background="w", foreground="#333")
    from app.session.garbage import collect_garbage_on_gui_thread

    collect_garbage_on_gui_thread(app)
    return app


def create_window(
    *, confirm_close: bool = True, restore: bool = True, init: bool = True, lazy: bool = True, model=None
):
    """A MainWindow on a new Session.

    ``model`` (an :class:`app.commands.window.WindowRequest`): once the starter is shown, the window
    opens that model as File → Open does (one that cannot be read is an error dialog; the starter stays).

    ``lazy``: only the Train tab and the Model panel exist at the first paint; right after it the
    other panels are built, then (``init``) the default corpus and model are loaded, then the other
    tabs are built one per event-loop turn, so the window appears before the trainer, the loaders and
    the data are even imported.
    """
    from PySide6.QtCore import QTimer

    from app.session.session import Session
    from app.shell.window import MainWindow

    named = model is not None and model.path is not None
    session = Session()
    # what Start says from the first paint on, before a data source exists (set before the tabs are built)
    if named:
        session.initialising = f"opening {model.name or Path(model.path).name}"
    elif init:
        session.initialising = "loading the default corpus and model"
    win = MainWindow(session, confirm_close=confirm_close, restore=restore, lazy=lazy)

    def after_first_paint():
        try:
            win._build_late_docks()
            if init and not win.session.open_starter():
                win.session.init_default()
        except Exception as exc:
            traceback.print_exc()
            win.show_error("Could not set up the default model", str(exc))
        win.session.initialising = ""
        if named:
            win.files.open_named(model.path, model.name, stored=model.stored)
        win.build_later()

    win.firstPainted.connect(lambda: QTimer.singleShot(0, after_first_paint))
    from app.session.garbage import settle_garbage

    win.allTabsBuilt.connect(settle_garbage)  # what stands now lives as long as the window
    return win


def _install_excepthook(window):
    """An exception in a slot shows a copyable report and is logged instead of vanishing (app.shell.crash)."""
    from app.shell.crash import install

    window.crash_reporter = install(window)
    return window.crash_reporter


def launch(on_first_paint: Callable[[float], None] | None = None, model=None) -> int:
    """Open the window (on ``model``, an :class:`app.commands.window.WindowRequest`, when one is
    named) and run the event loop; once the window has closed, end the process (:func:`end_process`).
    Returns the exit code only when the loop ended another way.

    ``on_first_paint(seconds)`` is called once the window has painted, with the time since this
    module was imported (the cold-start benchmark uses it).
    """
    app = make_app()
    win = create_window(model=model)
    if on_first_paint is not None:
        win.firstPainted.connect(lambda: on_first_paint(time.perf_counter() - _T0))
    _install_excepthook(win)
    win.show()
    code = int(app.exec())
    if not win.isVisible():  # closed through closeEvent: settings saved, every worker stopped and joined
        end_process(code)
    return code


def end_process(code: int) -> NoReturn:
    """End the process at once after the window closed, doing what Python's exit does that matters.

    As at a normal exit, threads that are not daemons are waited for (``threading._shutdown``, which
    also lets thread pools finish), ``atexit`` handlers run (logging, temporary folders, the compile
    cache) and stdout and stderr are flushed; then ``os._exit``. What is skipped is the interpreter's
    teardown: collecting every object and destroying every widget, plot item and tensor one by one,
    which kept the process busy on the CPU for 1-3 s after the window had gone (longer on a loaded
    machine) with nothing left to save. A daemon thread still in a torch call (an inspection whose
    result nobody will see) ends with the process instead of being waited for.
    """
    try:
        shutdown = getattr(threading, "_shutdown", None)
        if callable(shutdown):
            shutdown()
        else:  # pragma: no cover - every CPython we support has it
            for t in threading.enumerate():
                if t is not threading.current_thread() and not t.daemon:
                    t.join()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a closed stream must not keep the process alive
                stream.flush()
        os._exit(code)
