"""The SAE page (key ``features``): what a sparse autoencoder's features say about the tab's prompt
(:mod:`~app.views.attention.features_state`, computed by :mod:`model.interp.sae.prompt`).

Top, the SAE: "SAE: [folder ▾] Open…" (the folders announced on the session's hub, the most recent
first: :mod:`~app.views.attention.features_jobs`), with its site and size, or, in red and in one line,
why a folder was refused (an SAE of another model or site shape). Left, the **active features**: the
strongest features on the prompt × its positions, each named by its index and the token it promotes
most; hover reads token, feature and activation, a click asks the Features tab for that feature's
dashboard (:class:`~app.session.messages.OpenFeature`) and, when no Features tab is open, says the
feature's promoted and suppressed tokens here instead. Right, the **logit attributed to features**:
the site's direct contribution to the logit of a token (the model's top prediction by default) at a
position (the last by default), as bars: the largest features' terms ``f_i (W_dec,i · u)``, the rest
summed, the decoder bias and the error term, which add up to it exactly, as the line under them says.

A new prompt, SAE, position or token greys the reading shown, under a line naming what it was read
for, until the new one is in (the job, Cancel and the time left in the page's busy line).
"""

from __future__ import annotations

import html
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.session.messages import OpenFeature, SAEChosen, ask
from app.views.attention.base import AttentionPage, blurb_label, lines_label
from app.views.attention.features_jobs import FeaturesJobs
from app.views.attention.features_state import FeaturesFailure, FeaturesOnPrompt, attribution_bars
from app.views.attention.features_views import FeatureBars
from app.widgets.job_bar import quoted
from app.widgets.matrix_plot import MatrixPlot

RED = "#a33"


def sae_text(reading: FeaturesOnPrompt) -> str:
    """What the SAE read is, in words: "attention z, layer 1 · 512 features"."""
    return f"{reading.site.label()} · {reading.d_sae:,} features"


class FeaturesPage(AttentionPage):
    title = "SAE"  # short: with "Features" the row of page tabs took a third line at 1024 px
    key = "features"
    own_jobs = ("features",)
    blurb = (
        "The features of a sparse autoencoder (SAE) on your prompt: which are active at each position "
        "(click one for its dashboard), and how much each adds to the next-token logit."
    )

    features: FeaturesJobs | None = None

    def help_html(self) -> str:
        return (
            f"{self.blurb}<br><br>"
            "<b>An SAE</b> writes the activation x [d_in] at its site (z, attention out, the residual "
            "stream or the MLP out of one layer) as a sparse sum of feature directions: "
            "f = σ((x − b_dec) W_enc + b_enc), "
            "x = Σ<sub>i</sub> f<sub>i</sub> W<sub>dec,i</sub> + b_dec + ε, "
            "ε the error term. σ is TopK or ReLU.<br>"
            "<b>The map</b> shows f<sub>i</sub> at each position for the features strongest on the prompt "
            "(largest max<sub>t</sub> f<sub>t,i</sub>), each named by the token its decoder direction "
            "promotes most through the unembedding.<br>"
            "<b>The bars</b> split the site's direct contribution to a logit, x · u (u the site's "
            "direction to the logit through W_O for z, the final norm frozen from this run): "
            "x · u = Σ<sub>i</sub> f<sub>i</sub> (W<sub>dec,i</sub> · u) + b_dec · u + ε · u, exactly. "
            "Direct effects only: what later layers make of the site counts where they write."
        )

    # ---- the SAE and its job ------------------------------------------------------------------------
    def use_tab_jobs(self, jobs) -> None:
        """The tab's jobs: the SAE chosen and its reading live beside them, and hear the hub's
        announcements from now on (before the page is built)."""
        self.features = FeaturesJobs(jobs, self._on_features_changed)
        sub = self.features.subscription
        self.destroyed.connect(lambda *_: sub.cancel())

    def _on_features_changed(self) -> None:
        if self.built:
            self.redraw()
        else:
            self.stale = True

    # ---- building -----------------------------------------------------------------------------------
    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = QHBoxLayout()
        bar.addWidget(QLabel("SAE:"))
        self.sae_box = QComboBox()
        self.sae_box.setPlaceholderText("none: open a folder, or train one in the Features tab")
        self.sae_box.setMinimumContentsLength(18)
        self.sae_box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.sae_box.activated.connect(self._sae_picked)
        self.open_button = QPushButton("Open…")
        self.open_button.setToolTip("An SAE folder in SAELens's format (cfg.json + sae_weights.safetensors)")
        self.open_button.clicked.connect(self._open_dialog)
        self.shown_spin = QSpinBox()
        self.shown_spin.setRange(1, 64)
        self.shown_spin.setToolTip("how many of the prompt's strongest features the map shows")
        self.shown_spin.editingFinished.connect(self._setup_changed)
        bar.addWidget(self.sae_box, 1)
        bar.addWidget(self.open_button)
        bar.addWidget(QLabel("Shown:"))
        bar.addWidget(self.shown_spin)
        self.skip_box = QCheckBox("rank after the first token")
        self.skip_box.setToolTip(
            "Rank the features and scale the colours by the positions after the first: the first token's "
            "activation is often far larger than the rest (an attention sink's massive activation). "
            "Its column is still drawn, and its values read exactly on hover."
        )
        self.skip_box.toggled.connect(self._setup_changed)
        lay.addLayout(bar)
        status_row = QHBoxLayout()
        self.status_label = lines_label(2)  # a refusal names the file, the field and both widths
        status_row.addWidget(self.status_label, 1)
        status_row.addWidget(self.skip_box)
        lay.addLayout(status_row)

        self.map = MatrixPlot(
            square=False, numbers=False, row_title="feature", col_title="position", legend_label="activation"
        )
        self.map.describe = self._describe_cell
        self.map.clicked.connect(self._cell_clicked)
        right = QWidget()
        right_lay = QVBoxLayout(right)
        right_lay.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(QLabel("Logit of"))
        self.token_edit = QLineEdit()
        self.token_edit.setPlaceholderText("top prediction")
        self.token_edit.setMaximumWidth(140)
        self.token_edit.editingFinished.connect(self._setup_changed)
        row.addWidget(self.token_edit)
        row.addWidget(QLabel("at position"))
        self.position_spin = QSpinBox()
        self.position_spin.setMinimum(-1)
        self.position_spin.setSpecialValueText("last")
        self.position_spin.editingFinished.connect(self._setup_changed)
        row.addWidget(self.position_spin)
        row.addStretch(1)
        right_lay.addLayout(row)
        self.bars = FeatureBars()
        self.bars.featureClicked.connect(self.open_feature)
        right_lay.addWidget(self.bars, 1)
        self.sum_label = lines_label(2)
        self.sum_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.split = QSplitter(Qt.Orientation.Horizontal)
        self.split.addWidget(self.map)
        self.split.addWidget(right)
        self.split.setStretchFactor(0, 2)
        self.split.setStretchFactor(1, 1)
        self.split.setSizes([680, 320])  # the map wider: a column per token
        self.results = QWidget()  # what is greyed while it is another input's
        box = QVBoxLayout(self.results)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.split, 1)
        box.addWidget(self.sum_label)
        lay.addWidget(self.results, 1)
        self.feature_label = lines_label(2)
        lay.addWidget(self.feature_label)
        self.feature_label.setText(
            "Click a feature (in the map or a bar) for its dashboard in the Features tab."
        )
        self.drawn: FeaturesOnPrompt | None = None  # the reading drawn

    def stale_covers(self) -> list[QWidget]:
        return [self.results]

    # ---- inputs -------------------------------------------------------------------------------------
    def _sae_picked(self, index: int) -> None:
        folder = self.sae_box.itemData(index)
        if self.features is not None and folder:
            self.features.choose(str(folder))

    def choose_sae(self, folder: str | Path) -> bool:
        """Read the SAE in ``folder`` (what Open… does): False, with the reason in one red line, when it
        does not fit the model shown. A folder taken is announced on the hub
        (:class:`~app.session.messages.SAEChosen`)."""
        f = self.features
        if f is None or not f.choose(str(folder)):
            return False
        f.session.hub.publish(SAEChosen(str(folder)))
        return True

    def _open_dialog(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open an SAE folder (SAELens's format)")
        if folder:
            self.choose_sae(folder)

    def _setup_changed(self) -> None:
        if self.features is not None:
            self.features.set_setup(
                shown=self.shown_spin.value(),
                skip_first=self.skip_box.isChecked(),
                position=self.position_spin.value(),
                token=self.token_edit.text().strip(),
            )

    def _show_inputs(self) -> None:
        f = self.features
        if f is None:
            return
        items = [str(self.sae_box.itemData(i)) for i in range(self.sae_box.count())]
        if items != f.folders:
            self.sae_box.clear()
            for folder in f.folders:
                path = Path(folder)
                self.sae_box.addItem(f"{path.parent.name}/{path.name}", folder)
                self.sae_box.setItemData(self.sae_box.count() - 1, folder, Qt.ItemDataRole.ToolTipRole)
        self.sae_box.setCurrentIndex(f.folders.index(f.chosen) if f.chosen in f.folders else -1)
        s = f.setup
        insp = self.state.inspection
        if insp is not None:
            self.position_spin.setMaximum(max(0, len(insp.ids) - 1))
        for spin, value in ((self.shown_spin, s["shown"]), (self.position_spin, s["position"])):
            if not spin.hasFocus():
                spin.setValue(value)
        if self.skip_box.isChecked() != s["skip_first"]:
            self.skip_box.blockSignals(True)
            self.skip_box.setChecked(s["skip_first"])
            self.skip_box.blockSignals(False)
        if not self.token_edit.hasFocus() and self.token_edit.text() != s["token"]:
            self.token_edit.setText(s["token"])

    # ---- drawing ------------------------------------------------------------------------------------
    def refresh(self) -> None:
        f = self.features
        self._show_inputs()
        if f is None or self.state.inspection is None:
            return
        refusal = f.refusal()
        if f.chosen is None or not f.fits():
            self._say(refusal or "No SAE chosen: Open… a folder in SAELens's format, or train one in the "
                      "Features tab.", error=bool(refusal))  # fmt: skip
            self._draw(None)
            if self.job_bar is not None:
                self.job_bar.set_stale(None)
            self.stale = False
            return
        reading = f.reading()
        if reading is None:
            cancelled = f.ready() and f.cancelled()
            doing = (
                "Cancelled: change an input to read the features again."
                if cancelled
                else "Reading the features…"
            )
            self._say(refusal or doing, error=bool(refusal))
            self._mark_previous(cancelled)
            self.stale = not cancelled
            return
        if self.job_bar is not None:
            self.job_bar.set_stale(None)
        if isinstance(reading, FeaturesFailure):
            self._say(f"Refused {Path(f.chosen).name}: {reading.message}", error=True)
            self._draw(None)
        else:
            self._say(refusal or self._summary(reading), error=bool(refusal))
            self._draw(reading)
        self.stale = False

    def _say(self, text: str, *, error: bool = False) -> None:
        """One line above the result: plain, or in red (rich text escaped here)."""
        line = html.escape(" ".join(text.split()), quote=False)
        self.status_label.setText(f"<span style='color:{RED}'>{line}</span>" if error else line)
        self.status_label.setToolTip(text)

    def _summary(self, r: FeaturesOnPrompt) -> str:
        T = len(r.labels)
        l0 = sum(len(v) for v in r.active.features) / max(1, T)
        ablated = " (heads switched off are not applied here)" if self.state.ablation else ""
        return f"{sae_text(r)} · {l0:.1f} features active per position on {T} tokens{ablated}"

    def _mark_previous(self, cancelled: bool) -> None:
        """Grey the reading shown (if any) under a line naming what it was read for."""
        old, bar = self.drawn, self.job_bar
        if old is None or bar is None:
            return
        insp = self.state.inspection
        same_prompt = insp is not None and old.prompt == insp.prompt
        what = (
            "the previous reading"
            if same_prompt
            else f"the features of the previous prompt {quoted(old.prompt)}"
        )
        if cancelled:
            bar.set_stale(f"Cancelled: change an input to read again. Showing {what}.", at_once=True)
        else:
            bar.set_stale(f"Showing {what} until the new one is read.")

    def on_job_ended(self, key: str, state: str) -> None:
        if state == "cancelled":
            self.refresh()

    def clear(self) -> None:
        if self.built:
            self._draw(None)

    def _draw(self, r: FeaturesOnPrompt | None) -> None:
        self.drawn = r
        if r is None or not len(r.shown):
            self.map.set_matrix(np.full((1, 1), np.nan, dtype=np.float32), [" "], [" "])  # grey: nothing
            self.map.set_title("no feature is active on this prompt" if r is not None else " ")
        else:
            skip = r.inputs.skip_first and r.table.shape[1] > 1  # the first column clipped to the scale
            top = float(r.table[:, 1:].max()) if skip else 0.0
            top = top if top > 0 else float(r.table.max())
            self.map.set_matrix(r.table, [r.name(i) for i in r.shown], r.labels, levels=(0.0, top))
            n_on = len({int(i) for v in r.active.features for i in v})
            self.map.set_title(f"the {len(r.shown)} strongest of {n_on} active features")
        self.bars.set_bars(attribution_bars(r) if r is not None else [])
        self.sum_label.setText(self._sum_text(r))

    def _sum_text(self, r: FeaturesOnPrompt | None) -> str:
        if r is None:
            return " "
        a = r.attribution
        if a is None:
            return f"<span style='color:{RED}'>No attribution: {html.escape(r.attribution_error)}</span>"
        total = float(self.bars.values.sum())
        where = html.escape(r.labels[a.position])
        self.sum_label.setToolTip(
            f"The final norm's scale ({a.scale:.4g}) is frozen from this run, which makes the logit linear "
            "in the site's activation; what later layers make of the site is not counted here."
        )
        return (
            f"logit(‘{html.escape(r.token_label)}’) at position {a.position} ‘{where}’ = {a.logit:.4f} · "
            f"the bars add up to {total:.4f} (difference {abs(total - a.site):.1e})<br>"
            f"<b>sum = site's direct contribution to the logit: {a.site:.4f} (exact)</b>"
        )

    def _describe_cell(self, row: int, col: int) -> str:
        r = self.drawn
        if r is None or not len(r.shown):
            return " "
        i, v = int(r.shown[row]), float(r.table[row, col])
        on = len(r.active.features[col])
        state = f"{v:.3f}" if v > 0 else "off"
        return (
            f"position {col} ‘{r.labels[col]}’ · feature {r.name(i)}: {state} · {on} features active here"
            " · click for its dashboard"
        )

    def _cell_clicked(self, row: int, _col: int) -> None:
        r = self.drawn
        if r is not None and 0 <= row < len(r.shown):
            self.open_feature(int(r.shown[row]))

    def open_feature(self, feature: int) -> bool:
        """Ask the Features tab for ``feature``'s dashboard; when none is open, say what the feature
        promotes and suppresses here instead. True when the Features tab took it."""
        r, f = self.drawn, self.features
        if r is None or f is None:
            return False
        name = html.escape(r.name(feature))
        if ask(f.session.hub, OpenFeature(r.inputs.sae, int(feature))):
            self.feature_label.setText(f"Feature <b>{name}</b>: its dashboard is in the Features tab.")
            return True
        up = " ".join(f"‘{html.escape(t)}’" for t in r.promoted.get(int(feature), []))
        down = " ".join(f"‘{html.escape(t)}’" for t in r.suppressed.get(int(feature), []))
        self.feature_label.setText(
            f"Feature <b>{name}</b> promotes {up or '?'} and suppresses {down or '?'} through the "
            "unembedding. <i>The Features tab is not open, so its dashboard is not shown.</i>"
        )
        return False

    # ---- export -------------------------------------------------------------------------------------
    def export_targets(self):
        return {"features": self.map, "feature-logits": self.bars}

    def numbers(self):
        r = self.drawn
        if r is None:
            return None
        names = [r.name(i) for i in r.shown]
        arrays: dict = {"features": r.shown, "activations": r.table, "tokens": np.array(r.labels, dtype=str)}
        tables: dict = {"active": (r.table, names, r.labels, "feature \\ position")}
        bars = attribution_bars(r)
        if r.attribution is not None:
            a = r.attribution
            arrays |= {"attributed_features": a.features, "contributions": a.contributions,
                       "bias": np.float64(a.bias), "error": np.float64(a.error),
                       "site": np.float64(a.site)}  # fmt: skip
            tables["attribution"] = (np.array([[b.value] for b in bars]), [b.label for b in bars],
                                     ["logit part"], "part")  # fmt: skip
        return arrays, tables


__all__ = ["FeaturesPage", "sae_text"]
