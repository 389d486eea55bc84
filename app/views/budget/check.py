"""Check against the real model: the built model's parameter count, and a measured training speed.

Both run off the GUI thread on the session's compute worker (under the shared compute lock), and
their results are drawn beside the calculator's figures. Counting builds the model for real when
it is small and on PyTorch's ``meta`` device (shapes only, no memory) when it is large; the speed
is measured on the config itself when it is small, else on a scaled-down copy, and turned into an
estimate for the full config through the FLOP/s it achieved.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.views.budget.common import fill, make_table
from app.views.page import PushedPage
from model.budget import arithmetic as budget
from model.budget.table import BudgetSettings
from model.config import GPTConfig
from model.nn.measure import REAL_BUILD_MAX_PARAMS, ParamCheck, measure_throughput, measured_parameters

OK_COLOR = QColor(210, 240, 210)


def rate(tokens_per_s: float) -> str:
    """Tokens per second as people read them; below one token a second, the time per token too."""
    if tokens_per_s >= 100:
        return f"{tokens_per_s:,.0f} tokens/s"
    if tokens_per_s >= 1:
        return f"{tokens_per_s:.3g} tokens/s"
    return f"{tokens_per_s:.3g} tokens/s ({budget.human_duration(1 / tokens_per_s)} per token)"


BAD_COLOR = QColor(250, 205, 205)


class CheckPage(PushedPage):
    """Buttons ``count_button`` and ``speed_button``; signals ``paramsChecked``, ``speedMeasured``."""

    title = "Check against the real model"
    key = "check"

    def prepare_screenshot(self) -> None:
        """The built model's parameter count (on the compute worker, which the screenshot waits for)."""
        if self.param_result is None:
            self.check_params()

    paramsChecked = Signal(object)  # model.budget_check.ParamCheck or an exception
    speedMeasured = Signal(object)  # model.budget_check.ThroughputResult or an exception

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.cfg: GPTConfig | None = None
        self.settings = BudgetSettings()
        self.param_result: ParamCheck | Exception | None = None
        self.speed_result: Any = None
        self._request = 0
        layout = QVBoxLayout(self)

        pbox = QGroupBox("Parameters: calculated vs counted in the built model")
        pl = QVBoxLayout(pbox)
        row = QHBoxLayout()
        self.count_button = QPushButton("Build the model and count")
        self.count_button.setObjectName("countParamsButton")
        self.count_button.setToolTip(
            "Instantiate the app's GPT for this config and count numel per component "
            "(large configs on the meta device: shapes only, no memory)"
        )
        self.count_button.clicked.connect(self.check_params)
        row.addWidget(self.count_button)
        self.param_status = QLabel("Press the button to build this config and count its parameters.")
        self.param_status.setObjectName("paramCheckStatus")
        self.param_status.setWordWrap(True)
        row.addWidget(self.param_status, 1)
        pl.addLayout(row)
        self.param_table = make_table(["component", "calculated", "counted in the model", "match"])
        self.param_table.setObjectName("paramCheckTable")
        pl.addWidget(self.param_table, 1)
        layout.addWidget(pbox, 3)

        sbox = QGroupBox("Training throughput: measured on this machine vs estimated")
        sl = QVBoxLayout(sbox)
        row = QHBoxLayout()
        self.speed_button = QPushButton("Measure a few training steps")
        self.speed_button.setObjectName("measureSpeedButton")
        self.speed_button.setToolTip(
            "Time a few AdamW steps of this config (or a scaled-down copy with the same architecture) "
            "on the app's device, off the GUI thread"
        )
        self.speed_button.clicked.connect(self.measure_speed)
        row.addWidget(self.speed_button)
        self.speed_status = QLabel("Press the button to time a few training steps here.")
        self.speed_status.setObjectName("speedStatus")
        self.speed_status.setWordWrap(True)
        row.addWidget(self.speed_status, 1)
        sl.addLayout(row)
        self.speed_table = make_table(["", "measured here", "estimate"], stretch_last=True)
        self.speed_table.setObjectName("speedTable")
        sl.addWidget(self.speed_table, 1)
        layout.addWidget(sbox, 2)
        session.trainingStateChanged.connect(lambda *_: self._update_buttons())
        self._update_buttons()

    # ---- inputs --------------------------------------------------------------------------------
    def set_config(self, cfg: GPTConfig | None, settings: BudgetSettings) -> None:
        changed = cfg is None or self.cfg is None or cfg.to_dict() != self.cfg.to_dict()
        self.cfg = cfg
        self.settings = settings
        if changed:
            self._request += 1  # results of the old config are no longer shown
            self.param_result = None
            self.param_table.setRowCount(0)
            self.param_status.setText("Press the button to build this config and count its parameters.")
            if self.speed_result is not None:
                self._draw_speed()
        elif self.speed_result is not None:
            self._draw_speed()
        self._update_buttons()

    def _update_buttons(self) -> None:
        ok = self.cfg is not None
        self.count_button.setEnabled(ok)
        training = bool(getattr(self.session, "is_training", False))
        self.speed_button.setEnabled(ok and not training)
        self.speed_button.setToolTip(
            "Stop training first: a measurement beside a running training shares the CPU"
            if training
            else "Time a few AdamW steps of this config (or a scaled-down copy with the same architecture) "
            "on the app's device, off the GUI thread"
        )

    # ---- parameters ----------------------------------------------------------------------------
    def check_params(self) -> None:
        if self.cfg is None:
            return

        cfg = self.cfg
        self._request += 1
        req = self._request
        where = (
            "on the CPU" if budget.parameters(cfg).total <= REAL_BUILD_MAX_PARAMS else "on the meta device"
        )
        self.param_status.setText(f"Building the model {where}…")
        self.count_button.setEnabled(False)

        def done(result, error):
            self.count_button.setEnabled(self.cfg is not None)
            if req != self._request:
                return
            self.param_result = error if error is not None else result
            self._draw_params(cfg)
            self.paramsChecked.emit(self.param_result)

        self.session.compute.submit("budget.params", lambda: measured_parameters(cfg), done)

    def _draw_params(self, cfg: GPTConfig) -> None:
        """The count of ``cfg`` (the config still shown: another one would have dropped the result)."""
        r = self.param_result
        if r is None:
            return
        if isinstance(r, Exception):
            self.param_status.setText(f"Could not build the model: {r}")
            self.param_table.setRowCount(0)
            return
        rows = []
        for name, calc in r.calculated.items():
            meas = r.measured.get(name, 0)
            if not calc and not meas:
                continue
            rows.append([name, f"{calc:,}", f"{meas:,}", "✓" if calc == meas else "✗ differs"])
        rows.append(
            [
                "total",
                f"{r.calculated_total:,}",
                f"{r.measured_total:,}",
                "✓" if r.measured_total == r.calculated_total else "✗ differs",
            ]
        )
        items = fill(self.param_table, rows, right_from=1, bold_rows=(len(rows) - 1,))
        for row, row_items in zip(rows, items, strict=True):
            color = OK_COLOR if row[3] == "✓" else BAD_COLOR
            row_items[3].setBackground(QBrush(color))
            row_items[3].setTextAlignment(Qt.AlignmentFlag.AlignCenter)
        how = (
            "built for real on the CPU"
            if r.device == "cpu"
            else "built on PyTorch's meta device (every parameter with its shape, no memory)"
        )
        verdict = (
            "the calculator matches the model exactly"
            if r.ok
            else f"MISMATCH in {', '.join(r.mismatches)}: a bug in the calculator or the model"
        )
        self.param_status.setText(
            f"GPT({cfg.core.n_layers} layers, d = {cfg.core.d_model}) {how}: {verdict}."
        )

    # ---- throughput ----------------------------------------------------------------------------
    def measure_speed(self) -> None:
        if self.cfg is None:
            return

        cfg = self.cfg
        device = str(getattr(self.session, "device", None) or "cpu")
        self.speed_status.setText(f"Timing a few training steps on {device}…")
        self.speed_button.setEnabled(False)

        def done(result, error):
            self._update_buttons()
            self.speed_result = (cfg, error if error is not None else result)
            self._draw_speed()
            self.speedMeasured.emit(self.speed_result[1])

        self.session.compute.submit("budget.speed", lambda: measure_throughput(cfg, device=device), done)

    def _draw_speed(self) -> None:
        measured_cfg, r = self.speed_result
        if isinstance(r, Exception):
            self.speed_status.setText(f"Could not measure: {r}")
            self.speed_table.setRowCount(0)
            return
        cfg = self.cfg or measured_cfg
        what = (
            "this config itself"
            if not r.scaled
            else "a scaled-down copy with the same architecture (" + "; ".join(r.notes) + ")"
        )
        stale = "" if cfg.to_dict() == measured_cfg.to_dict() else " (measured for an earlier config)"
        self.speed_status.setText(
            f"Timed {r.steps} AdamW step{'s' if r.steps != 1 else ''} of {what} on {r.device}, "
            f"batch {r.batch} × T = {r.seq_len}{stale}; the median step counts."
        )
        T = min(self.settings.seq_len_for(cfg), cfg.core.context_length)
        est_here = r.estimate_tokens_per_s(cfg, T)
        train_pt = budget.flops(cfg, T).train_total_per_token
        rows = [
            [
                "model timed",
                f"{budget.parameters(r.config).total:,} parameters",
                f"{budget.parameters(cfg).total:,} parameters (this config)",
            ],
            [
                "training tokens/s",
                f"{r.tokens_per_s:,.0f}",
                f"{rate(est_here)} for this config here at T = {T:,} (same FLOP/s)",
            ],
            [
                "model FLOP/s achieved",
                f"{r.achieved_flops / 1e9:,.3g} GFLOP/s",
                f"{train_pt:.3g} FLOP per training token at T = {T:,}",
            ],
        ]
        if r.peak_flops:
            rows.append(
                [
                    "utilisation (MFU)",
                    f"{r.mfu:.1%} of a measured {r.peak_flops / 1e9:,.0f} GFLOP/s fp32 matmul peak",
                    "",
                ]
            )
        s = self.settings
        if s.tokens:
            rows.append(
                [
                    "training on D tokens here",
                    "",
                    f"{budget.human_duration(s.tokens / est_here)} for "
                    f"{budget.human_count(s.tokens)} tokens on this machine",
                ]
            )
        if s.peak_tflops:
            eff = s.peak_tflops * 1e12 * s.mfu * s.gpus
            rows.append(
                [
                    "with the Cost settings",
                    "",
                    f"{rate(eff / train_pt)} on {s.gpus:,} × {s.peak_tflops:g} TFLOP/s at {s.mfu:.0%} MFU",
                ]
            )
        fill(self.speed_table, rows, right_from=1)
