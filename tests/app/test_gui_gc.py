"""Cyclic garbage is collected on the GUI thread only (app.session.garbage.collect_garbage_on_gui_thread): a
Qt object in a cycle destroyed in a worker thread deadlocked the window here once."""

import gc
import threading

from app.shell.gui import make_app


class _Cycle:
    """A reference cycle that says in which thread the collector finalised it."""

    def __init__(self, seen: list):
        self.me, self.seen = self, seen

    def __del__(self):
        self.seen.append(threading.current_thread().name)


def test_garbage_made_in_a_worker_is_collected_on_the_gui_thread(qtbot):
    app = make_app()
    assert make_app() is app and app.garbage_collector is app.garbage_collector  # once
    assert not gc.isenabled() and app.garbage_collector.timer.isActive()
    seen: list[str] = []
    kept: list = []

    def worker():
        _Cycle(seen)
        # objects kept alive, far past gen 0's threshold: with automatic collection on, this
        # allocation would run the collector here, in the worker
        kept.append([[i] for i in range(50_000)])

    t = threading.Thread(target=worker, name="a-worker")
    t.start()
    t.join()
    assert seen == []  # not collected in the worker
    qtbot.waitUntil(lambda: bool(seen), timeout=5000)  # the GUI thread's timer collects it
    assert seen == [threading.main_thread().name]
