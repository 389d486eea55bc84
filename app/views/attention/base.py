"""What every page of the Attention tab shares: :class:`AttentionPage` (the tabs' page protocol,
``app.views.page``, over the tab's :class:`~app.views.attention.state.AttentionState`), a head
selector, and two small layout helpers.

A page builds its widgets on first use and draws from the state (``state.inspection``,
``state.selected``, ``state.metrics``, ...) in ``refresh``; it follows the state's signals, redrawing
when in view and only marking itself ``stale`` otherwise; a stale page refreshes when it comes into
view. So a new prompt costs the drawing of one page, whatever the number of pages.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractScrollArea,
    QApplication,
    QBoxLayout,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.core.jobs import JobBoard
from app.views.attention.job_keys import page_job_keys
from app.views.page import LazyPage
from app.widgets.job_bar import JobBar


class AttentionPage(LazyPage):
    """One page of the Attention tab: a :class:`~app.views.page.LazyPage` over an
    :class:`~app.views.attention.state.AttentionState`.

    The state's signals reach the ``on_*`` methods below (a page not built yet only becomes stale);
    a new inspection marks the page stale (the tab redraws the page in view). A page asks the tab to
    open a head large with ``openHeadRequested(layer, head)``, and to run a prompt with the state's
    ``request_prompt(text)``.
    """

    openHeadRequested = Signal(int, int)

    #: whether the page draws the selected head's pipeline (raw and scaled scores)
    needs_head_detail = False
    #: whether the page needs the aggregates job
    needs_aggregates = False
    #: whether those aggregates must include attention rollout (the Rollout page)
    needs_rollout = False
    #: whether the page needs the next-token table (ranked over the vocabulary when shown)
    needs_next_tokens = False
    #: the causal tool the page shows ("patching", "attribution"), whose job it needs
    needs_causal: str | None = None
    #: whether the page needs the experts the router chose per token (a mixture of experts)
    needs_experts = False
    #: whether the page needs the circuits of the weights, the selected head's full circuits and the
    #: path patching of the sender (the Circuits page)
    needs_circuits = False
    #: whether the page needs the Q–K map of its head over a corpus and every head's thumbnail
    needs_qk_map = False
    #: whether the page needs every head scored over a corpus (the Heads-over-a-corpus page)
    needs_corpus_heads = False
    #: whether the page reads every head's pattern at once (a long prompt's are not held: the tab
    #: shows :meth:`~app.views.attention.state.AttentionState.shorter_prompt_note` instead)
    needs_every_pattern = False
    #: the follow-up jobs the page shows besides those its needs say (``"ablation"``, ``"metrics"``)
    own_jobs: tuple[str, ...] = ()

    @staticmethod
    def applies_to(config) -> bool:
        """Whether the page has something to show for a model of ``config`` (the tab hides it
        otherwise: the Experts page for a dense model)."""
        return True

    def __init__(self, state, parent: QWidget | None = None):
        super().__init__(state, parent)
        #: the session's job board and the tab's Cancel (:meth:`use_jobs`); the page's busy line
        self._board: JobBoard | None = None
        self._cancel_job: Callable[[str], bool] = lambda _key: False
        self.job_bar: JobBar | None = None
        #: the line shown instead of the widgets (made when first needed), and the widgets it hides
        self._long_note: QLabel | None = None
        self._hidden_for_note: list[QWidget] = []
        state.inspection_changed.connect(self._mark_stale)
        self.follow(state.selection_changed, self.on_head_selected)
        self.follow(state.head_detail_changed, self.on_head_detail)
        self.follow(state.metrics_changed, self.on_metrics)
        self.follow(state.ablation_changed, self.on_ablation)
        self.follow(state.ablation_result_changed, self.on_ablation_result)
        self.follow(state.aggregates_changed, self.on_aggregates)
        self.follow(state.next_tokens_changed, self.on_next_tokens)
        self.follow(state.causal_changed, self.on_causal)
        self.follow(state.experts_changed, self.on_experts)
        self.follow(state.circuits_changed, self.on_circuits)
        self.follow(state.cleared, self.clear)

    def use_tab_jobs(self, jobs) -> None:
        """The tab's :class:`~app.views.attention.jobs.AttentionJobs`, for a page whose inputs key its
        own jobs (the Q–K map, the corpus run): nothing by default."""

    def use_jobs(self, board: JobBoard, cancel: Callable[[str], bool]) -> None:
        """The board the page's jobs are announced on and how to cancel one (the tab's, before build)."""
        self._board, self._cancel_job = board, cancel

    def ensure_built(self) -> None:
        """Build the page; a page that waits for jobs of its own gets its busy line under its blurb."""
        if self.built:
            return
        super().ensure_built()
        keys = page_job_keys(self)
        lay = self.layout()
        if keys and self._board is not None and isinstance(lay, QBoxLayout):
            self.job_bar = JobBar(self._board, keys, cancel=self._cancel_job)
            self.job_bar.jobEnded.connect(self.on_job_ended)
            self.job_bar.cover(*self.stale_covers())  # greyed while its numbers are another input's
            self.job_bar.float_over(self)

    def stale_covers(self) -> list[QWidget]:
        """What shows the page's result (greyed while it belongs to another input): the page by default;
        a page with inputs of its own names its results, so the inputs stay as they are."""
        return [self]

    def on_job_ended(self, key: str, state: str) -> None:
        """One of the page's jobs ended (``state``: done, failed, cancelled, superseded)."""

    def __init_subclass__(cls, **kwargs):
        """A page that reads every head's pattern draws, on a streamed run, one line instead."""
        super().__init_subclass__(**kwargs)
        draw = cls.__dict__.get("refresh")
        if draw is None:
            return

        def refresh(self) -> None:
            if (
                self.needs_every_pattern
                and self.state.inspection is not None
                and not self.state.patterns_held
            ):
                self._note_instead(self.state.shorter_prompt_note(f"The {self.title} page"))
                self.stale = False
                return
            self._note_instead(None)
            draw(self)

        refresh.__doc__ = draw.__doc__
        setattr(cls, "refresh", refresh)  # noqa: B010 (a method replaced on the class, as mypy allows it)

    def _note_instead(self, text: str | None) -> None:
        """Show ``text`` in place of the page's widgets (None: the widgets again)."""
        lay = self.layout()
        note = self._long_note
        if text is None:
            if note is not None and note.isVisible():
                note.hide()
                for w in self._hidden_for_note:
                    w.show()
            return
        if not isinstance(lay, QBoxLayout):
            return  # not built (or not a column of widgets)
        if note is None:
            note = self._long_note = QLabel()
            note.setWordWrap(True)
            note.setStyleSheet("color: #a33; padding: 8px;")
            lay.insertWidget(0, note)
        note.setText(text)
        if not note.isVisible():
            self._hidden_for_note = []
            for i in range(lay.count()):
                item = lay.itemAt(i)
                widget = item.widget() if item is not None else None
                if widget is not None and widget is not note and not widget.isHidden():
                    widget.hide()
                    self._hidden_for_note.append(widget)
            note.show()

    @property
    def long_note(self) -> str:
        """The line shown instead of the page ('' when the page draws)."""
        note = self._long_note
        return note.text() if note is not None and not note.isHidden() else ""

    def _mark_stale(self, _inspection) -> None:
        self.stale = True

    # what the state announces (override what the page shows)
    def on_head_selected(self, layer: int, head: int) -> None:
        pass

    def on_head_detail(self, detail) -> None:
        pass

    def on_metrics(self) -> None:
        pass

    def on_ablation(self, heads: dict) -> None:
        pass

    def on_ablation_result(self, result) -> None:
        pass

    def on_aggregates(self, result) -> None:
        pass

    def on_next_tokens(self, table) -> None:
        pass

    def on_causal(self, kind: str, result) -> None:
        pass

    def on_experts(self, choice) -> None:
        pass

    def on_circuits(self, kind: str, result) -> None:
        pass

    def numbers(self) -> tuple[dict, dict] | None:
        """What "This page's numbers" exports: (arrays for .npz, {name: (matrix, row labels, column
        labels, corner)} for CSV); None when the page has none (yet)."""
        return None


class HeadSelector(QWidget):
    """Layer and head spin boxes with ◀ ▶ (previous/next head across layers); ``changed(layer, head)``."""

    changed = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        self.prev_button = QToolButton()
        self.prev_button.setText("◀")
        self.prev_button.setToolTip("previous head")
        self.next_button = QToolButton()
        self.next_button.setText("▶")
        self.next_button.setToolTip("next head")
        self.layer_spin = QSpinBox()
        self.head_spin = QSpinBox()
        self.layer_spin.setPrefix("layer ")
        self.head_spin.setPrefix("head ")
        for w in (self.prev_button, self.layer_spin, self.head_spin, self.next_button):
            lay.addWidget(w)
        self._quiet = False
        self._shape = (1, 1)
        self.layer_spin.valueChanged.connect(self._emit)
        self.head_spin.valueChanged.connect(self._emit)
        self.prev_button.clicked.connect(lambda: self._step(-1))
        self.next_button.clicked.connect(lambda: self._step(1))

    def set_shape(self, n_layers: int, n_heads: int) -> None:
        self._quiet = True
        try:
            self._shape = (max(1, n_layers), max(1, n_heads))
            self.layer_spin.setRange(0, self._shape[0] - 1)
            self.head_spin.setRange(0, self._shape[1] - 1)
        finally:
            self._quiet = False

    def set_head(self, layer: int, head: int) -> None:
        self._quiet = True
        try:
            self.layer_spin.setValue(layer)
            self.head_spin.setValue(head)
        finally:
            self._quiet = False

    def head(self) -> tuple[int, int]:
        return self.layer_spin.value(), self.head_spin.value()

    def _step(self, d: int) -> None:
        L, H = self._shape
        i = (self.layer_spin.value() * H + self.head_spin.value() + d) % (L * H)
        self.set_head(i // H, i % H)
        self.changed.emit(*self.head())

    def _emit(self, *_):
        if not self._quiet:
            self.changed.emit(*self.head())


class Holder(QWidget):
    """A plain widget around ``view`` (in a column, ``column``): what a page offers for export (File →
    Export writes a plain widget with ``QSvgGenerator``; pyqtgraph's own SVG exporter fails on Qt
    6.11's path data)."""

    def __init__(self, view: QWidget):
        super().__init__()
        self.column = QVBoxLayout(self)
        self.column.setContentsMargins(0, 0, 0, 0)
        self.column.addWidget(view)
        self.view = view


def holder(view: QWidget) -> Holder:
    """A :class:`Holder` around ``view``."""
    return Holder(view)


class WheelScrollsPage(QObject):
    """Sends the wheel turned over a view's viewport to a scroll area's vertical bar: plots that do
    not zoom (a page's stages, its maps) let the page scroll under the pointer, where the view would
    take the wheel and nothing move. Made by :func:`wheel_scrolls_page`."""

    def __init__(self, viewport: QWidget, scroll_area: QAbstractScrollArea):
        super().__init__(viewport)
        self.scroll_area = scroll_area
        viewport.installEventFilter(self)

    def eventFilter(self, obj, event) -> bool:
        if event.type() == QEvent.Type.Wheel:
            QApplication.sendEvent(self.scroll_area.verticalScrollBar(), event)
            return True
        return False


def wheel_scrolls_page(view, scroll_area: QAbstractScrollArea) -> WheelScrollsPage:
    """The wheel over ``view`` (a ``QGraphicsView``) scrolls ``scroll_area`` (see
    :class:`WheelScrollsPage`)."""
    return WheelScrollsPage(view.viewport(), scroll_area)


def blurb_label(text: str) -> QLabel:
    lab = QLabel(text)
    lab.setWordWrap(True)
    lab.setStyleSheet("color: #444;")
    return lab


def lines_label(lines: int, *, rich: bool = True, colour: str = "") -> QLabel:
    """A word-wrapped label exactly ``lines`` lines tall: new text never moves the plots around it (a
    label that grew or shrank re-laid the page out and repainted every plot, ~40 ms)."""
    lab = QLabel(" ")
    lab.setWordWrap(True)
    if rich:
        lab.setTextFormat(Qt.TextFormat.RichText)
    if colour:
        lab.setStyleSheet(f"color: {colour};")
    lab.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
    lab.setFixedHeight(lab.fontMetrics().lineSpacing() * lines + 4)
    lab.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
    return lab


__all__ = [
    "AttentionPage",
    "HeadSelector",
    "Holder",
    "WheelScrollsPage",
    "blurb_label",
    "holder",
    "lines_label",
    "wheel_scrolls_page",
]
