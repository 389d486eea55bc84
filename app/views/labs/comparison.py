"""Training comparisons for the Labs: two (or more) variants of one small model trained side by side.

:class:`ComparisonWorker` runs a :class:`~model.multitrain.TrainerGroup` (every variant from the same
seed, on identical batches) in its own thread, one step of each variant in turn. Between steps it
can take a *probe* of each variant (a number such as the mean max attention weight, or a gradient
profile) and a generated *sample*. Results go into a lock-protected mailbox; the GUI drains it with
a ~30 Hz timer (never a signal per step), and a stop takes effect before the next step. A variant
whose loss diverges is dropped with a note, the others go on.

:class:`ComparisonPanel` is the widget: Start/Stop, a progress line, the loss curves of every
variant (raw and smoothed), an optional probe plot and one sample box per variant.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.widgets.labs_plots import LinePlot, color_for
from app.workers import GroupThread

DRAIN_MS = 33


@dataclass
class ComparisonSpec:
    """What to train: ``variants`` {name: GPTConfig}, one ``source`` and one ``settings`` for all.

    ``probe(name, trainer)`` runs in the worker thread under the compute lock every ``probe_every``
    steps (and at step 0 and the end) and returns any value; ``probe_scalar(value)`` turns it into the
    number the probe plot shows. ``sample_every`` > 0 writes a sample of ``sample_tokens`` tokens
    after ``sample_prompt`` that often (and always at the end, when ``sample_prompt`` is set).
    """

    variants: dict[str, Any]
    source: Any
    settings: Any
    probe: Callable[[str, Any], Any] | None = None
    probe_every: int = 0
    probe_scalar: Callable[[Any], float] = float
    sample_prompt: str = ""
    sample_every: int = 0
    sample_tokens: int = 80
    sample_temperature: float = 0.8
    extra: dict[str, Any] = field(default_factory=dict)


class ComparisonWorker(GroupThread):
    """Trains a :class:`ComparisonSpec` in a daemon thread; poll :meth:`take` from the GUI thread."""

    thread_name = "attention-lab-labs-compare"

    def __init__(self, spec: ComparisonSpec):
        self.spec = spec
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._events: list[tuple[str, int, float]] = []
        self._probes: list[tuple[str, int, Any]] = []
        self._samples: list[tuple[str, int, str]] = []
        self._notes: list[str] = []
        self._done: tuple[str, str] | None = None
        self._thread: threading.Thread | None = None
        self.params: dict[str, int] = {}
        self.group = None
        self.step = 0

    # ---- control (any thread) --------------------------------------------------------------
    def take(self):
        """(events, probes, samples, notes, done) posted since the last call; ``done`` once at the end."""
        with self._lock:
            out = (self._events, self._probes, self._samples, self._notes, self._done)
            self._events, self._probes, self._samples, self._notes = [], [], [], []
            self._done = None
        return out

    # ---- worker thread ---------------------------------------------------------------------
    def _post(self, kind: str, item: Any) -> None:
        with self._lock:
            getattr(self, f"_{kind}").append(item)

    def _run(self) -> None:
        from model.multitrain import TrainerGroup
        from model.train import TrainingDiverged

        reason, message = "done", ""
        spec = self.spec
        try:
            group = TrainerGroup(spec.variants, spec.source, spec.settings)
            self.group = group
            if self._stop.is_set():
                group.stop()
            self.params = {n: int(t.model.num_params()) for n, t in group.trainers.items()}
            target = int(spec.settings.steps)
            active = list(group.names)
            diverged: set[str] = set()
            self._probe_all(group, active, 0)
            while active and not self._stop.is_set():
                for name in list(active):
                    if self._stop.is_set():
                        break
                    trainer = group.trainers[name]
                    if trainer.step >= target:
                        active.remove(name)
                        continue
                    try:
                        ev = trainer.train_step()
                    except TrainingDiverged as exc:
                        active.remove(name)
                        diverged.add(name)
                        self._post("notes", f"{name}: {exc}")
                        continue
                    self._post("events", (name, int(ev.step), float(ev.train_loss)))
                if not active:
                    break
                step = min(group.trainers[n].step for n in active)
                self.step = step
                if spec.probe_every and step % spec.probe_every == 0 and step < target:
                    self._probe_all(group, active, step)
                if spec.sample_every and step % spec.sample_every == 0 and step < target:
                    self._sample_all(group, active, step)
            if self._stop.is_set():
                reason = "stopped"
            live = [n for n in group.names if n not in diverged]
            if not live:
                reason = "error"
            final = max(t.step for t in group.trainers.values())
            self._probe_all(group, live, final)
            if spec.sample_prompt:
                self._sample_all(group, live, final)
            message = {
                "done": f"finished at step {final}",
                "stopped": f"stopped at step {final}",
                "error": "every variant diverged",
            }[reason]
        except Exception as exc:  # a bad config or source: say so in the panel
            reason, message = "error", str(exc) or type(exc).__name__
            traceback.print_exc()
        with self._lock:
            self._done = (reason, message)

    def _probe_all(self, group, names, step: int) -> None:
        from model.runtime import compute_lock

        if self.spec.probe is None:
            return
        for name in names:
            try:
                with compute_lock:
                    value = self.spec.probe(name, group.trainers[name])
            except Exception as exc:
                self._post("notes", f"{name}: probe failed at step {step}: {exc}")
                continue
            self._post("probes", (name, step, value))

    def _sample_all(self, group, names, step: int) -> None:
        from model.runtime import compute_lock

        spec = self.spec
        if not spec.sample_prompt:
            return
        for name in names:
            trainer = group.trainers[name]
            try:
                with compute_lock:
                    text = trainer.sample(
                        spec.sample_prompt,
                        max_new_tokens=spec.sample_tokens,
                        temperature=spec.sample_temperature,
                        seed=0,
                    )
            except Exception as exc:
                text = f"(sampling failed: {exc})"
            self._post("samples", (name, step, text))


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
        parent: QWidget | None = None,
    ):
        super().__init__(parent)
        self.spec_factory = spec_factory
        self.worker: ComparisonWorker | None = None
        self.losses: dict[str, tuple[list[int], list[float]]] = {}
        self.probes: dict[str, tuple[list[int], list[Any]]] = {}
        self.sample_texts: dict[str, str] = {}
        self.notes: list[str] = []
        self._t0 = 0.0
        self._target = 0

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
        self.loss_plot = LinePlot(title, "step", "training loss (nats)")
        plots.addWidget(self.loss_plot, 1)
        self.probe_plot = None
        if probe_title:
            self.probe_plot = LinePlot(probe_title, "step", probe_label, log_y=probe_log_y)
            plots.addWidget(self.probe_plot, 1)
        root.addLayout(plots, 3)

        self.sample_boxes: dict[str, QPlainTextEdit] = {}
        self.samples_row = None
        if samples:
            self.samples_row = QHBoxLayout()
            root.addLayout(self.samples_row, 1)

        self._timer = QTimer(self)
        self._timer.setInterval(DRAIN_MS)
        self._timer.timeout.connect(self._drain)

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
        self.loss_plot.clear_curves()
        if self.probe_plot is not None:
            self.probe_plot.clear_curves()
        self._make_sample_boxes(list(spec.variants))
        self._target = int(spec.settings.steps)
        self._t0 = time.monotonic()
        self.worker = ComparisonWorker(spec)
        self.worker.start()
        self.start_button.setEnabled(False)
        self.stop_button.setEnabled(True)
        self.status.setText(f"Building {len(spec.variants)} models from one seed …")
        self._timer.start()
        self.started.emit()

    def stop(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.status.setText("Stopping after the current step …")

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Stop the worker and wait for it (the tab's shutdown and the window's close)."""
        worker = self.worker
        if worker is None:
            return True
        worker.stop()
        ok = worker.join(timeout)
        self._drain()
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
            if item.widget() is not None:
                item.widget().deleteLater()
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
        events, probes, samples, notes, done = worker.take()
        touched = set()
        for name, step, loss in events:
            xs, ys = self.losses.setdefault(name, ([], []))
            xs.append(step)
            ys.append(loss)
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
            scalar = worker.spec.probe_scalar
            for i, (name, (xs, vs)) in enumerate(self.probes.items()):
                try:
                    ys = [scalar(v) for v in vs]
                except Exception:
                    continue
                self.probe_plot.set_curve(name, xs, ys, color=color_for(name, i), symbol="o")
        for name, step, text in samples:
            self.sample_texts[name] = text
            box = self.sample_boxes.get(name)
            if box is not None:
                box.setPlainText(f"[step {step}] {worker.spec.sample_prompt}{text}")
        self.notes.extend(notes)
        if done is not None:
            self._finish(*done)
        elif events:
            elapsed = time.monotonic() - self._t0
            last = " · ".join(f"{n} {ys[-1]:.3f}" for n, (_, ys) in self.losses.items())
            self.status.setText(f"step {worker.step} / {self._target} · {elapsed:.0f} s · loss {last}")

    def _draw_loss(self, name: str, index: int) -> None:
        from model.smoothing import ema

        xs, ys = self.losses[name]
        color = color_for(name, index)
        y = np.asarray(ys)
        self.loss_plot.set_curve(f"{name} (raw)", xs, y, label="", color=color, width=1, alpha=70)
        self.loss_plot.set_curve(name, xs, ema(y, 0.9), color=color)

    def _finish(self, reason: str, message: str) -> None:
        self._timer.stop()
        worker = self.worker
        self.worker = None
        if worker is not None:
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
