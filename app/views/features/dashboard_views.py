"""What the Features page draws: the table of features and one feature's dashboard.

:class:`FeatureTable` lists every feature of the corpus pass (index, firing frequency, largest
activation, the token its decoder direction promotes most, and for a ``z`` SAE the head writing most of
it with its share of ``‖W_dec,i‖²``), sortable by any column by its number. :class:`Dashboard` draws
one :class:`~model.interp.sae.dashboard.FeatureDashboard`, as Neuronpedia's: the top-activating
examples with the activating token highlighted, the activation histogram, the tokens promoted and
suppressed through the unembedding, and for ``z`` the share of the decoder norm per head and, for the
example chosen, the source tokens each writing head attended to (``A_h[t, s] (v_h[s] · W_enc[h, i])``,
summing with the bias to the pre-activation).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QUrl, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.widgets.axes import style_plot
from model.interp.sae.dashboard import FeatureDashboard, FeatureStats
from model.text.datasource import DataSource
from model.text.tokens import visible

#: The highlight of the activating token (and of a source token's weight, by its opacity).
HIGHLIGHT = "#f6c342"
#: Source tokens listed per writing head.
TOP_SOURCES = 3


@dataclass
class FeatureList:
    """What the corpus pass gives the table: the stats, the corpus it read (to draw prompts again), the
    token each feature promotes most, and for ``z`` its head shares [F, H] (else None)."""

    stats: FeatureStats
    source: DataSource
    promoted: list[str]
    shares: np.ndarray | None


@dataclass
class DashboardData:
    """A feature's dashboard and, per top example, its prompt's token texts (for the sources)."""

    dashboard: FeatureDashboard
    prompts: list[list[str]]


class NumberItem(QTableWidgetItem):
    """A cell shown as text and sorted by its number."""

    def __init__(self, text: str, number: float):
        super().__init__(text)
        self.number = float(number)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        return self.number < getattr(other, "number", 0.0)


class FeatureTable(QTableWidget):
    """Every feature of a :class:`FeatureList` (module docstring); ``featureChosen(i)`` on a click."""

    featureChosen = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(0, 6, parent)
        self.setHorizontalHeaderLabels(["feature", "fires", "max", "promotes", "head", "share"])
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.itemSelectionChanged.connect(self._chosen)
        self._quiet = False
        self.show_list(None, 0)

    def show_list(self, fl: FeatureList | None, layer: int) -> None:
        self._quiet = True
        self.setSortingEnabled(False)
        self.setRowCount(0)
        if fl is not None:
            st = fl.stats
            freq, top = st.frequency, st.max_activation
            self.setRowCount(st.n_features)
            for i in range(st.n_features):
                cells = [
                    NumberItem(str(i), i),
                    NumberItem(f"{freq[i]:.2%}", freq[i]),
                    NumberItem(f"{top[i]:.3g}", top[i]),
                    QTableWidgetItem(visible(fl.promoted[i])),
                ]
                if fl.shares is not None:
                    h = int(np.argmax(fl.shares[i]))
                    cells += [
                        NumberItem(f"L{layer}H{h}", h),
                        NumberItem(f"{fl.shares[i, h]:.0%}", fl.shares[i, h]),
                    ]
                else:
                    cells += [NumberItem("—", 0), NumberItem("—", 0)]
                for c, item in enumerate(cells):
                    self.setItem(i, c, item)
            self.setSortingEnabled(True)
            self.sortItems(1, Qt.SortOrder.DescendingOrder)
        self.setColumnHidden(4, fl is None or fl.shares is None)
        self.setColumnHidden(5, fl is None or fl.shares is None)
        self._quiet = False
        self.resizeColumnsToContents()
        # never narrower than its columns: none cut, no sideways scrolling
        bar = self.verticalScrollBar().sizeHint().width()
        self.setMinimumWidth(self.horizontalHeader().length() + bar + 2 * self.frameWidth() + 8)

    def select_feature(self, feature: int) -> None:
        """Select the row of ``feature`` (sorted or not) and bring it into view."""
        for r in range(self.rowCount()):
            item = self.item(r, 0)
            if item is not None and int(item.text()) == feature:
                self.selectRow(r)
                self.scrollToItem(item)
                return

    def selected_feature(self) -> int | None:
        rows = self.selectionModel().selectedRows() if self.selectionModel() else []
        item = self.item(rows[0].row(), 0) if rows else None
        return int(item.text()) if item is not None else None

    def _chosen(self) -> None:
        i = self.selected_feature()
        if i is not None and not self._quiet:
            self.featureChosen.emit(i)


def split_marked(text: str) -> tuple[str, str, str]:
    """An example line ``before⟦token⟧after`` as (before, token, after)."""
    before, _, rest = text.partition("⟦")
    token, _, after = rest.partition("⟧")
    return before, token, after


def example_html(text: str) -> str:
    before, token, after = (html.escape(t, quote=False) for t in split_marked(text))
    return f"{before}<span style='background:{HIGHLIGHT}'><b>{token}</b></span>{after}"


class Dashboard(QWidget):
    """One feature's page (module docstring); a click on an example shows its source tokens."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.data: DashboardData | None = None
        self.example = 0
        self.layer = 0
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.header = QLabel(" ")
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.header)
        self.examples_view = QTextBrowser()
        self.examples_view.setOpenLinks(False)
        self.examples_view.anchorClicked.connect(self._example_clicked)
        lay.addWidget(self.examples_view, 3)
        plots = pg.GraphicsLayoutWidget()
        plots.setMinimumHeight(140)
        self.hist_plot = style_plot(plots.addPlot(row=0, col=0), "activations when firing", "activation")
        self.hist_bars = pg.BarGraphItem(x0=[], x1=[], height=[], brush=(60, 110, 180))
        self.hist_plot.addItem(self.hist_bars)
        self.share_plot = style_plot(plots.addPlot(row=0, col=1), "share of ‖W_dec‖² by head")
        self.share_bars = pg.BarGraphItem(x=[], height=[], width=0.7, brush=(200, 120, 40))
        self.share_plot.addItem(self.share_bars)
        self.plots = plots
        lay.addWidget(plots, 2)
        self.logits_label = QLabel(" ")
        self.logits_label.setWordWrap(True)
        self.logits_label.setTextFormat(Qt.TextFormat.RichText)
        lay.addWidget(self.logits_label)
        self.sources_view = QTextBrowser()
        lay.addWidget(self.sources_view, 2)

    def show_data(self, data: DashboardData | None, layer: int) -> None:
        self.data, self.example, self.layer = data, 0, layer
        if data is None:
            for w in (self.header, self.logits_label):
                w.setText(" ")
            self.examples_view.setHtml("")
            self.sources_view.setHtml("")
            self.hist_bars.setOpts(x0=[], x1=[], height=[])
            self.share_bars.setOpts(x=[], height=[])
            return
        d = data.dashboard
        self.header.setText(
            f"<b>Feature {d.feature}</b>: fires on {d.frequency:.2%} of tokens, mean {d.mean_activation:.3g} "
            f"when it fires, max {d.max_activation:.3g}"
        )
        lines = [
            f"<div><a href='ex:{r}'>{v:.3g} · prompt {n}, position {p}</a>&nbsp; {example_html(text)}</div>"
            for r, (v, n, p, text) in enumerate(d.examples)
        ]
        self.examples_view.setHtml("".join(lines) or "<i>It never fired on these prompts.</i>")
        counts, edges = d.histogram
        self.hist_bars.setOpts(x0=edges[:-1], x1=edges[1:], height=np.asarray(counts, dtype=np.float64))
        words = lambda ts: " ".join(f"<code>{html.escape(visible(t), quote=False)}</code>" for t in ts)  # noqa: E731
        self.logits_label.setText(
            f"<b>Promotes</b> {words(d.promoted)}<br><b>Suppresses</b> {words(d.suppressed)}"
        )
        self.share_plot.setVisible(d.head_shares is not None)
        if d.head_shares is not None:
            H = len(d.head_shares)
            self.share_bars.setOpts(x=np.arange(H), height=np.asarray(d.head_shares, dtype=np.float64))
            self.share_plot.getAxis("bottom").setTicks([[(h, f"L{layer}H{h}") for h in range(H)]])
            self.share_plot.setYRange(0, 1)
        self.show_example(0)

    def highlighted(self, rank: int = 0) -> str:
        """The activating token of example ``rank`` as the dashboard marks it."""
        assert self.data is not None
        return split_marked(self.data.dashboard.examples[rank][3])[1]

    def show_example(self, rank: int) -> None:
        """The source tokens the writing heads attended to for example ``rank`` (a ``z`` SAE)."""
        self.example = rank
        data = self.data
        if data is None or not data.dashboard.sources or rank >= len(data.dashboard.sources):
            note = "<i>Source tokens: for an SAE on z, of a top example.</i>"
            self.sources_view.setHtml(note if data else "")
            return
        src, tokens = data.dashboard.sources[rank], data.prompts[rank]
        c = src.contributions  # [H, t+1]
        per_head = c.sum(axis=1)
        scale = float(np.abs(c).max()) or 1.0
        parts = [
            f"<p>Example {rank} (position {src.position}): pre-activation {src.pre_activation:.3g} = "
            f"heads {per_head.sum():.3g} + bias {src.bias:.3g}; each head's source tokens, "
            "shaded by their part A·(v·W_enc):</p>"
        ]
        for h in np.argsort(-np.abs(per_head))[: min(4, len(per_head))]:
            row = c[h]
            top = np.argsort(-row)[:TOP_SOURCES]
            named = ", ".join(f"{html.escape(visible(tokens[s]))}@{s} {row[s]:+.3g}" for s in top)
            cells = "".join(
                f"<span style='background:rgba(220,60,40,{max(0.0, v) / scale:.2f})'>"
                f"{html.escape(visible(tokens[s]), quote=False)}</span>"
                for s, v in enumerate(row)
            )
            parts.append(f"<p><b>L{self.layer}H{h}</b> {per_head[h]:+.3g} ({named})<br>{cells}</p>")
        self.sources_view.setHtml("".join(parts))

    def _example_clicked(self, url: QUrl) -> None:
        self.show_example(int(url.toString().split(":")[1]))


__all__ = ["Dashboard", "DashboardData", "FeatureList", "FeatureTable", "example_html", "split_marked"]
