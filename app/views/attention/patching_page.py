"""The Patching page: activation patching of every head and of the residual stream
(``model.interp.causal.patching_of``, computed off the GUI thread).

The tab's prompt is the *clean* run; the page asks for a *corrupted* one of the same token length
(by default two words of the prompt swapped, names first: "When Mary and John …, John gave a drink
to" → "When John and Mary …, Mary gave a drink to"). Each cell of the two maps is one patched run:
that activation copied from the clean run into the corrupted one, and the share of the logit
difference ``logit[answer] − logit[wrong]`` it brings back (1 = all of it, 0 = nothing). Clicking a
head opens it; clicking a (layer, position) cell opens that layer's head that restores most.
"""

from __future__ import annotations

import html

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from app.views.attention.base import AttentionPage, blurb_label
from app.views.attention.state import CausalFailure
from app.widgets.job_bar import quoted
from app.widgets.matrix_plot import MatrixPlot, format_cell

#: A clean − corrupted logit difference below this (nats) makes the restored fractions noisy.
SMALL_GAP = 0.5


#: px of a map's width that are not its cells: the row labels ("L29") with their title, and the colour
#: bar with its label (measured: 163 px on a 30-layer model).
MAP_FRAME_PX = 165


def layer_labels(n: int) -> list[str]:
    return [f"L{layer}" for layer in range(n)]


def heads_share(n_heads: int, n_positions: int) -> float:
    """The heads map's share of the two maps' cell width: ``H / (H + T)`` (a column of either map
    as wide), kept in [0.3, 0.6] so neither map shrinks to a strip (a long prompt, a few heads)."""
    return min(0.6, max(0.3, n_heads / max(1, n_heads + n_positions)))


class CausalPage(AttentionPage):
    """What the Patching and Logit attribution pages share: a row of inputs that write the state's
    ``causal_setup[needs_causal]`` when edited (Enter or leaving the box), a summary line, and the
    result drawn when it arrives."""

    #: the summary line (each page's ``build`` places the one :meth:`_summary_label` makes)
    summary: QLabel

    def _input(self, row: QHBoxLayout, label: str, key: str, placeholder: str, width: int = 0) -> QLineEdit:
        row.addWidget(QLabel(label))
        edit = QLineEdit()
        edit.setPlaceholderText(placeholder)
        if width:
            edit.setMaximumWidth(width)
        edit.editingFinished.connect(
            lambda: self.state.set_causal_setup(self.needs_causal, **{key: edit.text()})
        )
        row.addWidget(edit, 0 if width else 1)
        return edit

    def _summary_label(self) -> QLabel:
        lab = QLabel(" ")
        lab.setWordWrap(True)
        lab.setTextFormat(Qt.TextFormat.RichText)
        lab.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        return lab

    def refresh(self) -> None:
        if self.state.inspection is None:
            return
        res = self.state.causal_for_current(self.needs_causal)
        self.show_inputs()
        if res is None:
            self._mark_previous()
            return  # the tab asks for it; on_causal draws it
        if self.job_bar is not None:
            self.job_bar.set_stale(None)
        if isinstance(res, CausalFailure):
            self.result = None
            self.summary.setText(f"<b style='color:#b00'>Cannot measure:</b> {html.escape(res.message)}")
            self.clear_plots()
        else:
            self.result = res
            self.draw(res)
        self.stale = False

    def on_causal(self, kind: str, result) -> None:
        if kind == self.needs_causal:
            self.redraw()

    #: the maps (with :attr:`summary`): greyed while they show another input's numbers
    results: QWidget

    def stale_covers(self) -> list[QWidget]:
        return [self.summary, self.results]

    def _mark_previous(self, why: str = "") -> None:
        """Say that the numbers on screen (if any) were measured for other inputs, and grey them, while
        the new ones are measured (``why``: what became of the new measurement)."""
        shown = self.result
        if shown is None:
            self.summary.setText(f"<i>{why or 'Measuring…'}</i>")
            return
        note = f"Showing the previous measurement ({self.shown_inputs(shown)})"
        if self.job_bar is not None:
            if why:
                self.job_bar.set_stale(f"{why} {note}.", at_once=True)
            else:
                self.job_bar.set_stale(f"{note} until the new one is measured.")

    def on_job_ended(self, key: str, state: str) -> None:
        if state == "cancelled" and self.state.causal_for_current(self.needs_causal) is None:
            self._mark_previous(f"Cancelled: {self.rerun_hint} to measure again.")

    #: how to measure again (said in the line after a Cancel)
    rerun_hint = "press Enter in a box above"

    def shown_inputs(self, result) -> str:
        """What the numbers shown were measured for, in words (rich text)."""
        return html.escape(str(getattr(result, "target", "")), quote=False)

    # for the subclasses
    def show_inputs(self) -> None: ...

    def clear_plots(self) -> None: ...

    def draw(self, res) -> None: ...


class PatchingPage(CausalPage):
    title = "Patching"
    key = "patching"
    needs_causal = "patching"
    blurb = (
        "Which heads carry what the prompt says? Run the prompt (clean) and a corrupted copy, then copy one "
        "activation at a time from the clean run into the corrupted one: a cell's value is the share of the "
        "logit difference between the two answers that this one activation brings back (1 = all of it). "
        "Click a head to open it."
    )

    def build(self) -> None:
        self.result = None
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        row = QHBoxLayout()
        label = QLabel("Corrupted prompt")
        label.setAlignment(Qt.AlignmentFlag.AlignTop)
        row.addWidget(label)
        self.corrupt_edit = QPlainTextEdit()
        self.corrupt_edit.setPlaceholderText("suggested: two words of the prompt swapped (names first)")
        self.corrupt_edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.corrupt_edit.setFixedHeight(self.corrupt_edit.fontMetrics().lineSpacing() * 3 + 12)
        row.addWidget(self.corrupt_edit, 1)
        buttons = QVBoxLayout()
        self.run_button = QPushButton("Patch")
        self.run_button.setToolTip("patch every head and every stream position with this corrupted prompt")
        self.run_button.clicked.connect(self._apply)
        self.suggest_button = QPushButton("Suggest")
        self.suggest_button.setToolTip("swap two words of the prompt (names first) keeping its token count")
        self.suggest_button.clicked.connect(lambda: self.state.set_causal_setup("patching", corrupt=""))
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.suggest_button)
        row.addLayout(buttons)
        tokens = QVBoxLayout()
        answer_row, wrong_row = QHBoxLayout(), QHBoxLayout()
        self.answer_edit = self._input(answer_row, "answer", "answer", "clean top token", 150)
        self.wrong_edit = self._input(wrong_row, "vs", "wrong", "corrupted top token", 150)
        tokens.addLayout(answer_row)
        tokens.addLayout(wrong_row)
        row.addLayout(tokens)
        lay.addLayout(row)
        self.summary = self._summary_label()
        lay.addWidget(self.summary)
        self.split = split = QSplitter(Qt.Orientation.Horizontal)
        self.heads_plot = MatrixPlot(
            diverging=True, legend_label="restored", row_title="layer", col_title="head",
            square=False, numbers=None,
        )  # fmt: skip
        self.resid_plot = MatrixPlot(
            diverging=True, legend_label="restored", row_title="layer (stream entering it)",
            col_title="position", square=False, numbers=None,
        )  # fmt: skip
        self.heads_plot.set_title("each head's output z (all positions)")
        self.resid_plot.set_title("the residual stream at one position")
        for plot in (self.heads_plot, self.resid_plot):
            box = QWidget()
            blay = QVBoxLayout(box)
            blay.setContentsMargins(0, 0, 0, 0)
            blay.addWidget(plot)
            split.addWidget(box)
        self._shared: tuple[int, int] | None = None  # the (heads, positions) the widths were shared for
        self._share_widths(1, 1)
        lay.addWidget(split, 1)
        self.results = split  # with the summary: what is greyed while it is another input's
        self.heads_plot.describe = self._describe_head
        self.resid_plot.describe = self._describe_resid
        self.heads_plot.clicked.connect(lambda l, h: self.openHeadRequested.emit(l, h))
        self.resid_plot.clicked.connect(self._open_layer_head)

    def _share_widths(self, n_heads: int, n_positions: int) -> None:
        """Give the two maps the width their columns need: both have a row per layer, so the heads map
        gets :func:`heads_share` of the width for its data (each map also keeps its axis and colour
        bar), and a head's column is about as wide as a position's. Once per shape: the user's own
        dragging of the splitter is kept until the model or the prompt length changes."""
        if self._shared == (n_heads, n_positions):
            return
        self._shared = (n_heads, n_positions)
        share = heads_share(n_heads, n_positions)
        total = max(sum(self.split.sizes()), self.split.width(), 2 * MAP_FRAME_PX + 2)
        heads = round(MAP_FRAME_PX + share * (total - 2 * MAP_FRAME_PX))
        self.split.setSizes([heads, total - heads])
        self.split.setStretchFactor(0, max(1, round(100 * share)))  # a resize keeps the shares
        self.split.setStretchFactor(1, max(1, round(100 * (1 - share))))

    def _apply(self) -> None:
        """Patch with the corrupted prompt and tokens in the boxes (what Patch does); the same inputs
        again measure again when nothing is measured for them (after a Cancel)."""
        changed = self.state.set_causal_setup(
            "patching",
            corrupt=self.corrupt_edit.toPlainText(),
            answer=self.answer_edit.text(),
            wrong=self.wrong_edit.text(),
        )
        if not changed and self.state.causal_for_current("patching") is None:
            self.state.causal_setup_changed.emit("patching")

    rerun_hint = "press Patch"

    def shown_inputs(self, result) -> str:
        return f"corrupted prompt {quoted(result.corrupt_prompt)}"

    def show_inputs(self) -> None:
        setup = self.state.causal_setup["patching"]
        res = self.state.causal.get("patching")
        corrupt = setup["corrupt"]
        if not corrupt and res is not None and not isinstance(res.result, CausalFailure):
            corrupt = res.result.corrupt_prompt  # show the suggestion in use
        if not self.corrupt_edit.hasFocus() and self.corrupt_edit.toPlainText() != corrupt:
            self.corrupt_edit.setPlainText(corrupt)
        for edit, text in ((self.answer_edit, setup["answer"]), (self.wrong_edit, setup["wrong"])):
            if not edit.hasFocus() and edit.text() != text:
                edit.setText(text)

    def clear_plots(self) -> None:
        for plot in (self.heads_plot, self.resid_plot):
            plot.set_matrix(np.full((1, 1), np.nan))

    def draw(self, res) -> None:
        self.show_inputs()
        h, r = res.heads, res.resid
        L, H = h.restored.shape
        T = r.restored.shape[1]
        bl, bh = h.best
        rl, rt = r.best
        esc = html.escape
        gap = h.clean_diff - h.corrupt_diff
        lines = [
            f"Metric at position {h.position} '{esc(res.labels[h.position])}': "
            f"<b>logit('{esc(res.answer_label)}') − logit('{esc(res.wrong_label)}')</b> = "
            f"{h.clean_diff:.3f} clean, {h.corrupt_diff:.3f} corrupted (gap {gap:+.3f}).",
        ]
        if 0 < abs(gap) < SMALL_GAP:
            lines.append(
                "<b style='color:#8a4b00'>Small gap:</b> the corruption hardly moves this prediction, so the "
                "fractions below are noisy (a cell can exceed ±1). Choose a corruption, or answer tokens, "
                "that the two prompts disagree on."
            )
        if np.isfinite(h.restored).any():
            lines.append(
                f"Most restoring head: <b>L{bl}H{bh}</b> ({format_cell(h.restored[bl, bh])}); "
                f"stream: layer {rl}, position {rt} '{esc(res.labels[rt])}' "
                f"({format_cell(r.restored[rl, rt])}). "
                f"{L * H + L * T} patched runs; positions after {h.position} cannot matter (causal)."
            )
        else:
            lines.append("Both runs give the same difference: there is no gap to restore. Try other tokens.")
        self.summary.setText("<br>".join(lines))
        self._share_widths(H, T)
        self.heads_plot.set_matrix(
            h.restored, layer_labels(L), [f"H{i}" for i in range(H)], levels=(-1.0, 1.0)
        )
        cols = [f"{t}:{lab}" for t, lab in enumerate(res.labels)]
        self.resid_plot.set_matrix(r.restored, layer_labels(L), cols, levels=(-1.0, 1.0))

    def _describe_head(self, l: int, h: int) -> str:
        res = self.result
        if res is None:
            return " "
        v = res.heads.restored[l, h]
        return (
            f"L{l}H{h}: patching it restores {format_cell(v)} of the gap "
            f"(difference {res.heads.patched[l, h]:.3f}) · click to open the head"
        )

    def _describe_resid(self, l: int, t: int) -> str:
        res = self.result
        if res is None:
            return " "
        v = res.resid.restored[l, t]
        return (
            f"stream entering layer {l} at position {t} '{res.labels[t]}' "
            f"(corrupted: '{res.corrupt_labels[t]}'): restores {format_cell(v)} "
            f"· click to open layer {l}'s most restoring head"
        )

    def _open_layer_head(self, layer: int, _t: int) -> None:
        if self.result is not None:
            row = np.nan_to_num(self.result.heads.restored[layer], nan=-np.inf)
            self.openHeadRequested.emit(layer, int(np.argmax(row)))

    def numbers(self):
        res = self.result
        if res is None:
            return None
        L, H = res.heads.restored.shape
        cols = [f"{t}:{lab}" for t, lab in enumerate(res.labels)]
        tables = {
            "heads": (res.heads.restored, layer_labels(L), [f"H{i}" for i in range(H)], "layer \\ head"),
            "resid": (res.resid.restored, layer_labels(L), cols, "layer \\ position"),
        }
        return res.arrays(), tables

    def export_targets(self):
        return {"heads": self.heads_plot, "resid": self.resid_plot}


__all__ = ["CausalPage", "PatchingPage", "heads_share", "layer_labels"]
