"""The model configuration panel: every GPTConfig field as a widget, grouped, validated as you type.

The form is a :class:`~app.widgets.dataclass_form.DataclassForm` (:func:`gpt_config_form`, which
the Budget tab's editor uses too). Each field's tooltip is the help line of its declaration in its
part of the config. After every edit the form builds a :class:`GPTConfig` and asks it for
``problems()``: each problem is listed under the form, the fields it names are outlined in red, and
:attr:`ConfigPanel.valid` turns False (the Train tab disables Start on ``validityChanged``). A valid
config is handed to the session with ``Session.set_config``. Fields that have no effect under the
other choices are switched off (``norm_bias`` under RMSNorm). Fields added to GPTConfig later appear
automatically in "Other".
"""

from __future__ import annotations

import contextlib
import html

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget

from app.session.model_files import check_fits
from app.widgets.config_form import gpt_config_form
from app.widgets.layouts import pin_above, scrolled
from model.budget.arithmetic import parameters
from model.budget.sizing import ModelTooLarge
from model.config import GPTConfig, default_config


class ConfigPanel(QWidget):
    """Edits a GPTConfig. ``config()`` returns what the widgets say; ``valid`` whether it validates."""

    #: the edited config (GPTConfig, perhaps invalid) after every change
    configEdited = Signal(object)
    #: True when the edited config has no problems
    validityChanged = Signal(bool)

    def __init__(self, session=None, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session

        layout = scrolled(self)

        self.form = gpt_config_form(
            fixed={"vocab_size": None}, error_prefix="Fix before training:\n", errors_below=False
        )
        self.form.valueChanged.connect(self._on_edited)
        self.form.validityChanged.connect(self.validityChanged)
        self.widgets = self.form.widgets
        self.vocab_label = QLabel("set by the tokenizer")
        self.vocab_label.setToolTip(self.form.tips["vocab_size"])
        self.vocab_label.setWordWrap(True)  # "49152 (set by the tokenizer)" in a 320 px dock: two lines
        self.form.forms["Size"].insertRow(0, self.form.label("vocab_size"), self.vocab_label)
        layout.addWidget(self.form)

        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setToolTip("Sizes derived from the fields above")
        layout.addWidget(self.summary)
        self.error_label = self.form.error_label
        self.error_label.setObjectName("configErrors")
        #: problems of this config with the Training panel's settings (``set_related_problems``)
        self.related_label = QLabel()
        self.related_label.setObjectName("configRelated")
        self.related_label.setWordWrap(True)
        self.related_label.setStyleSheet("color: #c02020;")
        self.related_label.hide()
        pin_above(self, self.related_label)
        pin_above(self, self.error_label)  # both in sight however far the form is scrolled
        buttons = QHBoxLayout()
        self.reset_button = QPushButton("Reset to default")
        self.reset_button.setToolTip("The built-in default: a small GPT-2-style model that trains on the CPU")
        self.reset_button.clicked.connect(lambda: self.set_config(default_config(self.vocab_size)))
        buttons.addWidget(self.reset_button)
        buttons.addStretch(1)
        layout.addLayout(buttons)
        layout.addStretch(1)

        if session is not None:
            session.editsChanged.connect(self._on_edits)
            self.set_config(session.config)
            session.dataChanged.connect(lambda src: self.set_vocab_size(src.tokenizer.vocab_size))
            session.configChanged.connect(self._on_session_config)
            session.trainingStateChanged.connect(lambda st: self.setEnabled(st == "idle"))
            if session.tokenizer is not None:
                self.set_vocab_size(session.tokenizer.vocab_size)
            self._report()
        else:
            self.set_config(default_config())

    @property
    def valid(self) -> bool:
        return self.form.valid

    @property
    def vocab_size(self) -> int | None:
        return self.form.fixed["vocab_size"]

    # ---- reading and writing -------------------------------------------------------------------
    def set_vocab_size(self, vocab: int | None) -> None:
        self.vocab_label.setText(f"{vocab} (set by the tokenizer)" if vocab else "set by the tokenizer")
        self.form.set_fixed("vocab_size", vocab)

    def set_config(self, config: GPTConfig) -> None:
        """Show ``config`` in the widgets (one change afterwards, not one per field)."""
        if config.core.vocab_size:
            self.form.fixed["vocab_size"] = config.core.vocab_size
            self.vocab_label.setText(f"{config.core.vocab_size} (set by the tokenizer)")
        self.form.set_value(config)

    def config(self) -> GPTConfig:
        """The config the widgets describe (not validated; text that is not a number stays text)."""
        return self.form.value()

    def problems(self) -> list[str]:
        return self.form.problems()

    def set_related_problems(self, problems: list[str]) -> None:
        """Show what this config cannot do with the Training panel's settings (a sequence longer
        than the context): said here too, where the user is editing, not only in that panel."""
        text = "With the Training panel's settings:\n• " + "\n• ".join(problems) if problems else ""
        self.related_label.setText(text)
        self.related_label.setVisible(bool(text))

    # ---- reacting ------------------------------------------------------------------------------
    def _on_session_config(self, config: GPTConfig) -> None:
        if config.to_dict() != self.config().to_dict():
            self.set_config(config)

    def _report(self) -> None:
        """Tell the session what Start must wait for in this panel (``Session.set_edit``)."""
        if self.session is not None:
            self.session.set_edit("Model panel", self.problems(), self.valid)

    def _on_edits(self, panel: str) -> None:
        """The Training panel's problems with this config (a sequence longer than the context) are
        said here too."""
        if panel == "Training panel":
            problems = self.session.edits.get(panel).problems
            self.set_related_problems([p for p in problems if "context_length" in p])

    def _on_edited(self, cfg: GPTConfig) -> None:
        self._report()
        valid = self.form.valid
        self.summary.setText(self._summary(cfg) if valid else "")
        self.configEdited.emit(cfg)
        if valid and self.session is not None and not self.session.is_training:
            try:
                self.session.set_config(cfg)
            except Exception as exc:  # e.g. the tokenizer's vocabulary changed meanwhile
                self.error_label.setText(str(exc))

    def _summary(self, cfg: GPTConfig) -> str:
        parts = [f"d_k = {cfg.d_head}", f"MLP hidden = {cfg.hidden}"]
        if cfg.kv_heads == 1 and cfg.attention.n_heads > 1:
            parts.append("multi-query attention (MQA)")
        elif cfg.kv_heads < cfg.attention.n_heads:
            parts.append(f"grouped-query attention: {cfg.n_rep} query heads per K/V head")
        if cfg.core.vocab_size:
            with contextlib.suppress(Exception):
                parts.append(f"{parameters(cfg).total:,} parameters")
        text = " · ".join(parts)
        if cfg.core.vocab_size and self.session is not None:
            try:
                check_fits(cfg, device=self.session.device, settings=self.session.train_settings)
            except ModelTooLarge as exc:  # said beside the fields; New run and Start refuse it too
                text += (
                    f"<br><span style='color:#c02020'>This model does not fit: {html.escape(str(exc))}</span>"
                )
            except Exception:
                pass
        return text
