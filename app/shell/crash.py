"""Unexpected exceptions in the GUI thread: a report the user can copy, and a log file, not a silent exit.

:func:`install` replaces ``sys.excepthook`` (PySide6 hands an exception raised in a slot, a timer or
an event handler to it, then carries on). The hook

* writes the report (:func:`report_text`: time, the traceback, the versions of Python, Qt, PyTorch,
  NumPy and the platform) to the end of :func:`log_path` (``crash.log`` in the app's data folder, or
  beside the settings file when ``ATTENTION_LAB_SETTINGS`` names one);
* shows it in a :class:`CrashDialog`: not modal, so the window stays usable and nothing blocks (an
  offscreen test observes it through :attr:`CrashReporter.reported`); one dialog is reused, so an
  exception raised on every paint does not open hundreds of windows.

``KeyboardInterrupt`` still goes to the previous hook.
"""

from __future__ import annotations

import datetime
import os
import platform
import sys
import tempfile
import traceback
from importlib.metadata import version
from pathlib import Path

import PySide6
from PySide6.QtCore import QObject, QStandardPaths, Qt, Signal, qVersion
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.session.settings import ENV_VAR
from model.atomic import write_atomic

LOG_NAME = "crash.log"

#: The log is cut to its last half when it grows past this (a loop of errors must not fill the disk).
LOG_MAX_BYTES = 2 * 2**20


def log_path() -> Path:
    """Where reports are appended: beside the settings file named by ``ATTENTION_LAB_SETTINGS``, else
    in the per-user app data folder (``QStandardPaths.AppDataLocation``), else the temp folder."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).parent / LOG_NAME
    base = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.AppDataLocation)
    if not base:
        base = tempfile.gettempdir()
    return Path(base) / LOG_NAME


def versions() -> str:
    """One line: app, Python, Qt, PySide6, PyTorch, NumPy and the platform (what a bug report needs)."""
    parts = []
    try:
        parts.append(f"attention-lab {version('attention-lab')}")
    except Exception:
        parts.append("attention-lab development")
    parts.append(f"Python {platform.python_version()}")
    parts.append(f"Qt {qVersion()} · PySide6 {PySide6.__version__}")
    for name in ("torch", "numpy", "pyqtgraph"):
        mod = sys.modules.get(name)  # only what is loaded: a report must not import torch
        if mod is not None:
            parts.append(f"{name} {getattr(mod, '__version__', '?')}")
    parts.append(platform.platform())
    return " · ".join(parts)


def report_text(exc_type, exc, tb) -> str:
    """The copyable report: when, what, the traceback and :func:`versions`."""
    when = datetime.datetime.now().isoformat(timespec="seconds")
    trace = "".join(traceback.format_exception(exc_type, exc, tb))
    return f"Attention Lab error report, {when}\n{versions()}\n\n{trace}"


def append_log(text: str, path: Path | None = None) -> Path | None:
    """Append ``text`` to the log (``path`` or :func:`log_path`); its path, or None when not writable."""
    path = path or log_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.stat().st_size > LOG_MAX_BYTES:
            keep = path.read_bytes()[-LOG_MAX_BYTES // 2 :]
            write_atomic(path, keep)  # the older half dropped whole or not at all
        with open(path, "a", encoding="utf-8", errors="backslashreplace") as f:
            f.write(text.rstrip("\n") + "\n\n")
        return path
    except OSError:
        return None


class CrashDialog(QDialog):
    """Not modal: the summary line, the report (selectable), Copy report, the log's path, Close."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("crashDialog")
        self.setWindowTitle("Unexpected error")
        self.setModal(False)
        self.resize(720, 460)
        self.count = 0
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.report = QPlainTextEdit()
        self.report.setReadOnly(True)
        self.report.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.log_label = QLabel()
        self.log_label.setWordWrap(True)
        self.log_label.setTextInteractionFlags(self.log_label.textInteractionFlags() | _selectable())
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.copy_button = QPushButton("Copy report")
        buttons.addButton(self.copy_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.copy_button.clicked.connect(self.copy_report)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(self.summary)
        lay.addWidget(self.report, 1)
        lay.addWidget(self.log_label)
        lay.addWidget(buttons)

    def show_report(self, summary: str, report: str, log: Path | None) -> None:
        self.count += 1
        more = ""
        if self.count > 1:
            more = f" ({self.count} errors since this window opened; the newest is below)"
        self.summary.setText(f"<b>{_escape(summary)}</b><br>The app keeps running{more}.")
        self.report.setPlainText(report)
        self.log_label.setText(
            f"Also written to {log}" if log is not None else "The log file could not be written."
        )
        self.show()
        self.raise_()

    def copy_report(self) -> None:
        QGuiApplication.clipboard().setText(self.report.toPlainText())


class CrashReporter(QObject):
    """The installed hook's state: ``reported(summary, report, log path or "")`` after each report."""

    reported = Signal(str, str, str)

    def __init__(self, window: QWidget | None = None):
        super().__init__(window)
        self.window = window
        self.dialog: CrashDialog | None = None
        self.previous = sys.excepthook
        self._busy = False

    def hook(self, exc_type, exc, tb) -> None:
        if issubclass(exc_type, KeyboardInterrupt):
            self.previous(exc_type, exc, tb)
            return
        traceback.print_exception(exc_type, exc, tb)
        if self._busy:  # the dialog itself failed: the print above is all there is
            return
        self._busy = True
        try:
            report = report_text(exc_type, exc, tb)
            log = append_log(report)
            summary = f"{exc_type.__name__}: {exc}".splitlines()[0][:300]
            if self.dialog is None:
                self.dialog = CrashDialog(self.window)
            self.dialog.show_report(summary, report, log)
            self.reported.emit(summary, report, str(log or ""))
        except Exception:  # never let the hook itself take the app down
            traceback.print_exc()
        finally:
            self._busy = False

    def uninstall(self) -> None:
        if sys.excepthook == self.hook:
            sys.excepthook = self.previous


def install(window: QWidget | None = None) -> CrashReporter:
    """Make ``sys.excepthook`` report unexpected exceptions (dialog + log); returns the reporter."""
    reporter = CrashReporter(window)
    sys.excepthook = reporter.hook
    return reporter


def _selectable():
    return Qt.TextInteractionFlag.TextSelectableByMouse


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


__all__ = ["CrashDialog", "CrashReporter", "append_log", "install", "log_path", "report_text", "versions"]
