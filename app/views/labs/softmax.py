"""Softmax scaling lab: why attention divides by √d_k — in theory, on the real model, and in training."""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGridLayout,
    QHeaderView,
    QLabel,
    QSlider,
    QTableWidget,
    QTableWidgetItem,
    QWidget,
)

from app.views.labs.base import LabPage
from app.views.labs.controls import dspin, labelled, spin
from app.views.labs.plots import BarPlot, LinePlot
from app.widgets.axes import PLOT_MIN_HEIGHT
from app.widgets.layouts import FlowLayout
from app.widgets.palette import color_for
from app.widgets.side_by_side import PlotGrid, SideBySide
from app.widgets.table_width import keep_columns_whole
from model.interp.analysis.saturation import model_saturation
from model.interp.analysis.softmax_theory import (
    VARIANTS,
    expected_std,
    sample_logits,
    score_histogram,
    softmax_curves,
    softmax_stats,
    theory_summary,
)
from model.interp.trace import run_with_trace

VARIANT_LABELS = {
    "unscaled": "unscaled: q·k",
    "scaled": "scaled: q·k/√d_k",
    "temperature": "temperature: q·k/τ",
    "cosine": "cosine (QK-norm): g·cos(q,k)",
    "init": "scale in init: W_Q, W_K × d_k^(−1/4)",
}
SLIDER_STEPS = 90  # d_k = round(2^(v/10)), v in 0..90 → 1..512
#: the chapters' example (std √128 = 11.3): with 64 keys a row, the first power of two at which the
#: unscaled softmax's mean Jacobian is below the scaled one's and a quarter of its rows have vanished
DEFAULT_DK = 128


def slider_to_dk(v: int) -> int:
    return round(2 ** (v / 10))


def dk_to_slider(d: int) -> int:
    return round(10 * math.log2(max(1, d)))


class SoftmaxTheoryPage(LabPage):
    slug = "softmax-theory"
    short = "Theory, by sampling"
    lab = "Softmax scaling lab"
    title = "Theory: score spread and saturation vs head size"
    explanation = (
        "Draw queries and keys whose d<sub>k</sub> components are independent with mean 0 and variance 1. "
        "A score q·k adds d<sub>k</sub> such products, so it spreads like √d<sub>k</sub>; a softmax over "
        "widely "
        "spread scores puts almost all weight on one key, and its Jacobian — what carries the gradient back "
        "— "
        "shrinks once one key takes almost all the weight. Dividing by √d<sub>k</sub> keeps the spread at 1 "
        "for every head size. All numbers below are measured on sampled rows of n keys (512 rows of 64 by "
        "default)."
    )
    formula = (
        "Var(q·k) = Σ<sub>m</sub> Var(q<sub>m</sub>k<sub>m</sub>) = d<sub>k</sub> ⇒ std = √d<sub>k</sub> "
        "(8 at d<sub>k</sub> = 64, 11.3 at 128);   p = softmax(z),  J = ∂p/∂z = diag(p) − ppᵀ,  "
        "H = −Σ p<sub>j</sub> ln p<sub>j</sub>;  a row's gradient has vanished when ‖J‖<sub>F</sub> &lt; "
        "‖J<sub>uniform</sub>‖<sub>F</sub>/10"
    )
    #: the chapters' claim, set beside what this page measures (``theory_summary``) in the notice
    CLAIM = (
        "unscaled, scores spread like √d<sub>k</sub> (11.3 at d<sub>k</sub> = 128), the softmax turns "
        "nearly one-hot and its gradient nearly vanishes; ÷√d<sub>k</sub> keeps the spread at 1"
    )
    #: what holds by construction, whatever the sample: the other variants' rules
    VARIANTS_NOTE = (
        "A fixed temperature τ is right only near d<sub>k</sub> = τ²; cosine attention's scores never "
        "exceed its gain g; the d<sub>k</sub><sup>−1/4</sup> init gives exactly the scaled numbers "
        "(colours as in the table)."
    )
    notice = CLAIM + "; measuring…"
    uses_model = False
    follows_training = False

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        row.addWidget(QLabel("head size d_k"))
        self.slider = QSlider(Qt.Orientation.Horizontal)
        self.slider.setRange(0, SLIDER_STEPS)
        self.slider.setMinimumWidth(260)
        self.slider.setToolTip("d_k from 1 to 512 (logarithmic)")
        row.addWidget(self.slider)
        self.dk = spin(1, 512, DEFAULT_DK, "d_k, the size of one head's query and key")
        row.addWidget(self.dk)
        self.tau = labelled(
            row, "temperature τ", dspin(0.1, 100.0, 8.0, 0.5, 2, "Fixed divisor for the temperature variant")
        )
        self.gain = labelled(
            row,
            "cosine gain g",
            dspin(0.0, 100.0, 0.0, 0.5, 2, "g in g·cos(q,k); 0 means g = √d_k (the model's QK-norm init)"),
        )
        self.gain.setSpecialValueText("√d_k")
        self.n_keys = labelled(row, "keys n", spin(2, 1024, 64, "Keys per softmax row"))
        row.addStretch(1)
        body.addLayout(row)
        self.slider.setValue(dk_to_slider(DEFAULT_DK))
        self.slider.valueChanged.connect(lambda v: self.dk.setValue(slider_to_dk(v)))
        self.dk.valueChanged.connect(self._dk_changed)
        for w in (self.tau, self.gain, self.n_keys):
            w.valueChanged.connect(lambda *_: self.mark_dirty())

        grid = QGridLayout()
        self.hist = LinePlot(f"Scores at d_k = {DEFAULT_DK} (sampled)", "score fed to softmax", "density")
        self.table = QTableWidget(len(VARIANT_LABELS), 6)
        self.table.setHorizontalHeaderLabels(
            [
                "variant",
                "score std\n(theory)",
                "mean max\nweight",
                "row entropy\n(nats)",
                "‖J‖ softmax\nJacobian",
                "gradient\nvanished",
            ]
        )
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        keep_columns_whole(self.table)
        for i, name in enumerate(VARIANT_LABELS):
            item = QTableWidgetItem(VARIANT_LABELS[name].replace(": ", ":\n", 1))  # name above formula
            item.setForeground(_qcolor(color_for(name, i)))
            self.table.setItem(i, 0, item)
        self.table.resizeRowsToContents()
        self.std_plot = LinePlot("Std of scores", "d_k", "std (dark dashes: √d_k)", log_x=True, log_y=True)
        self.max_plot = LinePlot("Mean max weight", "d_k", "max_j p_j", log_x=True)
        self.ent_plot = LinePlot("Mean row entropy", "d_k", "nats", log_x=True)
        self.jac_plot = LinePlot("Norm of the softmax Jacobian", "d_k", "‖diag(p) − ppᵀ‖_F", log_x=True)
        # the histogram beside the table, or above it on a small screen
        self.top = SideBySide(self.hist, self.table, first_min=260)
        grid.addWidget(self.top, 0, 0, 1, 2)
        # two by two: four in a row left each ~120 px at 1024 px, too narrow for a title or a label
        for i, p in enumerate((self.std_plot, self.max_plot, self.ent_plot, self.jac_plot)):
            p.setMinimumHeight(PLOT_MIN_HEIGHT)  # the page scrolls down rather than squash them
            grid.addWidget(p, 1 + i // 2, i % 2)
        self.hist.setMinimumHeight(PLOT_MIN_HEIGHT)
        grid.setRowStretch(0, 2)
        grid.setRowStretch(1, 2)
        grid.setRowStretch(2, 2)
        body.addLayout(grid, 1)

    def _dk_changed(self, d: int) -> None:
        if slider_to_dk(self.slider.value()) != d:
            self.slider.blockSignals(True)
            self.slider.setValue(dk_to_slider(d))
            self.slider.blockSignals(False)
        self._compute_point()

    def _params(self) -> dict:
        g = self.gain.value()
        n = self.n_keys.value()
        return {
            "n_keys": n,
            # about 32k sampled scores per d_k whatever n is (512 rows of 64 keys by default): bounded memory
            "n_rows": int(min(512, max(32, 32768 // n))),
            "temperature": self.tau.value(),
            "gain": None if g == 0 else g,
        }

    def compute(self) -> None:
        params = self._params()
        self.submit("curves", lambda: softmax_curves(**params), self._draw_curves)
        self._compute_point()

    def _compute_point(self) -> None:
        d = self.dk.value()
        params = self._params()
        kw = {k: v for k, v in params.items() if k in ("n_keys", "n_rows", "temperature", "gain")}

        def job():
            stats = {v: softmax_stats(sample_logits(d, v, **kw)) for v in VARIANTS}
            theory = {
                v: float(expected_std(v, d, temperature=params["temperature"], gain=params["gain"]))
                for v in ("unscaled", "scaled", "temperature", "cosine", "init")
            }
            lim = 4 * max(math.sqrt(d), 1.0)
            hists = {v: score_histogram(d, v, limit=lim, **kw) for v in ("unscaled", "scaled")}
            return d, stats, theory, hists

        self.submit("point", job, self._draw_point)

    def _draw_curves(self, curves) -> None:
        for i, (name, c) in enumerate(curves.items()):
            label = VARIANT_LABELS[name]
            color = color_for(name, i)
            dashed = name == "init"  # lies exactly on "scaled": dash it so both stay visible
            self.std_plot.set_series(
                name, c.d_k, np.maximum(c.score_std, 1e-3), label=label, color=color, dashed=dashed
            )
            self.max_plot.set_series(name, c.d_k, c.max_weight, label=label, color=color, dashed=dashed)
            self.ent_plot.set_series(name, c.d_k, c.entropy, label=label, color=color, dashed=dashed)
            self.jac_plot.set_series(name, c.d_k, c.jacobian_norm, label=label, color=color, dashed=dashed)
        any_curve = next(iter(curves.values()))
        theory = self.std_plot.set_series(
            "theory",
            any_curve.d_k,
            np.sqrt(any_curve.d_k.astype(float)),
            label="√d_k (theory)",
            color=(40, 40, 40),
            width=2,
            dashed=True,
        )
        theory.setZValue(10)  # on top of the unscaled curve it coincides with
        self.ent_plot.set_hline(
            "uniform", any_curve.uniform_entropy, f"uniform: ln n = {any_curve.uniform_entropy:.2f}"
        )
        self.jac_plot.set_hline("uniform", any_curve.uniform_jacobian, "uniform row")
        self.max_plot.set_hline("uniform", 1.0 / any_curve.n_keys, "uniform: 1/n")
        for legend_off in (self.std_plot, self.max_plot, self.ent_plot, self.jac_plot):
            if legend_off.legend is not None:
                legend_off.legend.hide()
        self._mark()

    def _mark(self) -> None:
        d = self.dk.value()
        for p in (self.std_plot, self.max_plot, self.ent_plot, self.jac_plot):
            # half-way up: the uniform references' labels are at the top or the foot
            p.set_marker(d, f"d_k = {d}", position=0.5)

    def _draw_point(self, result) -> None:
        d, stats, theory, hists = result
        p = self._params()
        self.hist.set_title(f"Scores at d_k = {d} ({p['n_rows'] * p['n_keys']:,} samples)")
        for name in ("unscaled", "scaled"):
            edges, density = hists[name]
            centers = 0.5 * (edges[:-1] + edges[1:])
            self.hist.set_series(name, centers, density, label=VARIANT_LABELS[name], color=color_for(name))
        for i, name in enumerate(VARIANT_LABELS):
            s = stats[name]
            cells = [
                f"{s.score_std:.2f}  ({theory[name]:.2f})",
                f"{s.max_weight:.3f}",
                f"{s.entropy:.3f}",
                f"{s.jacobian_norm:.4f}",
                f"{s.vanished:.0%} of rows",
            ]
            for j, text in enumerate(cells, start=1):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                self.table.setItem(i, j, item)
        self.table.resizeRowsToContents()
        self._mark()
        un, sc = stats["unscaled"], stats["scaled"]
        self.set_notice(f"{self.CLAIM}; {theory_summary(d, un, sc)} {self.VARIANTS_NOTE}")
        self.say(
            f"d_k = {d}: unscaled scores have std {un.score_std:.2f} (√d_k = {math.sqrt(d):.2f}); "
            f"their softmax puts {un.max_weight:.2f} on the top key on average, against {sc.max_weight:.2f} "
            "when scaled."
        )

    def table_text(self, row: int, col: int) -> str:
        item = self.table.item(row, col)
        return item.text() if item is not None else ""

    def export_targets(self):
        return {
            "histogram": self.hist.view,
            "std": self.std_plot.view,
            "max weight": self.max_plot.view,
            "entropy": self.ent_plot.view,
            "jacobian": self.jac_plot.view,
        }


def _qcolor(rgb):
    return QColor(*rgb[:3])


def spread_sentence(spread, attn_scale: str) -> str:
    """One plain sentence on the spread of the scaled scores: its median over heads and, for the
    ``1/√d_k`` rule, how many heads are far from the 1 the rule is derived for."""
    if spread is None:
        return ""
    raw, scaled = float(np.nanmedian(spread.raw)), spread.median_scaled
    text = f"Score spread (median over heads): {raw:.2f} raw → {scaled:.2f} as the softmax sees it."
    if attn_scale != "sqrt_dk":
        return text
    share = spread.share_above(1.25)
    if share >= 0.5:
        return (
            f"{text} {share:.0%} of the heads spread wider than 1.25, not the 1 that ÷√d_k is derived for: "
            "this model's q and k are not unit-variance noise."
        )
    return f"{text} {share:.0%} of the heads spread wider than 1.25; ÷√d_k keeps most near 1."


class SoftmaxModelPage(LabPage):
    slug = "softmax-model"
    short = "On the model"
    lab = "Softmax scaling lab"
    title = "On the model: each head with and without its scale"
    explanation = (
        "The same two measurements on the current model, for the labs' prompt: every head's attention with "
        "the model's own scaling rule, and recomputed from the raw scores QKᵀ with the scale taken out (same "
        "mask). The third plot tests the reason for ÷√d<sub>k</sub> on the model's own heads: the spread of "
        "the scores each head's softmax compares."
    )
    formula = (
        "A = softmax(mask(s(QKᵀ)))  vs  A⁰ = softmax(mask(QKᵀ));   entropy = mean<sub>i</sub> −Σ<sub>j</sub> "
        "A<sub>ij</sub> ln A<sub>ij</sub>;   max weight = mean<sub>i</sub> max<sub>j</sub> A<sub>ij</sub>  "
        "(over queries that see at least two keys);   spread = std of s(QKᵀ)<sub>ij</sub> over the visible "
        "pairs"
    )
    notice = (
        "with the usual 1/√d<sub>k</sub> removed every head's entropy falls and its max weight rises: rows "
        "turn one-hot. In an untrained model q and k are tiny (weights of std 0.02), so the gap is small; "
        "training makes q and k larger and the gap wide. ÷√d<sub>k</sub> brings the scores' spread to 1 "
        "only if q and k had independent unit-variance components; a trained model's are larger and "
        "aligned, so its scaled spread sits above the dashed line (SmolLM2-135M: about 2.3 in 99% of heads). "
        "(A QK-norm model's g·cos is compared with the raw, unnormalised QKᵀ.)"
    )

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.tokens = labelled(row, "tokens", spin(2, 4096, 64, "How many tokens of the prompt to read"))
        self.tokens.valueChanged.connect(lambda *_: self.mark_dirty())
        row.addStretch(1)
        body.addLayout(row)
        self.entropy_bars = BarPlot("Mean row entropy per head (nats; higher = more spread)", "nats")
        self.max_bars = BarPlot("Mean max weight per head (1 = one-hot)", "max weight")
        self.spread_bars = BarPlot("Spread of the scores per head (std over visible pairs)", "std")
        bars: list[QWidget] = [self.entropy_bars, self.max_bars, self.spread_bars]
        for b in bars:
            b.setMinimumHeight(PLOT_MIN_HEIGHT)
        body.addWidget(PlotGrid(bars, min_width=300), 1)

    def compute(self) -> None:
        model, _ = self.require_model()
        ids, _ = self.prompt_ids(self.tokens.value())

        def job():
            return model_saturation(run_with_trace(model, ids, kinds=("pattern", "scores_raw", "scores")))

        self.submit("saturation", job, lambda s: self._draw(s, len(ids)))

    def _draw(self, s, T: int) -> None:
        L, H = s.entropy_model.shape
        cats = [f"L{lay}H{h}" for lay in range(L) for h in range(H)]
        self.entropy_bars.set_groups(
            cats, {"model's scale": s.entropy_model.ravel(), "scale removed": s.entropy_unscaled.ravel()}
        )
        self.max_bars.set_groups(
            cats,
            {"model's scale": s.max_weight_model.ravel(), "scale removed": s.max_weight_unscaled.ravel()},
        )
        rule = {
            "sqrt_dk": "1/√d_k",
            "none": "none",
            "learned": "a learned per-head τ",
            "qk_norm": "QK-norm g·cos",
        }
        extra = " The model has no scale, so both bars are the same." if s.attn_scale == "none" else ""
        self.say(
            f"{T} tokens; scale rule: {rule.get(s.attn_scale, s.attn_scale)}. Mean over heads — entropy "
            f"{np.nanmean(s.entropy_model):.3f} → {np.nanmean(s.entropy_unscaled):.3f} nats, max weight "
            f"{np.nanmean(s.max_weight_model):.3f} → {np.nanmean(s.max_weight_unscaled):.3f} without the "
            f"scale.{extra} {spread_sentence(s.spread, s.attn_scale)}"
        )
        sp = s.spread
        self.spread_bars.set_reference(1.0 if s.attn_scale == "sqrt_dk" else None, "1: what ÷√d_k aims for")
        self.spread_bars.set_groups(
            cats, {"raw QKᵀ": sp.raw.ravel(), "what the softmax compares": sp.scaled.ravel()}
        )

    def export_targets(self):
        return {
            "entropy": self.entropy_bars.view,
            "max weight": self.max_bars.view,
            "spread": self.spread_bars.view,
        }
