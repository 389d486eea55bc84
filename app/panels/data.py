"""The data panel: built-in corpora, synthetic tasks, or a text file of the user's own.

Choosing an entry resolves it through ``model.text.sources.resolve_source`` at once; the data layer's error
message (a missing file, not UTF-8 at line/column, too short, an unknown task parameter, ...) is
shown in red under the list and the previous source stays in use.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from model.text.sources import source_help

TEXT_FILTER = "Text files (*.txt *.md *.py *.rst *.csv *.json);;All files (*)"


class DataPanel(QWidget):
    """Lists every named source; ``choose(spec)`` switches the session to it."""

    #: a source was resolved and made current (its spec)
    sourceChosen = Signal(str)
    #: resolving a source failed (the data layer's message)
    sourceFailed = Signal(str)

    def __init__(self, session, parent: QWidget | None = None, *, settings=None):
        super().__init__(parent)
        self.session = session
        self.settings = settings
        layout = QVBoxLayout(self)

        intro = QLabel(
            "Train on a built-in corpus, a synthetic task that grows recognisable heads, or a text file."
        )
        intro.setWordWrap(True)
        layout.addWidget(intro)

        self.list = QListWidget()
        self.list.setObjectName("sourceList")
        self.list.setWordWrap(True)
        self.list.setAlternatingRowColors(True)
        self.list.setSpacing(2)
        layout.addWidget(self.list, 1)
        self._fill_list()
        self.list.itemActivated.connect(self._on_item)
        self.list.itemClicked.connect(self._on_item)

        form = QFormLayout()
        self.params_edit = QLineEdit()
        self.params_edit.setPlaceholderText("e.g. n_symbols=10,max_len=16 (blank: defaults)")
        self.params_edit.setToolTip("Parameters of a synthetic task as key=value pairs separated by commas")
        self.params_edit.returnPressed.connect(self._apply_params)
        form.addRow("Task parameters", self.params_edit)
        layout.addLayout(form)

        row = QHBoxLayout()
        self.open_button = QPushButton("Open text file…")
        self.open_button.setToolTip("Train on any UTF-8 text file (a character vocabulary is built from it)")
        self.open_button.clicked.connect(self.open_text_file)
        row.addWidget(self.open_button)
        row.addStretch(1)
        layout.addLayout(row)

        self.current_label = QLabel()
        self.current_label.setWordWrap(True)
        self.current_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.current_label)
        self.error_label = QLabel()
        self.error_label.setObjectName("dataErrors")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #c02020;")
        layout.addWidget(self.error_label)

        session.dataChanged.connect(self._on_data_changed)
        session.modelChanged.connect(lambda *_: self._describe())
        session.trainingStateChanged.connect(lambda st: self.setEnabled(st == "idle"))
        if session.source is not None:
            self._on_data_changed(session.source)

    def _fill_list(self) -> None:
        for spec, help_text in source_help().items():
            kind, _, name = spec.partition(":")
            title = f"{name} · {'corpus' if kind == 'builtin' else 'synthetic task'}"
            item = QListWidgetItem(f"{title}\n{help_text}")
            item.setData(Qt.ItemDataRole.UserRole, spec)
            item.setToolTip(spec)
            self.list.addItem(item)

    # ---- choosing ------------------------------------------------------------------------------
    def _on_item(self, item: QListWidgetItem) -> None:
        spec = item.data(Qt.ItemDataRole.UserRole)
        if spec.startswith("task:") and self.params_edit.text().strip():
            spec = f"{spec}:{self.params_edit.text().strip()}"
        self.choose(spec)

    def _apply_params(self) -> None:
        item = self.list.currentItem()
        if item is not None:
            self._on_item(item)

    def open_text_file(self) -> None:
        start = self.settings.last_dir("text") if self.settings is not None else ""
        path, _ = QFileDialog.getOpenFileName(self, "Open a text file to train on", start, TEXT_FILTER)
        if not path:
            return
        if self.settings is not None:
            self.settings.set_last_dir("text", path)
        self.choose(path)

    def choose(self, spec: str) -> bool:
        """Resolve ``spec`` and make it the session's source; False (and the message shown) on error."""
        if self.session.is_training:
            self._fail("stop training before changing the data")
            return False
        QGuiApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
        try:
            self.session.set_source(spec)
        except Exception as exc:  # DataError and friends carry a message written for the user
            self._fail(str(exc) or type(exc).__name__)
            return False
        finally:
            QGuiApplication.restoreOverrideCursor()
        self.error_label.setText("")
        self.sourceChosen.emit(spec)
        return True

    def _fail(self, message: str) -> None:
        self.error_label.setText(message)
        self.sourceFailed.emit(message)

    def _describe(self) -> None:
        """The data in use, and whether the model shown can read it (its tokenizer is the data's)."""
        s = self.session
        source = s.source
        if source is None:
            return
        text = f"<b>In use:</b> {_escape(source.describe())}"
        if s.model is not None and s.tokenizer is not None and s.tokenizer != source.tokenizer:
            text += (
                f"<br><i>The model shown reads another vocabulary ({s.model.config.core.vocab_size} tokens): "
                "Start trains a fresh model on this data.</i>"
            )
        self.current_label.setText(text)

    def _on_data_changed(self, source) -> None:
        self._describe()
        base = self.session.source_spec.split(":")
        key = ":".join(base[:2]) if base and base[0] in ("builtin", "task") else None
        for i in range(self.list.count()):
            item = self.list.item(i)
            if item.data(Qt.ItemDataRole.UserRole) == key:
                self.list.setCurrentItem(item)
                break
        else:
            self.list.clearSelection()


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
