"""One background-work layer (issue 56, item 1): whatever a worker thread hands the GUI (the compute
worker's result, a loop's state and end, a training run's end) crosses into the GUI thread through the
one shared bridge, app.session.bridge.GuiBridge, and through nothing else."""

from __future__ import annotations

import sys
import threading

from app.session.bridge import GuiBridge, gui_bridge, to_gui

TIMEOUT = 30_000


def _carried() -> dict:
    """Where the caller runs: its thread, and the bridge whose delivery called it (None when no
    GuiBridge delivery is on the stack)."""
    frame, carrier = sys._getframe(1), None
    while frame is not None:
        if frame.f_code is GuiBridge._deliver.__code__:
            carrier = frame.f_locals["self"]
            break
        frame = frame.f_back
    return {"gui_thread": threading.current_thread() is threading.main_thread(), "carrier": carrier}


def _the_bridge(seen: dict) -> bool:
    return seen["gui_thread"] and seen["carrier"] is gui_bridge()


def test_calls_from_a_thread_arrive_in_the_gui_thread_in_order_and_at_once_from_the_gui_thread(qtbot):
    got: list[tuple[int, dict]] = []

    def record(i: int) -> None:
        got.append((i, _carried()))

    worker = threading.Thread(target=lambda: [to_gui(record, i) for i in range(50)], name="a-worker")
    worker.start()
    worker.join(30)
    qtbot.waitUntil(lambda: len(got) == 50, timeout=TIMEOUT)
    assert [i for i, _ in got] == list(range(50))  # in the order they were handed over
    assert all(_the_bridge(seen) for _, seen in got)
    to_gui(record, 50)  # from the GUI thread: at once, as Qt's automatic connection does
    assert got[-1][0] == 50 and got[-1][1]["gui_thread"]


def test_a_compute_result_reaches_its_callback_through_the_bridge(qtbot):
    from app.session.compute import ComputeWorker

    compute = ComputeWorker()
    ran_in, got = [], []
    compute.submit(
        "k",
        lambda: ran_in.append(threading.current_thread().name) or 7,
        lambda r, e: got.append((r, _carried())),
    )
    qtbot.waitUntil(lambda: compute.idle, timeout=TIMEOUT)
    assert compute.shutdown(10)
    assert ran_in == ["attention-lab-compute"]  # the work ran in the worker's thread
    ((result, seen),) = got
    assert result == 7 and _the_bridge(seen)
    job = compute.board.get("k")
    assert job is not None and job.state == "done"  # its start and end crossed the same way


def test_a_loop_workers_state_and_end_arrive_through_the_bridge(qtbot):
    from app.session.workers import LoopWorker

    class Twice(LoopWorker):
        def work(self):
            yield
            yield

    worker = Twice()
    states, ended = [], []
    worker.stateChanged.connect(lambda state: states.append((state, _carried())))
    worker.finished.connect(lambda reason, message: ended.append((reason, _carried())))
    worker.start()
    qtbot.waitUntil(lambda: bool(ended), timeout=TIMEOUT)
    assert worker.join(10)
    assert [s for s, _ in states] == ["idle"] and [r for r, _ in ended] == ["done"]
    assert all(_the_bridge(seen) for _, seen in states + ended)


def test_a_training_runs_worker_reaches_the_run_through_the_bridge(qtbot, tiny_config, tiny_settings):
    from app.session.session import Session

    s = Session()
    s.sample_every = 0
    s.set_device("cpu")
    s.set_source("task:copy")
    s.set_config(tiny_config)
    s.set_train_settings(tiny_settings.replace(steps=2, probe_every=0))
    heard = []
    s.run.stateChanged.connect(lambda state: heard.append((f"state {state}", _carried())))
    s.run.finished.connect(lambda reason, message: heard.append((f"finished {reason}", _carried())))
    try:
        s.run.start()
        qtbot.waitUntil(lambda: any(what == "finished done" for what, _ in heard), timeout=TIMEOUT)
    finally:
        assert s.shutdown(30)
    # "starting" is said by Start itself, in the GUI thread; "running", "idle" and the end come from the
    # worker's thread, through the bridge
    said = [what for what, _ in heard]
    assert (
        said[0] == "state starting"
        and "state running" in said
        and said[-2:] == ["state idle", "finished done"]
    )
    assert all(_the_bridge(seen) for what, seen in heard if what != "state starting")
