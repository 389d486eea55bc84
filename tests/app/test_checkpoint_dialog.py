"""File → Open's dialog (a Qt file dialog with an Open this folder button): the file name's completer
never drops its list over that button, and the list's Size and Type columns show their text whole,
even where an earlier dialog left them narrow (Qt keeps the columns in its own settings)."""

from __future__ import annotations

import pytest
import shiboken6
from PySide6.QtCore import QRect, QSettings, QStandardPaths, Qt
from PySide6.QtWidgets import QLineEdit, QStyle, QTreeView

from app.dialogs.checkpoint_dialog import CheckpointDialog

TIMEOUT = 10_000


@pytest.fixture
def qt_settings(tmp_path):
    """Qt's own settings (where a file dialog keeps its columns) in a temporary folder for the test."""
    fmt, scope = QSettings.Format.NativeFormat, QSettings.Scope.UserScope
    before = QStandardPaths.writableLocation(QStandardPaths.StandardLocation.GenericConfigLocation)
    QSettings.setPath(fmt, scope, str(tmp_path / "qt-settings"))
    yield
    QSettings.setPath(fmt, scope, before)


@pytest.fixture
def folder(tmp_path):
    """A folder of model files whose names start alike, as a model folder's do."""
    root = tmp_path / "models"
    root.mkdir()
    for name, size in (("model.safetensors", 3 * 2**20), ("model-b.gguf", 2**20), ("meta.json", 900)):
        (root / name).write_bytes(b"\0" * size)
    return root


def _dialog(qtbot, folder, *, keep: bool = True) -> CheckpointDialog:
    dialog = CheckpointDialog(None, str(folder))
    if keep:
        qtbot.addWidget(dialog)
    dialog.setViewMode(CheckpointDialog.ViewMode.Detail)
    dialog.show()
    view = dialog.findChild(QTreeView, "treeView")
    qtbot.waitUntil(lambda: view.model().rowCount(view.rootIndex()) == 3, timeout=TIMEOUT)
    return dialog


def _global(widget) -> QRect:
    return QRect(widget.mapToGlobal(widget.rect().topLeft()), widget.size())


def test_the_completer_list_leaves_open_this_folder_uncovered(qtbot, qt_settings, folder):
    dialog = _dialog(qtbot, folder)
    name = dialog.findChild(QLineEdit, "fileNameEdit")
    name.setFocus()
    qtbot.keyClicks(name, "m")
    popup = name.completer().popup()
    qtbot.waitUntil(popup.isVisible, timeout=TIMEOUT)
    assert popup.model().rowCount() >= 2
    assert not _global(popup).intersects(_global(dialog.folder_button))
    assert dialog.folder_button.isVisible() and dialog.folder_button.isEnabled()


def test_size_and_type_show_whole_after_a_dialog_left_them_narrow(qtbot, qt_settings, folder):
    first = _dialog(qtbot, folder, keep=False)
    header = first.findChild(QTreeView, "treeView").header()
    for col in (1, 2):
        header.setSectionResizeMode(col, header.ResizeMode.Interactive)
        header.resizeSection(col, 12)
    first.reject()
    shiboken6.delete(first)  # Qt writes its columns to its own settings as the dialog goes
    assert "FileDialog/treeViewHeader" in QSettings(QSettings.Scope.UserScope, "QtProject").allKeys()

    dialog = _dialog(qtbot, folder)
    view = dialog.findChild(QTreeView, "treeView")
    model, root, fm = view.model(), view.rootIndex(), view.fontMetrics()
    # the room a cell gives its text: its width less the style's margin at each side
    margin = view.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1

    def cut() -> list[str]:
        """The Size and Type texts the list draws elided ("1.2…")."""
        out = []
        for row in range(model.rowCount(root)):
            for col in (1, 2):
                text = str(model.index(row, col, root).data() or "")
                room = view.header().sectionSize(col) - 2 * margin
                if fm.elidedText(text, Qt.TextElideMode.ElideRight, room) != text:
                    out.append(text)
        return out

    qtbot.waitUntil(lambda: not cut(), timeout=TIMEOUT)
