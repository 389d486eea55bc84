"""Signals without Qt (``app.core.state``) and the Attention tab's state object: no QApplication here."""

from __future__ import annotations

import subprocess
import sys
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from app.core.state import Signal


class Thing:
    changed = Signal()
    moved = Signal()


def test_each_instance_has_its_own_signal_and_slots_run_in_order_with_the_arguments():
    a, b = Thing(), Thing()
    assert a.changed is a.changed and a.changed is not b.changed and a.changed is not a.moved
    got = []
    a.changed.connect(lambda *args: got.append(("first", args)))
    a.changed.connect(lambda *args: got.append(("second", args)))
    b.changed.emit(1)
    assert got == []
    a.changed.emit(1, "x")
    assert got == [("first", (1, "x")), ("second", (1, "x"))]
    assert a.changed.receivers() == 2 and b.changed.receivers() == 0
    assert Thing.changed.receivers() == 0  # the class attribute is only the template


def test_slots_run_at_once_in_the_emitting_thread():
    t = Thing()
    where = []
    t.changed.connect(lambda: where.append(threading.get_ident()))
    worker = threading.Thread(target=t.changed.emit)
    worker.start()
    worker.join()
    assert where == [worker.ident]  # no event loop, no queue: called by the emitter itself
    t.changed.emit()
    assert where[-1] == threading.get_ident()


def test_disconnect_one_slot_a_bound_method_or_all():
    t = Thing()

    class Listener:
        def __init__(self):
            self.n = 0

        def hear(self):
            self.n += 1

    lis = Listener()
    seen = []
    t.changed.connect(lis.hear)
    t.changed.connect(seen.append)
    t.changed.disconnect(lis.hear)  # a new bound method of the same object matches
    t.changed.emit("a")
    assert lis.n == 0 and seen == ["a"]
    with pytest.raises(ValueError, match="changed"):
        t.changed.disconnect(lis.hear)
    t.changed.disconnect()
    t.changed.emit("b")
    assert seen == ["a"] and t.changed.receivers() == 0
    with pytest.raises(TypeError):
        t.changed.connect("not callable")


def test_a_slot_may_disconnect_itself_while_the_signal_is_emitted_and_errors_reach_the_emitter():
    t = Thing()
    calls = []

    def once():
        calls.append("once")
        t.changed.disconnect(once)

    t.changed.connect(once)
    t.changed.connect(lambda: calls.append("always"))
    t.changed.emit()
    t.changed.emit()
    assert calls == ["once", "always", "always"]
    t.moved.connect(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        t.moved.emit()


def test_the_state_modules_import_and_run_without_qt():
    code = (
        "import sys\n"
        "from app.core.state import Signal\n"
        "from app.views.attention.state import AttentionState\n"
        "class T:\n    changed = Signal()\n"
        "t = T(); got = []; t.changed.connect(got.append); t.changed.emit(1); assert got == [1]\n"
        "bad = [m for m in sys.modules if m.startswith(('PySide6', 'pyqtgraph'))]\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


# ---- AttentionState ------------------------------------------------------------------------------
def _inspection(request=1, L=2, H=3):
    return SimpleNamespace(request=request, n_layers=L, n_heads=H, prompt=f"run {request}")


def _metrics(L=2, H=3, prev=0.0):
    from model.interp.analysis.heads import HeadMetrics
    from model.interp.measures import MetricsResult

    z = np.zeros((L, H))
    p = np.full((L, H), prev)
    p[0, 1] = 0.8
    return MetricsResult(HeadMetrics(z, z + 0.5, p, z, z, None), period=8)


def _record(state):
    log = []
    for name in (
        "inspection_changed",
        "selection_changed",
        "ablation_changed",
        "head_detail_changed",
        "metrics_changed",
        "ablation_result_changed",
        "aggregates_changed",
        "chosen_heads_changed",
        "cleared",
    ):
        getattr(state, name).connect(lambda *args, name=name: log.append((name, args)))
    return log


def test_attention_state_announces_each_change_once():
    from app.views.attention.state import AttentionState

    s = AttentionState()
    log = _record(s)
    first = _inspection(1)
    s.set_inspection(first, first.request)
    assert log == [("inspection_changed", (first,))] and s.prompt == "run 1"
    log.clear()
    assert s.select(5, 1) and s.selected == (1, 1)  # clamped to the model's 2 layers
    assert not s.select(1, 1)  # no change, no signal
    assert log == [("selection_changed", (1, 1))]
    log.clear()
    assert s.set_ablation({(np.int64(0), 2): "mean"})
    assert not s.set_ablation({(0, 2): "mean"})
    assert log == [("ablation_changed", ({(0, 2): "mean"},))] and s.ablation == {(0, 2): "mean"}
    log.clear()
    assert s.set_chosen_heads([(1, 0), (0, 1)]) and not s.set_chosen_heads([(0, 1), (1, 0)])
    assert log == [("chosen_heads_changed", ([(0, 1), (1, 0)],))]


def test_attention_state_names_heads_and_follows_the_thresholds():
    from app.views.attention.state import AttentionState
    from model.interp.analysis.heads import HeadThresholds

    s = AttentionState()
    s.set_inspection(_inspection(), 1)
    log = _record(s)
    s.set_metrics(_metrics())
    assert log == [("metrics_changed", ())]
    assert s.classification.labels[0][1].name == "previous-token" and list(s.head_tips) == [(0, 1)]
    assert "layer 0, head 1: previous-token" in s.head_summary(0, 1)
    s.set_thresholds(HeadThresholds(previous_token=0.9))
    assert len(log) == 2 and s.head_tips == {} and "previous-token score ≥ 0.90" in s.role_rules_text()
    # a model of another shape: the old metrics no longer apply, the selection is clamped
    s.select(1, 2)
    s.set_inspection(_inspection(2, L=1, H=2), 2)
    assert s.metrics is None and s.classification is None and s.selected == (0, 1)


def test_attention_state_keeps_only_results_of_the_current_run_and_heads():
    from app.views.attention.state import AttentionState

    s = AttentionState()
    s.set_inspection(_inspection(3), 3)
    log = _record(s)
    s.set_head_detail(3, 1, 1, "detail of L1H1")  # not the selected head: kept, not announced
    assert s.head_detail_for_selected() is None and log == []
    s.select(1, 1)
    assert s.head_detail_for_selected() == "detail of L1H1"
    s.set_inspection(_inspection(4), 4)
    assert s.head_detail_for_selected() is None  # computed for the previous run
    s.set_ablation({(0, 0): "zero"})
    log.clear()
    assert not s.set_ablation_result(SimpleNamespace(heads={(1, 1): "zero"}))
    res = SimpleNamespace(heads={(0, 0): "zero"})
    assert s.set_ablation_result(res) and log == [("ablation_result_changed", (res,))]
    s.set_ablation({})
    assert s.ablation_result is None
    agg = SimpleNamespace(chosen_heads=[])
    s.set_aggregates(agg, 4)  # measured for the run shown (request 4)
    assert s.aggregates_for_current() is agg
    s.set_chosen_heads([(0, 0)])
    assert s.aggregates_for_current() is None  # averaged other heads
    assert s.restrict_ablation(1, 1) is False and s.set_ablation({(1, 0): "zero"})
    assert s.restrict_ablation(1, 1) and s.ablation == {}
    log.clear()
    s.clear()
    assert s.inspection is None and [name for name, _ in log] == ["cleared", "inspection_changed"]


def test_a_subscriber_that_is_gone_is_neither_kept_alive_nor_called():
    """A bound method is held weakly (as the hub holds its handlers); a lambda strongly."""
    import gc
    import weakref

    t = Thing()
    heard = []

    class View:
        def redraw(self, value):
            heard.append(value)

    view = View()
    t.changed.connect(view.redraw)
    t.changed.connect(lambda value: heard.append(("lambda", value)))
    t.changed.emit(1)
    assert heard == [1, ("lambda", 1)] and t.changed.receivers() == 2
    gone = weakref.ref(view)
    del view
    gc.collect()
    assert gone() is None  # the connection did not keep the view alive
    t.changed.emit(2)
    assert heard == [1, ("lambda", 1), ("lambda", 2)]  # nor is the view's method called
    assert t.changed.receivers() == 1
