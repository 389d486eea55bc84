"""Long jobs in the window (issue 53): each says that it runs, how far it is, can be cancelled, and never
shows an older input's result as the current one.

A model is made slow on purpose: each block waits for the test to let it through (:class:`Gate`), and
while it waits it checks for a stop as the model's own blocks do, so the test decides how far the job is
and a Cancel takes effect as it would between two real blocks.
"""

from __future__ import annotations

import threading

import pytest

from app.views.attention.job_keys import CIRCUITS_JOB, FOLLOW_UPS, INSPECT_JOB
from model.progress import check, current

TIMEOUT = 30_000
#: the issue's bound on a Cancel (ms)
CANCEL_MS = 1_000


class Gate:
    """Blocks of ``model`` pass one at a time as the test releases them (``release(n)``); ``open()``
    lets everything through. While waiting, a block checks for a stop every 10 ms."""

    def __init__(self, model):
        self._tokens = threading.Semaphore(0)
        self._open = threading.Event()
        self.passed = 0
        self._handles = [block.register_forward_pre_hook(self._wait) for block in model.blocks]

    #: when set, only the work whose Progress this returns waits at the gate (others pass)
    only = None

    def _wait(self, module, args):
        if self.only is not None and current() is not self.only():
            return
        while not self._open.is_set() and not self._tokens.acquire(timeout=0.01):
            check()  # a cancelled job stops here, as it would before a real block
        self.passed += 1

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self._tokens.release()

    def open(self) -> None:
        self._open.set()

    def close(self) -> None:
        self._open.clear()

    def remove(self) -> None:
        self.open()
        for h in self._handles:
            h.remove()


@pytest.fixture
def gate(qtbot, attention_tab):
    compute = attention_tab.session.compute
    qtbot.waitUntil(lambda: compute.idle, timeout=TIMEOUT)  # the first run's follow-ups are through
    g = Gate(attention_tab.session.model)
    yield g
    g.remove()


def _job(tab, key):
    return tab.session.jobs.get(key)


def test_a_slow_trace_is_busy_at_once_shows_progress_and_cancels_leaving_the_old_prompt_labelled(
    qtbot, attention_tab, gate
):
    tab = attention_tab
    old = tab.state.inspection
    assert old.prompt == "The head looks back." and not tab.stale
    tab.prompt_edit.setPlainText("A new prompt, traced slowly.")  # as typing does
    # at once, before any event-loop turn: the shown result is marked as the previous prompt's
    assert (
        tab.stale
        and "previous prompt" in tab.job_bar.stale_note
        and "The head looks back." in tab.job_bar.stale_note
    )
    assert tab.header_veil.isVisibleTo(tab)  # the header about the run shown is greyed with it
    qtbot.waitUntil(
        lambda: (j := _job(tab, INSPECT_JOB)) is not None and j.state == "running", timeout=TIMEOUT
    )
    job = _job(tab, INSPECT_JOB)
    assert job.subject.startswith("“A new prompt") and tab.job_bar.busy
    # the greyed result and the busy line show once the job has lasted a moment; never the new result
    qtbot.waitUntil(lambda: tab.job_bar.greyed and tab.job_bar.busy_row.isVisibleTo(tab), timeout=TIMEOUT)
    assert tab.state.inspection is old
    gate.release(1)  # one of the two layers
    qtbot.waitUntil(lambda: job.snapshot().done == 1, timeout=TIMEOUT)
    qtbot.waitUntil(lambda: "1 of 2 layers" in tab.job_bar.bar.format(), timeout=TIMEOUT)
    assert tab.job_bar.bar.maximum() == 1000 and 400 <= tab.job_bar.bar.value() <= 600
    # Cancel stops it within a second and leaves the old result, said to be the previous prompt's
    qtbot.mouseClick(tab.job_bar.cancel_button, qtbot_left())
    qtbot.waitUntil(lambda: job.state == "cancelled", timeout=CANCEL_MS)
    assert tab.state.inspection is old and tab.stale
    assert "Cancelled" in tab.job_bar.stale_note and "The head looks back." in tab.job_bar.stale_note
    assert not tab.job_bar.busy
    # the new prompt runs again only when asked, and replaces the old one only once it is done
    gate.open()
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT) as blk:
        tab.refresh_button.click()
    assert blk.args[0].prompt == "A new prompt, traced slowly." and tab.state.inspection is blk.args[0]
    assert not tab.stale and not tab.job_bar.isVisibleTo(tab) and not tab.header_veil.isVisibleTo(tab)


def test_a_newer_prompt_supersedes_a_running_trace_which_stops(qtbot, attention_tab, gate):
    tab = attention_tab
    tab.prompt_edit.setPlainText("first slow prompt")
    qtbot.waitUntil(
        lambda: (j := _job(tab, INSPECT_JOB)) is not None and j.state == "running", timeout=TIMEOUT
    )
    first = _job(tab, INSPECT_JOB)
    assert first.subject.startswith("“first slow prompt")
    tab.prompt_edit.setPlainText("second prompt")
    qtbot.waitUntil(lambda: _job(tab, INSPECT_JOB) is not first, timeout=TIMEOUT)
    assert first.state == "superseded" and first.progress.cancelled  # its work is told to stop
    gate.open()
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT) as blk:
        pass
    assert blk.args[0].prompt == "second prompt"  # the first one's result never arrives


def test_patching_marks_the_old_numbers_counts_its_runs_and_cancels(qtbot, attention_tab, gate):
    tab = attention_tab
    gate.open()
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.set_prompt("the cat saw the dog and the dog saw the")
    with qtbot.waitSignal(tab.causalReady, timeout=TIMEOUT):
        page = tab.show_page("patching")
    first = page.result
    assert first.prompt == "the cat saw the dog and the dog saw the"
    assert first is not None and first.corrupt_prompt != "the dog saw the cat and the cat saw the"
    assert not page.job_bar.stale
    gate.remove()
    qtbot.waitUntil(lambda: tab.session.compute.idle, timeout=TIMEOUT)
    slow = Gate(tab.session.model)
    try:
        page.corrupt_edit.setPlainText("the dog saw the cat and the cat saw the")
        page.run_button.click()
        # at once: the numbers on screen are said to be the previous corrupted prompt's
        assert page.job_bar.stale and "previous measurement" in page.job_bar.stale_note
        key = FOLLOW_UPS + "attention.patching"
        qtbot.waitUntil(lambda: (j := _job(tab, key)) is not None and j.state == "running", timeout=TIMEOUT)
        job = _job(tab, key)
        for _ in range(40):  # block by block: the clean and corrupted runs, then the first patched runs
            if job.snapshot().done > 0:
                break
            passed = slow.passed
            slow.release(1)
            qtbot.waitUntil(lambda passed=passed: slow.passed > passed, timeout=TIMEOUT)
        qtbot.waitUntil(lambda: job.snapshot().done > 0, timeout=TIMEOUT)
        snap = job.snapshot()
        L, H, T = 2, 2, len(tab.state.inspection.ids)
        assert snap.unit == "runs" and snap.total == L * H + L * T and 0 < snap.done < snap.total
        qtbot.waitUntil(lambda: "runs" in page.job_bar.bar.format(), timeout=TIMEOUT)
        assert page.result is first  # the old numbers stay, marked, until the new ones are done
        page.job_bar.cancel_button.click()
        qtbot.waitUntil(lambda: job.state == "cancelled", timeout=CANCEL_MS)
        assert page.result is first and "Cancelled" in page.job_bar.stale_note
        # Patch again measures the same inputs; the new numbers replace the old ones when done
        slow.open()
        with qtbot.waitSignal(tab.causalReady, timeout=TIMEOUT):
            page.run_button.click()
        assert (
            page.result is not first
            and page.result.corrupt_prompt == "the dog saw the cat and the cat saw the"
        )
        assert not page.job_bar.stale
    finally:
        slow.remove()


PROMPT = "the cat saw the dog and the dog saw the"


def _slow_follow_up(qtbot, tab, gate, key, start):
    """``start()`` asks for the follow-up job ``key`` with the gate closed: it is announced on the page in
    view, said to run, cancelled within a second by the page's Cancel; asked again with the gate open, its
    result arrives."""
    job_key = key if key == CIRCUITS_JOB else FOLLOW_UPS + key
    # only this job waits at the gate: the jobs queued before it (the new run's metrics, ...) go through
    gate.only = lambda: (j := tab.session.jobs.get(job_key)) is not None and j.progress
    start()
    qtbot.waitUntil(lambda: (j := _job(tab, job_key)) is not None and j.state == "running", timeout=TIMEOUT)
    job, page = _job(tab, job_key), tab.current_page
    assert page.job_bar is not None and page.job_bar.busy and job.title in page.job_bar.job().describe()
    qtbot.waitUntil(lambda: page.job_bar.busy_row.isVisibleTo(page), timeout=TIMEOUT)
    page.job_bar.cancel_button.click()
    qtbot.waitUntil(lambda: job.state == "cancelled", timeout=CANCEL_MS)
    assert not page.job_bar.busy
    return job


@pytest.mark.parametrize("kind", ["attribution", "ablation", "path", "circuits"])
def test_each_follow_up_page_shows_its_job_and_cancels_it(qtbot, attention_tab, gate, kind, monkeypatch):
    tab = attention_tab
    gate.open()
    with qtbot.waitSignal(tab.inspected, timeout=TIMEOUT):
        tab.set_prompt(PROMPT)
    qtbot.waitUntil(lambda: tab.session.compute.idle, timeout=TIMEOUT)
    if kind == "attribution":
        gate.close()
        _slow_follow_up(qtbot, tab, gate, "attention.attribution", lambda: tab.show_page("attribution"))
        gate.open()
        with qtbot.waitSignal(tab.causalReady, timeout=TIMEOUT):
            tab.state.causal_setup_changed.emit("attribution")  # asked again (Enter in a box)
    elif kind == "ablation":
        tab.show_page("ablation")
        qtbot.waitUntil(lambda: tab.session.compute.idle, timeout=TIMEOUT)
        gate.close()  # the prompt runs again without the head (it passes), then the ablation (it waits)
        _slow_follow_up(qtbot, tab, gate, "attention.ablation", lambda: tab.set_ablation({(0, 0): "zero"}))
        gate.open()
        with qtbot.waitSignal(tab.ablationReady, timeout=TIMEOUT):
            tab.set_ablation({(0, 1): "zero"})
    elif kind == "circuits":  # the weights alone, no forward pass: each pair of layers waits instead
        import model.interp.analysis.composition as composition

        scores_of = composition._scores_of

        def slow(*args):
            while not gate._open.is_set():
                check()
                gate._open.wait(0.01)
            return scores_of(*args)

        monkeypatch.setattr(composition, "_scores_of", slow)
        gate.close()
        job = _slow_follow_up(qtbot, tab, gate, CIRCUITS_JOB, lambda: tab.show_page("circuits"))
        assert job.snapshot().total == 1 and job.snapshot().unit == "layer pairs"  # L = 2: one pair
        gate.open()
        tab.show_page("heads")
        with qtbot.waitSignal(
            tab.circuitsReady, timeout=TIMEOUT, check_params_cb=lambda k, _r: k == "circuits"
        ):
            tab.show_page("circuits")
    else:
        tab.show_page("circuits")
        qtbot.waitUntil(lambda: tab.session.compute.idle, timeout=TIMEOUT)
        gate.close()
        layer, head = tab.state.path_heads()[0]  # another sender: a new path patching
        job = _slow_follow_up(
            qtbot, tab, gate, "attention.path", lambda: tab.state.set_circuit_setup(sender=(layer, 1 - head))
        )
        assert job.snapshot().unit in ("runs", "")  # counted once its patched runs begin
        gate.open()
        tab.show_page("heads")
        with qtbot.waitSignal(tab.circuitsReady, timeout=TIMEOUT, check_params_cb=lambda k, _r: k == "path"):
            tab.show_page("circuits")  # shown again: the cancelled path patching is measured


def qtbot_left():
    from PySide6.QtCore import Qt

    return Qt.MouseButton.LeftButton
