"""Training comparisons for the Labs: two (or more) variants of one small model trained side by side.

The app's :class:`~app.session.workers.GroupWorker` trains a :class:`ComparisonSpec` (every variant from the
same seed, on identical batches, one step of each in turn). Between steps it can take a *probe* of
each variant (a number such as the mean max attention weight, or a gradient profile) and a generated
*sample*. Results go into its mailbox; the panel drains it with a ~30 Hz timer (never a signal per
step), and a stop takes effect before the next step. A variant whose loss diverges is dropped with a
note, the others go on.

:class:`ComparisonPanel` is the widget: Start/Stop, a progress line, the loss curves of every
variant (raw and smoothed, one smoothing control), an optional probe plot and one sample box per variant.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.core.pace import progress_line
from app.session.workers import GroupSpec, GroupWorker, drain_timer
from app.widgets.curves import Curves
from app.widgets.palette import color_for
from model.train.settings import TrainSettings


@dataclass
class ComparisonSpec(GroupSpec):
    """A :class:`~app.session.workers.GroupSpec` plus how the probe plot reads a probe value:
    ``probe_scalar(value)`` is the number it shows."""

    probe_scalar: Callable[[Any], float] = float
    extra: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def lab_settings(*, steps: int, batch_size: int, seq_len: int, lr: float, warmup: int) -> Any:
        """A lab comparison's :class:`~model.train.settings.TrainSettings`: evaluated once, at the end; seed 0
        (every variant sees the same batches); one CPU thread."""
        return TrainSettings(
            steps=steps,
            batch_size=batch_size,
            seq_len=seq_len,
            lr=lr,
            warmup=warmup,
            eval_every=steps,
            eval_batches=2,
            seed=0,
            device="cpu",
            threads=1,
        ).validate()


class ComparisonPanel(QWidget):
    """Start/Stop, the loss curves of each variant, an optional probe plot and samples.

    ``spec_factory()`` builds the :class:`ComparisonSpec` when Start is pressed (it may raise
    ValueError/ConfigError: the message is shown). Signals: ``started()``, ``finished(reason, message)``
    with reason done/stopped/error, ``probed(name, step, value)`` for each probe as it arrives.
    """

    started = Signal()
    finished = Signal(str, str)
    probed = Signal(str, int, object)

    def __init__(
        self,
        spec_factory: Callable[[], ComparisonSpec],
        *,
        title: str = "Training comparison",
        probe_title: str = "",
        probe_label: str = "",
        probe_log_y: bool = False,
        samples: bool = False,
        session=None,
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self.spec_factory = spec_factory
        self.title = title
        #: the app's session, when given: its run shares the CPU, and the progress line says so
        self.session = session
        self.worker: GroupWorker | None = None
        self.losses: dict[str, tuple[list[int], list[float]]] = {}
        self.probes: dict[str, tuple[list[int], list[Any]]] = {}
        self.sample_texts: dict[str, str] = {}
        self.notes: list[str] = []
        self._t0 = 0.0
        self._target = 0
        #: the running comparison's ``probe_scalar`` (the worker knows its spec only as a GroupSpec)
        self._probe_scalar: Callable[[Any], float] = float

        root = QVBoxLayout(self)
        root.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        self.start_button = QPushButton("Start comparison")
        self.start_button.setToolTip(
            "Build the variants from one seed and train them in turn on the same batches"
        )
        self.start_button.clicked.connect(self.start)
        self.stop_button = QPushButton("Stop")
        self.stop_button.setEnabled(False)
        self.stop_button.clicked.connect(self.stop)
        self.status = QLabel("Not started.")
        self.status.setWordWrap(True)
        row.addWidget(self.start_button)
        row.addWidget(self.stop_button)
        row.addWidget(self.status, 1)
        root.addLayout(row)

        plots = QHBoxLayout()
        self.loss_plot = Curves(title, "training loss (nats)")
        plots.addWidget(self.loss_plot, 1)
        self.probe_plot = None
        if probe_title:
            self.probe_plot = Curves(
                probe_title,
                probe_label,
                smoothing=0.0,
                controls=False,
                log_y=probe_log_y,
                legend_offset=(8, 8),
                legend_text_size="8pt",
                redraw_ms=0,
            )
            plots.addWidget(self.probe_plot, 1)
        root.addLayout(plots, 3)

        self.sample_boxes: dict[str, QPlainTextEdit] = {}
        self.samples_row = None
        if samples:
            self.samples_row = QHBoxLayout()
            root.addLayout(self.samples_row, 1)

        self._timer = drain_timer(self, self._drain)

    # ---- control -----------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.worker is not None

    def start(self) -> None:
        if self.worker is not None:
            return
        try:
            spec = self.spec_factory()
        except Exception as exc:
            self.status.setText(f"Cannot start: {exc}")
            return
        self.losses.clear()
        self.probes.clear()
        self.sample_texts.clear()
        self.notes.clear()
        self.loss_plot.clear()
        if self.probe_plot is not None:
            self.probe_plot.clear()
        self._make_sample_boxes(list(spec.variants))
        self._target = int(spec.settings.steps)
        self._probe_scalar = spec.probe_scalar
        self._t0 = time.monotonic()
        self.worker = GroupWorker(spec)
        self.worker.finished.connect(self._finish)
        if self.session is not None:  # a job of the window's board: how far, Cancel (Stop)
            n = len(spec.variants)
            self.worker.announce(self.session.jobs, self.job_key, f"{self.title}: {n} variants", "")
        self.worker.start()
        self.start_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.status.setText(f"Building {len(spec.variants)} models from one seed …")
        self._timer.start()
        self.started.emit()

    def stop(self) -> None:
        if self.worker is not None:
            if self.worker.job is not None:
                self.session.jobs.cancel(self.job_key)  # the job's Cancel stops the loop
            else:
                self.worker.control.stop()
            self.status.setText("Stopping after the current step …")

    @property
    def job_key(self) -> str:
        """The comparison's key on the board."""
        return f"labs.comparison.{self.title}"

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Stop the worker and wait for it (the tab's shutdown and the window's close)."""
        worker = self.worker
        if worker is None:
            return True
        worker.control.stop()
        ok = worker.join(timeout)
        if ok and worker.result is not None:
            worker.finished.disconnect(self._finish)  # its finished, still on its way, ends nothing
            self._finish(*worker.result)
        return ok

    # ---- GUI thread --------------------------------------------------------------------------
    def _make_sample_boxes(self, names: list[str]) -> None:
        if self.samples_row is None:
            return
        if list(self.sample_boxes) == names:
            for box in self.sample_boxes.values():
                box.setPlainText("")
            return
        while self.samples_row.count():
            item = self.samples_row.takeAt(0)
            widget = item.widget() if item is not None else None
            if widget is not None:
                widget.deleteLater()
        self.sample_boxes = {}
        for i, name in enumerate(names):
            group = QGroupBox(f"Sample from “{name}”")
            r, g, b = color_for(name, i)
            group.setStyleSheet(f"QGroupBox {{ color: rgb({r},{g},{b}); font-weight: bold; }}")
            lay = QVBoxLayout(group)
            box = QPlainTextEdit()
            box.setReadOnly(True)
            box.setPlaceholderText("A sample appears here while it trains and at the end.")
            box.setStyleSheet("font-family: monospace; color: black; font-weight: normal;")
            lay.addWidget(box)
            self.samples_row.addWidget(group, 1)
            self.sample_boxes[name] = box

    def _drain(self) -> None:
        worker = self.worker
        if worker is None:
            self._timer.stop()
            return
        events, probes, samples, notes = worker.mailbox.take("events", "probes", "samples", "notes")
        touched = set()
        for name, event in events:
            xs, ys = self.losses.setdefault(name, ([], []))
            xs.append(int(event["step"]))
            ys.append(float(event["train_loss"]))
            touched.add(name)
        for i, name in enumerate(self.losses):
            if name in touched:
                self._draw_loss(name, i)
        for name, step, value in probes:
            xs, vs = self.probes.setdefault(name, ([], []))
            xs.append(step)
            vs.append(value)
            self.probed.emit(name, step, value)
        if probes and self.probe_plot is not None:
            scalar = self._probe_scalar
            for i, (name, (xs, vs)) in enumerate(self.probes.items()):
                try:
                    ys = [scalar(v) for v in vs]
                except Exception:
                    continue
                self.probe_plot.set_series(name, xs, ys, color=color_for(name, i), symbol="o", smooth=False)
        for name, step, text in samples:
            self.sample_texts[name] = text
            box = self.sample_boxes.get(name)
            if box is not None:
                box.setPlainText(f"[step {step}] {worker.spec.sample_prompt}{text}")
        self.notes.extend(notes)
        if events and worker.job is not None:
            worker.job.progress.describe(worker.step, self._target, f"step {worker.step} of {self._target}")
        if events:
            elapsed = time.monotonic() - self._t0
            last = " · ".join(f"{n} {ys[-1]:.3f}" for n, (_, ys) in self.losses.items())
            head = f"step {worker.step} / {self._target} · {elapsed:.0f} s · loss {last}"
            self.status.setText(progress_line(head, worker.step, self._target, elapsed, self.session))

    def _draw_loss(self, name: str, index: int) -> None:
        xs, ys = self.losses[name]  # raw and smoothed by the plot's own control, repainted ≤ 5/s
        self.loss_plot.set_series(name, xs, ys, color=color_for(name, index))

    def _finish(self, reason: str, message: str) -> None:
        worker = self.worker
        if worker is None:
            return
        self._drain()  # finished comes after the last post: take everything
        self._timer.stop()
        self.worker = None
        worker.join(5.0)
        self.start_button.setEnabled(True)
        self.stop_button.setEnabled(False)
        finals = " · ".join(f"{n} {ys[-1]:.3f}" for n, (_, ys) in self.losses.items() if ys)
        text = {"done": "Done", "stopped": "Stopped", "error": "Failed"}[reason]
        parts = [f"{text}: {message}." if message else f"{text}."]
        if finals:
            parts.append(f"Last training loss: {finals} (nats).")
        if self.notes:
            parts.append(" ".join(self.notes))
        self.status.setText(" ".join(parts))
        self.finished.emit(reason, message)
