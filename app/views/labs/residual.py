"""Residual stream lab: norms along the stream, during training, and gradient flow (the logit lens
page is in lens.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QGridLayout,
    QHBoxLayout,
    QPushButton,
    QWidget,
)

from app.views.labs.base import LabPage
from app.views.labs.comparison import ComparisonPanel, ComparisonSpec
from app.views.labs.controls import dspin, labelled, spin
from app.views.labs.plots import BarPlot, LinePlot
from app.widgets.layouts import FlowLayout
from app.widgets.matrix_plot import MatrixPlot
from app.widgets.palette import color_for
from model.interp.analysis.gradflow import (
    at_init_summary,
    fixed_batch,
    grad_flow_on_batch,
    grad_flow_variants,
    shows_xiong,
    xiong_config,
)
from model.interp.analysis.residual import (
    ResidualNorms,
    WriteStats,
    residual_norms,
    residual_profile,
    write_stats,
)
from model.interp.trace import run_with_trace
from model.train.multitrain import variant_configs

STREAM_KINDS = ("resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out")


class StreamNormsPage(LabPage):
    slug = "residual-norms"
    short = "Norms along the stream"
    lab = "Residual stream lab"
    title = "Norms along the stream, and what each sublayer writes"
    explanation = (
        "Every token carries one vector of width d from the embedding to the output; each attention and MLP "
        "sublayer reads it (through a norm) and adds its output back. Here is the size of that vector at "
        "every "
        "checkpoint and position of the prompt, and the size and direction of what each sublayer adds."
    )
    formula = (
        "Pre-LN: mid = x + Attn(Norm(x)),  post = mid + MLP(Norm(mid))   ·   Post-LN: mid = Norm(x + "
        "Attn(x)), "
        "post = Norm(mid + MLP(mid))   ·   cos(write, stream) = w·x / (‖w‖‖x‖)"
    )
    notice = (
        "in a Pre-LN model nothing renormalises the stream, so its norm is free to grow with depth, often in "
        "one big step where a single sublayer writes far more than the rest; Post-LN pins it near √d at "
        "every "
        "checkpoint. A cosine near 0 means a sublayer writes something new; above 0 it reinforces what is "
        "there, below 0 it erases."
    )

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.tokens = labelled(row, "tokens", spin(2, 4096, 64, "How many tokens of the prompt to read"))
        self.tokens.valueChanged.connect(lambda *_: self.mark_dirty())
        row.addStretch(1)
        body.addLayout(row)
        grid = QGridLayout()
        self.lines = LinePlot("‖x‖₂ along the stream (grey: one line per position)", "checkpoint", "norm")
        self.heat = MatrixPlot(
            title="‖x‖₂ by checkpoint and position",
            square=False,
            interactive=False,
            numbers=None,
            legend_label="norm",
        )
        self.heat.set_axis_titles("checkpoint", "position")
        self.writes = BarPlot("What each sublayer writes: mean ‖attn_out‖, ‖mlp_out‖", "norm")
        self.cosines = BarPlot("Mean cosine of each write with the stream it joins", "cos(write, stream)")
        grid.addWidget(self.lines, 0, 0)
        grid.addWidget(self.heat, 0, 1)
        grid.addWidget(self.writes, 1, 0)
        grid.addWidget(self.cosines, 1, 1)
        body.addLayout(grid, 1)

    def compute(self) -> None:
        model, _ = self.require_model()
        ids, labels = self.prompt_ids(self.tokens.value())

        def job() -> tuple[ResidualNorms, WriteStats]:
            trace = run_with_trace(model, ids, kinds=STREAM_KINDS)
            return residual_norms(trace, mids=True), write_stats(trace)

        self.submit("norms", job, lambda r: self._draw(*r, labels))

    def _draw(self, norms, writes, labels) -> None:
        P, T = norms.norms.shape
        x = np.arange(P)
        step = max(1, T // 64)
        keep = set(range(0, T, step))
        for t in range(T):
            key = f"pos{t}"
            if t in keep:
                self.lines.set_series(
                    key, x, norms.norms[:, t], label="", color=(150, 150, 150), width=1, alpha=90
                )
            else:
                self.lines.remove(key)
        for key in [k for k in self.lines.curves if k.startswith("pos") and int(k[3:]) >= T]:
            self.lines.remove(key)
        self.lines.set_series(
            "mean", x, norms.mean, label="mean over positions", color=(31, 119, 180), width=3, symbol="o"
        )
        self.lines.set_x_ticks(norms.names)
        self.heat.set_matrix(norms.norms, norms.names, labels)
        cats = [f"layer {layer}" for layer in writes.layers]
        self.writes.set_groups(
            cats, {"attention": writes.attn_norm.mean(-1), "MLP": writes.mlp_norm.mean(-1)}
        )
        self.cosines.set_groups(cats, {"attention": writes.attn_cos.mean(-1), "MLP": writes.mlp_cos.mean(-1)})
        self.say(
            f"{T} tokens. Mean norm: {norms.names[0]} {norms.mean[0]:.2f} → {norms.names[-1]} "
            f"{norms.mean[-1]:.2f}. "
            "Checkpoints: embed = token (+ position) embedding; L0.mid, L1.mid, … after each layer's "
            "attention; L0.post, L1.post, … after its MLP."
        )

    def export_targets(self):
        return {
            "lines": self.lines.view,
            "heatmap": self.heat.view,
            "writes": self.writes.view,
            "cosines": self.cosines.view,
        }


class LiveNormsPage(LabPage):
    slug = "residual-live"
    short = "Norms during training"
    lab = "Residual stream lab"
    title = "The same norms during training"
    explanation = (
        "While the model trains (Train tab), this page measures the mean residual-stream norm of the labs' "
        "prompt at every layer boundary every few steps, between two training steps, and draws it against "
        "the "
        "step. It records in the background even when another page is on screen."
    )
    formula = (
        "‖x‖₂ averaged over positions at embed, L0.post, L1.post, …  (x = the stream leaving each block)"
    )
    eager = True
    notice = (
        "in a Pre-LN model every deeper checkpoint sits higher — each layer adds to what the layers below "
        "wrote — and they all climb steeply in the first steps of training, while the embedding's norm "
        "barely "
        "moves."
    )
    follows_training = False

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.record = QCheckBox("Record while training")
        self.record.setChecked(True)
        row.addWidget(self.record)
        self.every = labelled(row, "every", spin(1, 10000, 10, "Measure every this many training steps"))
        self.clear_button = QPushButton("Clear")
        self.clear_button.clicked.connect(self.clear)
        row.addWidget(self.clear_button)
        row.addStretch(1)
        body.addLayout(row)
        self.plot = LinePlot("Mean ‖x‖₂ at each layer boundary vs training step", "training step", "norm")
        body.addWidget(self.plot, 1)
        self.steps: list[int] = []
        self.values: list[np.ndarray] = []
        self.names: list[str] = []
        #: id() of the model the points were measured on (a new model starts a new plot)
        self._model_id: int | None = None
        self._last_step = -1

    def clear(self) -> None:
        self.steps, self.values, self.names = [], [], []
        self._last_step = -1
        self.plot.clear()

    def compute(self) -> None:
        model, _ = self.require_model()
        if id(model) != self._model_id or self.session.step < self._last_step:
            self._model_id = id(model)
            self.clear()
        self._measure()
        if not self.session.is_training:
            self.say("Start training in the Train tab: a point is added every few steps.")

    def on_training_events(self, events: list[dict[str, Any]]) -> None:
        if not self.record.isChecked() or not events or self.session.model is None:
            return
        step = int(events[-1]["step"])
        if id(self.session.model) != self._model_id or step < self._last_step:
            self._model_id = id(self.session.model)
            self.clear()
        if self._last_step < 0 or step - self._last_step >= self.every.value():
            self._measure()

    def _measure(self) -> None:
        model, _ = self.require_model()
        ids, _ = self.prompt_ids(64)
        step = int(self.session.step)
        if step == self._last_step:
            return
        self._last_step = step

        def job():
            names, mean = residual_profile(model, ids)
            return step, names, mean

        self.submit(f"live{step}", job, self._add)

    def _add(self, result) -> None:
        step, names, mean = result
        if names != self.names:
            self.clear()
            self.names = names
            self._last_step = step
        self.steps.append(step)
        self.values.append(mean)
        order = np.argsort(self.steps)
        xs = np.asarray(self.steps)[order]
        ys = np.stack(self.values)[order]
        for i, name in enumerate(self.names):
            self.plot.set_series(
                name, xs, ys[:, i], color=color_for(name, i), symbol="o" if len(xs) < 40 else None
            )
        self.say(
            f"{len(self.steps)} measurements, last at step {step}: "
            + ", ".join(f"{n} {v:.2f}" for n, v in zip(self.names, mean))
        )

    def export_targets(self):
        return {"norms over steps": self.plot.view}


class GradFlowPage(LabPage):
    slug = "residual-gradflow"
    short = "Gradient flow: Pre- vs Post-LN"
    lab = "Residual stream lab"
    title = "Gradient flow: Pre-LN vs Post-LN"
    explanation = (
        "How large is ∂loss/∂θ for each block? Pre-LN keeps a clean identity path from the loss to every "
        "layer; Post-LN normalises the sum after every sublayer, so every path back passes through a norm. "
        "Left: one backward pass of a fresh model on random tokens (Xavier init and the original "
        "Transformer's ReLU FFN, as Xiong et al. analyse). Right: the same measurement on a fixed batch as "
        "two copies train side by side."
    )
    formula = (
        "‖g<sub>l</sub>‖ = ‖∂loss/∂θ<sub>l</sub>‖₂ over all of block l's parameters;  Pre-LN: x + "
        "F(Norm(x)),  "
        "Post-LN: Norm(x + F(x));  LayerNorm: γ(x − μ)/σ + β,  RMSNorm: γx/rms(x)"
    )
    #: the claim the measured sentence (``at_init_summary``) is set beside, in the notice
    XIONG = (
        "Xiong et al. (2020) find that at initialisation Post-LN's gradients are largest near the output, "
        "the reason it needs warm-up, while Pre-LN's are well scaled at every depth"
    )
    notice = XIONG + "; measuring this page's setting…"
    uses_model = False
    follows_training = False

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        xiong = xiong_config()
        self.n_layers = labelled(row, "layers", spin(2, 24, xiong.core.n_layers))
        self.d_model = labelled(
            row, "d_model", spin(8, 512, xiong.core.d_model, "FFN width d_ff = 2·d_model")
        )
        self.n_heads = labelled(row, "heads", spin(1, 16, xiong.attention.n_heads))
        self.mlp = QComboBox()
        self.mlp.addItem("ReLU (original Transformer)", "relu")
        self.mlp.addItem("GELU (GPT-2)", "gelu")
        labelled(row, "FFN", self.mlp)
        self.norm = QComboBox()
        self.norm.addItem("LayerNorm", "layernorm")
        self.norm.addItem("RMSNorm", "rmsnorm")
        labelled(row, "norm", self.norm)
        self.init = QComboBox()
        self.init.addItem("Xavier (Xiong et al.)", "xavier")
        self.init.addItem("GPT-2 (std 0.02)", "model")
        self.init.setToolTip(
            "Weights for the at-init measurement; training always starts from the GPT-2 init"
        )
        labelled(row, "init", self.init)
        self.steps = labelled(row, "training steps", spin(1, 100000, 200))
        self.lr = labelled(row, "learning rate", dspin(1e-5, 1.0, 3e-3, 1e-3))
        self.warmup = labelled(row, "warm-up", spin(0, 10000, 0, "Linear warm-up steps (Post-LN needs them)"))
        row.addStretch(1)
        body.addLayout(row)
        for box in (self.n_layers, self.d_model, self.n_heads):
            box.valueChanged.connect(lambda *_: self.mark_dirty())
        for choice in (self.norm, self.init, self.mlp):
            choice.currentIndexChanged.connect(lambda *_: self.mark_dirty())

        plots_row = QWidget()
        plots = QHBoxLayout(plots_row)
        plots.setContentsMargins(0, 0, 0, 0)
        self.init_plot = LinePlot(
            "At initialisation: ‖∂loss/∂θ‖ per block", "block (0 = nearest the input)", "gradient norm"
        )
        self.train_plot = LinePlot(
            "During training (latest probe, fixed batch)", "block (0 = nearest the input)", "gradient norm"
        )
        for plot in (self.init_plot, self.train_plot):
            plot.setMinimumHeight(170)  # six blocks stay readable when the training plots below take room
            plots.addWidget(plot, 1)
        body.addWidget(plots_row, 3)
        self.keep_in_view(plots_row)
        self.panel = ComparisonPanel(
            self.make_spec,
            title="Training loss: Pre-LN vs Post-LN",
            probe_title="Gradient norm of the last block (nearest the output)",
            probe_label="‖∂loss/∂θ_last‖ (log scale)",
            probe_log_y=True,
            session=self.session,
        )
        self.panel.probed.connect(self._probed)
        body.addWidget(self.panel, 3)

    def init_vocab(self) -> int:
        """Vocabulary of the at-init measurement (random tokens, so not the corpus's): the experiment's
        64 — a handful of symbols leaves the unembedding's gradient too small for the effect, and a
        large vocabulary blurs it (gradflow's module docstring)."""
        vocab = xiong_config().core.vocab_size
        assert vocab is not None  # xiong_config always sets one
        return vocab

    def _config(self, vocab: int):
        return xiong_config(
            vocab_size=vocab,
            n_layers=self.n_layers.value(),
            d_model=self.d_model.value(),
            n_heads=self.n_heads.value(),
            mlp=self.mlp.currentData(),
            norm=self.norm.currentData(),
        )

    def compute(self) -> None:
        self.set_notice(self.XIONG + "; measuring this page's setting…")
        cfg = self._config(self.init_vocab())
        norm, init = self.norm.currentData(), self.init.currentData()

        def job():
            return grad_flow_variants(cfg, variants=(("pre", norm), ("post", norm)), init=init, seed=0)

        self.submit("init", job, self._draw_init)

    def _draw_init(self, flows) -> None:
        for (pos, _norm), flow in flows.items():
            name = "Pre-LN" if pos == "pre" else "Post-LN"
            self.init_plot.set_series(name, flow.layers, flow.block, color=color_for(name), symbol="o")
        pre = flows[("pre", self.norm.currentData())]
        post = flows[("post", self.norm.currentData())]
        verdict = (
            "as they describe"
            if shows_xiong(pre, post)
            else "not their picture: this setting hides it (the defaults show it)"
        )
        self.set_notice(f"{self.XIONG}; {at_init_summary(pre, post)} That is {verdict}.")
        self.say(
            f"At init ({self.norm.currentText()}, {self.mlp.currentText()} FFN, {self.init.currentText()} "
            f"weights, one batch of 8 × 64 random tokens over {self.init_vocab()} symbols): last block "
            f"{post.block[-1]:.3f} (Post-LN) vs {pre.block[-1]:.3f} (Pre-LN), first block "
            f"{post.block[0]:.3f} vs {pre.block[0]:.3f}."
        )

    def make_spec(self) -> ComparisonSpec:
        source = self.require_source()
        base = self._config(source.tokenizer.vocab_size)
        variants = variant_configs(
            base, {"Pre-LN": {"norm_position": "pre"}, "Post-LN": {"norm_position": "post"}}
        )
        steps = self.steps.value()
        T = 64
        settings = ComparisonSpec.lab_settings(
            steps=steps,
            batch_size=16,
            seq_len=T,
            lr=self.lr.value(),
            warmup=self.warmup.value(),
        )
        x, y = fixed_batch(source, 8, T, seed=1)
        for line in list(self.train_plot.curves):
            self.train_plot.remove(line)
        return ComparisonSpec(
            variants=variants,
            source=source,
            settings=settings,
            probe=lambda name, trainer: grad_flow_on_batch(trainer.model, x, y),
            probe_every=max(1, steps // 25),
            probe_scalar=lambda flow: float(flow.block[-1]),
        )

    def _probed(self, name: str, step: int, flow) -> None:
        self.train_plot.set_series(name, flow.layers, flow.block, color=color_for(name), symbol="o")
        self.train_plot.set_title(f"During training: ‖∂loss/∂θ‖ per block at step {step} (fixed batch)")

    def prepare_screenshot(self) -> None:
        self.refresh()
        self.steps.setValue(100)
        self.panel.start()

    @property
    def idle(self) -> bool:
        return super().idle and not self.panel.running

    def shutdown(self) -> None:
        self.panel.shutdown()

    def export_targets(self):
        return {
            "at init": self.init_plot.view,
            "during training": self.train_plot.view,
            "loss": self.panel.loss_plot.view,
        }
