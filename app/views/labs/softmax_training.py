"""Softmax scaling lab, in training: a scaled and an unscaled copy of a model with large heads trained
side by side, and what the run measured (``model.interp.analysis.scaling_run``) as its notice."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QComboBox

from app.views.labs.base import LabPage
from app.views.labs.comparison import ComparisonPanel, ComparisonSpec
from app.views.labs.controls import dspin, labelled, spin
from app.widgets.layouts import FlowLayout
from model.config import GPTConfig
from model.interp.analysis.saturation import saturation_summary
from model.interp.analysis.scaling_run import ScalingOutcome, final_loss, scaling_run_summary
from model.interp.prompt import encode_prompt
from model.text.sources import resolve_source
from model.text.tasks import task_help
from model.train.multitrain import variant_configs

#: the defaults under which both models learn and the effect shows: a large head (256 in a 64-wide
#: model) sorting 12 symbols, where both end well below ln 12 = 2.48 nats and the unscaled one behind
DEFAULT_DATA = "task:sort"
DEFAULT_HEADS = 1
DEFAULT_STEPS = 200
DEFAULT_LR = 3e-3


class SoftmaxTrainingPage(LabPage):
    slug = "softmax-training"
    short = "Training: scaled vs unscaled"
    lab = "Softmax scaling lab"
    title = "Training: scaled vs unscaled attention with large heads"
    explanation = (
        "Two copies of a model with large heads start from the same seed and train on the same batches; one "
        "divides the scores by √d<sub>k</sub>, the other does not. By default they learn to sort: each "
        "output symbol must find the right symbol of the input, a job for attention alone. A probe measures "
        "how one-hot each model's attention is on the task's prompt (the labs' prompt for the Data panel's "
        "data) as they train."
    )
    formula = (
        "scaled: softmax(QKᵀ/√d<sub>k</sub>)V   vs   unscaled: softmax(QKᵀ)V,   d<sub>k</sub> = head size"
    )
    #: the chapters' claim, set beside what the run measured (``scaling_run_summary``) in the notice
    CLAIM = (
        "unscaled, a large head's scores spread like √d<sub>k</sub>, its softmax saturates and passes "
        "back little gradient, so the unscaled model should learn more slowly and attend more one-hot"
    )
    notice = CLAIM + "; press Start comparison to measure it with these settings."
    uses_model = False
    follows_training = False

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.data = QComboBox()
        for name, line in task_help().items():
            self.data.addItem(name, name)
            self.data.setItemData(self.data.count() - 1, line, Qt.ItemDataRole.ToolTipRole)
        self.data.addItem("the Data panel's data", "")
        self.data.setCurrentIndex(self.data.findData(DEFAULT_DATA))
        labelled(row, "data", self.data)
        self.head_dim = labelled(row, "head size d_k", spin(2, 1024, 256, "head_dim of every head"))
        self.n_heads = labelled(row, "heads", spin(1, 16, DEFAULT_HEADS))
        self.d_model = labelled(row, "d_model", spin(8, 512, 64))
        self.n_layers = labelled(row, "layers", spin(1, 8, 2))
        self.steps = labelled(row, "steps", spin(1, 100000, DEFAULT_STEPS))
        self.lr = labelled(row, "learning rate", dspin(1e-5, 1.0, DEFAULT_LR, 1e-3))
        self.seq_len = labelled(row, "sequence", spin(4, 256, 64))
        self.batch = labelled(row, "batch", spin(1, 256, 16))
        row.addStretch(1)
        body.addLayout(row)
        self.panel = ComparisonPanel(
            self.make_spec,
            title="Training loss: scaled vs unscaled",
            probe_title="How one-hot attention is (probe prompt)",
            probe_label="mean max weight over heads",
            session=self.session,
        )
        self.panel.finished.connect(self._finished)
        body.addWidget(self.panel, 1)
        #: the vocabulary of the run in progress (ln V: the loss of learning nothing)
        self.vocab_size = 0

    def outcome(self) -> ScalingOutcome | None:
        """What the last run measured, once both variants logged a loss and a probe."""
        losses, probes = self.panel.losses, self.panel.probes
        names = ("scaled", "unscaled")
        if not all(losses.get(n, ((), ()))[1] and probes.get(n, ((), ()))[1] for n in names):
            return None
        return ScalingOutcome(
            loss_scaled=final_loss(losses["scaled"][1]),
            loss_unscaled=final_loss(losses["unscaled"][1]),
            max_weight_scaled=float(probes["scaled"][1][-1]),
            max_weight_unscaled=float(probes["unscaled"][1][-1]),
            vocab_size=self.vocab_size,
        )

    def _finished(self, reason: str, _message: str) -> None:
        outcome = self.outcome() if reason in ("done", "stopped") else None
        if outcome is not None:
            self.set_notice(f"{self.CLAIM}. Measured here: {scaling_run_summary(outcome)}")

    def make_spec(self) -> ComparisonSpec:
        data = self.data.currentData()
        source = resolve_source(data) if data else self.require_source()
        self.vocab_size = source.tokenizer.vocab_size
        T = self.seq_len.value()
        base = GPTConfig(
            n_layers=self.n_layers.value(),
            d_model=self.d_model.value(),
            n_heads=self.n_heads.value(),
            head_dim=self.head_dim.value(),
            context_length=max(T, 8),
            dropout=0.0,
        ).with_vocab(source.tokenizer.vocab_size)
        variants = variant_configs(
            base, {"scaled": {"attn_scale": "sqrt_dk"}, "unscaled": {"attn_scale": "none"}}
        )
        steps = self.steps.value()
        settings = ComparisonSpec.lab_settings(
            steps=steps,
            batch_size=self.batch.value(),
            seq_len=T,
            lr=self.lr.value(),
            warmup=min(10, steps // 10),
        )
        text = source.default_prompt if data else self.prompt_text() or source.default_prompt
        ids = list(encode_prompt(source.tokenizer, text, T, keep="first", errors="replace").ids)
        return ComparisonSpec(
            variants=variants,
            source=source,
            settings=settings,
            probe=lambda name, trainer: saturation_summary(trainer.model, ids)["max_weight"],
            probe_every=max(1, steps // 30),
        )

    def prepare_screenshot(self) -> None:
        self.steps.setValue(100)
        self.panel.start()

    @property
    def idle(self) -> bool:
        return not self.panel.running

    def shutdown(self) -> None:
        self.panel.shutdown()

    def export_targets(self):
        targets = {"loss": self.panel.loss_plot.view}
        if self.panel.probe_plot is not None:  # this page always has one
            targets["max weight"] = self.panel.probe_plot.view
        return targets
