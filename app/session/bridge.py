"""The one way background work reaches the GUI thread: :func:`to_gui`.

A worker thread never touches a widget nor a part of the session. What it has for them (a result or an
error, a job that began, a loop's state, a generated token, a trainer built, a checkpoint written) it
hands over as a call: ``to_gui(callback, *args)`` runs ``callback(*args)`` in the GUI thread when its
event loop next turns, the calls in the order they were made (called in the GUI thread itself, it runs
at once, as a Qt signal's automatic connection does). The callback is plain Python: a Qt-free
:class:`~app.core.state.Signal`'s ``emit``, a method of a Qt-free part. The compute worker
(:class:`~app.session.compute.ComputeWorker`), the loops (:class:`~app.session.workers.LoopWorker`: the
training, generation, following, download and scan workers) and the runs they serve
(:mod:`app.session.training_run`, :mod:`app.session.follow`) cross threads here and nowhere else; the
high-rate results (training events, probe frames) wait in a :class:`~app.session.workers.Mailbox` that
the GUI drains instead.

One :class:`GuiBridge`, a QObject of the GUI thread that lives as long as the process, carries every
call: a signal connected to its own slot, which Qt queues into the thread the bridge lives in when it is
emitted from another one. Never deleted, it never drops a call that is on its way. Made before a
``QApplication`` exists it works as well, but nothing crosses until an event loop runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QCoreApplication, QObject, Signal


class GuiBridge(QObject):
    """Carries ``callback(*args)`` from any thread into the thread the bridge lives in (the GUI's).

    Use the process's one bridge, :func:`gui_bridge` (or :func:`to_gui`); ``post`` queues a call."""

    _call = Signal(object, object)  # callback, args

    def __init__(self) -> None:
        super().__init__()
        self._call.connect(self._deliver)  # a slot of this QObject: queued when emitted from another thread

    def post(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run ``callback(*args)`` in the bridge's thread: queued from another thread, at once in it."""
        self._call.emit(callback, args)

    def _deliver(self, callback: Callable[..., Any], args: tuple) -> None:
        callback(*args)


_bridge: GuiBridge | None = None
_made = threading.Lock()


def gui_bridge() -> GuiBridge:
    """The process's one :class:`GuiBridge`, made at the first call and kept to the end.

    It lives in the application's thread (the GUI's); before a ``QApplication`` exists, in the thread that
    asked first, which must then be the main one: the owners of worker threads ask for it when they are
    made (:class:`~app.session.compute.ComputeWorker`, :class:`~app.session.workers.LoopWorker`), so a
    worker thread never is the first to ask."""
    global _bridge
    with _made:
        if _bridge is None:
            app = QCoreApplication.instance()
            if app is None and threading.current_thread() is not threading.main_thread():
                raise RuntimeError("the GUI bridge is made in the main thread first (no QApplication yet)")
            bridge = GuiBridge()
            if app is not None:
                bridge.moveToThread(app.thread())  # made in another thread: it lives in the GUI's
            _bridge = bridge
        return _bridge


def to_gui(callback: Callable[..., Any], *args: Any) -> None:
    """Run ``callback(*args)`` in the GUI thread (see the module docstring): the one hand-over from a
    worker thread."""
    gui_bridge().post(callback, *args)


__all__ = ["GuiBridge", "gui_bridge", "to_gui"]
