"""The Features tab's Evaluate page: how good the SAE is, as SAELens's evals measure it.

**Evaluate** runs :func:`model.interp.sae.evaluate.evaluate_sae` in the session's compute worker (the
JobBar: tokens done, the time left, Cancel) over the tokens asked for of the SAE's own corpus (the one
it was trained on, named in its ``cfg.json``; else the session's data), and the table gives each figure
with a line saying what it is. An evaluation of another model or SAE stays greyed under a line naming
what it is of until the SAE is evaluated again.
"""

from __future__ import annotations

import html

from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.session.compute import job_threads
from app.views.features.state import FeaturesState
from app.widgets.corpus_box import corpus_spec
from app.widgets.job_bar import JobBar
from model.interp.sae.evaluate import DENSE_DENSITY, SAEEvaluation, evaluate_sae
from model.runtime import with_threads

#: The compute key of the evaluation.
EVAL_JOB = "features.eval"

#: The table's rows: (the field of SAEEvaluation, its name, its format, what it is).
ROWS = (
    ("tokens", "tokens", "{:,}", "positions read, the BOS left out"),
    ("variance_explained", "variance explained", "{:.4f}", "1 − E‖x − SAE(x)‖² / (E‖x‖² − ‖E x‖²)"),
    ("mse", "MSE", "{:.6g}", "E‖x − SAE(x)‖², in the site's units"),
    ("l0", "L0", "{:.2f}", "features firing per token"),
    ("dead", "dead features", "{:,}", "never fired on these tokens"),
    ("dense", "dense features", "{:,}", f"fired on more than {DENSE_DENSITY:.0%} of tokens"),
    ("loss_clean", "loss, clean", "{:.4f}", "next-token cross-entropy of the model as it is"),
    ("loss_sae", "loss, SAE spliced in", "{:.4f}", "the site replaced by the SAE's reconstruction"),
    ("loss_zero", "loss, site zeroed", "{:.4f}", "the site zero-ablated"),
    ("loss_recovered", "loss recovered", "{:.4f}", "(L_zero − L_SAE) / (L_zero − L_clean): 1 costs nothing"),
)


def default_corpus(session) -> str:
    """The corpus "" stands for: the built-in text or task the model shown was trained on, when its
    checkpoint names one (the starter's ``task:induction``; a loaded file's ``source`` names its kind,
    not its data), else the session's data (:func:`corpus_spec`)."""
    trained_on = (session.checkpoint_meta or {}).get("source")
    if isinstance(trained_on, str) and trained_on.startswith(("builtin:", "task:")):
        return trained_on
    return corpus_spec(session, "")


def result_area(root: QVBoxLayout, job_bar: JobBar, content: QWidget) -> tuple[QWidget, QLabel]:
    """``content`` in a box under ``job_bar``'s veil while stale (what the page's result is), then a
    status line, added to ``root``: ``(box, status)``."""
    box = QWidget()
    lay = QVBoxLayout(box)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.addWidget(content)
    root.addWidget(box, 1)
    job_bar.cover(box)
    status = QLabel(" ")
    status.setWordWrap(True)
    root.addWidget(status)
    return box, status


def sae_corpus(session, sae) -> str:
    """The corpus an SAE is read on: the one it was trained on (its ``cfg.json``), else
    :func:`default_corpus`."""
    trained_on = (sae.config.extra or {}).get("corpus") if sae is not None else None
    return trained_on if isinstance(trained_on, str) and trained_on else default_corpus(session)


def what_of(state: FeaturesState, model_name: str) -> str:
    """The inputs a result is of, for its stale line: "SAE-folder on model (step N)"."""
    step = f" at step {state.step:,}" if state.step else ""
    return f"{state.folder or 'no SAE'} on {model_name}{step}"


class EvalPage(QWidget):
    """The Evaluate page (module docstring)."""

    def __init__(self, session, state: FeaturesState, model_name, parent: QWidget | None = None):
        super().__init__(parent)
        self.session, self.state, self.model_name = session, state, model_name
        root = QVBoxLayout(self)
        self.job_bar = JobBar(session.jobs, (EVAL_JOB,), cancel=session.compute.abort)
        self.job_bar.jobEnded.connect(lambda *_: self.refresh())
        root.addWidget(self.job_bar)
        row = QHBoxLayout()
        self.eval_button = QPushButton("Evaluate")
        self.eval_button.setToolTip("Measure the SAE over tokens of its corpus, as SAELens's evals do")
        self.eval_button.clicked.connect(self.evaluate)
        self.tokens_spin = QSpinBox()
        self.tokens_spin.setRange(256, 100_000_000)
        self.tokens_spin.setSingleStep(8192)
        self.tokens_spin.setGroupSeparatorShown(True)
        self.tokens_spin.setValue(32_768)
        self.corpus_label = QLabel()
        row.addWidget(self.eval_button)
        row.addWidget(QLabel("Tokens:"))
        row.addWidget(self.tokens_spin)
        row.addWidget(self.corpus_label, 1)
        root.addLayout(row)
        self.table = QTableWidget(len(ROWS), 3)
        self.table.setHorizontalHeaderLabels(["measure", "value", "what it is"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        for r, (_, name, _, what) in enumerate(ROWS):
            self.table.setItem(r, 0, QTableWidgetItem(name))
            self.table.setItem(r, 1, QTableWidgetItem("—"))
            self.table.setItem(r, 2, QTableWidgetItem(what))
        self.table.resizeColumnsToContents()
        self.box, self.status = result_area(root, self.job_bar, self.table)
        self.refresh()

    def corpus(self) -> str:
        return sae_corpus(self.session, self.state.sae)

    def evaluate(self) -> bool:
        """Evaluate the SAE shown (in the compute worker); False when there is none or no model."""
        s, st = self.session, self.state
        model, tok, sae = s.model, s.tokenizer, st.sae
        if model is None or sae is None:
            return False
        key, corpus, n = st.key(), self.corpus(), self.tokens_spin.value()
        seq_len = min(128, model.config.core.context_length)
        what = what_of(st, self.model_name())

        def fn() -> SAEEvaluation:
            return evaluate_sae(model, tok, sae, corpus=corpus, n_tokens=n, seq_len=seq_len)

        def done(result, error) -> None:
            if error is not None:
                self.status.setText(f"Evaluation failed: {html.escape(str(error).splitlines()[0])}")
                return
            st.keep("eval", key, result, what)
            self.status.setText(f"{result.tokens:,} tokens of {html.escape(corpus)}")
            self.refresh()

        s.compute.submit(EVAL_JOB, with_threads(job_threads(s), fn), done, title="Evaluating the SAE on",
                         subject=f"{n:,} tokens of {corpus}")  # fmt: skip
        self.refresh()
        return True

    def value_text(self, field: str) -> str:
        """The table's text for ``field`` of :class:`SAEEvaluation`."""
        item = self.table.item([f for f, *_ in ROWS].index(field), 1)
        return item.text() if item is not None else ""

    def refresh(self) -> None:
        st = self.state
        self.eval_button.setEnabled(st.sae is not None and self.session.model is not None)
        self.corpus_label.setText(
            f"of {self.corpus()}" if st.sae is not None else "Open or train an SAE first"
        )
        kept = st.get("eval")
        if kept is not None:
            for r, (field, _, fmt, _) in enumerate(ROWS):
                self.table.setItem(r, 1, QTableWidgetItem(fmt.format(getattr(kept.value, field))))
            self.table.resizeColumnToContents(1)
        current = st.current("eval")
        if kept is None or current:
            self.job_bar.set_stale(None)
        else:
            self.job_bar.set_stale(f"Showing the evaluation of {html.escape(kept.what)}: evaluate again "
                                   "for the SAE and model shown.", at_once=True)  # fmt: skip


__all__ = ["EVAL_JOB", "ROWS", "EvalPage", "default_corpus", "sae_corpus", "what_of"]
