"""The Attention tab's own controls around its pages: the prompt bar, the banner shown while heads
are switched off, and the view shown when there is no model yet. They hold widgets only; the tab
connects them."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.views.attention.state import AttentionState
from model.budget.arithmetic import human_bytes

ERROR_STYLE = "color: #b00020;"
NOTE_STYLE = "color: #444;"

#: File → Export-like entries of the Export button: (key, menu text)
EXPORTS = (
    ("png", "This view as PNG…"),
    ("svg", "This view as SVG…"),
    ("npz", "The prompt's tensors as .npz…"),
    ("csv", "The selected head as CSV…"),
    ("numbers", "This page's numbers as CSV or .npz…"),
)


class PromptBar(QWidget):
    """The prompt box, with a status line, "Follow training", "Run again" and an Export menu
    (``export_actions[key]`` for each key of :data:`EXPORTS`)."""

    def __init__(self, follow_interval_s: float, parent: QWidget | None = None):
        super().__init__(parent)
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        label = QLabel("Prompt")
        label.setAlignment(Qt.AlignmentFlag.AlignTop)
        row.addWidget(label)
        self.edit = QPlainTextEdit()
        self.edit.setObjectName("attentionPrompt")
        self.edit.setPlaceholderText("Type text to run through the model; every view follows as you type.")
        self.edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.edit.setTabChangesFocus(True)
        self.edit.setFixedHeight(self.edit.fontMetrics().lineSpacing() * 4 + 14)
        row.addWidget(self.edit, 1)
        side = QVBoxLayout()
        self.status_label = QLabel(" ")
        self.status_label.setWordWrap(True)
        self.status_label.setMinimumWidth(300)
        self.status_label.setMaximumWidth(420)
        self.status_label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        side.addWidget(self.status_label)
        buttons = QHBoxLayout()
        self.follow_box = QCheckBox("Follow training")
        self.follow_box.setChecked(True)
        self.follow_box.setToolTip(
            f"while the model trains, re-run the prompt on the newest weights (at most every "
            f"{follow_interval_s:g} s)"
        )
        self.cut_box = QCheckBox("Cut to context")
        self.cut_box.setChecked(True)
        self.cut_box.setToolTip(
            "a prompt longer than the model's context: keep its last tokens (and say how many were left "
            "out), or, unticked, refuse it and name both lengths"
        )
        self.refresh_button = QPushButton("Run again")
        self.refresh_button.setToolTip("run the prompt through the current weights now")
        self.export_button = QToolButton()
        self.export_button.setText("Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        self.export_actions: dict[str, QAction] = {key: menu.addAction(text) for key, text in EXPORTS}
        self.export_button.setMenu(menu)
        for w in (self.follow_box, self.cut_box, self.refresh_button, self.export_button):
            buttons.addWidget(w)
        buttons.addStretch(1)
        side.addLayout(buttons)
        side.addStretch(1)
        row.addLayout(side)

    def set_status(self, text: str, *, error: bool = False) -> None:
        self.status_label.setStyleSheet(ERROR_STYLE if error else NOTE_STYLE)
        self.status_label.setText(text)


class AblationBanner(QFrame):
    """ "n heads switched off …" with a "Restore all heads" button; hidden while every head is on."""

    def __init__(self, state: AttentionState, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("ablationBanner")
        self.setStyleSheet(
            "#ablationBanner { background: #fff1e0; border: 1px solid #e0a050; border-radius: 4px; }"
        )
        lay = QHBoxLayout(self)
        lay.setContentsMargins(8, 3, 8, 3)
        self.label = QLabel(" ")
        lay.addWidget(self.label, 1)
        self.restore_button = QPushButton("Restore all heads")
        self.restore_button.clicked.connect(lambda: state.set_ablation({}))
        lay.addWidget(self.restore_button)
        self.setVisible(False)
        state.ablation_changed.connect(self.show_heads)

    def show_heads(self, heads: dict) -> None:
        if not heads:
            self.setVisible(False)
            return
        names = ", ".join(f"L{l}H{h}" for l, h in sorted(heads))
        modes = " / ".join(sorted(set(heads.values())))
        self.label.setText(
            f"<b>{len(heads)} head{'s' if len(heads) != 1 else ''} switched off</b> "
            f"({modes}): {names}. Every view shows the model without them."
        )
        self.setVisible(True)


class NoModelView(QWidget):
    """What the tab shows without a model: why, and a button that builds the default one."""

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        lay = QVBoxLayout(self)
        lay.addStretch(1)
        msg = QLabel(
            "<h3>No model to inspect yet</h3>"
            "<p>The Attention tab runs your prompt through the current model and shows what every head "
            "does. Train a model in the <b>Train</b> tab, open a saved one with <b>File → Open "
            "checkpoint…</b>, or build the default model now (4 layers × 4 heads, untrained: its heads "
            "spread attention evenly until it learns).</p>"
        )
        msg.setWordWrap(True)
        msg.setAlignment(Qt.AlignmentFlag.AlignCenter)
        msg.setMaximumWidth(640)
        self.build_button = QPushButton("Build the default model")
        self.build_button.clicked.connect(self.build_default_model)
        self.error_label = QLabel(" ")
        self.error_label.setStyleSheet(ERROR_STYLE)
        self.error_label.setWordWrap(True)
        for widget in (msg, self.build_button, self.error_label):
            h = QHBoxLayout()
            h.addStretch(1)
            h.addWidget(widget)
            h.addStretch(1)
            lay.addLayout(h)
        lay.addStretch(2)

    def build_default_model(self) -> None:
        """Build the default (untrained) model: default data and config if none is chosen."""
        s = self.session
        self.error_label.setText(" ")
        try:
            if s.source is None or s.train_settings is None:
                s.init_default()
            else:
                s.build_model()
        except Exception as exc:
            self.error_label.setText(f"Could not build the model: {exc}")


def run_status(res, plan, timings: dict[str, float], *, training_step: int | None = None) -> str:
    """The status line of a run ``res`` (:class:`~model.interp.inspection.Inspection`) of ``plan``
    (:class:`~model.interp.plan.PromptPlan`): its size and timings, what was left out and why, what
    was pooled, and the training step of its weights."""
    cfg = res.config
    text = (
        f"{res.T} tokens · {cfg.core.n_layers} layers × {cfg.attention.n_heads} heads · "
        f"traced in {timings['trace_ms']:.0f} ms, drawn in {timings['draw_ms']:.0f} ms"
    )
    if plan.for_context:
        text += (
            f"<br>The first {plan.for_context} tokens were left out: the model reads at most "
            f"{cfg.core.context_length} (its context length)."
        )
    if plan.for_memory:
        cut = (
            f"{plan.for_memory} more tokens were"
            if plan.for_context
            else f"The first {plan.for_memory} tokens were"
        )
        all_tokens = res.T + plan.for_memory
        text += (
            f"<br>{cut} left out to fit in memory: all {all_tokens} would need about "
            f"{human_bytes(plan.need_all)}, {human_bytes(plan.budget)} is free."
        )
    if res.block > 1:
        text += (
            f"<br>Long prompt: the Heads overview shows the largest weight of each "
            f"{res.block}×{res.block} block; open a head for every token."
        )
    if not getattr(res, "held", True):
        text += (
            f"<br>Streamed: {res.T:,} tokens are more than the {res.held_limit:,} whose every pattern is "
            "kept; each layer keeps its queries and keys, and a head is computed when it is opened."
        )
    if training_step is not None:
        text += f"<br>Weights of training step {training_step}."
    return text


__all__ = ["ERROR_STYLE", "EXPORTS", "NOTE_STYLE", "AblationBanner", "NoModelView", "PromptBar", "run_status"]
