"""The Features tab's Train page: an SAE's settings, Train / Resume, and its live curves.

Left, the settings of :class:`~model.interp.sae.train.SAETrainSettings`: the site (``z``, the heads'
outputs before ``W_O``; the attention output after it; the residual stream before the block; the MLP
output) and its layer, the expansion (features = expansion × d_in, shown), TopK with ``k`` or ReLU with
an L1 coefficient, the learning rate, the tokens and the corpus (the Corpus page's choices), and the
folder the SAE is written to in SAELens's format (by default a fresh one under the app's SAE place,
:mod:`~app.views.features.folders`). Right, the run's curves as it reports its steps: reconstruction
MSE, fraction of variance explained, L0 and dead features, against the tokens seen.

**Train** starts a fresh run (into a fresh folder when the one named holds anything); **Resume**
continues the run stopped in the folder (Cancel, or the app closed), with that run's settings. The
run is :class:`~app.views.features.training.SAETrainLoop`: the JobBar above says how far it is and
stops it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.session.compute import job_threads
from app.session.workers import drain_timer
from app.views.features.eval_page import default_corpus
from app.views.features.folders import default_folder, run_state
from app.views.features.training import TRAIN_JOB, SAETrainLoop
from app.widgets.axes import style_plot
from app.widgets.corpus_box import corpus_box
from app.widgets.job_bar import JobBar
from model.interp.sae.site import Site
from model.interp.sae.train import SAETrainSettings

#: The sites offered, as the page names them.
SITES = (
    ("z: the heads' outputs before W_O", "z"),
    ("attention output (after W_O)", "attn_out"),
    ("residual stream (before the block)", "resid_pre"),
    ("MLP output", "mlp_out"),
)
#: The curves drawn: (TrainStep field, plot title).
CURVES = (
    ("mse", "reconstruction MSE"),
    ("fve", "variance explained"),
    ("l0", "L0"),
    ("dead", "dead features"),
)


def settings_from_dict(d: dict) -> SAETrainSettings:
    """The settings a run's state holds (:meth:`SAETrainSettings.to_dict`) as settings again."""
    d = dict(d)
    site = d.pop("site")
    return SAETrainSettings(site=Site(site["kind"], int(site["layer"])), **d)


class TrainPage(QWidget):
    """The Train page (module docstring). ``trained(folder)`` when a run finished and its SAE is
    written; ``message(text)`` says a run's end (stopped, failed) in a line."""

    trained = Signal(str)
    message = Signal(str)

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.loop: SAETrainLoop | None = None
        self._settings: SAETrainSettings | None = None  # the run's, for Resume
        self._points: dict[str, list[float]] = {name: [] for name, _ in CURVES}
        self._tokens: list[float] = []
        root = QVBoxLayout(self)
        self.job_bar = JobBar(session.jobs, (TRAIN_JOB,), cancel=session.jobs.cancel)
        self.job_bar.bar.setFixedWidth(320)  # "1,234,567 of 10,002,432 tokens · ETA 12:34" on one line
        root.addWidget(self.job_bar)
        body = QHBoxLayout()
        body.addWidget(self._build_form())
        self.curves = pg.GraphicsLayoutWidget()
        self.curves.setMinimumWidth(320)
        self.plots: dict[str, pg.PlotDataItem] = {}
        for i, (name, title) in enumerate(CURVES):
            plot = style_plot(self.curves.addPlot(row=i // 2, col=i % 2), title, "tokens")
            self.plots[name] = plot.plot([], [], pen=pg.mkPen((40, 90, 170), width=1.5))
        body.addWidget(self.curves, 1)
        root.addLayout(body, 1)
        self._drain = drain_timer(self, self._take_steps)
        self.refresh()

    # ---- building ------------------------------------------------------------------------------
    def _build_form(self) -> QWidget:
        box = QWidget()
        box.setMaximumWidth(400)
        col = QVBoxLayout(box)
        col.setContentsMargins(0, 0, 0, 0)
        form = QFormLayout()
        self.site_box = QComboBox()
        for label, kind in SITES:
            self.site_box.addItem(label, kind)
        self.layer_spin = QSpinBox()
        self.expansion_spin = QSpinBox()
        self.expansion_spin.setRange(4, 32)
        self.expansion_spin.setValue(8)
        self.expansion_spin.setPrefix("× ")
        self.width_label = QLabel()
        exp_row = QHBoxLayout()
        exp_row.addWidget(self.expansion_spin)
        exp_row.addWidget(self.width_label, 1)
        self.sparsity_box = QComboBox()
        self.sparsity_box.addItem("TopK", "topk")
        self.sparsity_box.addItem("ReLU + L1", "standard")
        self.k_spin = QSpinBox()
        self.k_spin.setRange(1, 4096)
        self.k_spin.setValue(32)
        self.l1_spin = QDoubleSpinBox()
        self.l1_spin.setRange(0.0, 1000.0)
        self.l1_spin.setDecimals(3)
        self.l1_spin.setValue(5.0)
        sp_row = QHBoxLayout()
        sp_row.addWidget(self.sparsity_box)
        sp_row.addWidget(QLabel("k"))
        sp_row.addWidget(self.k_spin)
        sp_row.addWidget(QLabel("L1"))
        sp_row.addWidget(self.l1_spin)
        self.lr_spin = QDoubleSpinBox()
        self.lr_spin.setDecimals(5)
        self.lr_spin.setRange(0.00001, 0.1)
        self.lr_spin.setSingleStep(0.0001)
        self.lr_spin.setValue(0.0004)
        self.tokens_spin = QSpinBox()
        self.tokens_spin.setRange(1_000, 2_000_000_000)
        self.tokens_spin.setSingleStep(100_000)
        self.tokens_spin.setGroupSeparatorShown(True)
        self.tokens_spin.setValue(500_000)
        self.corpus_box = corpus_box()
        self.corpus_box.setMinimumContentsLength(16)
        self.folder_edit = QLineEdit()
        self.folder_edit.setToolTip("The folder the SAE is written to (SAELens's format); empty: a fresh one")
        choose = QPushButton("Choose…")
        choose.setToolTip("Choose the folder")
        choose.clicked.connect(self._choose_folder)
        folder_row = QHBoxLayout()
        folder_row.addWidget(self.folder_edit, 1)
        folder_row.addWidget(choose)
        for label, w in (("Site", self.site_box), ("Layer", self.layer_spin), ("Features", exp_row),
                         ("Sparsity", sp_row), ("Learning rate", self.lr_spin), ("Tokens", self.tokens_spin),
                         ("Corpus", self.corpus_box), ("Folder", folder_row)):  # fmt: skip
            form.addRow(label, w)
        col.addLayout(form)
        buttons = QHBoxLayout()
        self.train_button = QPushButton("Train")
        self.train_button.setToolTip("Train a fresh SAE with these settings")
        self.resume_button = QPushButton("Resume")
        self.resume_button.setToolTip("Continue the run stopped in the folder, with its settings")
        self.train_button.clicked.connect(lambda: self.start(resume=False))
        self.resume_button.clicked.connect(lambda: self.start(resume=True))
        buttons.addWidget(self.train_button)
        buttons.addWidget(self.resume_button)
        buttons.addStretch(1)
        col.addLayout(buttons)
        self.status = QLabel(" ")
        self.status.setWordWrap(True)
        col.addWidget(self.status)
        col.addStretch(1)
        for w in (self.site_box, self.sparsity_box):
            w.currentIndexChanged.connect(self.refresh)
        for w in (self.layer_spin, self.expansion_spin):
            w.valueChanged.connect(self.refresh)
        self.folder_edit.textChanged.connect(self.refresh)
        return box

    # ---- the settings ----------------------------------------------------------------------------
    def site(self) -> Site:
        return Site(self.site_box.currentData(), self.layer_spin.value())

    def settings(self) -> SAETrainSettings:
        """The settings the form gives, for the session's model and data."""
        model = self.session.model
        seq_len = min(128, model.config.core.context_length) if model is not None else 128
        return SAETrainSettings(
            site=self.site(), corpus=self.corpus_box.currentText().strip() or default_corpus(self.session),
            tokens=self.tokens_spin.value(), expansion=self.expansion_spin.value(),
            architecture=self.sparsity_box.currentData(), k=self.k_spin.value(),
            l1_coefficient=self.l1_spin.value(), lr=self.lr_spin.value(), seq_len=seq_len,
        )  # fmt: skip

    def fill(self, s: SAETrainSettings) -> None:
        """Show ``s`` in the form (a run's settings, to resume it)."""
        self.site_box.setCurrentIndex(max(0, self.site_box.findData(s.site.kind)))
        self.layer_spin.setValue(s.site.layer)
        self.expansion_spin.setValue(s.expansion)
        self.sparsity_box.setCurrentIndex(max(0, self.sparsity_box.findData(s.architecture)))
        self.k_spin.setValue(s.k)
        self.l1_spin.setValue(s.l1_coefficient)
        self.lr_spin.setValue(s.lr)
        self.tokens_spin.setValue(min(s.tokens, self.tokens_spin.maximum()))
        self.corpus_box.setCurrentText(s.corpus)

    def model_name(self) -> str:
        s = self.session
        return str((s.checkpoint_meta or {}).get("name") or Path(s.checkpoint_path or "model").name)

    def folder(self) -> Path:
        text = self.folder_edit.text().strip()
        return (
            Path(text)
            if text
            else default_folder(self.model_name(), self.site(), self.expansion_spin.value())
        )

    def _choose_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "The SAE's folder", str(self.folder().parent))
        if path:
            self.folder_edit.setText(path)

    def show_folder(self, folder: str) -> None:
        """The SAE in ``folder`` is the tab's: name it as the folder and, when it was trained here, show
        its run's settings and curves (a stopped run's, for Resume to continue)."""
        self.folder_edit.setText(folder)
        state = run_state(folder)
        if state is not None:
            try:
                self.fill(settings_from_dict(state["settings"]))
            except (TypeError, ValueError, KeyError):
                return
            self._show_curves(state.get("curves") or {})
        self.refresh()

    # ---- the run ---------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self.loop is not None and self.loop.alive

    def resumable(self) -> bool:
        state = run_state(self.folder()) if self.folder_edit.text().strip() else None
        return state is not None and not state["finished"]

    def refresh(self, *_args) -> None:
        model = self.session.model
        if model is not None:
            cfg = model.config
            self.layer_spin.setRange(0, cfg.core.n_layers - 1)
            try:
                d_in = self.site().d_in(cfg)
                self.width_label.setText(f"= {self.expansion_spin.value() * d_in:,} features (d_in {d_in})")
            except ValueError as exc:
                self.width_label.setText(str(exc))
        self.k_spin.setEnabled(self.sparsity_box.currentData() == "topk")
        self.l1_spin.setEnabled(self.sparsity_box.currentData() == "standard")
        self.folder_edit.setPlaceholderText(str(self.folder()) if not self.folder_edit.text() else "")
        if (edit := self.corpus_box.lineEdit()) is not None and model is not None:
            edit.setPlaceholderText(default_corpus(self.session))
        idle = not self.running and model is not None
        self.train_button.setEnabled(idle)
        self.resume_button.setEnabled(idle and self.resumable())

    def start(self, *, resume: bool) -> bool:
        """Train (or, ``resume``, continue the run in the folder); False with the reason on the page
        when it cannot start."""
        s = self.session
        if self.running or s.model is None:
            return False
        try:
            if resume:
                state = run_state(self.folder())
                if state is None or state["finished"]:
                    raise ValueError(f"{self.folder()} holds no stopped run to resume")
                settings = settings_from_dict(state["settings"])
                self.fill(settings)
                self._show_curves(state.get("curves") or {})
            else:
                settings = self.settings()
                settings.check(s.model.config)
                if self.folder().is_dir() and any(self.folder().iterdir()):  # a fresh run, a fresh folder
                    self.folder_edit.setText(str(default_folder(self.model_name(), settings.site,
                                                                settings.expansion)))  # fmt: skip
                self._show_curves({})
        except (ValueError, TypeError) as exc:
            self._say(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            return False
        out = self.folder()
        self._settings = settings
        loop = self.loop = SAETrainLoop(s.model, s.tokenizer, settings, out, model_name=self.model_name(),
                                        n_threads=job_threads(s))  # fmt: skip
        what = f"{settings.site.hook_name} × {settings.expansion} on {settings.corpus}"
        loop.announce(s.jobs, TRAIN_JOB, "Resuming the SAE" if resume else "Training an SAE on", what)
        loop.finished.connect(self._on_finished)
        loop.start()
        self._drain.start()
        self._say(f"Writing to {out}")
        self.refresh()
        return True

    def _say(self, text: str) -> None:
        self.status.setText(text)
        self.message.emit(text)

    def _on_finished(self, reason: str, message: str) -> None:
        self._take_steps()
        self._drain.stop()
        loop = self.loop
        if loop is None:
            return
        if reason == "done":
            self._say(f"Trained: {loop.out}")
            self.trained.emit(str(loop.out))
        elif reason == "stopped":
            state = run_state(loop.out)  # the steps as saved: the last may have been cut before its report
            if state is not None:
                self._show_curves(state["curves"])
            self._say(
                f"Stopped after {int(self._tokens[-1]) if self._tokens else 0:,} tokens: Resume continues"
            )
        else:
            self._say(f"Training failed: {message}")
        self.refresh()

    def cancel(self) -> bool:
        return self.session.jobs.cancel(TRAIN_JOB)

    def shutdown(self, timeout: float = 30.0) -> bool:
        """Stop a run (its state saved for Resume) and wait for it."""
        if self.loop is None:
            return True
        self.cancel()
        return self.loop.join(timeout)

    # ---- the curves ------------------------------------------------------------------------------
    def _show_curves(self, curves: dict) -> None:
        self._tokens = [float(t) for t in curves.get("tokens", [])]
        for name, _ in CURVES:
            self._points[name] = [float(v) for v in curves.get(name, [])][: len(self._tokens)]
        self._redraw()

    def _take_steps(self) -> None:
        if self.loop is None:
            return
        (steps,) = self.loop.mailbox.take("steps")
        if not steps:
            return
        for step in steps:
            self._tokens.append(float(step.tokens))
            for name, _ in CURVES:
                self._points[name].append(float(getattr(step, name)))
        self._redraw()

    def _redraw(self) -> None:
        x = np.asarray(self._tokens, dtype=np.float64)
        for name, item in self.plots.items():
            y = np.asarray(self._points[name], dtype=np.float64)
            n = min(len(x), len(y))
            item.setData(x[:n], y[:n])

    def curve_points(self, name: str) -> int:
        """How many points the curve ``name`` has drawn."""
        return len(self.plots[name].xData) if self.plots[name].xData is not None else 0


__all__ = ["CURVES", "SITES", "TrainPage", "settings_from_dict"]
