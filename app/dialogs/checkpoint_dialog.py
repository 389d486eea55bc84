"""File → Open checkpoint…: one dialog that picks a checkpoint folder or a checkpoint file.

Qt's file dialog picks either files or folders, never both, while a model on disk is either (an
Attention Lab or Hugging Face folder, a run folder, a nanoGPT ``ckpt.pt``). :class:`CheckpointDialog`
is Qt's own (non-native) file dialog choosing an existing file, with the checkpoint files in its filter,
plus an **Open this folder** button that opens the folder selected in the list, or else the folder
shown. :func:`checkpoint_target` says what a choice opens: a file inside a model folder (its
``config.json``, ``model.safetensors``, …) opens that folder; a PyTorch file elsewhere opens as a
nanoGPT checkpoint; a GGUF file (llama.cpp, Ollama, LM Studio) opens as itself.

Under the list, **Weights** chooses how a GGUF file's or a bf16/fp16 Hugging Face folder's matrices
are held (:data:`WEIGHT_CHOICES`, ``open_model``'s ``stored``): decoded once into float32, kept as
stored and decoded layer by layer as they are used, or automatically (as stored past 1 GiB of float32
weights). :meth:`CheckpointDialog.get_choice` returns the path and that choice.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QComboBox,
    QDialogButtonBox,
    QFileDialog,
    QGridLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTreeView,
    QWidget,
)

from model.io.gguf.file import is_gguf

#: What the dialog lists: a model folder's files, PyTorch checkpoints (nanoGPT's ``ckpt.pt``), GGUF files.
CHECKPOINT_FILTER = (
    "Models (*.gguf *.pt *.pth *.ckpt *.safetensors *.json *.bin);;GGUF files (*.gguf);;All files (*)"
)


#: The Weights choice: its text, and ``open_model``'s ``stored`` (None: decided by the model's size).
WEIGHT_CHOICES: tuple[tuple[str, bool | None], ...] = (
    ("automatic (kept as stored past 1 GiB of float32 weights)", None),
    ("decoded once to float32 (fastest to run)", False),
    ("kept as stored, decoded layer by layer as used (least memory)", True),
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
        self.weights = QComboBox()
        self.weights.setObjectName("weightsChoice")
        for text, stored in WEIGHT_CHOICES:
            self.weights.addItem(text, stored)
        self.weights.setToolTip(
            "How a GGUF file's or a bf16/fp16 Hugging Face folder's matrices are held: decoded once into "
            "float32 (4 bytes a weight, fastest), or kept as the file stores them and decoded one layer "
            "at a time as it is used (about the file's size, slower per pass). Other models are read "
            "into float32 whatever is chosen (the status bar says so)."
        )
        grid = self.layout()
        if isinstance(grid, QGridLayout):  # Qt's widget-based dialog lays itself out in a grid
            row = grid.rowCount()  # under "Files of type", its label and list in the same columns
            label = QLabel("&Weights:")
            label.setBuddy(self.weights)
            grid.addWidget(label, row, 0)
            grid.addWidget(self.weights, row, 1)
            grid.addWidget(hint, row + 1, 0, 1, grid.columnCount())
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

    @property
    def stored(self) -> bool | None:
        """The Weights choice as ``open_model``'s ``stored``."""
        return self.weights.currentData()

    @classmethod
    def get_choice(cls, parent: QWidget | None, start: str = "") -> tuple[str, bool | None]:
        """Run the dialog; what to open (see :func:`checkpoint_target`, ``""`` when cancelled) and the
        Weights choice (:attr:`stored`). (Tests patch this, as they patch ``QFileDialog``'s static
        functions.)"""
        dialog = cls(parent, start)
        try:
            if dialog.exec() != QFileDialog.DialogCode.Accepted:
                return "", None
            return dialog.chosen, dialog.stored
        finally:
            dialog.deleteLater()


__all__ = ["CHECKPOINT_FILTER", "WEIGHT_CHOICES", "CheckpointDialog", "checkpoint_target"]
