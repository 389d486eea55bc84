"""The History tab: scrub through a model's checkpoints and watch its heads form.

A history (:class:`model.io.history.traced.History`) comes from a Hub repo and some of its revisions (Pythia's
checkpoints), a folder of checkpoints, or a run folder's kept checkpoints (File → Open a training
history…). The step scrubber moves through the revisions; each is fetched, opened and traced on the
prompt only when first shown, in the session's compute worker, as a job of the session's board (its
busy line: how far the download or the trace is, Cancel): the GUI never waits, and while one step
loads, moving on supersedes it (the latest requested step wins; a download in flight for a step no
longer wanted stops at its next chunk). Until the step asked for is drawn, the grid is greyed and
said to be the step it shows. The head grid shows the
step's attention; the plot shows each kind's best head (or every head of one kind) against the step
on a log axis, over the revisions traced so far ("Trace all" traces the rest), and clicking a point
jumps to that step. Two steps go side by side to the Compare tab (A − B per head, metrics aligned).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSlider,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.session.messages import CompareRuns, ask
from app.session.settings import window_settings
from app.views.history.open_dialog import OpenHistoryDialog
from app.views.history.state import HistoryState
from app.views.history.step_plot import StepPlot
from app.views.history.to_compare import runs_of_steps
from app.views.tab import TabBase
from app.widgets.head_grid import HeadMosaic
from app.widgets.job_bar import JobBar
from model.errors import AttentionLabError
from model.io.history.revisions import open_source, suggested_prompt
from model.io.history.traced import History
from model.io.hub import DownloadCancelled, is_hub_spec
from model.progress import current

#: The compute keys of the tab's jobs: the step shown, "Trace all", the two steps for Compare.
JOBS = ("history.step", "history.fill", "history.compare")

#: The prompt when neither the run nor the session has one: a repeat, so induction heads show.
DEFAULT_PROMPT = "The cat sat on the mat because it was warm. The cat sat on the mat because it was warm."


class HistoryTab(TabBase):
    """A model's training history (see the module docstring). ``stepShown(index)`` once a step's
    snapshot is drawn; ``compareReady(a, b)`` once two steps are in the Compare tab."""

    #: the setup docks (data, model, training) are not needed here
    docks = ()
    stepShown = Signal(int)
    compareReady = Signal(str, str)
    failed = Signal(str)

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.state = HistoryState()
        self._wanted = -1
        self._filling = False
        root = QVBoxLayout(self)
        root.addLayout(self._build_source_row())
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self._build_grid())
        self.plot = StepPlot(self.state)
        self.plot.traceAllRequested.connect(self.trace_all)
        self.plot.stepClicked.connect(self.jump_to_step)
        split.addWidget(self.plot)
        split.setStretchFactor(0, 5)
        split.setStretchFactor(1, 4)
        root.addWidget(split, 1)
        root.addLayout(self._build_scrubber())
        root.addLayout(self._build_compare_row())
        self.job_bar.cover(self.mosaic)
        st = self.state
        st.opened.connect(self._on_opened)
        st.shown_changed.connect(self._draw_snapshot)
        st.message.connect(self.status_label.setText)
        self._on_opened()

    # ---- building ------------------------------------------------------------------------------
    def _build_source_row(self) -> QVBoxLayout:
        col = QVBoxLayout()
        row = QHBoxLayout()
        self.open_button = QPushButton("Open a history…")
        self.open_button.setToolTip(
            "A Hub repo and revisions (Pythia's checkpoints), a checkpoint folder or a run"
        )
        self.open_button.clicked.connect(self.open_dialog)
        row.addWidget(self.open_button)
        self.name_label = QLabel()
        self.name_label.setObjectName("historyName")
        row.addWidget(self.name_label, 1)
        col.addLayout(row)
        #: what is being fetched or traced, how far, Cancel; and which step the grid shows meanwhile
        self.job_bar = JobBar(self.session.jobs, JOBS, cancel=self._cancel_job)
        self.job_bar.jobEnded.connect(self._on_job_ended)
        col.addWidget(self.job_bar)
        prow = QHBoxLayout()
        prow.addWidget(QLabel("Prompt"))
        self.prompt_edit = QLineEdit()
        self.prompt_edit.setObjectName("historyPrompt")
        self.prompt_edit.setToolTip("Every step is traced on this prompt (a new prompt traces again; Enter)")
        self.prompt_edit.returnPressed.connect(self._apply_prompt)
        prow.addWidget(self.prompt_edit, 1)
        self.status_label = QLabel()
        self.status_label.setObjectName("historyStatus")
        self.status_label.setWordWrap(True)
        col.addLayout(prow)
        col.addWidget(self.status_label)
        return col

    def _build_grid(self) -> QWidget:
        box = QGroupBox("Attention at this step")
        layout = QVBoxLayout(box)
        self.mosaic = HeadMosaic(title="rows = queries, columns = keys", gamma=0.5, compact=True)
        self.mosaic.setMinimumHeight(200)
        layout.addWidget(self.mosaic, 1)
        self.best_label = QLabel()
        self.best_label.setObjectName("historyBest")
        self.best_label.setWordWrap(True)
        layout.addWidget(self.best_label)
        return box

    def _build_scrubber(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addWidget(QLabel("Step"))
        self.scrubber = QSlider(Qt.Orientation.Horizontal)
        self.scrubber.setObjectName("historyScrubber")
        self.scrubber.setToolTip("Move through the revisions: each is fetched and traced when first shown")
        self.scrubber.setPageStep(1)
        self.scrubber.valueChanged.connect(self.show_step)
        row.addWidget(self.scrubber, 1)
        self.step_label = QLabel()
        self.step_label.setObjectName("historyStep")
        self.step_label.setMinimumWidth(220)
        row.addWidget(self.step_label)
        return row

    def _build_compare_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addWidget(QLabel("Compare step"))
        self.a_combo, self.b_combo = QComboBox(), QComboBox()
        row.addWidget(self.a_combo)
        row.addWidget(QLabel("with"))
        row.addWidget(self.b_combo)
        self.compare_button = QPushButton("Side by side in Compare")
        self.compare_button.setToolTip(
            "Both steps as runs of the Compare tab: A − B per head, metrics aligned"
        )
        self.compare_button.clicked.connect(
            lambda: self.compare_steps(self.a_combo.currentIndex(), self.b_combo.currentIndex())
        )
        row.addWidget(self.compare_button)
        row.addStretch(1)
        return row

    # ---- opening -------------------------------------------------------------------------------
    def open_dialog(self) -> bool:
        """File → Open a training history…: the dialog, then :meth:`open_history`."""
        settings = window_settings(self)
        dialog = OpenHistoryDialog(self, last_dir=settings.last_dir("history") if settings else "")
        if not dialog.exec():
            return False
        spec, revisions = dialog.choice()
        if settings is not None and spec and not is_hub_spec(spec):
            settings.set_last_dir("history", Path(spec).parent)  # the next Browse… shows this folder
        return self.open_history(spec, revisions)

    def open_history(self, spec: str, revisions=None, *, prompt: str | None = None, cache_dir=None) -> bool:
        """Open the history of ``spec`` (``hf:REPO`` with ``revisions``, or a folder); nothing is fetched
        until a step is shown. False (and the reason in the status line) when it cannot be opened."""
        try:
            source = open_source(spec, revisions)
        except AttentionLabError as exc:  # a history, a Hub name or a folder that cannot be opened
            self.state.say(f"<span style='color:#c02020'>Cannot open {spec}: {exc}</span>")
            self.failed.emit(str(exc))
            return False
        # the run's own probe prompt, else text: never the shown model's prompt (the starter's letters
        # belong to its task, not to a Pythia)
        prompt = prompt or suggested_prompt(source) or DEFAULT_PROMPT
        self.cancel()
        self._cache_dir = cache_dir
        self.state.open(History(source, prompt, cache_dir=cache_dir))
        self.show_step(0)
        return True

    def _apply_prompt(self) -> None:
        h = self.state.history
        text = self.prompt_edit.text()
        if h is None or not text or text == h.prompt:
            return

        index = self.state.index
        self.cancel()
        self.state.open(History(h.source, text, cache_dir=getattr(self, "_cache_dir", None)))
        self.scrubber.setValue(index)
        self.show_step(index)

    def _on_opened(self) -> None:
        h = self.state.history
        self._wanted = -1
        self.state.say("")  # a message (an error) of the history open before is not this one's
        self.mosaic.clear("open a history: File → Open a training history…" if h is None else "loading…")
        for w in (self.scrubber, self.compare_button):
            w.setEnabled(h is not None)
        if h is None:
            self.name_label.setText("<i>no history open</i>")
            self.step_label.setText("")
            return
        self.name_label.setText(f"<b>{h.name}</b>")
        self.prompt_edit.setText(h.prompt)
        self.scrubber.blockSignals(True)
        self.scrubber.setRange(0, len(h) - 1)
        self.scrubber.setValue(0)
        self.scrubber.blockSignals(False)
        for combo in (self.a_combo, self.b_combo):
            combo.clear()
            combo.addItems([f"{r.step} ({r.label})" for r in h.revisions])
        self.a_combo.setCurrentIndex(len(h) - 1)
        self.b_combo.setCurrentIndex(0)

    # ---- scrubbing -----------------------------------------------------------------------------
    def show_step(self, i: int) -> None:
        """Show revision ``i``: at once from memory, else off the GUI thread (the latest request wins)."""
        h = self.state.history
        if h is None or not 0 <= i < len(h):
            return
        self.state.set_index(i)
        if self.scrubber.value() != i:
            self.scrubber.blockSignals(True)
            self.scrubber.setValue(i)
            self.scrubber.blockSignals(False)
        rev = h.revisions[i]
        self._wanted = i
        self.step_label.setText(f"step {rev.step}  ({i + 1} of {len(h)})")
        shown = self.state.shown
        if shown is not None and shown.step != rev.step:
            self.job_bar.set_stale(f"Showing step {shown.step} until step {rev.step} is traced.")
        self.session.compute.submit(
            "history.step",
            lambda: self._job(h, i),
            lambda s, e: self._done(h, i, s, e),
            title="Fetching and tracing",
            subject=f"step {rev.step} ({rev.label})",
        )

    def _job(self, h: History, i: int):
        """In the compute thread: the snapshot. A download says how far it is on the job's progress and
        stops when the job is cancelled or another step is wanted; the trace stops at the next block."""
        progress = current()

        def stop() -> bool:
            return (progress is not None and progress.cancelled) or (self._wanted != i and not self._filling)

        def said(p) -> None:
            if progress is not None and not getattr(p, "finished", False):
                progress.describe(p.done, p.total, f"{p.ref}: {p.line()}")

        return h.snapshot(i, on_progress=said, should_stop=stop)

    def _done(self, h: History, i: int, snap, error) -> None:
        if h is not self.state.history:
            return
        if error is not None:
            if isinstance(error, DownloadCancelled):
                self.state.say(f"Cancelled {h.revisions[i].label}: pick the step again to continue.")
            else:
                self.state.say(f"<span style='color:#c02020'>{h.revisions[i].label}: {error}</span>")
                self.failed.emit(str(error))
            if self.state.shown is None:  # never "loading…" once nothing is on its way
                self.mosaic.clear(f"{h.revisions[i].label} could not be opened (the reason is above)")
            self._filling = False
            return
        if i == self._wanted:
            self.state.show(snap)
            self.stepShown.emit(i)
        else:
            self.state.table_changed.emit()
        if self._filling:
            self._fill_next()

    def cancel(self) -> None:
        """Stop the download or trace in progress and "Trace all" (what is finished stays, in the cache)."""
        self._filling = False
        for key in JOBS:
            self.session.compute.abort(key)

    def _cancel_job(self, key: str) -> bool:
        """The busy line's Cancel: "Trace all" stops with the step it traces."""
        self._filling = False
        return self.session.compute.abort(key)

    def _on_job_ended(self, key: str, state: str) -> None:
        h, i = self.state.history, self._wanted
        if state != "cancelled" or h is None or key == "history.compare":
            return
        label = h.revisions[i].label if 0 <= i < len(h) else "the step"
        self.state.say(f"Cancelled {label}: pick the step again to continue.")
        shown = self.state.shown
        if shown is not None and 0 <= i < len(h) and shown.step != h.revisions[i].step:
            self.job_bar.set_stale(
                f"Showing step {shown.step} (step {h.revisions[i].step} was cancelled).", at_once=True
            )
        elif shown is None:
            self.mosaic.clear(f"{label} was cancelled: pick the step again to continue")

    def trace_all(self) -> None:
        """Trace every revision not traced yet, one per compute job (the plot grows as they come)."""
        if self.state.history is None:
            return
        self._filling = True
        self._fill_next()

    def _fill_next(self) -> None:
        h = self.state.history
        todo = [i for i in range(len(h)) if not h.is_in_memory(i)] if h is not None else []
        if h is None or not todo:
            self._filling = False
            self.state.say(f"All {len(h)} revisions traced." if h is not None else "")
            return
        i = todo[0]
        self.state.say(f"Tracing {h.revisions[i].label} ({len(h) - len(todo) + 1} of {len(h)})…")
        self.session.compute.submit(
            "history.fill",
            lambda: self._job(h, i),
            lambda s, e: self._done(h, i, s, e),
            title="Tracing every step:",
            subject=f"{h.revisions[i].label} ({len(h) - len(todo) + 1} of {len(h)})",
        )

    # ---- drawing -------------------------------------------------------------------------------
    def _draw_snapshot(self, snap) -> None:
        h = self.state.history
        self.job_bar.set_stale(None)
        self.mosaic.set_data(snap.weights, snap.labels, title=f"step {snap.step} ({snap.label})")
        self.best_label.setText("Best heads: " + self.state.describe(snap))
        cached = " · from the trace cache" if snap.from_cache else ""
        if h is not None:
            self.step_label.setText(f"step {snap.step}  ({self.state.index + 1} of {len(h)}){cached}")
        self.plot.mark_step(snap.step)

    def jump_to_step(self, step: int) -> None:
        """Show the revision nearest ``step`` (what clicking a point does)."""
        h = self.state.history
        if h is not None:
            self.show_step(h.index_of(step))

    # ---- compare -------------------------------------------------------------------------------
    def compare_steps(self, a: int, b: int) -> None:
        """Revisions ``a`` and ``b`` as two runs of the Compare tab (traced and opened off the GUI thread)."""
        h = self.state.history
        if h is None:
            return
        self.state.say(f"Preparing steps {h.revisions[a].step} and {h.revisions[b].step} for Compare…")

        def job():
            return [(h.snapshot(i), h.model(i)) for i in (a, b)]

        self.session.compute.submit(
            "history.compare",
            job,
            lambda r, e: self._compare_done(h, a, b, r, e),
            title="Preparing for Compare:",
            subject=f"steps {h.revisions[a].step} and {h.revisions[b].step}",
        )

    def _compare_done(self, h, a: int, b: int, result, error) -> None:
        if error is not None:
            self.state.say(f"<span style='color:#c02020'>Cannot compare: {error}</span>")
            return
        runs = runs_of_steps(h, list(zip((a, b), result, strict=True)))
        if not ask(self.session.hub, CompareRuns(runs, prompt=h.prompt)):
            self.state.say("The Compare tab is not open.")
            return
        names = [run.name for run in runs]  # as the Compare tab named them (unique there)
        self.state.say(f"{names[0]} and {names[1]} are in the Compare tab.")
        self.compareReady.emit(*names)

    # ---- hooks for the window ------------------------------------------------------------------
    def export_targets(self) -> dict[str, QWidget]:
        return {"plot": self.plot.curves.view, "attention": self.mosaic.view}

    def screenshot_pages(self):
        return [("", lambda: None)]

    def shutdown(self) -> None:
        self.cancel()


__all__ = ["HistoryTab"]
