"""Long jobs in the window (issue 53): each says that it runs, how far it is, can be cancelled, and never
shows an older input's result as the current one.

A model is made slow on purpose: each block waits for the test to let it through (:class:`Gate`), and
while it waits it checks for a stop as the model's own blocks do, so the test decides how far the job is
and a Cancel takes effect as it would between two real blocks.
"""

from __future__ import annotations

import threading

import pytest

from app.views.attention.job_keys import FOLLOW_UPS, INSPECT_JOB
from model.progress import check

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

    def _wait(self, module, args):
        while not self._open.is_set() and not self._tokens.acquire(timeout=0.01):
            check()  # a cancelled job stops here, as it would before a real block
        self.passed += 1

    def release(self, n: int = 1) -> None:
        for _ in range(n):
            self._tokens.release()

    def open(self) -> None:
        self._open.set()

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
    qtbot.waitUntil(lambda: "1 of 2 layers" in tab.job_bar.label.text(), timeout=TIMEOUT)
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
    assert not tab.stale and not tab.job_bar.isVisibleTo(tab)


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
        qtbot.waitUntil(lambda: "runs" in page.job_bar.label.text(), timeout=TIMEOUT)
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


def qtbot_left():
    from PySide6.QtCore import Qt

    return Qt.MouseButton.LeftButton
