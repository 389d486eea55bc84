"""File → Open checkpoint…: one dialog that picks a checkpoint folder or a checkpoint file.

Qt's file dialog picks either files or folders, never both, while a model on disk is either (an
Attention Lab or Hugging Face folder, a run folder, a nanoGPT ``ckpt.pt``). :class:`CheckpointDialog`
is Qt's own (non-native) file dialog choosing an existing file, with the checkpoint files in its filter,
plus an **Open this folder** button that opens the folder selected in the list, or else the folder
shown. :func:`checkpoint_target` says what a choice opens: a file inside a model folder (its
``config.json``, ``model.safetensors``, …) opens that folder; a PyTorch file elsewhere opens as a
nanoGPT checkpoint; a GGUF file (llama.cpp, Ollama, LM Studio) opens as itself.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QDialogButtonBox,
    QFileDialog,
    QGridLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTreeView,
    QWidget,
)

from model.io.gguf_file import is_gguf

#: What the dialog lists: a model folder's files, PyTorch checkpoints (nanoGPT's ``ckpt.pt``), GGUF files.
CHECKPOINT_FILTER = (
    "Models (*.gguf *.pt *.pth *.ckpt *.safetensors *.json *.bin);;GGUF files (*.gguf);;All files (*)"
)


def checkpoint_target(path: str | Path) -> str:
    """What choosing ``path`` opens: a folder as is; a file beside a ``config.json`` (or a run
    folder's ``run.json``) its folder; any other file (a nanoGPT ``ckpt.pt``, a GGUF file) itself."""
    p = Path(path)
    beside = (p.parent / "config.json").is_file() or (p.parent / "run.json").is_file()
    if p.is_file() and beside and not is_gguf(p):
        return str(p.parent)
    return str(p)


class CheckpointDialog(QFileDialog):
    """Choose a checkpoint file or folder (see the module docstring); :attr:`chosen` after ``exec``."""

    TITLE = "Open a model (a model folder, a ckpt.pt or a .gguf file)"

    def __init__(self, parent: QWidget | None = None, start: str = ""):
        super().__init__(parent, self.TITLE, start, CHECKPOINT_FILTER)
        self.setObjectName("checkpointDialog")
        self.setOption(QFileDialog.Option.DontUseNativeDialog, True)
        self.setFileMode(QFileDialog.FileMode.ExistingFile)
        self.setAcceptMode(QFileDialog.AcceptMode.AcceptOpen)
        self.chosen = ""
        self.folder_button = QPushButton("Open this folder")
        self.folder_button.setObjectName("openFolder")
        self.folder_button.setToolTip(
            "Open the folder selected in the list, or the folder shown: an Attention Lab, Hugging Face, "
            "run or nanoGPT folder"
        )
        self.folder_button.clicked.connect(self.accept_folder)
        # beside Open and Cancel: the file name's completer drops its list over the rows under the
        # name, where this button was, never over the buttons at its right
        buttons = self.findChild(QDialogButtonBox, "buttonBox")
        if buttons is not None:
            buttons.addButton(self.folder_button, QDialogButtonBox.ButtonRole.ActionRole)
        hint = QLabel("A model folder: select it (or go into it) and press <b>Open this folder</b>.")
        grid = self.layout()
        if isinstance(grid, QGridLayout):  # Qt's widget-based dialog lays itself out in a grid
            grid.addWidget(hint, grid.rowCount(), 0, 1, grid.columnCount())
        self._fit_detail_columns()
        self.fileSelected.connect(lambda path: setattr(self, "chosen", checkpoint_target(path)))
        self.resize(820, 520)

    def _fit_detail_columns(self) -> None:
        """The list's Size, Type and Date Modified columns as wide as what they hold (they were cut
        to "1.2…" and "gguf F…"); the name takes the rest."""
        view = self.findChild(QTreeView, "treeView")
        if view is None:
            return
        header = view.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for col in range(1, header.count()):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.ResizeToContents)

    def selected_folder(self) -> str:
        """The folder a press of **Open this folder** opens: the one selected in the list, else the
        folder shown."""
        for path in self.selectedFiles():
            if Path(path).is_dir():
                return path
        return self.directory().absolutePath()

    def accept_folder(self) -> None:
        self.chosen = self.selected_folder()
        self.done(QFileDialog.DialogCode.Accepted)

    @classmethod
    def get_path(cls, parent: QWidget | None, start: str = "") -> str:
        """Run the dialog; what to open (see :func:`checkpoint_target`), or ``""`` when cancelled.
        (Tests patch this, as they patch ``QFileDialog``'s static functions.)"""
        dialog = cls(parent, start)
        try:
            if dialog.exec() != QFileDialog.DialogCode.Accepted:
                return ""
            return dialog.chosen
        finally:
            dialog.deleteLater()


__all__ = ["CHECKPOINT_FILTER", "CheckpointDialog", "checkpoint_target"]
