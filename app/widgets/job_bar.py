"""The line a page shows about the work it waits for: :class:`JobBar`.

While a job of the page runs (any of its keys on the :class:`~app.core.jobs.JobBoard`), the bar says
what runs and for what, how far it is ("12 of 30 layers", a progress bar; a moving one while the work
is not countable), about how long is left once the pace is known, and offers Cancel. While the page
shows a result older than its input (the user typed a new prompt, pressed Patch with a new corrupted
prompt, or cancelled), :meth:`JobBar.set_stale` says which input the shown result belongs to and greys
the widget that shows it, until the page marks it current again. A result is never shown as current
when it is not.
"""

from __future__ import annotations

import contextlib
import html
import time
from collections.abc import Callable, Sequence
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QColor, QPainter
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.core.jobs import Job, JobBoard
from app.core.state import Signal

#: How often a running job's progress is read (ms).
POLL_MS = 150
#: A job shows its busy line once it has been waiting or running this long (ms): a trace of a small
#: model (tens of ms) never flashes a bar, a long one is announced at once. While the result shown is
#: stale (its input changed) the page says so at once, whatever the job's length.
SHOW_AFTER_MS = 250
#: The opacity of a result shown while it is not the current input's.
STALE_OPACITY = 0.4


class Veil(QWidget):
    """A translucent white cover over ``target`` (the stale result under it stays visible, greyed, and
    takes the mouse as before): a child of ``target`` that follows its size and stays on top. Unlike a
    graphics effect it never caches the widgets under it, so a view that redraws beneath stays right."""

    def __init__(self, target: QWidget):
        super().__init__(target)
        self.target = target
        self.setAttribute(Qt.WidgetAttribute.WA_TransparentForMouseEvents)
        self.hide()
        target.installEventFilter(self)

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize and obj is self.target:
            self.setGeometry(self.target.rect())
        return False

    def cover(self, on: bool) -> None:
        if on:
            self.setGeometry(self.target.rect())
            self.raise_()
        self.setVisible(on)

    def paintEvent(self, event) -> None:
        QPainter(self).fillRect(self.rect(), QColor(255, 255, 255, round(255 * (1 - STALE_OPACITY))))


class JobBar(QWidget):
    """The busy line and the stale line of one page (module doc). ``cancel(key)`` stops the job under
    ``key`` (the compute worker's :meth:`~app.session.compute.ComputeWorker.abort`). ``jobEnded(key,
    state)`` when a job under its keys ends (done, failed, cancelled, superseded)."""

    jobEnded = QtSignal(str, str)

    def __init__(
        self,
        board: JobBoard,
        keys: Sequence[str] = (),
        *,
        cancel: Callable[[str], bool],
        parent: QWidget | None = None,
    ) -> None:
        super().__init__(parent)
        self.board = board
        self.keys: tuple[str, ...] = tuple(keys)
        self._cancel = cancel
        self._veils: list[Veil] = []
        self._floating: QWidget | None = None
        self._placed_for: tuple[bool, str] = (False, "")  # the rows the banner was last sized for
        self._stale_note = ""
        self._stale_since = 0.0
        lay = self._lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(2)
        self.busy_row = QWidget()
        row = QHBoxLayout(self.busy_row)
        row.setContentsMargins(0, 0, 0, 0)
        self.label = QLabel()
        self.label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.bar = QProgressBar()  # how far, and the time left, written on it: always in sight
        self.bar.setFixedWidth(220)
        self.bar.setTextVisible(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("stop this computation; the page keeps what it showed before")
        self.cancel_button.clicked.connect(self._on_cancel)
        row.addWidget(self.label, 1)
        row.addWidget(self.bar)
        row.addWidget(self.cancel_button)
        self.stale_label = QLabel()
        self.stale_label.setWordWrap(True)
        self.stale_label.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.busy_row)
        lay.addWidget(self.stale_label)
        self._timer = QTimer(self)
        self._timer.setInterval(POLL_MS)
        self._timer.timeout.connect(self.update_now)
        subscribe(board.changed, self._on_board, self)
        self.update_now()

    # ---- what the page says ----------------------------------------------------------------------
    def set_keys(self, keys: Sequence[str]) -> None:
        """Follow the jobs under ``keys`` (the page in view changed)."""
        self.keys = tuple(keys)
        self.update_now()

    def cover(self, *widgets: QWidget) -> None:
        """The widgets that show the page's result: greyed (a :class:`Veil` over each) while it is stale."""
        self._veils = [Veil(w) for w in widgets]

    def float_over(self, target: QWidget) -> None:
        """Lie over the bottom of ``target`` (a banner above the result it speaks of) instead of taking a
        row of a layout, so showing and hiding it never moves what is drawn."""
        self.setParent(target)
        self.setObjectName("jobBanner")
        self.setAttribute(Qt.WidgetAttribute.WA_StyledBackground, True)  # the style sheet paints it
        self.setStyleSheet(
            "#jobBanner { background: #fdf6e3; border: 1px solid #c9b27c; border-radius: 4px; }"
        )
        self._lay.setContentsMargins(8, 4, 8, 4)
        self._floating = target
        target.installEventFilter(self)
        self._place()

    def eventFilter(self, obj: QObject, event: QEvent) -> bool:
        if obj is self._floating and event.type() == QEvent.Type.Resize:
            self._place()
        return False

    def _place(self) -> None:
        target = self._floating
        if target is None:
            return
        width = max(100, target.width() - 16)
        height = self.heightForWidth(width) if self.hasHeightForWidth() else self.sizeHint().height()
        self.setGeometry(8, max(0, target.height() - height - 8), width, height)
        self.raise_()

    def set_stale(self, note: str | None, *, at_once: bool = False) -> None:
        """Say that the result shown belongs to another input (``note``, rich text: "Showing the previous
        prompt “…”"), greying it; None: the result shown is the current input's. The page is stale from
        this call on (:attr:`stale`); the note and the grey show once it has lasted
        :data:`SHOW_AFTER_MS` (``at_once``: now, for a run that failed or was cancelled), so a quick
        run never makes the page flicker."""
        if note and (not self._stale_note or at_once):
            self._stale_since = -1e9 if at_once else time.monotonic()
        self._stale_note = note or ""
        self.update_now()

    def _grey(self, on: bool) -> None:
        for veil in self._veils:
            if veil.isVisible() != on:
                veil.cover(on)
        if on and self._veils:
            self.raise_()  # the bar's Cancel above the veil when both are in one widget

    @property
    def greyed(self) -> bool:
        """Whether the result is drawn greyed now (stale for at least :data:`SHOW_AFTER_MS`)."""
        return any(not veil.isHidden() for veil in self._veils)

    @property
    def stale(self) -> bool:
        """Whether the page says its result belongs to another input than its current one."""
        return bool(self._stale_note)

    @property
    def stale_note(self) -> str:
        return self._stale_note

    # ---- what the board says ---------------------------------------------------------------------
    def job(self) -> Job | None:
        """The first queued or running job under the bar's keys, or None."""
        for key in self.keys:
            job = self.board.get(key)
            if job is not None and job.active:
                return job
        return None

    @property
    def busy(self) -> bool:
        return self.job() is not None

    def update_now(self) -> None:
        """Read the board and the running job's progress into the bar."""
        job, now, after = self.job(), time.monotonic(), SHOW_AFTER_MS / 1000
        stale_shown = bool(self._stale_note) and now - self._stale_since >= after
        announced = job is not None and (stale_shown or now - job.submitted >= after)
        self.busy_row.setVisible(bool(announced))
        self._grey(stale_shown)
        if job is not None:
            self.label.setText(job.headline())
            self.label.setToolTip(job.describe())
            self.bar.setFormat(job.how_far() or "starting…")
            snap = job.snapshot()
            fraction = snap.fraction if job.state == "running" else None
            if fraction is None:
                self.bar.setRange(0, 0)  # a moving bar: running, not countable (or waiting its turn)
            else:
                self.bar.setRange(0, 1000)
                self.bar.setValue(round(1000 * fraction))
            self.cancel_button.setEnabled(not snap.cancelled)
        pending = job is not None or (bool(self._stale_note) and not stale_shown)
        if pending and not self._timer.isActive():
            self._timer.start()
        elif not pending and self._timer.isActive():
            self._timer.stop()
        self.stale_label.setVisible(stale_shown)
        self.stale_label.setText(f"<span style='color:#8a4b00'>{self._stale_note}</span>")
        visible = bool(announced) or stale_shown
        rows = (bool(announced), self._stale_note if stale_shown else "")
        if visible and self._floating is not None and (self.isHidden() or rows != self._placed_for):
            self._place()  # on showing, or when its rows change: not on every poll of the progress
        self._placed_for = rows
        self.setVisible(visible)

    def _on_board(self, key: str) -> None:
        if key in self.keys:
            self.update_now()
            job = self.board.get(key)
            if job is not None and not job.active:
                self.jobEnded.emit(key, job.state)

    def _on_cancel(self) -> None:
        job = self.job()
        if job is not None:
            self._cancel(job.key)
            self.update_now()


def subscribe(signal: Signal, slot: Callable[..., Any], owner: QObject) -> None:
    """Connect ``slot`` to a Qt-free ``signal`` (:class:`app.core.state.Signal`) for as long as ``owner``
    lives: it is disconnected when ``owner``'s C++ object is destroyed, so a model that outlives a view
    (the session's board, a closed tab) never calls into a deleted widget."""
    signal.connect(slot)

    def forget(*_: Any) -> None:
        with contextlib.suppress(ValueError):  # already disconnected
            signal.disconnect(slot)

    owner.destroyed.connect(forget)


def quoted(text: str, limit: int = 60) -> str:
    """``text`` in quotes for a stale line, escaped, cut to ``limit`` characters with an ellipsis."""
    one_line = " ".join(text.split())
    cut = one_line if len(one_line) <= limit else one_line[: limit - 1] + "…"
    return f"“{html.escape(cut, quote=False)}”"


__all__ = ["JobBar", "Veil", "quoted", "subscribe"]
