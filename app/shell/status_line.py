"""The window's status bar: where the shown model came from, the device, its parameters, its step
and the training pace (:class:`StatusLine`, a part of :class:`~app.shell.window.MainWindow`)."""

from __future__ import annotations

from typing import Any

from PySide6.QtWidgets import QLabel, QStatusBar

from app.widgets.elided_label import ElidedLabel
from model.io.gguf.file import tensor_types_by_role


class StatusLine:
    """The status bar's labels: ``origin`` (stretching; its tooltip the path and a GGUF file's quant
    types), then ``device``, ``params``, ``step`` and ``tps`` at the right; :meth:`update` reads them
    from the session."""

    def __init__(self, bar: QStatusBar, session: Any):
        self.session = session
        # where a loaded model came from (name, kind, size, tokenizer): as much as fits, all in its tooltip
        self.origin = ElidedLabel()
        self.origin.setContentsMargins(8, 0, 8, 0)
        bar.addWidget(self.origin, 1)
        self.device, self.params, self.step, self.tps = QLabel(), QLabel(), QLabel(), QLabel()
        for w in (self.device, self.params, self.step, self.tps):
            w.setContentsMargins(8, 0, 8, 0)
            bar.addPermanentWidget(w)

    def update(self) -> None:
        """The model's origin, device, parameters, step (or how it was trained elsewhere) and pace."""
        s = self.session
        origin = s.slot.origin()
        self.origin.setText(f"Model: {origin}" if origin else "")
        tip = str(s.checkpoint_path or "")
        types = s.slot.meta.get("tensor_types") if isinstance(s.slot.meta, dict) else None
        if types:  # a GGUF file: how each kind of tensor was quantized (the model is its dequantized form)
            tip += "\n\nStored as (dequantized to float32 here):\n" + "\n".join(tensor_types_by_role(types))
        self.origin.set_detail(tip.strip())
        self.device.setText(f"Device: {s.device if s.device is not None else '…'}")
        n = s.num_params
        self.params.setText(f"Parameters: {n:,}" if n is not None else "Parameters: –")
        target = f" / {s.target_steps:,}" if s.is_training and s.target_steps else ""
        if s.step or not s.slot.opened_untracked():
            self.step.setText(f"Step: {s.step:,}{target}")
        else:  # trained elsewhere, for steps its files do not say: not "0"
            self.step.setText("Step: – (pretrained)")
        self.step.setToolTip(s.slot.training_note())
        tps = s.tokens_per_s
        self.tps.setText(f"Tokens/s: {tps:,.0f}" if tps else "Tokens/s: –")


__all__ = ["StatusLine"]
