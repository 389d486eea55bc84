"""The Heads-over-a-corpus page: what each head does over many prompts, not one
(:mod:`model.interp.corpus`).

Top, the inputs: the corpus (the Q–K map page's chooser), the number of prompts ``N`` and their length
``T``; the run starts when the page is shown or an input changes, in the compute worker (progress in
prompts, the time left, Cancel: :mod:`~app.views.attention.corpus_heads_jobs`), and a run made before
with the same model, corpus and settings shows at once. Under them, left, the **heads × scores table**
(every score as "mean [low, high]", its 95% bootstrap interval over prompts; a click on a header
sorts, "Export CSV…" writes :meth:`~model.interp.corpus.HeadScores.csv`); right, the **map** of the
score chosen, [L, H]. Bottom, left, the selected head's **card**: its scores with their intervals, its
cluster and its top examples (the text around the key, highlighted red, and the query, blue; a click
opens that prompt in the Attention tab at that head); right, **heads that behave alike**: every head
placed, and grouped, by what the user chooses over it (remembered with the page's inputs): its corpus
statistics (the first two principal components of its standardised scores) or its patterns on the
shared prompts (classical MDS of their Jensen–Shannon distances), coloured by its cluster, each
cluster named by its dominant score (hover names the head).

A result of other inputs (another model, step, corpus or setting) is never shown as current: it stays
greyed under a line naming what it was computed for until the new run is in.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import Qt, QUrl
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)  # fmt: skip

from app.views.attention.base import AttentionPage, blurb_label, lines_label
from app.views.attention.corpus_heads_alike import HeadsAlikePlot
from app.views.attention.corpus_heads_views import ScoresTable, example_html, interval_text, router_text
from app.widgets.corpus_box import corpus_box
from app.widgets.matrix_plot import MatrixPlot
from model.interp.corpus import ALIKE_BASES

if TYPE_CHECKING:
    from app.views.attention.corpus_heads_jobs import CorpusHeadsJobs
    from model.interp.corpus import HeadScores

#: What each kind of top example is, as the card titles it.
EXAMPLE_TITLES = {"attention": "Where it attends most (weight)", "z": "Where its output is largest (‖z‖)"}
#: Examples shown per kind on the card.
CARD_EXAMPLES = 5
#: px: the score's map shows its colour legend (~70 px) only when at least this wide
MAP_LEGEND_MIN_WIDTH = 200


def run_text(result: HeadScores) -> str:
    """What a run read: "64 prompts × 64 tokens of task:induction"."""
    s = result.settings
    return f"{s.n_prompts:,} prompts × {s.seq_len} tokens of {s.corpus}"


class CorpusHeadsPage(AttentionPage):
    title = "Corpus"
    key = "corpus"
    needs_corpus_heads = True
    blurb = (
        "Every head scored over many prompts of a corpus, each score with its 95% interval over prompts: "
        "sort the table, map a score, click a head for its card and top examples (click one to open it)."
    )

    def help_html(self) -> str:
        return (
            f"{self.blurb}<br><br>"
            "<b>The scores</b> are the Metrics page's, measured on each of N prompts of T tokens "
            "(the tokenizer's BOS, then a window of the corpus): previous-token w[i, i−1]; induction on the "
            "corpus's own repeats Σ w[i, j+1] over x[j] = x[i], and on a random block repeated twice; "
            "duplicate-token; sink (the weight on position 0); entropy −Σ w ln w; the mean distance looked "
            "back Σ w[i, j](i − j); the share on the last 8 keys; self w[i, i].<br>"
            "<b>The interval</b> [low, high] is a 95% percentile bootstrap over prompts (1,000 resamples): "
            "two heads whose intervals do not overlap differ on this corpus, not by the prompts drawn.<br>"
            "<b>Top examples</b>: the prompts where the head's largest weight w[i, j] is largest, and where "
            "its output ‖z_i‖ (z = A V, before W_O) is; the key is red, the query blue.<br>"
            "<b>Heads that behave alike</b>, by <i>corpus statistics</i>: each head is its vector of "
            "standardised scores; average linkage groups them, each group named by the score it is "
            "highest on, and the plane is the first two principal components. By <i>patterns on shared "
            "prompts</i>: two heads are as alike as their rows are on the same first prompts, "
            "S = 1 − the mean Jensen–Shannon divergence (bits) of their weights over the keys (Clark et "
            "al. 2019), every head of every layer against every other; the same linkage groups the "
            "distances √(1 − S), and classical MDS places them."
        )

    def _fit_table(self) -> None:
        """The table never narrower than its columns (none cut, no sideways scrolling); the map takes
        the rest, and what the window gains or loses."""
        self.table.resizeColumnsToContents()
        bar = self.table.verticalScrollBar().sizeHint().width()
        need = self.table.horizontalHeader().length() + bar + 2 * self.table.frameWidth() + 4
        self.table.setMinimumWidth(need)
        total = sum(self.top_split.sizes())
        if total > need:
            self.top_split.setSizes([need, total - need])

    def build(self) -> None:
        lay = QVBoxLayout(self)
        lay.addWidget(blurb_label(self.blurb))
        bar = QHBoxLayout()
        self.corpus_box = corpus_box()
        self.prompts_spin, self.tokens_spin = QSpinBox(), QSpinBox()
        self.prompts_spin.setRange(1, 100_000)
        self.tokens_spin.setRange(2, 4096)
        self.score_box = QComboBox()
        self.score_box.setMinimumContentsLength(6)
        self.csv_button = QPushButton("Export CSV…")
        self.csv_button.setToolTip(
            "The heads × scores table: each score's mean, low and high, and the cluster"
        )
        for label, w in (
            ("Corpus", self.corpus_box), ("Prompts", self.prompts_spin), ("Tokens", self.tokens_spin),
        ):  # fmt: skip
            bar.addWidget(QLabel(label + ":"))
            bar.addWidget(w)
        bar.addStretch(1)
        bar.addWidget(self.csv_button)
        lay.addLayout(bar)
        s = self.state.corpus_setup
        self.corpus_box.setCurrentText(s["corpus"])
        self.prompts_spin.setValue(s["prompts"])
        self.tokens_spin.setValue(s["seq_len"])
        for spin in (self.prompts_spin, self.tokens_spin):
            spin.valueChanged.connect(self._inputs_changed)
        self.corpus_box.currentTextChanged.connect(self._inputs_changed)
        self.score_box.currentTextChanged.connect(self._score_chosen)
        self.csv_button.clicked.connect(self._csv_dialog)

        self.table = ScoresTable()
        self.table.headClicked.connect(self.state.select)
        # no title and no axis titles: the chooser above names the score, the ticks L0 and H0 the axes,
        # and the matrix keeps the room (at 1024 px beside a dock its column is ~115 px wide, where the
        # colour legend gives way too: the readout and the table give the values)
        self.map_plot = MatrixPlot(
            row_title="", col_title="", square=False, numbers=None, legend_min_width=MAP_LEGEND_MIN_WIDTH
        )
        self.map_plot.clicked.connect(self.state.select)
        self.card = QLabel(" ")
        self.card.setWordWrap(True)
        self.card.setTextFormat(Qt.TextFormat.RichText)
        self.card.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.examples_view = QTextBrowser()
        self.examples_view.setOpenLinks(False)
        self.examples_view.anchorClicked.connect(self._example_clicked)
        self.alike = HeadsAlikePlot()
        self.alike.headClicked.connect(self.state.select)
        self.alike_box = QComboBox()  # what places and groups the heads
        self.alike_box.setMinimumContentsLength(8)
        for basis, words in ALIKE_BASES.items():
            self.alike_box.addItem(words, basis)
        self.alike_box.setToolTip(
            "Place and group the heads by their scores over the whole corpus, or by how alike their "
            "attention weights are on the same first prompts"
        )
        self.alike_box.setCurrentIndex(max(0, self.alike_box.findData(s["alike"])))
        self.alike_box.currentIndexChanged.connect(self._alike_chosen)

        card_box = QWidget()
        card_lay = QVBoxLayout(card_box)
        card_lay.setContentsMargins(0, 0, 0, 0)
        card_lay.addWidget(self.card)
        card_lay.addWidget(self.examples_view, 1)
        map_box = _under_chooser("Map:", self.score_box, self.map_plot)  # the score's map
        self.top_split = QSplitter(Qt.Orientation.Horizontal)
        self.top_split.addWidget(self.table)
        self.top_split.addWidget(map_box)
        self.top_split.setSizes([1000, 200])  # the table first: every column in sight
        self.top_split.setStretchFactor(0, 0)
        self.top_split.setStretchFactor(1, 1)
        alike_box = _under_chooser("Heads alike by:", self.alike_box, self.alike)  # the plane of alike heads
        self.bottom_split = QSplitter(Qt.Orientation.Horizontal)
        self.bottom_split.addWidget(card_box)
        self.bottom_split.addWidget(alike_box)
        self.bottom_split.setSizes([780, 460])
        self.split = QSplitter(Qt.Orientation.Vertical)
        self.split.addWidget(self.top_split)
        self.split.addWidget(self.bottom_split)
        #: the result, under one veil while stale (a veil made a child of a QSplitter would be a pane)
        self.result_box = QWidget()
        box_lay = QVBoxLayout(self.result_box)
        box_lay.setContentsMargins(0, 0, 0, 0)
        box_lay.addWidget(self.split)
        lay.addWidget(self.result_box, 1)
        self.status_label = lines_label(2)
        lay.addWidget(self.status_label)

    # ---- inputs ----------------------------------------------------------------------------------
    def _inputs_changed(self, *_args) -> None:
        self.state.set_corpus_setup(
            corpus=self.corpus_box.currentText().strip(),
            prompts=self.prompts_spin.value(),
            seq_len=self.tokens_spin.value(),
        )

    def _score_chosen(self, name: str) -> None:
        if name and self.state.set_corpus_setup(score=name):
            self._draw_map()

    def basis(self) -> str:
        """What places and groups the heads alike: ``"scores"`` or ``"patterns"`` (:data:`ALIKE_BASES`)."""
        return str(self.alike_box.currentData())

    def _alike_chosen(self, _index: int) -> None:
        if self.state.set_corpus_setup(alike=self.basis()):
            self.alike.show_result(self._result, self.basis())
            self._draw_card()

    _host: CorpusHeadsJobs | None = None  # the tab's corpus jobs (``use_tab_jobs``)
    _result: HeadScores | None = None  # what the page draws (greyed when it is not the inputs' run)
    _result_key: tuple | None = None

    def use_tab_jobs(self, jobs) -> None:
        """The tab's corpus jobs, whose key says which run belongs to the inputs shown."""
        self._host = jobs.corpus

    def run_key(self):
        return self._host.key() if self._host is not None else None

    #: whether the next result drawn is sorted by induction with the top induction head's card open
    _feature_top = False

    def prepare_screenshot(self) -> None:
        """Sort by induction and open the card of the top induction head (once the run is in)."""
        self._feature_top = True
        self._show_top()

    def _show_top(self) -> None:
        res = self._result
        if self._feature_top and res is not None and "induction" in res.names:
            self._feature_top = False
            self.table.sort_by("induction")
            self.state.select(*res.top_heads("induction", 1)[0])

    # ---- drawing ---------------------------------------------------------------------------------
    def stale_covers(self) -> list[QWidget]:
        return [self.result_box]

    def refresh(self) -> None:
        st, key = self.state, self.run_key()
        model = self._host.session.model if self._host is not None else None
        if model is not None:
            self.tokens_spin.setMaximum(model.config.core.context_length)
        if self._host is not None and (edit := self.corpus_box.lineEdit()) is not None:
            edit.setPlaceholderText(f"the data: {self._host.corpus()}")
        res = st.corpus_result_for(key)
        if res is not None:
            if res is not self._result:
                self._result, self._result_key = res, key
                self._draw()
                self._show_top()
            took = "read back from the cache" if res.from_cache else f"run in {res.seconds:.1f} s"
            self._say(f"{run_text(res)}: {took}")
            if self.job_bar is not None:
                self.job_bar.set_stale(None)
            self.stale = False
            return
        error = st.corpus_error_for(key)
        ended = bool(error) or (self._host is not None and self._host.cancelled())  # nothing on its way
        if error:
            self._say(f'<span style="color:#a33">No run: {html.escape(error, quote=False)}</span>')
        elif ended:
            self._say("Cancelled: change an input to run again.")
        elif key is not None:
            self._say(f"Scoring every head over {html.escape(self._host.corpus() if self._host else '')}…")
        self._mark_old(key, cancelled=ended)
        self.stale = not ended and key is not None

    def on_job_ended(self, key: str, state: str) -> None:
        if state == "cancelled":
            self.refresh()  # the result shown stays greyed, under a line that says it was cancelled

    def _say(self, text: str) -> None:
        self.status_label.setText(text)

    def _mark_old(self, key, *, cancelled: bool) -> None:
        """Grey the result shown when it is not the run the inputs ask for, naming what it is of."""
        old, bar = self._result, self.job_bar
        if old is None or bar is None:
            return
        other_model = key is None or self._result_key is None or tuple(key[:2]) != tuple(self._result_key[:2])
        whose = " of the previous model" if other_model else ""
        note = f"Showing the run{whose} over {html.escape(run_text(old))}"
        if cancelled:
            bar.set_stale(f"{note}: not the inputs' run.", at_once=True)
        else:
            bar.set_stale(f"{note} until the new run is done.", at_once=other_model)

    def clear(self) -> None:
        self._result = self._result_key = None
        if self.built:
            self._draw()

    def _draw(self) -> None:
        res = self._result
        self.table.show_result(res)
        self._fit_table()
        names = list(res.names) if res is not None else []
        if [self.score_box.itemText(i) for i in range(self.score_box.count())] != names:
            self.score_box.blockSignals(True)
            self.score_box.clear()
            self.score_box.addItems(names)
            want = self.state.corpus_setup["score"]
            self.score_box.setCurrentIndex(names.index(want) if want in names else 0)
            self.score_box.blockSignals(False)
        self.csv_button.setEnabled(res is not None)
        self._draw_map()
        self.alike.show_result(self._result, self.basis())
        self._draw_card()

    def _draw_map(self) -> None:
        res, name = self._result, self.score_box.currentText()
        if res is None or name not in res.names:
            return
        L, H = res.shape
        m = np.asarray(res.score(name), dtype=np.float32)
        self.map_plot.set_matrix(
            m, [f"L{i}" for i in range(L)], [f"H{h}" for h in range(H)], legend_label=f"mean {name}"
        )
        low, high = res.interval(name)
        self.map_plot.describe = lambda r, c: (
            f"L{r}H{c} {name} {interval_text(m[r, c], low[r, c], high[r, c])}"
        )

    def on_head_selected(self, layer: int, head: int) -> None:
        self._draw_card()

    def _draw_card(self) -> None:
        res = self._result
        if res is None:
            self.card.setText(" ")
            self.examples_view.setHtml("")
            return
        L, H = res.shape
        layer, head = min(self.state.selected[0], L - 1), min(self.state.selected[1], H - 1)
        self.table.select_head(layer, head)
        self.alike.ring(layer, head)
        c = res.alike(self.basis())
        cluster = c.names[int(c.labels[layer, head])]
        values = (res.mean[:, layer, head], res.low[:, layer, head], res.high[:, layer, head])
        cells = " · ".join(
            f"{n} <b>{interval_text(float(m), float(lo), float(hi))}</b>"
            for n, m, lo, hi in zip(res.names, *values, strict=True)
        )
        router = router_text(res, layer)
        self.card.setText(
            f"<b>L{layer}H{head}</b>, cluster <b>{html.escape(cluster)}</b>: {cells}"
            + (f"<br>{router}" if router else "")
        )
        parts = []
        for kind, title in EXAMPLE_TITLES.items():
            ex, texts = res.examples[kind], res.example_texts[kind]
            parts.append(f"<p style='margin:4px 0 2px 0'><b>{title}</b></p>")
            for rank in range(min(CARD_EXAMPLES, ex.k)):
                p = int(ex.prompt[layer, head, rank])
                if p < 0:
                    continue
                value = float(ex.value[layer, head, rank])
                line = example_html(str(texts[layer, head, rank]))
                parts.append(
                    f"<div><a href='example:{kind}:{rank}'>{value:.2f} · prompt {p}</a>&nbsp; {line}</div>"
                )
        self.examples_view.setHtml("".join(parts))

    # ---- actions ---------------------------------------------------------------------------------
    def open_example(self, kind: str, rank: int) -> bool:
        """Open example ``rank`` of ``kind`` of the selected head: its prompt run in the Attention tab and
        that head shown large; False when its prompt cannot be drawn again."""
        res, host = self._result, self._host
        if res is None or host is None:
            return False
        layer, head = self.state.selected
        prompt = int(res.examples[kind].prompt[layer, head, rank])
        text = host.example_prompt(res, prompt) if prompt >= 0 else None
        if text is None:
            self._say("That example's corpus is not at hand: run it again to open its prompt.")
            return False
        self.state.request_prompt(text)
        self.openHeadRequested.emit(layer, head)
        return True

    def _example_clicked(self, url: QUrl) -> None:
        _, kind, rank = url.toString().split(":")
        self.open_example(kind, int(rank))

    def export_csv(self, path: str | Path) -> str:
        """Write the table shown as CSV (:meth:`~model.interp.corpus.HeadScores.csv`); the file."""
        from model.atomic import write_atomic

        assert self._result is not None
        write_atomic(path, self._result.csv())
        return str(path)

    def _csv_dialog(self) -> None:
        if self._result is None:
            return
        path, _ = QFileDialog.getSaveFileName(
            self, "Export the heads × scores table", "heads.csv", "CSV (*.csv)"
        )
        if path:
            self.export_csv(path)
            self._say(f"Wrote {html.escape(path)}")


def _under_chooser(label: str, chooser: QWidget, view: QWidget) -> QWidget:
    """``view`` under a row ``label`` + ``chooser`` (what it shows), in one box."""
    box = QWidget()
    lay = QVBoxLayout(box)
    lay.setContentsMargins(0, 0, 0, 0)
    row = QHBoxLayout()
    row.addWidget(QLabel(label))
    row.addWidget(chooser, 1)
    lay.addLayout(row)
    lay.addWidget(view, 1)
    return box


__all__ = ["CorpusHeadsPage", "run_text"]
