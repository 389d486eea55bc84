"""An unexpected exception in the GUI thread: a non-modal, copyable report, a log file, the app alive."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest


@pytest.fixture
def reporter(qtbot, app_settings, monkeypatch):
    """A small main window with the crash hook installed as ``launch()`` does; the hook is removed after."""
    from app.shell.gui import _install_excepthook
    from app.shell.window import MainWindow, TabEntry

    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # restored at teardown
    tabs = [TabEntry("train", "Train", "app.views.train.tab:TrainTab")]
    win = MainWindow(settings=app_settings, confirm_close=False, restore=False, tabs=tabs)
    qtbot.addWidget(win)
    win.show()
    rep = _install_excepthook(win)
    yield win, rep
    rep.uninstall()


def _raise_in_slot(message: str):
    from PySide6.QtCore import QTimer

    def broken_slot():
        raise RuntimeError(message)

    QTimer.singleShot(0, broken_slot)


def test_an_exception_in_a_slot_shows_a_copyable_report_and_is_logged(qtbot, reporter, app_settings):
    from PySide6.QtGui import QGuiApplication

    from app.shell.crash import log_path

    win, rep = reporter
    with qtbot.waitSignal(rep.reported, timeout=5000) as blocker:
        _raise_in_slot("the view broke")
    summary, report, log = blocker.args
    assert summary == "RuntimeError: the view broke"
    assert "broken_slot" in report and "Traceback" in report  # the traceback
    assert "Python " in report and "PySide6 " in report  # the versions
    dialog = rep.dialog
    assert dialog.isVisible() and not dialog.isModal()
    assert dialog.report.toPlainText() == report
    # the log sits beside the settings (the app's config folder) and its path is in the dialog
    assert log == str(log_path())
    assert "broken_slot" in Path(log).read_text(encoding="utf-8")
    assert log in dialog.log_label.text()
    dialog.copy_button.click()
    assert QGuiApplication.clipboard().text() == report
    # the app is alive: a later action runs, and a second error reuses the one dialog
    with qtbot.waitSignal(rep.reported, timeout=5000):
        _raise_in_slot("again")
    assert rep.dialog is dialog and dialog.count == 2 and "2 errors" in dialog.summary.text()
    assert Path(log).read_text(encoding="utf-8").count("Attention Lab error report") == 2
    win.statusBar().showMessage("still here")
    assert win.statusBar().currentMessage() == "still here"


def test_the_log_lies_beside_the_settings_file(app_settings):
    from pathlib import Path

    from app.shell.crash import append_log, log_path

    settings_file = Path(app_settings.qsettings.fileName())
    assert log_path() == settings_file.parent / "crash.log"
    assert append_log("one report") == log_path()
    assert log_path().read_text(encoding="utf-8") == "one report\n\n"


def test_an_unwritable_log_still_shows_the_dialog(qtbot, reporter, monkeypatch, tmp_path):
    import app.shell.crash as crash

    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x")
    monkeypatch.setattr(crash, "log_path", lambda: blocked / "crash.log")
    _, rep = reporter
    with qtbot.waitSignal(rep.reported, timeout=5000) as blocker:
        _raise_in_slot("no log")
    assert blocker.args[2] == ""
    assert "could not be written" in rep.dialog.log_label.text()
