"""File → Open a training history…: a Hub repo and its revisions, or a folder (checkpoints or a run)."""

from __future__ import annotations

import re

from PySide6.QtWidgets import (
    QButtonGroup,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QVBoxLayout,
    QWidget,
)

from model.io.history.revisions import log_spaced_steps

#: The repo the dialog suggests: the smallest Pythia (its 154 checkpoints are Hub branches).
DEFAULT_REPO = "EleutherAI/pythia-70m"


def parse_revisions(text: str) -> list[str | int]:
    """``"0 1 2 step512, main"`` → ``[0, 1, 2, "step512", "main"]`` (numbers mean ``stepN``)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"[\s,;]+", text.strip()) if part]


class OpenHistoryDialog(QDialog):
    """Choose the history's source; :meth:`choice` gives ``(spec, revisions or None)``."""

    def __init__(self, parent: QWidget | None = None, *, last_dir: str = ""):
        super().__init__(parent)
        self.setWindowTitle("Open a training history")
        self.last_dir = last_dir
        layout = QVBoxLayout(self)
        intro = QLabel(
            "Scrub through a model's checkpoints and watch its heads form. Each checkpoint is fetched "
            "and traced on the probe prompt only when first shown; traces are cached on disk."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)
        grid = QGridLayout()
        self.hub_radio = QRadioButton("Hub repo")
        self.folder_radio = QRadioButton("Folder")
        group = QButtonGroup(self)
        group.addButton(self.hub_radio)
        group.addButton(self.folder_radio)
        self.hub_radio.setChecked(True)
        self.repo_edit = QLineEdit(DEFAULT_REPO)
        self.repo_edit.setObjectName("historyRepo")
        self.repo_edit.setToolTip(
            "OWNER/NAME on the Hugging Face Hub (Pythia's checkpoints are branches stepN)"
        )
        self.revisions_edit = QLineEdit(" ".join(str(s) for s in log_spaced_steps()))
        self.revisions_edit.setObjectName("historyRevisions")
        self.revisions_edit.setToolTip(
            "Step numbers (Hub branches stepN) or revision names, separated by spaces; the default is 16 "
            "steps log-spaced from 0 to 143000 among Pythia's 154 checkpoints"
        )
        self.folder_edit = QLineEdit()
        self.folder_edit.setObjectName("historyFolder")
        self.folder_edit.setPlaceholderText(
            "a folder of checkpoints, or a run folder (train --keep-checkpoints)"
        )
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        grid.addWidget(self.hub_radio, 0, 0)
        grid.addWidget(self.repo_edit, 0, 1, 1, 2)
        grid.addWidget(QLabel("revisions"), 1, 0)
        grid.addWidget(self.revisions_edit, 1, 1, 1, 2)
        grid.addWidget(self.folder_radio, 2, 0)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder_edit, 1)
        folder_row.addWidget(browse)
        grid.addLayout(folder_row, 2, 1, 1, 2)
        layout.addLayout(grid)
        self.folder_edit.textEdited.connect(lambda *_: self.folder_radio.setChecked(True))
        self.repo_edit.textEdited.connect(lambda *_: self.hub_radio.setChecked(True))
        self.error_label = QLabel()
        self.error_label.setStyleSheet("color: #c02020;")
        self.error_label.setWordWrap(True)
        layout.addWidget(self.error_label)
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)
        self.resize(640, self.sizeHint().height())

    def _browse(self) -> None:
        path = QFileDialog.getExistingDirectory(
            self, "A folder of checkpoints or a run folder", self.last_dir
        )
        if path:
            self.folder_edit.setText(path)
            self.folder_radio.setChecked(True)

    def choice(self) -> tuple[str, list[str | int] | None]:
        if self.hub_radio.isChecked():
            repo = self.repo_edit.text().strip()
            return ("hf:" + repo if repo and not repo.startswith("hf:") else repo), parse_revisions(
                self.revisions_edit.text()
            ) or None
        return self.folder_edit.text().strip(), None

    def _accept(self) -> None:
        spec, _ = self.choice()
        if not spec or spec == "hf:":
            self.error_label.setText("Name a Hub repo or a folder.")
            return
        self.accept()


__all__ = ["DEFAULT_REPO", "OpenHistoryDialog", "parse_revisions"]
