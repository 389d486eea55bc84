"""Mask lab: one head's scores, mask and weights under any mask; and the missing-mask bug, trained."""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import (
    QComboBox,
    QLabel,
    QPushButton,
)

from app.views.labs.base import LabPage
from app.views.labs.comparison import ComparisonPanel, ComparisonSpec
from app.views.labs.controls import dspin, labelled, map_grid, readable_map, spin
from app.widgets.layouts import FlowLayout
from app.widgets.matrix_plot import MatrixPlot
from model.config import GPTConfig
from model.interp.analysis.masks import future_attention, make_mask, mask_stages
from model.interp.prompt import encode_prompt
from model.interp.trace import run_with_trace
from model.nn.hooks import use_mask
from model.train.multitrain import variant_configs

MASK_CHOICES = [
    ("causal", "causal (on)"),
    ("none", "none (off)"),
    ("sliding", "sliding window"),
    ("prefix", "prefix-LM"),
]


class MaskStagesPage(LabPage):
    slug = "mask-stages"
    short = "Scores, mask, weights"
    lab = "Mask lab"
    title = "Scores, mask and weights of one head"
    explanation = (
        "A decoder predicts token <i>i</i>+1 from tokens 1…<i>i</i>, so query <i>i</i> must not read a "
        "later key. "
        "The mask adds 0 where attention is allowed and −∞ where it is not; since e<sup>−∞</sup> = 0 those "
        "weights vanish after the softmax and every row still sums to 1. Here the current model reads the "
        "prompt under the mask you choose (a hook on the model's <tt>mask</tt> point: "
        "<tt>model.hooks(use_mask(M))</tt>)."
    )
    formula = (
        "A = softmax<sub>row</sub>(QKᵀ/√d<sub>k</sub> + M),   M<sub>ij</sub> = 0 if query i may see key j, "
        "−∞ otherwise.   causal: j ≤ i · sliding window w: i−w &lt; j ≤ i · prefix-LM p: j &lt; p or j ≤ i"
    )
    notice = (
        "with the causal mask the upper triangle of the weights is exactly 0. Turn the mask off and it "
        "fills in: "
        "every token now also reads the tokens after it. A sliding window keeps a band of w keys; a "
        "prefix-LM "
        "lets the first p tokens see each other both ways."
    )

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.layer = labelled(row, "Layer", spin(0, 0, 0, "Which layer's head to show"))
        self.head = labelled(row, "Head", spin(0, 0, 0, "Which head of that layer"))
        self.kind = QComboBox()
        for key, text in MASK_CHOICES:
            self.kind.addItem(text, key)
        self.kind.setToolTip("The mask the model reads the prompt with")
        labelled(row, "Mask", self.kind)
        self.toggle = QPushButton("Toggle causal on/off")
        self.toggle.clicked.connect(self.toggle_causal)
        row.addWidget(self.toggle)
        # not ``window``: that is QWidget.window(), the top-level widget
        self.window_size = labelled(
            row, "window w", spin(1, 512, 4, "Sliding window: each query sees itself and w−1 keys before")
        )
        self.prefix = labelled(
            row, "prefix p", spin(0, 512, 4, "Prefix-LM: the first p tokens see each other")
        )
        self.tokens = labelled(row, "tokens shown", spin(2, 64, 10, "How many tokens of the prompt to show"))
        row.addStretch(1)
        body.addLayout(row)
        for w in (self.layer, self.head, self.window_size, self.prefix, self.tokens):
            w.valueChanged.connect(lambda *_: self.mark_dirty())
        self.kind.currentIndexChanged.connect(self._kind_changed)

        lab = readable_map("value")
        self.scores_view = MatrixPlot(title="Scores S = QKᵀ/√d_k (before the mask)", diverging=True, **lab)
        self.mask_view = MatrixPlot(
            title="Mask M: 0 = may attend, −∞ = hidden", diverging=True, legend=False, digits=0, **lab
        )
        self.weights_view = MatrixPlot(title="Weights A = softmax(S + M)", **readable_map("weight"))
        body.addWidget(map_grid([self.scores_view, self.mask_view, self.weights_view]), 1)
        self.summary = QLabel(" ")
        self.summary.setWordWrap(True)
        body.addWidget(self.summary)
        self._kind_changed()

    def _kind_changed(self) -> None:
        kind = self.kind.currentData()
        self.window_size.setEnabled(kind == "sliding")
        self.prefix.setEnabled(kind == "prefix")
        self.mark_dirty()

    def toggle_causal(self) -> None:
        self.kind.setCurrentIndex(1 if self.kind.currentData() == "causal" else 0)

    def set_mask(self, kind: str) -> None:
        self.kind.setCurrentIndex([k for k, _ in MASK_CHOICES].index(kind))

    def compute(self) -> None:
        model, _ = self.require_model()
        cfg = model.config
        self.layer.setMaximum(cfg.core.n_layers - 1)
        self.head.setMaximum(cfg.attention.n_heads - 1)
        ids, labels = self.prompt_ids(self.tokens.value())
        T = len(ids)
        kind = self.kind.currentData()
        mask = make_mask(kind, T, window=self.window_size.value(), prefix=self.prefix.value())
        layer, head = self.layer.value(), self.head.value()

        def job():
            hooks = use_mask(mask.to(model.device))  # the chosen mask instead of the model's
            trace = run_with_trace(model, ids, kinds=("scores", "pattern"), layers=[layer], hooks=hooks)
            return mask_stages(trace, layer, head)

        self.submit("stages", job, lambda st: self._draw(st, labels, kind, layer, head))

    def _draw(self, st, labels, kind, layer, head) -> None:
        finite = st.scores[np.isfinite(st.scores)]
        lim = float(np.abs(finite).max()) if finite.size else 1.0
        self.scores_view.set_matrix(st.scores, labels, labels, levels=(-lim, lim))
        self.mask_view.set_matrix(st.additive, labels, labels, levels=(-1.0, 1.0))
        self.weights_view.set_matrix(st.weights, labels, labels, levels=(0.0, 1.0), mask=st.mask)
        self.weights_view.set_title(f"Weights A = softmax(S + M), layer {layer} head {head}")
        visible = st.mask.sum(-1)
        name = dict(MASK_CHOICES)[kind]
        self.summary.setText(
            f"Mask: {name}. Keys visible per query: {', '.join(str(int(v)) for v in visible)}. "
            f"Hidden cells: {int((~st.mask).sum())} of {st.mask.size}. "
            f"Mean weight on keys after the query: {st.future:.3f}. "
            f"Row sums of A: {st.weights.sum(-1).min():.3f}–{st.weights.sum(-1).max():.3f}."
        )
        self.say(f"Prompt: the first {len(labels)} tokens of the labs' prompt.")

    def export_targets(self):
        return {
            "scores": self.scores_view.view,
            "mask": self.mask_view.view,
            "weights": self.weights_view.view,
        }


class MaskBugPage(LabPage):
    slug = "mask-bug"
    short = "Training without the mask"
    lab = "Mask lab"
    title = "The classic bug: training without the mask"
    explanation = (
        "Two copies of one small model start from the same seed and see the same batches, one step each in "
        "turn; the only difference is the causal mask. Without it, position <i>i</i> can read token "
        "<i>i</i>+1 — the very token it is asked to predict — so it learns to copy instead of to predict."
    )
    formula = (
        "loss = −(1/T) Σ<sub>i</sub> log p(x<sub>i+1</sub> | x<sub>1</sub>…x<sub>i</sub>)   — without the "
        "mask "
        "the model computes p(x<sub>i+1</sub> | x<sub>1</sub>…x<sub>T</sub>), and x<sub>i+1</sub> is one of "
        "its inputs"
    )
    notice = (
        "the unmasked loss drops far below the masked one, towards zero, while its attention on later tokens "
        "climbs; its samples are garbage all the same, because when it generates there is no next token to "
        "copy."
    )
    uses_model = False
    follows_training = False

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.steps = labelled(row, "steps", spin(1, 100000, 300, "Training steps per variant"))
        self.lr = labelled(row, "learning rate", dspin(1e-5, 1.0, 1e-2, 1e-3))
        self.n_layers = labelled(row, "layers", spin(1, 8, 2))
        self.d_model = labelled(row, "d_model", spin(8, 512, 64))
        self.n_heads = labelled(row, "heads", spin(1, 16, 4))
        self.positions = QComboBox()
        for p in ("rope", "learned", "sinusoidal"):
            self.positions.addItem(p)
        self.positions.setToolTip(
            "RoPE makes 'read the next position' easy to learn, so the bug shows quickly"
        )
        labelled(row, "positions", self.positions)
        self.seq_len = labelled(row, "sequence", spin(4, 256, 32, "Tokens per training sequence"))
        self.batch = labelled(row, "batch", spin(1, 256, 16))
        row.addStretch(1)
        body.addLayout(row)
        self.panel = ComparisonPanel(
            self.make_spec,
            title="Training loss: with vs without the causal mask",
            probe_title="Attention on later tokens (probe prompt)",
            probe_label="mean weight on keys j > i",
            samples=True,
            session=self.session,
        )
        body.addWidget(self.panel, 1)

    def make_spec(self) -> ComparisonSpec:
        source = self.require_source()
        T = self.seq_len.value()
        base = GPTConfig(
            n_layers=self.n_layers.value(),
            d_model=self.d_model.value(),
            n_heads=self.n_heads.value(),
            context_length=max(T, 8),
            positions=self.positions.currentText(),
            dropout=0.0,
        ).with_vocab(source.tokenizer.vocab_size)
        variants = variant_configs(base, {"with mask": {"causal": True}, "without mask": {"causal": False}})
        steps = self.steps.value()
        settings = ComparisonSpec.lab_settings(
            steps=steps,
            batch_size=self.batch.value(),
            seq_len=T,
            lr=self.lr.value(),
            warmup=min(20, steps // 10),
        )
        prompt = self.prompt_text() or getattr(source, "default_prompt", "")
        ids = list(encode_prompt(source.tokenizer, prompt, T, keep="first", errors="replace").ids)
        sample_prompt = source.tokenizer.decode(ids[: min(16, len(ids))])
        return ComparisonSpec(
            variants=variants,
            source=source,
            settings=settings,
            probe=lambda name, trainer: future_attention(trainer.model, ids),
            probe_every=max(1, steps // 30),
            sample_prompt=sample_prompt,
            sample_every=max(1, steps // 3),
            sample_tokens=80,
        )

    def prepare_screenshot(self) -> None:
        self.steps.setValue(150)
        self.panel.start()

    @property
    def idle(self) -> bool:
        return not self.panel.running

    def shutdown(self) -> None:
        self.panel.shutdown()

    def export_targets(self):
        out = {"loss": self.panel.loss_plot.view}
        if self.panel.probe_plot is not None:
            out["future attention"] = self.panel.probe_plot.view
        return out
