"""Closing the window while it trains ends the process promptly: a stop cuts a validation short, and
once the window has gone the process ends without the interpreter's seconds-long teardown."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time

import pytest

from model.train.trainer import Trainer


@pytest.fixture
def tiny_window_tabs():
    return ["train"]


def _train_thread():
    return next((t for t in threading.enumerate() if t.name == "attention-lab-train"), None)


def test_closing_mid_validation_ends_the_training_thread_at_once(qtbot, tiny_window, monkeypatch):
    """A validation of 200,000 batches takes minutes here; closing the window during it must not
    wait for it (closeEvent joins the worker, so a close that waited would take the join's 30 s)."""
    win, s = tiny_window, tiny_window.session
    s.set_train_settings(s.train_settings.replace(steps=1000, eval_every=1, eval_batches=200_000))
    validating = threading.Event()
    real_evaluate = Trainer.evaluate

    def evaluate(self, batches=None):
        validating.set()
        return real_evaluate(self, batches)

    monkeypatch.setattr(Trainer, "evaluate", evaluate)
    s.start_training()
    # waited on in this thread without running Qt's event loop: the worker's trainerReady is still
    # queued when the window closes (a close that dropped the step then left the history empty)
    assert validating.wait(60)
    thread = _train_thread()
    assert thread is not None and thread.is_alive()
    t0 = time.monotonic()
    win.close()
    took = time.monotonic() - t0
    assert not thread.is_alive()
    assert took < 10.0, f"closing waited {took:.1f} s for the validation"
    assert s.state == "idle" and s.history and s.history[-1]["val_loss"] is None


def test_a_stopped_trainer_validates_again_when_training_continues(qtbot, tiny_window):
    """The stop that cut a validation short is cleared when training continues."""
    s = tiny_window.session
    s.set_train_settings(s.train_settings.replace(steps=2, eval_every=1, eval_batches=1))
    with qtbot.waitSignal(s.trainingFinished, timeout=60_000):
        s.start_training()
    s.trainer.control.stop()  # as a stop during the last run leaves it
    s.set_train_settings(s.train_settings.replace(steps=4))
    with qtbot.waitSignal(s.trainingFinished, timeout=60_000) as done:
        s.start_training()
    assert done.args[0] == "done" and s.step == 4
    assert all(e["val_loss"] is not None for e in s.history[-2:])


def test_end_process_does_what_exit_does_that_matters_and_skips_the_teardown(tmp_path):
    """app.shell.gui.end_process: atexit handlers run, non-daemon threads are waited for, output is
    flushed, the exit code is kept; the interpreter's teardown (objects finalized one by one) and
    daemon threads still busy are not waited for."""
    script = textwrap.dedent(
        """
        import atexit, sys, threading
        from app.shell.gui import end_process

        class Finalized:
            def __del__(self):
                print("finalized", flush=True)

        kept = Finalized()
        atexit.register(lambda: print("atexit ran"))
        go = threading.Event()
        def worker():
            go.wait()
            print("non-daemon thread finished")
        threading.Thread(target=worker).start()
        threading.Thread(target=threading.Event().wait, daemon=True).start()  # a daemon that never ends
        threading.Timer(0.2, go.set).start()
        print("unflushed", end="")
        end_process(3)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    out = proc.stdout
    assert "non-daemon thread finished" in out and "atexit ran" in out and "unflushed" in out
    assert "finalized" not in out
