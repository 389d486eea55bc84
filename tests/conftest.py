"""Shared test set-up: Qt offscreen and a throw-away settings file, before anything imports Qt.

Fixtures for GUI tests (``tests/app``): ``app_settings`` (a fresh AppSettings in a temporary INI
file), ``tiny_window`` (a MainWindow on a tiny model and a synthetic task, closed and its workers
stopped at teardown) and ``tiny_config`` / ``tiny_settings``.
"""

from __future__ import annotations

import os
import tempfile

# Must happen before any test module imports PySide6.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Nothing a test does may read or overwrite the user's own settings.
os.environ["ATTENTION_LAB_SETTINGS"] = os.path.join(tempfile.mkdtemp(prefix="attention-lab-tests-"), "s.ini")

import pytest  # noqa: E402

#: A data source that needs no corpus on disk and resolves instantly.
TINY_SOURCE = "task:copy"


@pytest.fixture(autouse=True)
def _delete_closed_widgets_now(request):
    """Delete the widgets pytest-qt closed (its ``deleteLater`` waits for an event loop) and collect
    garbage here, at a quiet point. Left to Python's garbage collector, a closed window can be deleted
    in the middle of the next test's paint, and the offscreen platform then crashes in
    ``QPainter::drawImage`` (its backing store freed under the painter; seen with valgrind).

    Only GUI tests (those using ``qtbot``) need it. After collecting, what survived is frozen
    (``gc.freeze``), so the next collection scans only the objects made since: a full collection over
    torch's and transformers' objects cost ~0.3 s a test, 3 of the suite's 4 minutes.
    """
    yield
    if "qtbot" not in request.fixturenames:
        return
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent

    if QCoreApplication.instance() is None:
        return
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.freeze()


@pytest.fixture(autouse=True)
def _no_modal_dialogs(request, monkeypatch):
    """A modal message box would block an offscreen test forever: make an unexpected one fail it.

    Tests that expect a dialog patch the QMessageBox function themselves (their patch wins).
    """
    if "qtbot" not in request.fixturenames:
        return

    from PySide6.QtWidgets import QMessageBox

    def unexpected(name):
        def fail(*args, **kwargs):
            text = " | ".join(str(a) for a in args[1:3])
            raise AssertionError(f"unexpected modal QMessageBox.{name}: {text}")

        return fail

    for name in ("critical", "warning", "information", "question", "about"):
        monkeypatch.setattr(QMessageBox, name, unexpected(name))


@pytest.fixture
def app_settings(tmp_path, monkeypatch):
    """AppSettings stored in a fresh temporary INI file (also what new windows pick up)."""
    from app.settings import AppSettings

    path = tmp_path / "settings.ini"
    monkeypatch.setenv("ATTENTION_LAB_SETTINGS", str(path))
    return AppSettings(path)


@pytest.fixture
def tiny_config():
    from model.config import GPTConfig

    return GPTConfig(context_length=32, n_layers=2, d_model=16, n_heads=2)


@pytest.fixture
def tiny_settings():
    from model.train import TrainSettings

    return TrainSettings(
        steps=6,
        batch_size=2,
        seq_len=16,
        lr=3e-3,
        warmup=2,
        eval_every=3,
        eval_batches=1,
        probe_every=2,
        threads=1,
        device="cpu",
    )


@pytest.fixture
def tiny_window(qtbot, app_settings, tiny_config, tiny_settings):
    """A window on a tiny 2-layer, 2-head model of ``task:copy`` (untrained), cleaned up afterwards."""
    from app.gui import make_app
    from app.window import MainWindow

    make_app()
    win = MainWindow(settings=app_settings, confirm_close=False, restore=False)
    qtbot.addWidget(win)
    s = win.session
    s.sample_every = 0
    win.train_settings_panel.sample_every.setValue(0)
    win.train_settings_panel.set_settings(tiny_settings)
    s.set_device("cpu")
    assert win.data_panel.choose(TINY_SOURCE)
    win.config_panel.set_config(tiny_config)
    s.build_model()
    win.show()
    yield win
    s.shutdown(timeout=30)
    win.close()
