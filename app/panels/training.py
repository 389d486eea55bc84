"""The training settings panel: steps, batch, learning-rate schedule, evaluation, probes, device.

Every :class:`~model.train.settings.TrainSettings` field gets a widget in a
:class:`~app.widgets.dataclass_form.DataclassForm` (fields added later appear at the end);
``settings()`` builds and ``problems()`` validates them, shown inline. The device selector
(auto/CPU/CUDA) is enabled only while nothing trains. "Recommended for this data" applies
``model.train.recipes.recommended_config/recommended_settings`` for the current source.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from PySide6.QtCore import Signal
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QPushButton,
    QSpinBox,
    QWidget,
)

from app.widgets.dataclass_form import DataclassForm, FieldSpec
from app.widgets.layouts import compact_combo, pin_above, scrolled
from app.widgets.wheel_guard import guard_wheel
from model.train.recipes import recommended_config, recommended_settings
from model.train.settings import ON_CONTINUE, TrainSettings

#: App-side default: live attention on (the model layer's default is off, for scripts).
APP_PROBE_EVERY = 10


def app_default_settings():
    """The Training panel's defaults: the model layer's, with live attention on and the sequence
    length "auto" (the model's context length, or the data's, if shorter), so that the defaults fit
    whatever model is shown: the starter's context is 64, the default config's 256."""
    return TrainSettings(probe_every=APP_PROBE_EVERY, seq_len=None)


#: (label, tooltip, minimum, maximum, special text for the minimum or None) per field.
SPECS: dict[str, tuple[str, str, float, float, str | None]] = {
    "steps": (
        "Steps",
        "Optimizer steps in the run (the learning-rate schedule ends here)",
        1,
        10_000_000,
        None,
    ),
    "batch_size": ("Batch size", "Sequences per step (B)", 1, 65536, None),
    "seq_len": (
        "Sequence length",
        "Tokens per sequence (T); auto = the model's context length",
        0,
        131072,
        "auto",
    ),
    "lr": ("Learning rate", "Peak learning rate after warmup (AdamW)", 1e-7, 10.0, None),
    "warmup": (
        "Warmup steps",
        "Steps of linear warmup from 0 to the peak learning rate",
        0,
        10_000_000,
        None,
    ),
    "min_lr": ("Final learning rate", "Floor of the cosine decay; auto = lr / 10", 0.0, 10.0, "auto"),
    "weight_decay": (
        "Weight decay",
        "AdamW decoupled weight decay on matrices (not biases or norms)",
        0.0,
        10.0,
        None,
    ),
    "grad_clip": ("Gradient clip", "Clip the global gradient norm to this (0 = off)", 0.0, 1000.0, None),
    "beta1": ("Adam β₁", "Momentum of the first moment", 0.0, 1.0, None),
    "beta2": ("Adam β₂", "Momentum of the second moment", 0.0, 1.0, None),
    "eval_every": ("Validate every", "Measure validation loss every this many steps", 1, 10_000_000, None),
    "eval_batches": (
        "Validation batches",
        "Held-out batches averaged for one validation loss",
        1,
        100_000,
        None,
    ),
    "seed": ("Seed", "Seeds the weights, the batches and dropout: same seed, same run", 0, 2**31 - 1, None),
    "probe_every": (
        "Live attention every",
        "Trace the probe prompt every this many steps (0 = off)",
        0,
        1_000_000,
        "off",
    ),
    "threads": (
        "CPU threads",
        "torch threads for training on the CPU (0 = every core)",
        0,
        1024,
        "all cores",
    ),
    "amp": ("Mixed precision", "bf16/fp16 autocast on CUDA (the CPU always trains in fp32)", 0, 0, None),
    "loss_mask": (
        "Score task answers only",
        "For synthetic tasks: only the determined targets count",
        0,
        0,
        None,
    ),
    "on_continue": (
        "Learning rate on Continue",
        "When Continue trains past the end the schedule was made for: continue = on from the rate "
        "it has, down to the final rate over the new steps; stretch = the cosine recomputed over the "
        "new total (the rate jumps up); restart = warm up to the peak again, then decay",
        0,
        0,
        None,
    ),
}
#: Fields this panel does not show (the device has its own selector; the probe prompt is on the Train
#: tab; where a continued run's schedule stands is the run's own, never a setting typed here).
HIDDEN = {"device", "probe_prompt", "schedule_from", "schedule_peak"}


class TrainSettingsPanel(QWidget):
    """Edits :class:`~model.train.settings.TrainSettings` (plus the sample interval) and the device."""

    validityChanged = Signal(bool)

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)

        self.session = session

        layout = scrolled(self)

        dev_box = QGroupBox("Device")
        dev_form = QFormLayout(dev_box)
        self.device_combo = compact_combo(QComboBox(), 12)  # long GPU names: the dock stays narrow
        self.device_combo.setObjectName("deviceCombo")
        self.device_combo.setToolTip(
            "Where the model trains and runs; auto = CUDA when present, else the CPU"
        )
        for label, value, ok in self._device_choices():
            self.device_combo.addItem(label, value)
            items = self.device_combo.model()
            if not ok and isinstance(items, QStandardItemModel):  # (a combo box's own model is one)
                item = items.item(self.device_combo.count() - 1)
                if item is not None:
                    item.setEnabled(False)
        self.device_combo.currentIndexChanged.connect(self._device_changed)
        dev_form.addRow("Device", self.device_combo)
        layout.addWidget(dev_box)

        self.form = DataclassForm(
            TrainSettings,
            other_title="Optimisation",
            hidden=HIDDEN,
            fixed=self._session_values,
            specs={
                name: FieldSpec(label=label, tip=tip, minimum=lo, maximum=hi, special=special)
                for name, (label, tip, lo, hi, special) in SPECS.items()
            },
            check=lambda v: v.problems_for(self.session.config, self.session.source),
            error_prefix="Fix before training:\n",
            choices={"on_continue": ON_CONTINUE},
            show_names=False,
            object_prefix="setting_",
            errors_below=False,
        )
        self.form.valueChanged.connect(self._changed)
        self.form.validityChanged.connect(self.validityChanged)
        self.widgets = self.form.widgets
        self.sample_every = QSpinBox()
        self.sample_every.setRange(0, 1_000_000)
        self.sample_every.setSpecialValueText("off")
        self.sample_every.setValue(session.sample_every)
        self.sample_every.setToolTip("Generate a text sample every this many steps while training (0 = off)")
        self.sample_every.setObjectName("setting_sample_every")
        guard_wheel(self.sample_every, self.device_combo)
        self.sample_every.valueChanged.connect(self._changed)
        self.form.forms["Optimisation"].addRow("Sample text every", self.sample_every)
        layout.addWidget(self.form)

        self.recommend_button = QPushButton("Recommended for this data")
        self.recommend_button.setToolTip("Model shape and settings that suit the chosen corpus or task")
        self.recommend_button.clicked.connect(self.apply_recommended)
        layout.addWidget(self.recommend_button)
        layout.addStretch(1)
        self.error_label = self.form.error_label
        self.error_label.setObjectName("settingsErrors")
        pin_above(self, self.error_label)  # in sight however far the form is scrolled

        initial = session.train_settings or app_default_settings()
        self.set_settings(initial)
        session.trainingStateChanged.connect(self._on_state)
        session.deviceChanged.connect(lambda *_: self._sync_device())
        # the settings are checked against the model and data they would train
        for signal in (session.configChanged, session.dataChanged, session.modelChanged):
            signal.connect(lambda *_: self.form.refresh())
        self._sync_device()
        self._report()

    @property
    def valid(self) -> bool:
        return self.form.valid

    def _session_values(self) -> dict[str, Any]:
        """The fields this panel does not show: the device and probe prompt, from the session."""
        current = self.session.train_settings
        return {
            "device": self.session.device_choice,
            "probe_prompt": getattr(current, "probe_prompt", None),
            "schedule_from": 0,
            "schedule_peak": None,
        }

    @staticmethod
    def _device_choices() -> list[tuple[str, str, bool]]:
        try:  # a broken CUDA driver: the CPU alone
            cuda = torch.cuda.is_available()
            name = torch.cuda.get_device_name(0) if cuda else ""
        except Exception:
            cuda, name = False, ""
        auto = f"Auto (CUDA: {name})" if cuda else "Auto (CPU: no CUDA device found)"
        return [
            (auto, "auto", True),
            ("CPU", "cpu", True),
            (f"CUDA ({name})" if cuda else "CUDA (not available)", "cuda", cuda),
        ]

    # ---- values --------------------------------------------------------------------------------
    def set_settings(self, settings: Any) -> None:
        self.form.set_value(settings)

    def settings(self) -> Any:
        """The TrainSettings the widgets describe (device and probe prompt from the session)."""
        return self.form.value()

    def problems(self) -> list[str]:
        return self.form.problems()

    def values(self) -> dict[str, Any]:
        """JSON-able values for QSettings (``restore`` takes them back)."""
        d = self.form.values()
        d["sample_every"] = self.sample_every.value()
        return d

    def restore(self, values: dict[str, Any]) -> None:
        try:
            sample = int(values.pop("sample_every", self.sample_every.value()))
            current = self.settings()
            known = {k: v for k, v in values.items() if k in self.widgets}
            self.set_settings(dataclasses.replace(current, **known))
            self.sample_every.setValue(sample)
        except Exception:
            pass

    def _report(self) -> None:
        """Tell the session what Start must wait for in this panel (``Session.set_edit``)."""
        self.session.set_edit("Training panel", self.problems(), self.valid)

    def _changed(self, *_: Any) -> None:
        self._report()
        if self.form.valid:
            self.session.set_train_settings(self.settings())
            self.session.sample_every = int(self.sample_every.value())

    # ---- device --------------------------------------------------------------------------------
    def _sync_device(self) -> None:
        idx = self.device_combo.findData(self.session.device_choice)
        if idx >= 0 and idx != self.device_combo.currentIndex():
            self.device_combo.blockSignals(True)
            self.device_combo.setCurrentIndex(idx)
            self.device_combo.blockSignals(False)

    def _device_changed(self) -> None:
        choice = self.device_combo.currentData()
        try:
            self.session.set_device(choice)
        except Exception as exc:
            self.error_label.setText(str(exc))
            self._sync_device()
            return
        self.form.refresh()

    def _on_state(self, state: str) -> None:
        idle = state == "idle"
        self.device_combo.setEnabled(idle)
        self.recommend_button.setEnabled(idle)
        for name in ("seed", "seq_len", "threads", "amp"):
            if name in self.widgets:
                self.widgets[name].setEnabled(idle)

    def apply_recommended(self) -> None:
        source = self.session.source
        if source is None:
            return
        settings = recommended_settings(source)
        if not settings.probe_every:
            settings = settings.replace(probe_every=APP_PROBE_EVERY)
        self.set_settings(settings)
        try:
            self.session.set_config(recommended_config(source))
        except Exception as exc:
            self.error_label.setText(str(exc))
