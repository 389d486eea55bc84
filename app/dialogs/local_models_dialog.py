"""File → Open a local model…: the models already on this machine (Ollama, LM Studio, the Hugging Face
cache, Python packages), listed from their headers and configs without reading a weight, then opened.

The look runs in a :class:`~app.session.workers.LoopWorker` (:class:`ScanWorker`, one ``yield`` per model
found, so Refresh or Close stops it between two); each model goes through its mailbox and the table
fills ~30 times a second (:func:`~app.session.workers.drain_timer`). What is found and why a model would be
refused is :mod:`model.io.local.models`' (a :class:`~model.io.local.models.LocalScan`). A model
Attention Lab cannot open is a grey row, the reason its tooltip and the line below the table; it is
never opened. Open (double-click, Enter) emits ``openRequested`` with the model; the window opens it
(:meth:`app.shell.file_actions.FileActions.open_local_model`).
"""

from __future__ import annotations

import html
from collections.abc import Callable, Generator
from pathlib import Path

from PySide6.QtCore import (
    QCoreApplication,
    QEvent,
    QItemSelectionModel,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
    Signal,
)
from PySide6.QtGui import QKeyEvent, QPalette, QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from app.session.workers import LoopWorker, drain_timer
from app.widgets.paths import shown_path
from model.budget.units import human_bytes, human_count
from model.io.local.models import SOURCES, LocalModel, LocalScan, Location

#: The role holding each cell's sort key (numbers sort as numbers, not as their text).
SORT_ROLE = Qt.ItemDataRole.UserRole + 1
#: The role of the Name cell holding the row's :class:`LocalModel`.
MODEL_ROLE = Qt.ItemDataRole.UserRole + 2


class _Filter(QSortFilterProxyModel):
    """Rows whose name, source, family or quantization holds the filter text (not the status: a
    refusal that lists what does open would match those names)."""

    COLUMNS = (0, 1, 2, 4)
    text = ""

    def set_text(self, text: str) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt 6.10+
            self.beginFilterChange()
            self.text = text
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:
            self.text = text
            self.invalidateRowsFilter()

    def filterAcceptsRow(self, source_row: int, source_parent: QModelIndex | QPersistentModelIndex) -> bool:
        if not self.text:
            return True
        model = self.sourceModel()
        needle = self.text.casefold()
        return any(
            needle in str(model.index(source_row, c, source_parent).data() or "").casefold()
            for c in self.COLUMNS
        )


class ScanWorker(LoopWorker):
    """Runs one :class:`LocalScan` in a thread: each model found is posted under ``"models"``; a stop
    ends it before the next one."""

    thread_name = "attention-lab-local-models"
    nice = 0  # the user is waiting for the list

    def __init__(self, scan: LocalScan):
        super().__init__()
        self.scan = scan

    def work(self) -> Generator[None, None, None]:
        for model in self.scan:
            self.mailbox.put("models", model)
            yield


def where_line(locations: list[Location], home: Path | None = None) -> str:
    """Where a scan looked, one source after another: ``Ollama: ~/.ollama/models (2) · LM Studio: …``
    (a count where something was found, the note where it was absent or unreadable)."""
    home = Path.home() if home is None else home
    parts = []
    for source in SOURCES:
        places = []
        for loc in (x for x in locations if x.source == source):
            said = loc.note if loc.note and not loc.found else str(loc.found) if loc.found else "none"
            if loc.note and loc.found:
                said = f"{loc.found}, {loc.note}"
            places.append(f"{shown_path(loc.where, home)} ({said})")
        if places:
            parts.append(f"{source}: {', '.join(places)}")
    return " · ".join(parts)


def _params(n: int | None) -> str:
    return human_count(n) if n else ""


class LocalModelsDialog(QDialog):
    """The table of the machine's models, a filter, the line saying where it looked, Open, Refresh
    and Close. ``make_scan()`` makes the look (default: :class:`LocalScan` of the standard places).

    ``openRequested(LocalModel)``: a model that opens was chosen; the dialog stays open until
    :meth:`accept` (the window calls it once the model is open).
    """

    openRequested = Signal(object)

    COLUMNS = ("Name", "Source", "Family", "Size", "Quantization", "Parameters", "Status")

    def __init__(self, parent: QWidget | None = None, *, make_scan: Callable[[], LocalScan] = LocalScan):
        super().__init__(parent)
        self.setObjectName("localModelsDialog")
        self.setWindowTitle("Open a local model")
        self.make_scan = make_scan
        self.worker: ScanWorker | None = None
        self.scan: LocalScan | None = None
        self.models: list[LocalModel] = []
        self.complete = False  # a look ran to its end (not stopped by Close)
        self._timer = drain_timer(self, self._drain)

        intro = QLabel(
            "Models already on this machine: Ollama's, LM Studio's, the Hugging Face cache's and those "
            "Python packages ship. Each is described from its header or config alone; no weight is read "
            "until you open one. Grey rows are models Attention Lab cannot open: the reason is their "
            "tooltip and the line below the table."
        )
        intro.setWordWrap(True)

        self.filter_edit = QLineEdit()
        self.filter_edit.setObjectName("localModelsFilter")
        self.filter_edit.setPlaceholderText("Filter: name, source, family, quantization… (↓ to the list)")
        self.filter_edit.setClearButtonEnabled(True)
        self.filter_edit.textChanged.connect(self._filter)
        self.filter_edit.installEventFilter(self)

        self.source_model = QStandardItemModel(0, len(self.COLUMNS), self)
        self.source_model.setHorizontalHeaderLabels(list(self.COLUMNS))
        self.proxy = _Filter(self)
        self.proxy.setSourceModel(self.source_model)
        self.proxy.setSortRole(SORT_ROLE)
        self.proxy.setSortCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)

        self.table = QTableView()
        self.table.setObjectName("localModelsTable")
        self.table.setModel(self.proxy)
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setTabKeyNavigation(False)  # Tab leaves the list for the buttons
        self.table.setWordWrap(False)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 10)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.table.horizontalHeader().setSortIndicator(-1, Qt.SortOrder.AscendingOrder)  # found order
        self.table.setSortingEnabled(True)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        header.setHighlightSections(False)
        self.table.doubleClicked.connect(self.open_index)
        self.table.selectionModel().currentRowChanged.connect(self._on_current_changed)
        self._auto_selected = False  # the current row is the dialog's pick, not the user's

        self.detail = QLabel("")
        self.detail.setObjectName("localModelsDetail")
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.TextFormat.RichText)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.where = QLabel("")
        self.where.setObjectName("localModelsWhere")
        self.where.setWordWrap(True)
        self.where.setTextFormat(Qt.TextFormat.PlainText)
        self.where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.where.setStyleSheet("color: #666666;")
        self.status = QLabel("")
        self.message = QLabel("")
        self.message.setWordWrap(True)
        self.message.setStyleSheet("color: #b00020;")
        self.message.setVisible(False)

        self.refresh_button = QPushButton("&Refresh")
        self.refresh_button.setToolTip("Look again (a model pulled or downloaded since)")
        self.refresh_button.setAutoDefault(False)
        self.refresh_button.clicked.connect(self.refresh)
        self.open_button = QPushButton("&Open")
        self.open_button.setDefault(True)  # Enter in the list or the filter opens the chosen model
        self.open_button.clicked.connect(self.open_selected)
        self.close_button = QPushButton("Close")
        self.close_button.setAutoDefault(False)
        self.close_button.clicked.connect(self.reject)
        buttons = QHBoxLayout()
        buttons.addWidget(self.refresh_button)
        buttons.addWidget(self.status, 1)
        buttons.addWidget(self.open_button)
        buttons.addWidget(self.close_button)

        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.filter_edit)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.detail)
        layout.addWidget(self.message)
        layout.addWidget(self.where)
        layout.addLayout(buttons)
        # within a 1280 × 800 window: wide enough for Status to keep a refusal's first words
        width = 1180 if parent is None else max(640, min(1180, parent.width() - 80))
        height = 620 if parent is None else max(400, min(620, parent.height() - 120))
        self.resize(width, height)
        self.filter_edit.setFocus()
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self._update_buttons()

    # ---- the look ------------------------------------------------------------------------------
    def refresh(self) -> None:
        """Look again: the table empties and fills as models are found (a look in progress is stopped)."""
        self.shutdown(timeout=0)
        self.complete = False
        self.models = []
        self.source_model.removeRows(0, self.source_model.rowCount())
        self.show_message("")
        self.status.setText("Looking…")
        self.where.setText("")
        try:
            scan = self.make_scan()
        except Exception as exc:  # defaults that cannot be resolved (no home folder): say so
            self.status.setText("")
            self.show_message(f"Could not look for models: {exc}")
            return
        self.scan = scan
        worker = self.worker = ScanWorker(scan)
        worker.finished.connect(lambda reason, message, w=worker: self._finished(w, reason, message))
        worker.start()
        self._timer.start()
        self._update_buttons()

    @property
    def scanning(self) -> bool:
        return self.worker is not None

    def _drain(self) -> None:
        if self.worker is None:
            return
        (found,) = self.worker.mailbox.take("models")
        for model in found:
            self._add_row(model)
        if found:
            self.status.setText(f"Looking… {len(self.models)} found")
            self._select_first_if_none()

    def _finished(self, worker: ScanWorker, reason: str, message: str) -> None:
        if worker is not self.worker:
            return  # a look replaced by a refresh
        self._drain()
        self._timer.stop()
        self.worker = None
        self.complete = True
        self._fit_columns()
        scan = worker.scan
        self._update_status()
        self.where.setText("Looked in " + where_line(scan.locations))
        if reason == "error":
            self.show_message(f"The look stopped: {message}")
        self._select_first_if_none()
        self._update_buttons()

    def _update_status(self) -> None:
        """``11 models (5 cannot open) · 2 shown · looked in 0.8 s`` once a look is over."""
        if self.scan is None or not self.complete:
            return
        refused = sum(not m.opens for m in self.models)
        parts = [f"{len(self.models)} model{'s' if len(self.models) != 1 else ''}"]
        if refused:
            parts[0] += f" ({refused} cannot open)"
        if self.proxy.text:
            parts.append(f"{self.proxy.rowCount()} shown")
        parts.append(f"looked in {self.scan.seconds:.2g} s")
        self.status.setText(" · ".join(parts))

    def _add_row(self, m: LocalModel) -> None:
        self.models.append(m)
        grey = self.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text)
        status = "opens" if m.opens else m.problem or "cannot open"
        cells: list[tuple[str, object]] = [
            (m.name, m.name.lower()),
            (m.source, SOURCES.index(m.source) if m.source in SOURCES else len(SOURCES)),
            (m.family, m.family.lower()),
            (human_bytes(m.size_bytes) if m.size_bytes else "", m.size_bytes),
            (m.quantization, m.quantization.lower()),
            (_params(m.n_params), m.n_params or 0),
            (status, f"{int(not m.opens)}{status.lower()}"),
        ]
        where = f"{m.path}" + (f"\n{m.detail}" if m.detail else "")
        tip = where if m.opens else f"Cannot open: {m.problem}\n\n{where}"
        row = []
        for col, (text, key) in enumerate(cells):
            item = QStandardItem(text)
            item.setData(key, SORT_ROLE)
            item.setToolTip(tip)
            item.setEditable(False)
            if col in (3, 5):
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            if not m.opens:
                item.setForeground(grey)
            row.append(item)
        row[0].setData(m, MODEL_ROLE)
        self.source_model.appendRow(row)

    def _fit_columns(self) -> None:
        """Every column but Status as wide as its contents (Name and Quantization capped); Status, the
        last, takes the rest and elides a long refusal (the whole line is the tooltip and below)."""
        header = self.table.horizontalHeader()
        caps = {0: 280, 4: 250}
        for col in range(len(self.COLUMNS) - 1):
            self.table.resizeColumnToContents(col)
            if header.sectionSize(col) > caps.get(col, 1 << 30):
                header.resizeSection(col, caps[col])

    # ---- choosing ------------------------------------------------------------------------------
    def model_at(self, index: QModelIndex) -> LocalModel | None:
        """The model of the table row of ``index`` (a proxy index), or None."""
        if not index.isValid():
            return None
        name_cell = self.proxy.index(index.row(), 0)
        model = self.proxy.data(name_cell, MODEL_ROLE)
        return model if isinstance(model, LocalModel) else None

    def selected(self) -> LocalModel | None:
        return self.model_at(self.table.currentIndex())

    def visible_names(self) -> list[str]:
        """The names of the rows shown now (after the filter), top to bottom."""
        return [self.proxy.index(r, 0).data() for r in range(self.proxy.rowCount())]

    def select(self, name: str) -> None:
        """Make the row named ``name`` current (KeyError when it is not shown)."""
        for r in range(self.proxy.rowCount()):
            if self.proxy.index(r, 0).data() == name:
                self._select_row(r)
                return
        raise KeyError(name)

    def _select_row(self, r: int, *, auto: bool = False) -> None:
        index = self.proxy.index(r, 0)
        flags = QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        self._picking = auto
        try:
            self.table.selectionModel().setCurrentIndex(index, flags)
        finally:
            self._picking = False
        self._auto_selected = auto
        self.table.scrollTo(index)

    def _on_current_changed(self, *_: object) -> None:
        if not getattr(self, "_picking", False):
            self._auto_selected = False  # the user moved: rows found later never take it away
        self._on_row()

    def _select_first_if_none(self) -> None:
        """Make the first row that opens current, unless the user has chosen one."""
        current = self.selected()
        if not self.proxy.rowCount() or (current is not None and (not self._auto_selected or current.opens)):
            self._on_row()
            return
        rows = range(self.proxy.rowCount())
        first = next((r for r in rows if (m := self.model_at(self.proxy.index(r, 0))) and m.opens), 0)
        self._select_row(first, auto=True)

    def _filter(self, text: str) -> None:
        self.proxy.set_text(text.strip())
        self._select_first_if_none()
        self._update_status()

    def _on_row(self) -> None:
        m = self.selected()
        if m is None:
            shown = self.proxy.rowCount()
            self.detail.setText("" if shown or self.scanning else "No model here matches the filter.")
        else:
            name, source, where = (html.escape(str(x), quote=False) for x in (m.name, m.source, m.path))
            line = f"<b>{name}</b> · {source} · {where}"
            if not m.opens:
                why = html.escape(m.problem, quote=False)
                line += f"<br><span style='color: #b00020;'>Cannot open: {why}</span>"
            self.detail.setText(line)
        self._update_buttons()

    def open_index(self, index: QModelIndex) -> bool:
        m = self.model_at(index)
        if m is None or not m.opens:
            return False
        self.show_message("")
        self.openRequested.emit(m)
        return True

    def open_selected(self) -> bool:
        """Open the current row's model (False when there is none, or it cannot be opened)."""
        return self.open_index(self.table.currentIndex())

    def show_message(self, text: str) -> None:
        """A line in red above the buttons (e.g. why the window did not open the model); "" hides it."""
        self.message.setText(text)
        self.message.setVisible(bool(text))

    def _update_buttons(self) -> None:
        m = self.selected()
        self.open_button.setEnabled(m is not None and m.opens)

    # ---- keyboard: ↓ in the filter goes to the list -------------------------------------------
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        down = (Qt.Key.Key_Down, Qt.Key.Key_PageDown)
        if (
            watched is self.filter_edit
            and event.type() == QEvent.Type.KeyPress
            and isinstance(event, QKeyEvent)
            and event.key() in down
            and self.proxy.rowCount()
        ):
            self.table.setFocus()
            if not self.table.currentIndex().isValid():
                self._select_row(0)
            return True
        return super().eventFilter(watched, event)

    # ---- closing -------------------------------------------------------------------------------
    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.worker is None and not self.complete:
            self.refresh()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop a look in progress (and wait ``timeout`` seconds for it)."""
        worker, self.worker = self.worker, None
        self._timer.stop()
        if worker is not None:
            worker.control.stop()
            if timeout:
                worker.join(timeout)

    def done(self, result: int) -> None:
        self.shutdown(timeout=0)  # closed while looking: the next show looks again
        super().done(result)


__all__ = ["LocalModelsDialog", "ScanWorker", "where_line"]
