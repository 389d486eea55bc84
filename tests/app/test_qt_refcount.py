"""Regression test for the PySide6 6.12.0 bug that corrupts the refcount of ``True`` on every emit.

Under Python 3.11, PySide6-Essentials 6.12.0 decrements ``True``'s reference count on each
``Signal.emit()``; a few thousand emits (pyqtgraph's ``setImage`` emits on every call, 30 times a
second for each head) free ``True`` and abort the interpreter. pyproject.toml excludes that version;
this test catches it, or any future release with the same fault, before a user's app crashes.
"""

from __future__ import annotations

import sys

import numpy as np
from PySide6.QtCore import QObject, Signal

N_EMITS = 5000


class _Emitter(QObject):
    flag = Signal(bool)
    anything = Signal(object)
    plain = Signal()


def test_emitting_thousands_of_signals_leaves_the_refcount_of_true_alone(qtbot):
    em = _Emitter()
    seen = []
    em.flag.connect(lambda v: seen.append(v))
    em.anything.connect(lambda v: None)
    em.plain.connect(lambda: None)
    before = sys.getrefcount(True)
    for _ in range(N_EMITS):
        em.flag.emit(True)
        em.anything.emit(True)
        em.plain.emit()
    after = sys.getrefcount(True) - len(seen)  # the list holds one reference per True received
    seen.clear()
    assert abs(after - before) < 50, f"refcount of True moved by {after - before} over {3 * N_EMITS} emits"


def test_pyqtgraph_setimage_in_a_loop_keeps_true_alive(qtbot):
    import pyqtgraph as pg

    img = pg.ImageItem(axisOrder="row-major")
    data = np.random.default_rng(0).random((16, 16), dtype=np.float32)
    before = sys.getrefcount(True)
    for _ in range(2000):
        img.setImage(data, levels=(0.0, 1.0), autoLevels=False)
    assert abs(sys.getrefcount(True) - before) < 50
