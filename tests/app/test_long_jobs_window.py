"""Long jobs of the window's other tabs (issue 53): a history step fetched over a slow network, the
Compare tab's training, the Train tab's generation. Each says that it runs and how far, can be
cancelled, and never shows an older input's result as the current one."""

from __future__ import annotations

import pytest

TIMEOUT = 60_000
#: the issue's bound on a Cancel (ms)
CANCEL_MS = 1_000


@pytest.fixture
def tiny_window_tabs():
    return ["train", "history", "compare"]


def test_a_slow_history_step_says_how_far_its_download_is_and_cancels_keeping_the_step_shown(
    qtbot, tiny_window, neox_history_hub, tmp_path, monkeypatch
):
    from huggingface_hub import constants

    tab = tiny_window.tab("history")
    with qtbot.waitSignal(tab.stepShown, timeout=TIMEOUT):
        tab.open_history(
            "hf:tiny/pythia", ["step0", "step16"], prompt="a b c d a b c d", cache_dir=tmp_path / "c"
        )
    assert tab.state.shown.step == 0 and not tab.job_bar.stale
    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 512)
    neox_history_hub.pace = (512, 0.02)  # a slow network: 25 kB/s
    tab.show_step(1)
    # at once: the grid is said to show step 0 while step 16 is on its way
    assert tab.job_bar.stale and "Showing step 0 until step 16" in tab.job_bar.stale_note
    job = tiny_window.session.jobs.get("history.step")
    assert job is not None and job.subject.startswith("step 16")
    qtbot.waitUntil(lambda: job.snapshot().done > 0 and " of " in job.snapshot().text, timeout=TIMEOUT)
    first = job.snapshot().done
    qtbot.waitUntil(lambda: job.snapshot().done > first, timeout=TIMEOUT)  # it advances
    qtbot.waitUntil(lambda: tab.job_bar.busy_row.isVisibleTo(tab), timeout=TIMEOUT)
    assert "step 16" in tab.job_bar.label.text()
    tab.job_bar.cancel_button.click()
    qtbot.waitUntil(lambda: job.state == "cancelled", timeout=CANCEL_MS)
    assert tab.state.shown.step == 0 and "Cancelled step16" in tab.status_label.text()
    assert tab.job_bar.stale and "Showing step 0" in tab.job_bar.stale_note
    neox_history_hub.pace = None
    with qtbot.waitSignal(tab.stepShown, timeout=TIMEOUT) as shown:
        tab.show_step(1)  # asked again: fetched and shown; only now does the grid change
    assert shown.args == [1] and tab.state.shown.step == 16 and not tab.job_bar.stale


def test_compare_training_is_a_job_that_counts_steps_and_cancels_within_a_second(qtbot, tiny_window):
    tab = tiny_window.tab("compare")
    tab.add_variant({})
    tab.add_variant("causal=false")
    assert tab.train_variants(1_000_000)
    job = tiny_window.session.jobs.get("compare.train")
    # at once: the job is on the board, running, and the page's busy line follows it
    assert job is not None and job.active and tab.setup.job_bar.busy
    assert job.title == "Training 2 variants" and "1000000 steps" in job.subject
    qtbot.waitUntil(lambda: job.snapshot().done >= 2, timeout=TIMEOUT)
    first = job.snapshot().done
    qtbot.waitUntil(lambda: job.snapshot().done > first, timeout=TIMEOUT)  # it advances
    qtbot.waitUntil(lambda: "of 1000000" in tab.setup.job_bar.bar.format(), timeout=TIMEOUT)
    with qtbot.waitSignal(tab.trainingFinished, timeout=CANCEL_MS) as ended:
        tab.setup.job_bar.cancel_button.click()
    assert ended.args[0] == "stopped" and job.state == "cancelled"
    assert all(r.status.startswith("stopped at step") for r in tab.runs if r.kind == "variant")
    assert not tab.setup.job_bar.busy


class SlowTemplate:
    """A chat template whose rendering waits for the test (a model file's template that takes long):
    it records the thread it was rendered in."""

    def __init__(self, inner):
        import threading

        self.inner, self.go, self.threads = inner, threading.Event(), []

    def prompt(self, system, turns, message, **_):
        import threading

        self.threads.append(threading.current_thread().name)
        assert self.go.wait(30)
        return self.inner.prompt(system, turns, message)


def test_a_chat_template_renders_off_the_window_s_thread_as_a_job_that_stop_cancels(qtbot, tiny_window):
    import threading

    from tests.app.test_chat_gui import _box, _with_template

    s = tiny_window.session
    box = _box(tiny_window)
    tok = _with_template(s)
    slow = tok.chat_template = SlowTemplate(tok.chat_template)
    box.chat.set_template(slow)
    box.chat.toggle.setChecked(True)
    box.prompt.setText("abc")
    box.button.click()  # returns at once: the template renders in the worker
    job = s.jobs.get("train.generate")
    assert job is not None and job.active and job.title == "Replying to" and box.button.text() == "Stop"
    qtbot.waitUntil(lambda: "rendering the chat template" in job.describe(), timeout=TIMEOUT)
    assert slow.threads and slow.threads[0] != threading.main_thread().name
    box.button.click()  # Stop: the job's Cancel, taken at the worker's next gap (after the rendering)
    slow.go.set()
    qtbot.waitUntil(lambda: box.worker is None, timeout=TIMEOUT)
    assert job.state == "cancelled" and box.conversation.turns == []  # the conversation is as it was


def test_stop_kills_a_chat_template_that_runs_on_within_a_second(qtbot, tiny_window, monkeypatch):
    """A model file's template that loops without writing, its time limit far away: Stop ends the job
    within a second (the template's process is killed), the conversation as it was, no error."""
    from model.text import template_process
    from model.text.chat import ChatTemplate
    from tests.app.test_chat_gui import LOOPS_ON_EE, _box, _with_template

    monkeypatch.setattr(template_process, "TIME_LIMIT_S", 60.0)
    s = tiny_window.session
    box = _box(tiny_window)
    tok = _with_template(s)
    tok.chat_template = ChatTemplate(LOOPS_ON_EE)
    box.chat.set_template(tok.chat_template)
    box.chat.toggle.setChecked(True)
    box.prompt.setText("ee")
    box.button.click()
    job = s.jobs.get("train.generate")
    assert job is not None and job.active
    qtbot.waitUntil(lambda: "rendering the chat template" in job.describe(), timeout=TIMEOUT)
    box.button.click()  # Stop
    qtbot.waitUntil(lambda: job.state == "cancelled", timeout=CANCEL_MS)
    qtbot.waitUntil(lambda: box.worker is None, timeout=CANCEL_MS)
    assert box.conversation.turns == [] and not box.send_error.isVisible() and box.button.text() == "Send"


def test_a_generation_counts_its_tokens_and_stop_ends_it_within_a_second(qtbot, tiny_window):
    s = tiny_window.session
    box = tiny_window.tabs["train"].generate_box
    box.max_tokens.setValue(box.max_tokens.maximum())
    box.prompt.setText("abc")
    box.button.click()
    job = s.jobs.get("train.generate")
    assert job is not None and job.title == "Generating after"
    qtbot.waitUntil(lambda: job.snapshot().done >= 3, timeout=TIMEOUT)
    assert f"of {box.max_tokens.maximum()} tokens" in job.describe()
    box.button.click()  # Stop
    qtbot.waitUntil(lambda: job.state == "cancelled", timeout=CANCEL_MS)
    assert box.worker is None and box.button.text() == "Generate"


def test_a_slow_hub_download_shows_its_bytes_and_cancels_within_a_second(
    qtbot, tiny_window, fake_hub, tiny_gpt2_repo_files, monkeypatch
):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", 512)
    fake_hub.add_repo("tiny/gpt2", tiny_gpt2_repo_files)
    fake_hub.pace = (512, 0.02)  # a slow network
    tiny_window.menu.get_model_action.trigger()
    dlg = tiny_window.files.get_model
    assert dlg.board is tiny_window.session.jobs  # the window's one job model
    dlg.repo_edit.setText("tiny/gpt2")
    dlg.download_button.click()
    job = dlg.board.get("hub.download")
    assert job is not None and job.active and job.subject == "tiny/gpt2" and dlg.job_bar.busy
    qtbot.waitUntil(lambda: job.snapshot().done > 0, timeout=TIMEOUT)
    first = job.snapshot().done
    qtbot.waitUntil(lambda: job.snapshot().done > first and "/s" in job.describe(), timeout=TIMEOUT)
    qtbot.waitUntil(lambda: "tiny/gpt2" in dlg.job_bar.label.text(), timeout=TIMEOUT)
    dlg.job_bar.cancel_button.click()
    qtbot.waitUntil(lambda: job.state == "cancelled", timeout=CANCEL_MS)
    qtbot.waitUntil(lambda: dlg.worker is None, timeout=TIMEOUT)
    assert "cancelled" in dlg.progress_label.text() and dlg.download_button.isEnabled()
    assert tiny_window.session.checkpoint_meta.get("kind") != "hf-gpt2"  # nothing was opened
