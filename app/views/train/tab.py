"""The Train tab: run controls, live curves, live attention with a step scrubber, samples, generation.

Layout: a control row (Start/Continue, Pause/Resume, Stop, Save now, progress with ETA), under it
one line saying what Start will do, or why it cannot (:meth:`~app.session.training_run.TrainingRun.plan`),
then the curves (left) beside the live attention of the probe prompt (right: the head grid and the step
scrubber), and at the bottom the samples written during training beside the generation box. For a
mixture-of-experts model the samples share their place with the router's load per layer and expert
at the newest step (a tab of its own, in front once such a model is shown; hidden for a dense model).

Everything drawn here comes from :class:`~app.session.session.Session` signals, which the session emits at
most ~30 times a second from its mailbox drain, so the GUI never falls behind the trainer.
"""

from __future__ import annotations

import html
import math

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeySequence, QTextCursor
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.core.pace import format_eta
from app.session.messages import InspectPrompt, ask
from app.views.tab import TabBase
from app.views.train.follow_bar import FollowBar
from app.views.train.generate_box import GenerateBox
from app.views.train.live_attention import LiveAttention
from app.views.train.plots import TrainPlots
from app.views.train.router_load import RouterLoad
from app.views.train.share_splitter import ShareSplitter
from app.widgets.progress import ReadableProgressBar
from model.train.settings import eta_seconds

#: the share of the Train tab's height the curves and the live heads get (the rest: samples, Generate),
#: and the least they get (px) on a small screen, where the loss plot's guide labels need it
TOP_SHARE, TOP_LEAST = 0.57, 345


class TrainTab(TabBase):
    """Train the current model and watch it learn. Buttons: ``start_button`` ... ``save_button``.
    It asks its host (the window) before a fresh run replaces unsaved training, and where "Save now"
    writes when the model has no checkpoint path yet; it asks the Attention tab, through the
    session's hub (:class:`~app.session.messages.InspectPrompt`), to run a chat's templated text."""

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session

        root = QVBoxLayout(self)
        root.addLayout(self._build_controls())
        self.plan_label = QLabel()  # what Start will do, before it is pressed (or why it cannot)
        self.plan_label.setObjectName("startPlan")
        self.plan_label.setWordWrap(True)
        self.plan_label.setTextFormat(Qt.TextFormat.PlainText)
        self.plan_label.setMaximumHeight(3 * self.plan_label.fontMetrics().lineSpacing())
        root.addWidget(self.plan_label)
        self.follow_bar = FollowBar(session)
        root.addWidget(self.follow_bar)

        # the curves and heads above, the samples and the Generate box below: room for both at any size
        main = ShareSplitter(Qt.Orientation.Vertical, TOP_SHARE, TOP_LEAST)
        top = QSplitter(Qt.Orientation.Horizontal)
        self.plots = TrainPlots()
        top.addWidget(self.plots)
        self.live = LiveAttention(session)
        self.live.stepShown.connect(self.plots.set_step_marker)
        top.addWidget(self.live)
        top.setStretchFactor(0, 5)
        top.setStretchFactor(1, 6)
        main.addWidget(top)
        bottom = QSplitter(Qt.Orientation.Horizontal)
        bottom.addWidget(self._build_samples())
        self.generate_box = GenerateBox(session)
        self.generate_box.attentionPromptRequested.connect(lambda text: ask(session.hub, InspectPrompt(text)))
        bottom.addWidget(self.generate_box)
        main.addWidget(bottom)
        root.addWidget(main, 1)
        self.top_splitter, self.main_splitter = top, main

        s = session
        s.trainingStateChanged.connect(self._on_state)
        s.eventsAppended.connect(self._on_events)
        s.historyReset.connect(self._on_history_reset)
        s.sampleAdded.connect(self._on_sample)
        s.modelChanged.connect(self._on_model)
        for changed in (s.configChanged, s.trainSettingsChanged, s.editsChanged):
            changed.connect(lambda *_: self._update_buttons())
        s.dataChanged.connect(self._on_data)
        s.trainingFinished.connect(self._on_finished)
        s.checkpointSaved.connect(lambda path: self.status_label.setText(f"Saved to {path}"))
        if s.source is not None:
            self._on_data(s.source)
        self._update_router()
        self._on_history_reset()
        self._update_buttons()

    # ---- building ------------------------------------------------------------------------------
    def _build_controls(self) -> QHBoxLayout:
        row = QHBoxLayout()
        self.start_button = QPushButton("Start")
        self.start_button.setObjectName("startButton")
        self.start_button.setToolTip("Train the model with the Model and Training panels' settings (F5)")
        self.start_button.clicked.connect(self.start)
        self.pause_button = QPushButton("Pause")
        self.pause_button.setObjectName("pauseButton")
        self.pause_button.setToolTip("Hold training after the current step; Resume goes on (F6)")
        self.pause_button.clicked.connect(self.toggle_pause)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setObjectName("stopButton")
        self.stop_button.setToolTip("End the run after the current step; Continue trains on later (F7)")
        self.stop_button.clicked.connect(self.session.stop_training)
        self.save_button = QPushButton("Save now")
        self.save_button.setObjectName("saveNowButton")
        self.save_button.setToolTip("Write a checkpoint now, between two steps, without stopping")
        self.save_button.clicked.connect(self.save_now)
        for b in (self.start_button, self.pause_button, self.stop_button, self.save_button):
            row.addWidget(b)
        self.progress = ReadableProgressBar()  # its text contrasts with the bar at any fill
        self.progress.setObjectName("trainProgress")
        self.progress.setMinimumWidth(160)
        self.progress.setFormat("idle")
        self.progress.setTextVisible(True)
        row.addWidget(self.progress, 1)
        self.status_label = QLabel()
        self.status_label.setObjectName("trainStatus")
        self.status_label.setWordWrap(True)
        self.status_label.setMinimumWidth(120)
        row.addWidget(self.status_label, 1)

        self.start_action = QAction("Start / continue training", self)
        self.start_action.setShortcut(QKeySequence("F5"))
        self.start_action.triggered.connect(lambda: self.start() if self.start_button.isEnabled() else None)
        self.pause_action = QAction("Pause / resume training", self)
        self.pause_action.setShortcut(QKeySequence("F6"))
        self.pause_action.triggered.connect(
            lambda: self.toggle_pause() if self.pause_button.isEnabled() else None
        )
        self.stop_action = QAction("Stop training", self)
        self.stop_action.setShortcut(QKeySequence("F7"))
        self.stop_action.triggered.connect(lambda: self.session.stop_training())
        return row

    def _build_samples(self) -> QWidget:
        """The samples written while training and, for a mixture of experts, the router load, as tabs."""
        self.bottom_tabs = QTabWidget()
        self.bottom_tabs.setDocumentMode(True)
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 4, 0, 0)
        self.samples_view = QPlainTextEdit()
        self.samples_view.setObjectName("samplesView")
        self.samples_view.setReadOnly(True)
        self.samples_view.setPlaceholderText(
            "Generated text appears here every few steps while training "
            "(Training panel: “Sample text every”)."
        )
        self.samples_view.setMaximumBlockCount(2000)
        self.samples_view.setMinimumHeight(50)
        layout.addWidget(self.samples_view)
        self.bottom_tabs.addTab(box, "Samples while training")
        self.router_load = RouterLoad()  # a tab for a mixture of experts only
        self.bottom_tabs.addTab(self.router_load, "Router load")
        self.bottom_tabs.setTabToolTip(1, self.router_load.toolTip())
        self.bottom_tabs.setTabVisible(1, False)
        return self.bottom_tabs

    # ---- hooks for the window ------------------------------------------------------------------
    def menu_actions(self) -> dict[str, list[QAction]]:
        return {"Training": [self.start_action, self.pause_action, self.stop_action]}

    def export_targets(self) -> dict[str, QWidget]:
        targets = {"curves": self.plots.view, "attention": self.live.head_grid.view}
        if self.router_load_shown:
            targets["router-load"] = self.router_load.view
        return targets

    def screenshot_pages(self):
        return [("", lambda: None)]

    def shutdown(self) -> None:
        self.generate_box.shutdown()

    # ---- run control ---------------------------------------------------------------------------
    def start_blocker(self) -> str:
        """Why Start is disabled now ('' when it is enabled): the first reason of Start's rule,
        :meth:`~app.session.training_run.TrainingRun.problems` (a panel's own problem first)."""
        problems = self.session.run.problems()
        return problems[0] if problems else ""

    def start(self) -> None:
        """Start or continue; a fresh run over unsaved training asks first (the host's ``maybe_save``)."""
        if self.start_blocker():
            return
        s = self.session
        if not s.run.can_continue() and not self.host.maybe_save("Start a fresh run"):
            return
        try:
            s.start_training()
        except Exception as exc:
            self.status_label.setText(f"<span style='color:#c02020'>Cannot start: {_html(str(exc))}</span>")
            return
        self.status_label.setText("Starting…")

    def toggle_pause(self) -> None:
        if self.session.state == "paused":
            self.session.run.resume()
        else:
            self.session.run.pause()

    def save_now(self) -> None:
        if self.session.checkpoint_path:
            try:
                self.session.save_checkpoint(self.session.checkpoint_path)
            except Exception as exc:
                self.status_label.setText(f"<span style='color:#c02020'>Save failed: {exc}</span>")
        else:
            self.host.save_checkpoint_as()

    def _update_buttons(self) -> None:
        s = self.session
        state = s.state
        buttons = (self.start_button, self.pause_button, self.stop_button, self.save_button)
        # a control button that is about to be disabled hands the focus to its counterpart, never
        # to the next editor in the chain (Qt's choice), where the next key would change a value
        had_focus = any(b.hasFocus() for b in buttons)
        blocker = self.start_blocker()
        self.start_button.setEnabled(not blocker)
        self._show_plan(blocker)
        if not s.is_training:
            self.start_button.setText(self._start_text())
        self.pause_button.setEnabled(state in ("running", "paused"))
        self.pause_button.setText("Resume" if state == "paused" else "Pause")
        self.stop_button.setEnabled(state in ("starting", "running", "paused", "following"))
        self.save_button.setEnabled(s.model is not None and state in ("idle", "running", "paused"))
        focused = QApplication.focusWidget()
        if had_focus and not (focused in buttons and focused.isEnabled()):
            self._focus_pending = True
            if focused is not None and focused not in buttons:
                focused.clearFocus()  # where Qt put it: the next key must not edit a field
        if self._focus_pending:
            current = QApplication.focusWidget()
            if current is not None and current not in buttons:
                self._focus_pending = False  # the user has moved on
            for b in (self.pause_button, self.stop_button) if s.is_training else (self.start_button,):
                if self._focus_pending and b.isEnabled():
                    b.setFocus(Qt.FocusReason.OtherFocusReason)
                    self._focus_pending = False

    _focus_pending = False

    def _show_plan(self, blocker: str) -> None:
        """The line under the controls: why Start is disabled (red), else what it will do; empty
        while a run trains or a run folder is followed."""
        s = self.session
        if s.is_training or s.is_following:
            text, red = "", False
        elif blocker:
            text, red = f"Start is disabled: {blocker}", True
        else:
            text, red = s.run.plan().text, False
        self.plan_label.setText(text)
        self.plan_label.setToolTip(text)
        self.plan_label.setStyleSheet("color:#c02020" if red else "color:#444")
        self.start_button.setToolTip(f"{text} (F5)" if text else "Train the model (F5)")

    def _start_text(self) -> str:
        return "Continue" if self.session.run.can_continue() else "Start"

    def _on_model(self, *_: object) -> None:
        self._update_buttons()
        self._update_reference()
        self._update_router()

    def _on_state(self, state: str) -> None:
        self._update_buttons()
        self._update_progress()
        if state == "paused":
            self.status_label.setText(f"Paused at step {self.session.step}")
        elif state == "running":
            self.status_label.setText("Training…")
        elif state == "stopping":
            self.status_label.setText("Stopping after this step…")

    def _on_finished(self, reason: str, message: str) -> None:
        self.plots.append([], now=True)  # the last curve points at once
        if reason == "error":
            self.status_label.setText(f"<span style='color:#c02020'>Stopped: {message}</span>")
        else:
            self.status_label.setText(message[:1].upper() + message[1:] if message else "")
        self._update_progress()
        self._update_buttons()

    # ---- progress and curves -------------------------------------------------------------------
    def _update_router(self) -> None:
        """The router load for a mixture-of-experts model (hidden for a dense one), from its newest step."""
        model = self.session.model
        was = self.router_load.is_moe
        self.router_load.set_config(model.config if model is not None else None)
        self.router_load.reset(self.session.history)
        moe = self.router_load.is_moe
        self.bottom_tabs.setTabVisible(1, moe)
        if moe and not was:  # a mixture of experts appeared: its load in front
            self.bottom_tabs.setCurrentIndex(1)
        elif not moe:
            self.bottom_tabs.setCurrentIndex(0)

    @property
    def router_load_shown(self) -> bool:
        """Whether the router load is offered (a mixture-of-experts model)."""
        return self.bottom_tabs.isTabVisible(1)

    def _on_history_reset(self) -> None:
        self.plots.reset(self.session.history)
        self.router_load.reset(self.session.history)
        self.samples_view.setPlainText("".join(_sample_block(st, t) for st, t in self.session.samples))
        self.live.reset()
        self._update_progress()
        self._update_reference()
        self._update_buttons()

    def _on_events(self, events: list) -> None:
        self.plots.append(events)
        self.router_load.add_events(events)
        self._update_progress()

    def _update_progress(self) -> None:
        s = self.session
        worker = s.run.worker or s.follow.worker  # the run trained here or the one followed
        target = s.target_steps
        step = s.step
        start = worker.start_step if worker is not None else 0
        span = max(1, target - start)
        done = min(span, max(0, step - start))
        self.progress.setRange(0, span)
        self.progress.setValue(done)
        if s.state == "paused":  # no ETA while nothing moves
            self.progress.setFormat(f"step {step} / {target}   paused")
        elif s.is_training or s.is_following:
            eta = eta_seconds(s.history, s.step, target)
            self.progress.setFormat(f"step {step} / {target}   ETA {format_eta(eta)}")
        else:
            self.progress.setFormat(f"step {step}" if step else s.slot.training_note() or "not trained yet")

    def _update_reference(self) -> None:
        """The uniform guess, ln V, of the model whose loss is drawn (its output size; else the
        tokenizer's while no model exists)."""
        s = self.session
        vocab = s.model.config.core.vocab_size if s.model is not None else None
        if vocab is None and s.tokenizer is not None:
            vocab = s.tokenizer.vocab_size
        self.plots.set_reference_loss(math.log(vocab) if vocab else None)

    # ---- data and frames ----------------------------------------------------------------------
    def _on_data(self, source) -> None:
        self._update_reference()
        self._update_buttons()
        self.generate_box.suggest(source.default_prompt[:24])

    def show_frame(self, index: int) -> None:
        """Scrub to kept frame ``index`` (negative counts from the newest)."""
        self.live.show_frame(index)

    # ---- samples -------------------------------------------------------------------------------
    def _on_sample(self, step: int, text: str) -> None:
        self.samples_view.moveCursor(QTextCursor.MoveOperation.End)
        self.samples_view.insertPlainText(_sample_block(step, text))
        self.samples_view.moveCursor(QTextCursor.MoveOperation.End)


def _html(text: str) -> str:
    return html.escape(text, quote=False)


def _sample_block(step: int, text: str) -> str:
    return f"── step {step} ──\n{text}\n\n"
