"""Positions lab: the sinusoidal table, RoPE's offset property, and attention without positions."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
)

from app.views.labs.base import LabPage
from app.views.labs.controls import dspin, labelled, map_grid, readable_map, spin, still_matrix
from app.views.labs.plots import BarPlot, LinePlot
from app.widgets.layouts import FlowLayout
from app.widgets.matrix_plot import MatrixPlot
from app.widgets.table_width import TOKEN_GRID_MAX_WIDTH, keep_columns_whole, set_header_labels
from model.interp.analysis.positions import (
    OffsetProfile,
    RopeCheck,
    permutation_experiment,
    permutation_predictions,
    position_similarity,
    rope_pair_path,
    rope_scores,
    shift_check,
    sinusoidal_heatmap,
    sinusoidal_offset_profile,
    without_positions,
)
from model.text.tokens import visible


class SinusoidalPage(LabPage):
    slug = "positions-sinusoidal"
    short = "Sinusoidal table"
    lab = "Positions lab"
    title = "The sinusoidal table and dot products by offset"
    explanation = (
        "Attention itself cannot tell order, so the original Transformer adds a fixed vector PE[p] to the "
        "token at position p. Each pair of dimensions is a point on the unit circle turning at its own speed "
        "ω<sub>i</sub>, from fast (left columns) to very slow (right)."
    )
    formula = (
        "PE[p, 2i] = sin(p·ω<sub>i</sub>),  PE[p, 2i+1] = cos(p·ω<sub>i</sub>),  ω<sub>i</sub> = "
        "10000<sup>−2i/d</sup>"
        "   ⇒   PE[p]·PE[q] = Σ<sub>i</sub> cos(ω<sub>i</sub>(p − q))"
    )
    notice = (
        "the dot product of two positions depends only on their offset p − q: the similarity matrix is "
        "constant "
        "along its diagonals, the measured curve lies on Σ cos(ω<sub>i</sub>Δ), and its spread is 0. It is "
        "largest (= d/2) at Δ = 0 and falls off with distance."
    )
    uses_model = False
    follows_training = False

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.n_pos = labelled(row, "positions", spin(2, 1024, 64))
        self.d_model = labelled(row, "d_model", spin(2, 1024, 64, "Width of the table (even)"))
        self.d_model.setSingleStep(2)
        row.addStretch(1)
        body.addLayout(row)
        for w in (self.n_pos, self.d_model):
            w.valueChanged.connect(lambda *_: self.mark_dirty())
        plots = QHBoxLayout()
        lab = still_matrix("value")
        self.table_view = MatrixPlot(title="The table PE[p, dim]", diverging=True, **lab)
        self.table_view.set_axis_titles("position p", "dimension")
        self.sim_view = MatrixPlot(title="PE[p] · PE[q]", **lab)
        self.sim_view.set_axis_titles("position p", "position q")
        self.profile = LinePlot("Dot product vs offset Δ = p − q", "Δ = p − q", "PE[p]·PE[q]")
        plots.addWidget(self.table_view, 1)
        plots.addWidget(self.sim_view, 1)
        plots.addWidget(self.profile, 1)
        body.addLayout(plots, 1)

    def compute(self) -> None:
        P, d = self.n_pos.value(), self.d_model.value()
        if d % 2:
            d += 1
            self.d_model.setValue(d)
            return

        def job() -> tuple[np.ndarray, np.ndarray, OffsetProfile]:
            table = sinusoidal_heatmap(P, d)
            return table, position_similarity(table), sinusoidal_offset_profile(P, d)

        self.submit("table", job, lambda r: self._draw(*r, d))

    def _draw(self, table, sim, prof, d) -> None:
        P = table.shape[0]
        pos = [str(p) for p in range(P)]
        self.table_view.set_matrix(
            table, pos, [str(j) for j in range(table.shape[1])], levels=(-1, 1), numbers=False
        )
        self.sim_view.set_matrix(sim, pos, pos, numbers=False)
        self.profile.set_series(
            "measured",
            prof.offsets,
            prof.mean,
            label="measured (mean over pairs)",
            color=(31, 119, 180),
            width=3,
        )
        self.profile.set_series(
            "theory", prof.offsets, prof.theory, label="Σ cos(ω_i Δ)", color=(214, 39, 40), dashed=True
        )
        self.profile.set_series(
            "spread",
            prof.offsets,
            prof.spread,
            label="spread (max − min) over pairs",
            color=(44, 160, 44),
            width=1,
        )
        err = float(np.abs(prof.mean - prof.theory).max())
        self.say(
            f"{P} positions × {d} dimensions. Largest spread among pairs with the same offset: "
            f"{prof.max_spread:.2e}; "
            f"largest gap between measured and Σ cos: {err:.2e}; at Δ = 0 the dot product is "
            f"{prof.theory[P - 1]:.1f} = d/2."
        )

    def export_targets(self):
        return {"table": self.table_view.view, "similarity": self.sim_view.view, "profile": self.profile.view}


class RopePage(LabPage):
    slug = "positions-rope"
    short = "RoPE: only the offset counts"
    lab = "Positions lab"
    title = "RoPE: rotate q and k, and the score depends only on the offset"
    explanation = (
        "Rotary embeddings do not add anything to the token: they rotate each pair of a head's query and key "
        "channels by an angle proportional to the position. A query at position m and a key at n are rotated "
        "by mθ<sub>i</sub> and nθ<sub>i</sub>; rotations compose, so their dot product sees only the "
        "difference. Here one random q and one random k are placed at every position (the model's own "
        "<tt>apply_rope</tt>)."
    )
    formula = (
        "rot<sub>m</sub>(q) · rot<sub>n</sub>(k) = q · R((n − m)θ) k,   θ<sub>i</sub> = "
        "base<sup>−2i/d<sub>k</sub></sup>"
        "   (pairs: channel i with channel i + d<sub>k</sub>/2)"
    )
    notice = (
        "the left plot shows the chosen pair of q turning around a circle as the position grows (k turns at "
        "the "
        "same speed); the score matrix is constant along each diagonal, so the spread among pairs with equal "
        "offset m − n is only float rounding."
    )
    uses_model = False
    follows_training = False

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.d_k = labelled(row, "head size d_k", spin(2, 256, 16, "Even"))
        self.d_k.setSingleStep(2)
        self.pair = labelled(row, "pair i", spin(0, 127, 1, "Which channel pair to draw (0 turns fastest)"))
        self.n_pos = labelled(row, "positions", spin(2, 512, 32))
        self.base = labelled(row, "base", dspin(2.0, 1e7, 10000.0, 1000.0, 0))
        self.seed = labelled(row, "random q, k seed", spin(0, 10**6, 0))
        row.addStretch(1)
        body.addLayout(row)
        for w in (self.d_k, self.pair, self.n_pos, self.base, self.seed):
            w.valueChanged.connect(lambda *_: self.mark_dirty())
        self.circle = LinePlot(
            "Channel pair i of q and k at positions 0, 1, 2, …", "channel i", "channel i + d_k/2"
        )
        self.circle.plot.setAspectLocked(True)
        self.scores_view = MatrixPlot(
            title="Score rot_m(q) · rot_n(k)", diverging=True, **readable_map("value")
        )
        self.scores_view.set_axis_titles("query position m", "key position n")
        self.profile = LinePlot("Score vs offset m − n", "offset m − n", "score")
        body.addWidget(map_grid([self.circle, self.scores_view, self.profile]), 1)
        self._labels: list[pg.TextItem] = []

    def compute(self) -> None:
        d = self.d_k.value() + (self.d_k.value() % 2)
        self.pair.setMaximum(d // 2 - 1)
        pair, P, base, seed = (
            min(self.pair.value(), d // 2 - 1),
            self.n_pos.value(),
            self.base.value(),
            self.seed.value(),
        )

        def job() -> tuple[np.ndarray, np.ndarray, RopeCheck]:
            rng = np.random.default_rng(seed)
            q, k = rng.standard_normal(d), rng.standard_normal(d)
            positions = np.arange(P)
            return (
                rope_pair_path(q, positions, pair, base),
                rope_pair_path(k, positions, pair, base),
                rope_scores(q, k, P, base),
            )

        self.submit("rope", job, lambda r: self._draw(*r, pair, d, base))

    def _draw(self, qpath, kpath, check, pair, d, base) -> None:
        self.circle.set_series("q", qpath[:, 0], qpath[:, 1], label="q", color=(31, 119, 180), symbol="o")
        self.circle.set_series("k", kpath[:, 0], kpath[:, 1], label="k", color=(214, 39, 40), symbol="o")
        for t in self._labels:
            self.circle.plot.removeItem(t)
        self._labels = []
        font = QFont()
        font.setPointSize(7)
        for p in range(min(6, len(qpath))):
            t = pg.TextItem(str(p), color=(31, 119, 180), anchor=(0.5, 1.2))
            t.setFont(font)
            t.setPos(float(qpath[p, 0]), float(qpath[p, 1]))
            self.circle.plot.addItem(t)
            self._labels.append(t)
        P = check.scores.shape[0]
        lim = float(np.abs(check.scores).max()) or 1.0
        pos = [str(p) for p in range(P)]
        self.scores_view.set_matrix(check.scores, pos, pos, levels=(-lim, lim), numbers=False)
        prof = check.profile
        self.profile.set_series(
            "mean", prof.offsets, prof.mean, label="score (mean over pairs)", color=(31, 119, 180)
        )
        self.profile.set_series(
            "spread",
            prof.offsets,
            prof.spread,
            label="spread (max − min) over pairs",
            color=(44, 160, 44),
            width=1,
        )
        theta = base ** (-2 * pair / d)
        self.say(
            f"Pair {pair} turns by θ = {theta:.4g} rad per position. Largest spread of the score among "
            "position "
            f"pairs with the same offset: {prof.max_spread:.1e} (scores are up to {lim:.2f}): only the "
            "offset matters."
        )

    def export_targets(self):
        return {"rotation": self.circle.view, "scores": self.scores_view.view, "profile": self.profile.view}


class RopeModelPage(LabPage):
    slug = "positions-rope-model"
    short = "RoPE on the model's heads"
    lab = "Positions lab"
    title = "On the model: shift the whole prompt, and RoPE's scores stay put"
    explanation = (
        "The same property on the current model's own heads. The prompt runs twice: at positions 0…T−1, "
        "and moved to s…s+T−1 (the same tokens, every position + s). RoPE adds nothing to the residual "
        "stream and its scores depend only on offsets, so every head of the chosen layer compares exactly "
        "the same scores. Learned or sinusoidal positions are added to the tokens, so there the scores "
        "move."
    )
    formula = (
        "score<sub>h</sub>(i, j) at positions (m, n) = score<sub>h</sub>(i, j) at (m + s, n + s)   "
        "(RoPE: q<sub>m</sub>·R((n − m)θ) k<sub>n</sub>)"
    )
    notice = (
        "with RoPE the largest change of any head is float rounding (it grows a little with s, as the "
        "angles m θ do), so the two score maps are the same picture. Open a model with learned positions "
        "(GPT-2) and the bars jump to a sizeable share of the scores."
    )

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.layer = labelled(row, "layer", spin(0, 999, 0, "Which block's heads"))
        self.head = labelled(row, "head", spin(0, 999, 0, "The head whose scores are drawn"))
        self.shift = labelled(row, "shift s", spin(1, 10**6, 100, "How many positions the prompt moves"))
        self.tokens = labelled(row, "tokens", spin(2, 512, 32, "How many tokens of the prompt to read"))
        row.addStretch(1)
        body.addLayout(row)
        for w in (self.layer, self.head, self.shift, self.tokens):
            w.valueChanged.connect(lambda *_: self.mark_dirty())
        plots = QHBoxLayout()
        lab = still_matrix("score")
        self.at_zero = MatrixPlot(title="Scores, prompt at 0…T−1", diverging=True, **lab)
        self.at_shift = MatrixPlot(title="Scores, prompt at s…s+T−1", diverging=True, **lab)
        for view in (self.at_zero, self.at_shift):
            view.set_axis_titles("query", "key")
        self.change_bars = BarPlot("Largest change per head ÷ its largest score", "share")
        plots.addWidget(self.at_zero, 1)
        plots.addWidget(self.at_shift, 1)
        plots.addWidget(self.change_bars, 1)
        body.addLayout(plots, 1)

    def compute(self) -> None:
        model, tok = self.require_model()
        cfg = model.config
        self.layer.setMaximum(cfg.core.n_layers - 1)
        self.head.setMaximum(cfg.attention.n_heads - 1)
        if cfg.positional.positions != "none":
            self.shift.setMaximum(max(1, cfg.core.context_length - 2))
        ids, _ = self.prompt_ids(self.tokens.value())
        if cfg.positional.positions != "none" and self.shift.value() + len(ids) > cfg.core.context_length:
            ids = ids[: max(2, cfg.core.context_length - self.shift.value())]
        layer, head, shift = self.layer.value(), self.head.value(), self.shift.value()

        def job():
            return shift_check(model, ids, layer=layer, shift=shift)

        self.submit("shift", job, lambda c: self._draw(c, ids, tok, head))

    def _draw(self, check, ids, tok, head: int) -> None:
        names = [visible(t) for t in tok.token_strings(list(ids))]
        z0, z1 = check.scores[head], check.shifted[head]
        lim = float(np.nanmax(np.abs(z0))) or 1.0
        s = check.shift
        for view, z, where in ((self.at_zero, z0, "0"), (self.at_shift, z1, f"{s}")):
            view.set_matrix(z, names, names, levels=(-lim, lim), numbers=False)  # NaN: masked
            view.set_title(f"L{check.layer} H{head}: scores, prompt from position {where}")
        share = check.change / np.maximum(check.size, 1e-30)
        self.change_bars.set_groups([f"H{h}" for h in range(len(share))], {"|Δ score| ÷ max |score|": share})
        worst = int(np.argmax(share))
        kind = {"rope": "RoPE", "learned": "learned", "sinusoidal": "sinusoidal", "none": "no"}
        verdict = (
            "the same scores to float rounding: only the offsets count."
            if check.invariant
            else "the scores move: the positions are added to the tokens, not rotated into q and k."
        )
        self.say(
            f"{kind.get(check.positions, check.positions)} positions, layer {check.layer}, {len(ids)} "
            f"tokens moved by {s}: the largest change is {check.change[worst]:.2g} (head {worst}, whose "
            f"scores reach {check.size[worst]:.3g}) — {verdict}"
        )

    def export_targets(self):
        return {"at zero": self.at_zero.view, "shifted": self.at_shift.view, "change": self.change_bars.view}


class PermutationPage(LabPage):
    slug = "positions-permutation"
    short = "Without positions: permute"
    lab = "Positions lab"
    title = "No positions: shuffle the prompt, the outputs shuffle too"
    explanation = (
        "Attention compares contents only. With no position signal and no mask, each token's output depends "
        "on its own vector and on the <i>set</i> of all tokens, not on their order — so shuffling the prompt "
        "shuffles the outputs the same way. The model here is the current one, optionally with its positions "
        "removed (same weights, <tt>positions = none</tt>)."
    )
    formula = (
        "f(X<sub>π</sub>) = f(X)<sub>π</sub> for every permutation π, when there are no positions and no mask"
    )
    notice = (
        "with positions removed and the mask off, the logits of the shuffled prompt match the shuffled "
        "logits "
        "to float rounding and every guess follows its token (all ✓). Put the causal mask or the positions "
        "back and the symmetry breaks."
    )

    def build(self) -> None:
        body = self.body
        row = FlowLayout()
        self.which = QComboBox()
        self.which.addItem("current weights, positions removed", "strip")
        self.which.addItem("current model as it is", "model")
        labelled(row, "model", self.which)
        # not ``mask``: that is QWidget.mask(), the widget's shape
        self.mask_kind = QComboBox()
        self.mask_kind.addItem("off (every token sees every token)", "none")
        self.mask_kind.addItem("the model's own (causal)", "model")
        labelled(row, "mask", self.mask_kind)
        self.seed = labelled(row, "shuffle seed", spin(0, 10**6, 0))
        self.tokens = labelled(row, "tokens", spin(2, 64, 12))
        row.addStretch(1)
        body.addLayout(row)
        for choice in (self.which, self.mask_kind):
            choice.currentIndexChanged.connect(lambda *_: self.mark_dirty())
        for box in (self.seed, self.tokens):
            box.valueChanged.connect(lambda *_: self.mark_dirty())
        self.table = QTableWidget()
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        # a column per token, sharing the page's width; the table scrolls only for a long prompt
        self.table.horizontalHeader().setDefaultSectionSize(60)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.table.horizontalHeader().setMinimumSectionSize(28)
        keep_columns_whole(self.table, stretch_content=False, at_most=TOKEN_GRID_MAX_WIDTH)
        body.addWidget(self.table, 3)
        body.addWidget(QLabel("<b>All four settings</b> (same prompt, same shuffle):"))
        self.summary = QTableWidget(4, 4)
        set_header_labels(
            self.summary, ["positions", "mask", "max |Δ logits|", "guesses that follow their token"]
        )
        self.summary.verticalHeader().setVisible(False)
        self.summary.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.summary.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        keep_columns_whole(self.summary)
        body.addWidget(self.summary, 2)

    def compute(self) -> None:
        model, tok = self.require_model()
        ids, _ = self.prompt_ids(self.tokens.value())
        strip, mask, seed = (
            self.which.currentData() == "strip",
            self.mask_kind.currentData(),
            self.seed.value(),
        )

        def job():
            stripped = without_positions(model)
            return {
                (s, m): permutation_predictions(
                    permutation_experiment(stripped if s else model, ids, seed=seed, mask=m)
                )
                for s in (True, False)
                for m in ("none", "model")
            }

        self.submit("perm", job, lambda runs: self._draw(runs, ids, tok, strip, mask, model.config))

    def _draw(self, runs, ids, tok, strip, mask, cfg) -> None:
        r = runs[(strip, mask)]
        self._draw_summary(runs, cfg, len(ids))

        def name(i: int) -> str:
            return visible(tok.token_strings([int(i)])[0]) if i < tok.vocab_size else f"#{int(i)}"

        T = len(ids)
        perm = r.perm
        rows = [
            ("prompt token", [name(i) for i in ids]),
            ("top guess for\nthe next token", [name(i) for i in r.pred]),
            ("shuffled\nprompt token", [name(ids[perm[t]]) for t in range(T)]),
            ("top guess\n(shuffled)", [name(i) for i in r.pred_permuted]),
            ("unshuffled guess\nof that token", [name(r.pred[perm[t]]) for t in range(T)]),
            ("follows its\ntoken?", ["✓" if f else "✗" for f in r.follows]),
        ]
        self.table.clear()
        self.table.setRowCount(len(rows))
        self.table.setColumnCount(T)
        self.table.setVerticalHeaderLabels([r_[0] for r_ in rows])
        # column t: position t of the shuffled prompt, ← the position its token came from
        self.table.setHorizontalHeaderLabels([f"{t}\n←{perm[t]}" for t in range(T)])
        for t in range(T):
            header = self.table.horizontalHeaderItem(t)
            assert header is not None  # setHorizontalHeaderLabels made one per column
            header.setToolTip(f"position {t} of the shuffled prompt holds the token from position {perm[t]}")
        bold = QFont()
        bold.setBold(True)
        for i, (_, cells) in enumerate(rows):
            for t, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                if i == len(rows) - 1:
                    item.setFont(bold)
                    item.setBackground(QColor(210, 245, 210) if r.follows[t] else QColor(250, 215, 215))
                self.table.setItem(i, t, item)
        what = "positions removed" if strip else f"{cfg.positional.positions} positions"
        verdict = "equivariant: the outputs permute with the inputs" if r.equivariant else "NOT equivariant"
        self.say(
            f"Model with {what}, mask {'off' if mask == 'none' else 'causal'}: max |logits(shuffled) − "
            "shuffled "
            f"logits| = {r.error:.2e} → {verdict}; {int(r.follows.sum())} of {T} guesses follow their token."
        )

    def _draw_summary(self, runs, cfg, T: int) -> None:
        for row, ((strip, mask), r) in enumerate(runs.items()):
            cells = [
                "removed" if strip else f"the model's ({cfg.positional.positions})",
                "off" if mask == "none" else ("causal" if cfg.core.causal else "the model's (none)"),
                f"{r.error:.2e}",
                f"{int(r.follows.sum())} of {T}" + ("  — equivariant" if r.equivariant else ""),
            ]
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                item.setBackground(QColor(210, 245, 210) if r.equivariant else QColor(255, 255, 255))
                self.summary.setItem(row, c, item)

    def export_targets(self):
        return {"permutation": self.table}
