"""The Train tab's live attention: the probe prompt, the head grid of its newest probe frame, and
the step scrubber back through the frames kept (:attr:`Session.frames <app.session.session.Session.frames>`).

The grid follows the newest frame (``Live``) until the scrubber is dragged back; a frame that
arrives meanwhile only moves the scrubber's end. An edited prompt applies with Apply or Ctrl+Enter
(a running trainer traces it from its next probe); a prompt the vocabulary cannot read is refused
under the editor, and the grid keeps the previous one.

A model of local and global layers (``sliding_window`` with a ``window_pattern``): a local layer's row
is named ``3 local`` (the axis's tool tip says how far it looks back) and its cells grey out what its
window hides (the frame's own mask, narrowed per layer by the config: no layer's mask is guessed from
its weights alone).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from app.views.train.prompt_edit import PromptEdit
from app.widgets.head_grid import MAX_BANDS, SCROLL_PX, HeadMosaic
from model.interp.frame import carried_mask
from model.interp.measures import layer_masks

#: The probe grid fits every layer while a head is at least this many pixels wide
PROBE_FIT_PX = 6


class LiveAttention(QGroupBox):
    """The probe prompt's editor, the head grid and the step scrubber (see the module docstring)."""

    #: the step of the frame the grid shows when scrubbed back; None when it follows the newest
    stepShown = Signal(object)

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__("Live attention of the probe prompt", parent)
        self.session = session
        self._scrub_live = True
        layout = QVBoxLayout(self)
        prow = QHBoxLayout()
        prow.addWidget(QLabel("Probe prompt"))
        self.probe_edit = PromptEdit()
        self.probe_edit.setObjectName("probePrompt")
        self.probe_edit.setAccessibleName("probe prompt")
        self.probe_edit.setToolTip(
            "The text whose attention is traced every few steps; Apply (or Ctrl+Enter) to use an edit. "
            "In each cell rows are queries and columns keys."
        )
        self.probe_edit.setTabChangesFocus(True)
        self.probe_edit.setFixedHeight(self.probe_edit.fontMetrics().lineSpacing() * 3 + 12)
        prow.addWidget(self.probe_edit, 1)
        self.probe_apply = QPushButton("Apply")
        self.probe_apply.setToolTip("Trace this prompt from now on (Ctrl+Enter)")
        self.probe_apply.clicked.connect(self._apply_probe_prompt)
        self.probe_edit.on_submit("Apply the edited probe prompt", self._apply_probe_prompt)
        col = QVBoxLayout()
        col.addWidget(self.probe_apply)
        self.sqrt_scale = QCheckBox("√ scale")
        self.sqrt_scale.setToolTip(
            "Colour by √weight so that the many small weights of a long prompt are visible "
            "(0 and 1 keep their colours; the colour bar shows the weights)"
        )
        self.sqrt_scale.setChecked(True)
        col.addWidget(self.sqrt_scale)
        prow.addLayout(col)
        layout.addLayout(prow)
        self.probe_error = QLabel()
        self.probe_error.setTextFormat(Qt.TextFormat.PlainText)
        self.probe_error.setStyleSheet("color: #c02020;")
        self.probe_error.setWordWrap(True)
        self.probe_error.hide()
        layout.addWidget(self.probe_error)
        self.head_grid = HeadMosaic(
            title="attention weights: rows = queries, columns = keys",
            gamma=0.5,
            interactive=False,
            compact=True,
        )
        # a deep model's heads in bands of layers side by side, all in view while they train: a
        # smaller least size than the Attention tab's (which scrolls), in this smaller box
        self.head_grid.set_scrolling(PROBE_FIT_PX, SCROLL_PX, bands=MAX_BANDS)
        self.head_grid.setMinimumHeight(180)
        layout.addWidget(self.head_grid, 1)
        self.sqrt_scale.toggled.connect(lambda on: self.head_grid.set_gamma(0.5 if on else 1.0))
        srow = QHBoxLayout()
        srow.addWidget(QLabel("Step"))
        self.scrubber = QSlider(Qt.Orientation.Horizontal)
        self.scrubber.setObjectName("stepScrubber")
        self.scrubber.setToolTip("Drag back through training to watch the heads form")
        self.scrubber.setRange(0, 0)
        self.scrubber.valueChanged.connect(self._on_scrub)
        srow.addWidget(self.scrubber, 1)
        self.scrub_label = QLabel("no frames yet")
        self.scrub_label.setMinimumWidth(170)
        srow.addWidget(self.scrub_label)
        self.live_button = QPushButton("Live")
        self.live_button.setToolTip("Follow the newest step again")
        self.live_button.setCheckable(True)
        self.live_button.setChecked(True)
        self.live_button.toggled.connect(self._on_live_toggled)
        srow.addWidget(self.live_button)
        layout.addLayout(srow)
        session.probePromptChanged.connect(self._on_probe_prompt_changed)
        session.traceUpdated.connect(self._on_frame)
        session.trainingStateChanged.connect(self._on_training_state)

    def _on_probe_prompt_changed(self, text: str) -> None:
        if self.probe_edit.toPlainText() != text:
            self.probe_edit.setPlainText(text)
        self.probe_error.hide()

    def _apply_probe_prompt(self) -> None:
        text = self.probe_edit.toPlainText()
        try:
            self.session.probe.set(text)
        except Exception as exc:
            kept = self.session.probe_prompt
            kept = kept if len(kept) <= 40 else kept[:37] + "…"
            self.probe_error.setText(f"{exc}. The grid still traces the previous prompt, “{kept}”.")
            self.probe_error.show()
            return
        self.probe_error.hide()

    def _on_frame(self, frame) -> None:
        frames = self.session.frames
        self.scrubber.blockSignals(True)
        self.scrubber.setRange(0, max(0, len(frames) - 1))
        if self._scrub_live:
            self.scrubber.setValue(self.scrubber.maximum())
        self.scrubber.blockSignals(False)
        if self._scrub_live:
            self._draw(frame, live=True)
        else:
            self._update_scrub_label(self._shown_step)  # still the scrubbed frame's step

    _shown_step: int | None = None  # the step of the frame the grid shows

    def _draw(self, frame, live: bool) -> None:
        self._shown_step = frame.step
        self.stepShown.emit(None if live else frame.step)
        L = frame.weights.shape[0]
        local = self.local_layers(L)
        mask = None  # the mask the weights carry
        if local and self._config().attention.window_pattern:  # local and global layers: each its own
            mask = layer_masks(self._config(), carried_mask(frame.weights), L)
        live_mark = " (live)" if live and self._running() else ""
        self.head_grid.set_data(
            frame.weights,
            frame.labels,
            mask=mask,
            row_labels=[f"{layer} local" if layer in local else str(layer) for layer in range(L)],
            title=f"{self._step_name(frame.step)}{live_mark}: rows = queries, columns = keys, "
            f"{len(frame.labels)} tokens",
        )
        W = self._config().attention.sliding_window if local else None
        self.head_grid.plot.getAxis("left").setToolTip(
            f"local layers attend through a sliding window of {W} keys (a query sees itself and the "
            f"{W - 1} before it); the others are global"
            if W
            else ""
        )
        self._update_scrub_label(frame.step if not live else None)

    def _step_name(self, step: int) -> str:
        """A frame's step as the status bar names it: "step N", or "pretrained" for a model opened
        from files that keep no step (its 0 is not a step it was trained to)."""
        slot = self.session.slot
        if step == 0 and slot.opened_untracked() and slot.steps_before() is None:
            return "pretrained"
        return f"step {step}"

    def _running(self) -> bool:
        """Whether the shown model is training (here, or in a followed run): only then is a frame live."""
        return bool(self.session.is_training or self.session.is_following)

    def _on_training_state(self, _state: str) -> None:
        """A run started or ended: the newest frame's title says "live" only while it runs."""
        if self._scrub_live and self.session.latest_frame is not None:
            self._draw(self.session.latest_frame, live=True)

    def _config(self):
        model = self.session.model
        return model.config if model is not None else None

    def local_layers(self, n_layers: int) -> set[int]:
        """The local (sliding-window) layers of the shown model, when its frames have its ``n_layers``."""
        cfg = self._config()
        if cfg is None or cfg.attention.sliding_window is None or cfg.core.n_layers != n_layers:
            return set()
        return {layer for layer in range(n_layers) if cfg.is_local_layer(layer)}

    def _update_scrub_label(self, step: int | None = None) -> None:
        frames = self.session.frames
        if not len(frames):
            self.scrub_label.setText("no frames yet")
            return
        if step is None:
            latest = self.session.latest_frame
            live = "live: " if self._running() else ""
            step = latest.step if latest else frames.steps()[-1]
            self.scrub_label.setText(f"{live}{self._step_name(step)}  ({len(frames)} kept)")
        else:
            latest = self.session.latest_frame
            newest = f" · newest: {latest.step}" if latest is not None and latest.step != step else ""
            self.scrub_label.setText(f"{self._step_name(step)}  ({len(frames)} kept{newest})")

    def reset(self) -> None:
        """The record was replaced (a new run, a model opened): the scrubber starts over; the grid
        keeps the newest frame, if there is one."""
        self._reset_scrubber()
        if self.session.latest_frame is None:
            self.head_grid.clear()

    def _reset_scrubber(self) -> None:
        self.scrubber.blockSignals(True)
        self.scrubber.setRange(0, max(0, len(self.session.frames) - 1))
        self.scrubber.setValue(self.scrubber.maximum())
        self.scrubber.blockSignals(False)
        self._update_scrub_label()

    def _on_scrub(self, index: int) -> None:
        frames = self.session.frames
        if not len(frames):
            return
        at_end = index >= len(frames) - 1
        if at_end and not self._scrub_live:
            self.live_button.setChecked(True)
            return
        if not at_end and self._scrub_live:
            self._scrub_live = False
            self.live_button.blockSignals(True)
            self.live_button.setChecked(False)
            self.live_button.blockSignals(False)
        live = at_end and self._scrub_live
        latest = self.session.latest_frame
        # the end of the scrubber is the newest frame, which the thinned history may not have kept
        self._draw(latest if live and latest is not None else frames[index], live=live)

    def _on_live_toggled(self, on: bool) -> None:
        self._scrub_live = on
        if on:
            self._reset_scrubber()
            if self.session.latest_frame is not None:
                self._draw(self.session.latest_frame, live=True)

    def show_frame(self, index: int) -> None:
        """Scrub to kept frame ``index`` (negative counts from the newest)."""
        n = len(self.session.frames)
        if n:
            self.scrubber.setValue(index % n)


__all__ = ["LiveAttention"]
