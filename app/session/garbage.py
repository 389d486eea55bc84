"""Python's garbage collector in a Qt app: cyclic garbage collected on the GUI thread only, and what
stands for good (the window, a model just opened) frozen out of later collections."""

from __future__ import annotations

import gc


def collect_garbage_on_gui_thread(app):
    """Python collects cyclic garbage in whichever thread is allocating when a threshold is crossed:
    the compute or training worker's, as often as not. A Qt object in such a cycle is then destroyed
    off the GUI thread, which Qt forbids (seen here: a QMenu's destructor waiting for the GIL while the
    GUI thread held it and waited for the QMenu's lock, a deadlock). Automatic collection is switched
    off and pyqtgraph's ``GarbageCollector`` collects, by the same thresholds, on a 1 s timer of the
    GUI thread. Once per application; returns the collector (``app.garbage_collector``)."""
    from pyqtgraph.util.garbage_collector import GarbageCollector  # imports Qt: only when asked

    collector = getattr(app, "garbage_collector", None)
    if collector is None:
        collector = app.garbage_collector = GarbageCollector(interval=1.0)
    return collector


def settle_garbage() -> None:
    """Collect, then freeze what is left out of every later collection: once the window stands (the
    imported modules, the window, its tabs) and once a model is opened (its modules, the loaders'
    imports). A full collection of the ~240k objects alive at start took ~130 ms of the GUI thread
    each time, and ~100 ms more after SmolLM2 was opened. Frozen objects are still freed by reference
    counting when they go (a model, its tokenizer and checkpoint hold no reference cycles)."""
    gc.collect()
    gc.freeze()


__all__ = ["collect_garbage_on_gui_thread", "settle_garbage"]
