"""File → Get a model…: a catalogue of small models people study, or any Hub repo id, downloaded into
the Hugging Face cache with a progress bar, then opened.

The network never runs in the GUI thread: the Hub's answer about a repo (:func:`model.io.hub.plan`) and
the download (:func:`model.io.hub.fetch`) each run in a :class:`~app.session.workers.LoopWorker`, a job
on the session's board (the dialog's busy line: bytes, speed, time left, Cancel). Cancel stops the
download at the next chunk; files already complete stay in the cache, and nothing half-written is ever
opened.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Generator
from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.jobs import JobBoard
from app.session.workers import LoopWorker
from app.widgets.job_bar import JobBar
from model.budget.arithmetic import human_bytes
from model.io.hub import (
    CATALOGUE,
    DownloadCancelled,
    HubError,
    HubRef,
    Plan,
    cache_dir,
    cached_folder,
    check_complete,
    fetch,
    plan,
    ref_problem,
    resolve_name,
)

#: The dialog's job keys on the board: the download, the look-up.
JOBS = ("hub.download", "hub.lookup")


class HubWorker(LoopWorker):
    """Runs one Hub call (``fn(on_progress, should_stop)``) in a thread; ``result`` holds its value.

    ``finished(reason, message)``: ``done`` with :attr:`value` set, ``stopped`` (cancelled) or
    ``error`` with the one-line message. Progress reports go to its job (:meth:`announce`).
    """

    thread_name = "attention-lab-hub"
    nice = 0  # the user is waiting

    def __init__(self, fn: Callable[..., Any]):
        super().__init__()
        self.fn = fn
        self.value: Any = None
        self.cancelled = False

    def work(self) -> Generator[None, None, None]:
        try:
            self.value = self.fn(self._progressed, lambda: self.control.stopped)
        except DownloadCancelled:
            self.cancelled = True
        yield

    def _progressed(self, e: Any) -> None:  # in the worker thread: a DownloadProgress
        if self.job is not None and not getattr(e, "finished", False):
            self.job.progress.describe(e.done, e.total, e.line())
        self.last = e

    last: Any = None  # the last DownloadProgress

    def end(self, reason: str) -> tuple[str, str]:
        if self.cancelled:
            return "stopped", "cancelled: files already complete stay in the cache"
        return reason, ""


class GetModelDialog(QDialog):
    """The catalogue, a repo field, what the chosen model is, a progress bar, Download and Cancel.

    ``downloaded(folder, ref)`` is emitted when the files are in the cache; the window opens them.
    """

    downloaded = Signal(str, str)

    COLUMNS = ("model", "family", "parameters", "download", "repo")

    def __init__(self, parent: QWidget | None = None, board: JobBoard | None = None):
        super().__init__(parent)
        #: the job board the look-up and the download are announced on (the session's)
        self.board = board if board is not None else JobBoard()
        self.setWindowTitle("Get a model")
        self.setObjectName("get-model-dialog")
        self.worker: HubWorker | None = None
        self.lookup: HubWorker | None = None
        self.plans: dict[str, Plan] = {}

        intro = QLabel(
            "Small models people study, or any Hugging Face repo. Only the config, tokenizer and "
            f"safetensors weights are fetched, into the Hugging Face cache ({cache_dir()}); a model "
            "downloaded once opens offline (HF_HUB_OFFLINE=1)."
        )
        intro.setWordWrap(True)

        self.table = QTableWidget(len(CATALOGUE), len(self.COLUMNS))
        self.table.setHorizontalHeaderLabels([c.capitalize() for c in self.COLUMNS])
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        for r, e in enumerate(CATALOGUE):
            cells = (e.name, e.family, e.n_params, f"≈ {human_bytes(e.size)}", e.repo_id)
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c in (2, 3):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                item.setToolTip(f"{e.repo_id}: {e.family}, {e.n_params} parameters, {e.note}")
                self.table.setItem(r, c, item)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._on_row)
        self.table.setTabKeyNavigation(False)  # Tab leaves the catalogue for the repo field

        self.repo_edit = QLineEdit()
        self.repo_edit.setPlaceholderText("or type a repo id: owner/name or owner/name@revision")
        self.repo_edit.textChanged.connect(self._on_typed)
        self.repo_edit.returnPressed.connect(self.look_up)
        self.lookup_button = QPushButton("Look up")
        self.lookup_button.setToolTip("Ask the Hub for this repo's family, files and size")
        self.lookup_button.clicked.connect(self.look_up)
        repo_row = QHBoxLayout()
        repo_row.addWidget(self.repo_edit, 1)
        repo_row.addWidget(self.lookup_button)

        self.info = QLabel("Choose a model above or type a repo id.")
        self.info.setWordWrap(True)
        self.info.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        #: what the Hub is asked or sends now: how far, the time left, Cancel
        self.job_bar = JobBar(self.board, JOBS, cancel=self.board.cancel)
        self.progress_label = QLabel("")  # how the last download ended
        self.error_label = QLabel("")
        self.error_label.setWordWrap(True)
        self.error_label.setStyleSheet("color: #b00020;")
        self.error_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.download_button = QPushButton("Download and open")
        self.download_button.setDefault(True)
        self.download_button.clicked.connect(self.start_download)
        self.close_button = QPushButton("Close")
        self.close_button.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        for b in (self.download_button, self.close_button):
            buttons.addWidget(b)

        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.table, 1)
        layout.addLayout(repo_row)
        layout.addWidget(self.info)
        layout.addWidget(self.job_bar)
        layout.addWidget(self.progress_label)
        layout.addWidget(self.error_label)
        layout.addLayout(buttons)
        self.resize(820, 560)
        self.repo_edit.setFocus()  # typing a repo id is what the keyboard does here first
        self._update_buttons()

    # ---- what is chosen ------------------------------------------------------------------------
    def chosen(self) -> HubRef | None:
        """The typed repo if any, else the selected catalogue row's; None when neither is valid."""
        text = self.repo_edit.text().strip()
        if text:
            try:
                return resolve_name(text)
            except HubError:
                return None
        rows = self.table.selectionModel().selectedRows()
        return CATALOGUE[rows[0].row()].ref if rows else None

    def select(self, name_or_repo: str) -> None:
        """Select the catalogue row of ``name_or_repo`` (name or repo id)."""
        for r, e in enumerate(CATALOGUE):
            if name_or_repo in (e.name, e.repo_id):
                self.repo_edit.clear()
                self.table.selectRow(r)
                return
        raise KeyError(name_or_repo)

    def _on_row(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if rows:
            self.repo_edit.clear()
        self._describe()

    def _on_typed(self, text: str) -> None:
        if text.strip():
            self.table.clearSelection()
        self._describe()

    def _describe(self) -> None:
        """Say what the chosen model is: family, parameters, size (written down or from the Hub)."""
        self.error_label.setText("")
        ref = self.chosen()
        text = self.repo_edit.text().strip()
        if ref is None:
            # typing passes through names that are not repo ids yet ("openai-", "a/"): a quiet hint
            hint = html.escape(f"not a repo id yet: {ref_problem(text)}", quote=False)
            self.info.setText(f'<span style="color: #777777;">{hint}</span>' if text else "")
            self._update_buttons()
            return
        entry = next((e for e in CATALOGUE if e.repo_id == ref.repo_id), None)
        parts = [f"<b>{html.escape(str(ref))}</b>"]
        if entry is not None:
            parts.append(f"{entry.family} · {entry.n_params} parameters · {entry.note}")
            parts.append(f"≈ {human_bytes(entry.size)} to download")
        looked_up = self.plans.get(str(ref))
        if looked_up is not None:
            fam = f"model_type {looked_up.family} · " if looked_up.family else ""
            parts.append(f"on the Hub: {fam}{human_bytes(looked_up.total)} in {len(looked_up.files)} files")
        elif entry is None:
            parts.append("family and size: press Look up (or Download)")
        try:
            folder = cached_folder(ref)
        except (HubError, OSError):  # an unreadable cache is "not in the cache" here
            folder = None
        if folder is not None and not check_complete(folder):
            parts.append("<i>in the cache: opens without downloading</i>")
        self.info.setText(" · ".join(parts))
        self._update_buttons()

    # ---- the Hub -------------------------------------------------------------------------------
    def look_up(self) -> None:
        """Ask the Hub (in a thread) for the chosen repo's files, sizes and family."""
        ref = self.chosen()
        if ref is None or self.busy:
            return
        self.info.setText(f"<b>{html.escape(str(ref))}</b> · asking the Hub…")
        self.lookup = HubWorker(lambda progress, stop: plan(ref))
        self.lookup.announce(self.board, JOBS[1], "Asking the Hub about", str(ref))
        self.lookup.finished.connect(lambda reason, message, w=self.lookup: self._looked_up(w, ref, message))
        self.lookup.start()
        self._update_buttons()

    def _looked_up(self, worker: HubWorker, ref: HubRef, message: str) -> None:
        if worker is not self.lookup:
            return
        self.lookup = None
        if worker.value is not None:
            self.plans[str(ref)] = worker.value
        self._describe()
        if message:
            self.error_label.setText(message)
        self._update_buttons()

    def start_download(self) -> None:
        """Fetch the chosen model in a thread; progress below; ``downloaded`` when complete."""
        ref = self.chosen()
        if ref is None or self.busy:
            return
        self.error_label.setText("")
        self.progress_label.setText("")
        planned = self.plans.get(str(ref))
        self.worker = HubWorker(
            lambda progress, stop: fetch(ref, on_progress=progress, should_stop=stop, planned=planned)
        )
        self.worker.finished.connect(
            lambda reason, message, w=self.worker: self._finished(w, ref, reason, message)
        )
        self.worker.announce(self.board, JOBS[0], "Downloading", str(ref))
        self.worker.start()
        self._update_buttons()

    def cancel_download(self) -> None:
        """Stop the download at its next chunk (the busy line's Cancel)."""
        self.board.cancel(JOBS[0])

    @property
    def busy(self) -> bool:
        return self.worker is not None or self.lookup is not None

    def _finished(self, worker: HubWorker, ref: HubRef, reason: str, message: str) -> None:
        if worker is not self.worker:
            return
        self.worker = None
        if reason == "done" and worker.value is not None:
            last = worker.last
            done = f"{last.line()} · " if last is not None else ""
            self.progress_label.setText(f"{ref}: {done}in the cache, opening…")
            self._update_buttons()
            self.downloaded.emit(str(worker.value), str(ref))
            return
        self._describe()
        if reason == "stopped":
            self.progress_label.setText(f"{ref}: {message}")
        else:
            self.progress_label.setText("")
            self.error_label.setText(message)

    def _update_buttons(self) -> None:
        ok = self.chosen() is not None
        self.download_button.setEnabled(ok and not self.busy)
        self.lookup_button.setEnabled(ok and not self.busy)
        self.table.setEnabled(self.worker is None)
        self.repo_edit.setEnabled(self.worker is None)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Cancel what runs and wait for it (window closing)."""
        for w in (self.worker, self.lookup):
            if w is not None:
                w.control.stop()
                w.join(timeout)

    def reject(self) -> None:
        if self.worker is not None:  # closing while downloading cancels it
            self.cancel_download()
        super().reject()
