"""Waiting for a condition while the Qt event loop keeps turning: :func:`wait_until`."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QCoreApplication, QEventLoop, QTimer


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0, interval_ms: int = 10) -> bool:
    """Run the Qt event loop until ``predicate()`` holds or ``timeout`` seconds pass.

    For the command line, benchmarks and screenshot hooks (tests use ``qtbot.waitUntil``). Between
    checks the loop sleeps in Qt (a short ``QEventLoop``), so timers and queued signals keep flowing.
    One loop and one timer serve every wait (a fresh ``singleShot`` per wait left a small object
    behind each time: 1 MiB over a soak's minutes).
    """
    app = QCoreApplication.instance()
    if app is None:
        raise RuntimeError("wait_until needs a QApplication: create one first")
    deadline = time.monotonic() + timeout
    loop = QEventLoop()
    pause = QTimer()
    pause.setSingleShot(True)
    pause.setInterval(interval_ms)
    pause.timeout.connect(loop.quit)
    while True:
        app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 50)
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        pause.start()
        loop.exec()


__all__ = ["wait_until"]
