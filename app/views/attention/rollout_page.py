"""The Rollout page: attention rollout through every layer (Abnar & Zuidema 2020,
``model.interp.analysis.rollout``), with its caveat on screen.

The rollout is computed off the GUI thread with the mean patterns (the aggregates job, asked to include
it while this page is in view: ``needs_rollout``); the page draws ``R = Â_{L−1} ··· Â_0`` [T, T] and
names the tokens the last position's stream is traced to.
"""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QVBoxLayout

from app.views.attention.base import AttentionPage, blurb_label, lines_label
from app.widgets.matrix_plot import MatrixPlot
from model.interp.analysis.rollout import ROLLOUT_CAVEAT

#: the flow through layer ℓ, as the page writes it
FORMULA = (
    "Â<sub>ℓ</sub> = rows normalised(½ · mean<sub>h</sub> A<sub>ℓ,h</sub> + ½ · I)   ·   "
    "R = Â<sub>L−1</sub> ··· Â<sub>1</sub> Â<sub>0</sub>   ·   R[i, j]: the share of position i's "
    "stream traced back to token j (every row sums to 1)"
)


def top_sources(row: np.ndarray, k: int = 3) -> list[tuple[int, float]]:
    """The ``k`` input positions with the largest shares of one rollout row [T], largest first."""
    order = np.argsort(-row, kind="stable")[:k]
    return [(int(j), float(row[j])) for j in order]


class RolloutPage(AttentionPage):
    title = "Rollout"
    needs_every_pattern = True
    key = "rollout"
    needs_aggregates = True
    needs_rollout = True
    blurb = (
        "Attention rollout (Abnar & Zuidema 2020) follows the attention weights through every layer: "
        "average each layer's heads, count the residual connection as half of the flow, and multiply "
        "the layers together. Row i says where position i's stream could have come from."
    )

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        formula = QLabel(FORMULA)
        formula.setWordWrap(True)
        formula.setStyleSheet("font-family: monospace; background: #f4f4f8;")
        lay.addWidget(formula)
        bar = QHBoxLayout()
        self.summary = lines_label(2)
        bar.addWidget(self.summary, 1)
        self.log_box = QCheckBox("Log colours")
        self.log_box.setToolTip(
            "colour log₁₀(share) from 10⁻⁴ to 1: small shares are faint in linear colours"
        )
        self.log_box.toggled.connect(lambda _on: self._draw())
        bar.addWidget(self.log_box)
        lay.addLayout(bar)
        self.heatmap = MatrixPlot(legend_label="share R[i, j]", square=False)  # the map fills its plot
        self.heatmap.set_axis_titles("position i", "input token j")
        lay.addWidget(self.heatmap, 1)
        self.caveat = blurb_label(f"Caveat (Abnar & Zuidema 2020): {ROLLOUT_CAVEAT}")
        self.caveat.setStyleSheet("color: #8a4b00;")
        lay.addWidget(self.caveat)
        self.rollout: np.ndarray | None = None

    def refresh(self) -> None:
        res = self.state.aggregates_for_current()
        if res is None or res.rollout is None:
            return  # the tab asks for it (needs_rollout); on_aggregates draws it
        self.rollout = res.rollout
        self._draw()
        self.stale = False

    def on_aggregates(self, result) -> None:
        if self.in_view():
            self.refresh()

    def _draw(self) -> None:
        insp, r = self.state.inspection, self.rollout
        if insp is None or r is None or r.shape[0] != len(insp.labels):
            return
        labels = insp.labels
        masked = np.where(insp.mask, r, np.float32(np.nan))
        scale = "log" if self.log_box.isChecked() else "linear"
        self.heatmap.set_matrix(masked, labels, labels, levels=(0.0, 1.0), scale=scale)
        self.heatmap.set_title(
            f"attention rollout through {insp.n_layers} layers: where each position's stream is from"
        )
        last = len(labels) - 1
        esc = lambda text: html.escape(text, quote=False)  # noqa: E731
        shares = ", ".join(f"“{esc(labels[j])}” at {j}: {share:.2f}" for j, share in top_sources(r[last]))
        self.summary.setText(
            f"The last position ({last}, “{esc(labels[last])}”) traces the largest shares of its stream to "
            f"{shares}; its own token keeps {r[last, last]:.2f}."
        )

    def numbers(self):
        insp, r = self.state.inspection, self.rollout
        if insp is None or r is None:
            return None
        return {"rollout": r, "tokens": np.array(insp.labels)}, {
            "rollout": (r, list(insp.labels), list(insp.labels), "position \\ token")
        }

    def export_targets(self):
        return {"rollout": self.heatmap}


__all__ = ["RolloutPage", "top_sources"]
