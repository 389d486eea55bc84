"""The Attention tab: type a prompt, see every head, and take any head apart.

Layout: the prompt box (with the token count and timings) on top, a banner while heads are switched
off, then the pages (``app/views/attention/``): Heads (the L×H grid), Head (one head large), Pipeline,
Lines, Token focus, Aggregates, Metrics, Ablation, Next token. With no model yet the tab says so and
offers to build the default one.

Computation. Typing re-runs the prompt after :attr:`AttentionTab.DEBOUNCE_MS` of quiet, on the
session's current model, in the session's :class:`~app.workers.ComputeWorker` (off the GUI thread,
under the shared compute lock). Every run gets a request number; a job whose request is no longer
the newest returns at once when it starts, and a result that is no longer the newest is dropped,
so a newer prompt always supersedes an older one. The main job (``attention.inspect``) traces the
attention weights of every head and ranks the next tokens; follow-up jobs, each superseded the same
way, measure what only some pages show: the selected head's pipeline (``attention.head``), the head
metrics (``attention.metrics``), the ablation effect (``attention.ablation``) and the aggregates
(``attention.aggregate``). Only the page in view is redrawn; the others redraw when shown.

Signals for tests and benchmarks: ``inspected(Inspection)`` once the page in view shows a new run;
``headDetailReady``, ``metricsReady``, ``ablationReady``, ``aggregatesReady``; ``exported(path)``
and ``failed(message)``.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.views.attention.ablation_page import AblationPage
from app.views.attention.aggregate_page import AggregatePage
from app.views.attention.base import Page
from app.views.attention.compute import (
    PromptError,
    ablation_of,
    aggregates_of,
    encode_prompt,
    export_arrays,
    head_detail,
    head_metrics_of,
    inspect_prompt,
    pick_threads,
    validation_batches,
    with_threads,
)
from app.views.attention.export import write_head_csv, write_npz, write_png, write_svg
from app.views.attention.focus_page import FocusPage
from app.views.attention.grid_page import ROLE_SHORT, GridPage
from app.views.attention.head_page import HeadPage
from app.views.attention.lines_page import LinesPage
from app.views.attention.metrics_page import MetricsPage
from app.views.attention.next_token_page import NextTokenPage
from app.views.attention.pipeline_page import PipelinePage

_ERROR_STYLE = "color: #b00020;"
_NOTE_STYLE = "color: #444;"
#: key prefix of the follow-up jobs of one run (metrics, head detail, ...): a new run cancels them
FOLLOW_UPS = "attention.run."


class AttentionTab(QWidget):
    """The Attention inspector; see the module docstring. Constructed as ``AttentionTab(session)``."""

    inspected = Signal(object)
    headDetailReady = Signal(object)
    metricsReady = Signal(object)
    ablationReady = Signal(object)
    aggregatesReady = Signal(object)
    exported = Signal(str)
    failed = Signal(str)

    #: quiet time after the last keystroke before the prompt runs (ms)
    DEBOUNCE_MS = 40
    #: while training, re-run the prompt at most this often (s) when "Follow training" is on
    FOLLOW_INTERVAL_S = 1.0

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        from model.analysis.heads import HeadThresholds

        self.session = session
        self.inspection = None
        self.selected: tuple[int, int] = (0, 0)
        self.ablation: dict[tuple[int, int], str] = {}
        self.head_detail_entry = None  # (request, layer, head, HeadPipeline)
        self.metrics = None
        self.classification = None
        self.thresholds = HeadThresholds()
        self.ablation_result = None
        self.aggregates = None
        self.timings: dict[str, float] = {}
        self._request = 0
        self._dirty = True
        self._edit_started: float | None = None
        self._last_follow = 0.0
        self._settings = None
        self._val_cache: dict = {}
        self.head_tips: dict[tuple[int, int], str] = {}
        self._threads: int | None = 1

        root = QVBoxLayout(self)
        root.addLayout(self._build_prompt_row())
        self.banner = self._build_banner()
        root.addWidget(self.banner)
        self.stack = QStackedWidget()
        self.empty = self._build_empty()
        self.stack.addWidget(self.empty)
        self.page_tabs = QTabWidget()
        self.page_tabs.setDocumentMode(True)
        self.pages: dict[str, Page] = {}
        for cls in (
            GridPage,
            HeadPage,
            PipelinePage,
            LinesPage,
            FocusPage,
            AggregatePage,
            MetricsPage,
            AblationPage,
            NextTokenPage,
        ):
            page = cls(self)
            self.pages[page.key] = page
            self.page_tabs.addTab(page, page.title)
            if page.blurb:
                self.page_tabs.setTabToolTip(self.page_tabs.count() - 1, page.blurb)
        self.stack.addWidget(self.page_tabs)
        root.addWidget(self.stack, 1)
        self.current_page.ensure_built()

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(self.DEBOUNCE_MS)
        self._debounce.timeout.connect(self.run_inspection)
        self.prompt_edit.textChanged.connect(self._on_text_changed)
        self.page_tabs.currentChanged.connect(self._on_page_changed)

        s = session
        s.modelChanged.connect(self._on_model_changed)
        s.trainingFinished.connect(lambda *_: self._mark_dirty())
        s.traceUpdated.connect(self._on_training_frame)
        s.probePromptChanged.connect(self._on_probe_prompt)
        if session.probe_prompt:
            self.set_prompt(session.probe_prompt, run=False)
        self._update_empty()

    # ---- construction --------------------------------------------------------------------------
    def _build_prompt_row(self) -> QHBoxLayout:
        row = QHBoxLayout()
        label = QLabel("Prompt")
        label.setAlignment(Qt.AlignmentFlag.AlignTop)
        row.addWidget(label)
        self.prompt_edit = QPlainTextEdit()
        self.prompt_edit.setObjectName("attentionPrompt")
        self.prompt_edit.setPlaceholderText(
            "Type text to run through the model; every view follows as you type."
        )
        self.prompt_edit.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.prompt_edit.setTabChangesFocus(True)
        self.prompt_edit.setFixedHeight(self.prompt_edit.fontMetrics().lineSpacing() * 4 + 14)
        row.addWidget(self.prompt_edit, 1)
        side = QVBoxLayout()
        self.status_label = QLabel(" ")
        self.status_label.setWordWrap(True)
        self.status_label.setMinimumWidth(300)
        self.status_label.setMaximumWidth(420)
        self.status_label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        side.addWidget(self.status_label)
        buttons = QHBoxLayout()
        self.follow_box = QCheckBox("Follow training")
        self.follow_box.setChecked(True)
        self.follow_box.setToolTip(
            f"while the model trains, re-run the prompt on the newest weights (at most every "
            f"{self.FOLLOW_INTERVAL_S:g} s)"
        )
        self.refresh_button = QPushButton("Run again")
        self.refresh_button.setToolTip("run the prompt through the current weights now")
        self.refresh_button.clicked.connect(self.run_inspection)
        self.export_button = QToolButton()
        self.export_button.setText("Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        menu = QMenu(self.export_button)
        self.export_actions: dict[str, QAction] = {}
        for key, text, slot in (
            ("png", "This view as PNG…", lambda: self.export_view_dialog("png")),
            ("svg", "This view as SVG…", lambda: self.export_view_dialog("svg")),
            ("npz", "The prompt's tensors as .npz…", self.export_npz_dialog),
            ("csv", "The selected head as CSV…", self.export_head_csv_dialog),
        ):
            act = menu.addAction(text)
            act.triggered.connect(lambda _=False, slot=slot: slot())
            self.export_actions[key] = act
        self.export_button.setMenu(menu)
        for w in (self.follow_box, self.refresh_button, self.export_button):
            buttons.addWidget(w)
        buttons.addStretch(1)
        side.addLayout(buttons)
        side.addStretch(1)
        row.addLayout(side)
        return row

    def _build_banner(self) -> QFrame:
        frame = QFrame()
        frame.setObjectName("ablationBanner")
        frame.setStyleSheet(
            "#ablationBanner { background: #fff1e0; border: 1px solid #e0a050; border-radius: 4px; }"
        )
        lay = QHBoxLayout(frame)
        lay.setContentsMargins(8, 3, 8, 3)
        self.banner_label = QLabel(" ")
        lay.addWidget(self.banner_label, 1)
        self.banner_restore = QPushButton("Restore all heads")
        self.banner_restore.clicked.connect(self.restore_heads)
        lay.addWidget(self.banner_restore)
        frame.setVisible(False)
        return frame

    def _build_empty(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        lay.addStretch(1)
        msg = QLabel(
            "<h3>No model to inspect yet</h3>"
            "<p>The Attention tab runs your prompt through the current model and shows what every head "
            "does. Train a model in the <b>Train</b> tab, open a saved one with <b>File → Open "
            "checkpoint…</b>, or build the default model now (4 layers × 4 heads, untrained: its heads "
            "spread attention evenly until it learns).</p>"
        )
        msg.setWordWrap(True)
        msg.setAlignment(Qt.AlignmentFlag.AlignCenter)
        msg.setMaximumWidth(640)
        self.build_button = QPushButton("Build the default model")
        self.build_button.clicked.connect(self.build_default_model)
        self.empty_error = QLabel(" ")
        self.empty_error.setStyleSheet(_ERROR_STYLE)
        self.empty_error.setWordWrap(True)
        for widget in (msg, self.build_button, self.empty_error):
            h = QHBoxLayout()
            h.addStretch(1)
            h.addWidget(widget)
            h.addStretch(1)
            lay.addLayout(h)
        lay.addStretch(2)
        return w

    # ---- state helpers -------------------------------------------------------------------------
    @property
    def current_page(self) -> Page:
        return self.page_tabs.currentWidget()

    def page(self, key: str) -> Page:
        return self.pages[key]

    def show_page(self, key: str) -> Page:
        page = self.pages[key]
        page.ensure_built()
        self.page_tabs.setCurrentWidget(page)
        return page

    def prompt(self) -> str:
        return self.prompt_edit.toPlainText()

    def set_prompt(self, text: str, *, run: bool = True) -> None:
        """Put ``text`` in the prompt box; ``run`` runs it (after the debounce) like typing does."""
        if text == self.prompt():
            if run:
                self.schedule()
            return
        self.prompt_edit.blockSignals(True)
        self.prompt_edit.setPlainText(text)
        self.prompt_edit.blockSignals(False)
        self._dirty = True
        if run:
            self.schedule()

    def _set_status(self, text: str, *, error: bool = False) -> None:
        self.status_label.setStyleSheet(_ERROR_STYLE if error else _NOTE_STYLE)
        self.status_label.setText(text)

    def _update_empty(self) -> None:
        has_model = self.session.model is not None
        self.stack.setCurrentWidget(self.page_tabs if has_model else self.empty)
        self.prompt_edit.setEnabled(True)
        for w in (self.refresh_button, self.export_button):
            w.setEnabled(has_model)
        if not has_model:
            self._set_status("No model yet: build or load one to inspect it.")

    def build_default_model(self) -> None:
        """Build the default (untrained) model: default data and config if none is chosen."""
        s = self.session
        self.empty_error.setText(" ")
        try:
            if s.source is None or s.train_settings is None:
                s.init_default()
            else:
                s.build_model()
        except Exception as exc:
            self.empty_error.setText(f"Could not build the model: {exc}")

    # ---- running the prompt --------------------------------------------------------------------
    def _on_text_changed(self) -> None:
        if self._edit_started is None:
            self._edit_started = time.perf_counter()
        self._dirty = True
        self._debounce.start()

    def schedule(self) -> None:
        """Run the prompt after the debounce (or when the tab is next shown)."""
        self._dirty = True
        if self.isVisible():
            self._debounce.start()

    def _mark_dirty(self) -> None:
        self._dirty = True
        if self.isVisible():
            self._debounce.start()

    def showEvent(self, event):  # noqa: N802 (Qt naming)
        super().showEvent(event)
        if self._dirty:
            self._debounce.start()

    def on_activated(self) -> None:
        if self._dirty and self.session.model is not None:
            self._debounce.start()

    def run_inspection(self) -> int | None:
        """Run the prompt now on the current model; returns the request number (None if it cannot)."""
        self._debounce.stop()
        s = self.session
        model, tok = s.model, s.tokenizer
        self._update_empty()
        if model is None or tok is None:
            return None
        if not self.prompt() and s.probe_prompt:
            self.set_prompt(s.probe_prompt, run=False)
        try:
            ids, dropped = encode_prompt(tok, self.prompt(), model.config.context_length)
        except PromptError as exc:
            self._edit_started = None
            self._set_status(str(exc), error=True)
            self.failed.emit(str(exc))
            return None
        self._dirty = False
        self._request += 1
        req = self._request
        ablate = dict(self.ablation)
        prompt = self.prompt()
        t_submit = time.perf_counter()
        t_edit = self._edit_started
        self._edit_started = None
        key = (id(model), s.step)
        self._threads = pick_threads(model, len(ids), training=s.is_training)
        run = with_threads(
            self._threads,
            lambda: inspect_prompt(
                model, tok, ids, ablate=ablate, request=req, prompt=prompt, dropped=dropped, model_key=key
            ),
        )

        s.compute.cancel(FOLLOW_UPS)  # the older run's follow-up jobs are stale now
        s.compute.submit(
            "attention.inspect", run, lambda res, err: self._on_inspection(res, err, req, t_submit, t_edit)
        )
        return req

    def _on_inspection(self, res, err, req: int, t_submit: float, t_edit: float | None) -> None:
        if err is not None:
            msg = f"Could not run the prompt: {err}"
            self._set_status(msg, error=True)
            self.failed.emit(msg)
            return
        prev = self.inspection
        self.inspection = res
        L, H = res.n_layers, res.n_heads
        if prev is None or (prev.n_layers, prev.n_heads) != (L, H):
            self.metrics = self.classification = None
            self.selected = (min(self.selected[0], L - 1), min(self.selected[1], H - 1))
        self.aggregates = None
        for page in self.pages.values():
            page.stale = True
        t0 = time.perf_counter()
        self.current_page.ensure_built()
        self.current_page.refresh()
        t1 = time.perf_counter()
        self.timings = {
            "trace_ms": res.seconds * 1e3,
            "draw_ms": (t1 - t0) * 1e3,
            "total_ms": (t1 - t_submit) * 1e3,
        }
        if t_edit is not None:
            self.timings["edit_to_draw_ms"] = (t1 - t_edit) * 1e3
        self._show_run_status(res)
        self.inspected.emit(res)
        self._follow_up()

    def _show_run_status(self, res) -> None:
        cfg = res.config
        parts = [f"{res.T} tokens · {cfg.n_layers} layers × {cfg.n_heads} heads"]
        parts.append(
            f"traced in {self.timings['trace_ms']:.0f} ms, drawn in {self.timings['draw_ms']:.0f} ms"
        )
        text = " · ".join(parts)
        if res.dropped:
            text += (
                f"<br>The first {res.dropped} tokens were left out: the model reads at most "
                f"{cfg.context_length} (its context length)."
            )
        if res.block > 1:
            text += (
                f"<br>Long prompt: the Heads overview shows the largest weight of each "
                f"{res.block}×{res.block} block; open a head for every token."
            )
        if self.session.is_training:
            text += f"<br>Weights of training step {self.session.step}."
        self._set_status(text)

    def _follow_up(self) -> None:
        """The jobs the new run makes due: metrics always, the rest for the page in view."""
        self.request_metrics()
        if self.ablation:
            self.request_ablation()
        page = self.current_page
        if page.needs_head_detail:
            self.request_head_detail()

    # ---- follow-up jobs ------------------------------------------------------------------------
    def _submit(self, key: str, fn, on_result) -> None:
        """A follow-up job of the current run: superseded by the next one with ``key`` or the next run."""

        def done(res, err):
            if err is not None:
                msg = f"{key.split('.')[-1]} failed: {err}"
                self._set_status(msg, error=True)
                self.failed.emit(msg)
                return
            if res is not None:
                on_result(res)

        self.session.compute.submit(FOLLOW_UPS + key, with_threads(self._threads, fn), done)

    def head_detail_for_selected(self):
        """The selected head's :class:`~model.analysis.pipeline.HeadPipeline` for the current run, or None."""
        e, insp = self.head_detail_entry, self.inspection
        if e is None or insp is None:
            return None
        req, layer, head, detail = e
        return detail if (req, layer, head) == (insp.request, *self.selected) else None

    def request_head_detail(self) -> None:
        insp, model = self.inspection, self.session.model
        if insp is None or model is None or self.head_detail_for_selected() is not None:
            return
        layer, head = self.selected
        ids, ablate, req = insp.ids, dict(insp.ablate), insp.request

        def fn():
            return req, layer, head, head_detail(model, ids, layer, head, ablate=ablate)

        def done(entry):
            self.head_detail_entry = entry
            if entry[1:3] == self.selected:
                self._notify("on_head_detail", entry[3])
                self.headDetailReady.emit(entry[3])

        self._submit("attention.head", fn, done)

    def request_metrics(self) -> None:
        insp, model = self.inspection, self.session.model
        if insp is None or model is None:
            return
        weights, mask, ablate, req = insp.weights, insp.mask, dict(insp.ablate), insp.request

        def done(res):
            self.metrics = res
            self._classify()
            self.metricsReady.emit(res)

        self._submit(
            "attention.metrics",
            lambda: head_metrics_of(model, weights, mask, ablate=ablate, request=req),
            done,
        )

    def _classify(self) -> None:
        from model.analysis.heads import classify_heads

        if self.metrics is None:
            self.classification = None
            return
        self.classification = classify_heads(self.metrics.metrics, self.thresholds)
        self._notify("on_metrics")
        self.head_tips = {
            (l, h): str(lab)
            for l, row in enumerate(self.classification.labels)
            for h, lab in enumerate(row)
            if lab.name
        }
        for key in ("lines", "aggregates", "ablation"):
            if self.pages[key].built:
                self.pages[key].picker.set_tooltips(self.head_tips)

    def set_thresholds(self, thresholds) -> None:
        """Name the heads again with new thresholds (no recomputation)."""
        self.thresholds = thresholds
        self._classify()

    def role_rules_text(self, *, long: bool = False, period: int | None = None) -> str:
        """The naming rules with their thresholds, in order of precedence."""
        t = self.thresholds
        per = f" on 2 × {period} random tokens" if period else ""
        rules = [
            ("induction", f"induction score ≥ {t.induction:.2f}{per if long else ''}"),
            ("previous-token", f"previous-token score ≥ {t.previous_token:.2f}"),
            ("self", f"self score ≥ {t.self:.2f}"),
            ("sink", f"first-token score ≥ {t.sink:.2f}"),
            ("uniform/dead", f"spread ≥ {t.uniform:.2f} (attention nearly even over the keys it sees)"),
        ]
        if long:
            return (
                "Rules, first match wins: "
                + "; ".join(f"{i}. <b>{name}</b> if {rule}" for i, (name, rule) in enumerate(rules, start=1))
                + ". Other heads stay unnamed."
            )
        return "; ".join(f"{ROLE_SHORT[name]} = {name} ({rule})" for name, rule in rules)

    def head_summary(self, layer: int, head: int) -> str:
        """One line about head (layer, head): its name and key metrics, once measured."""
        text = f"layer {layer}, head {head}"
        if self.classification is not None and self.metrics is not None:
            lab = self.classification.labels[layer][head]
            m = self.metrics.metrics
            text += f": {lab}" if lab.name else ": no named role"
            text += (
                f" · spread {m.entropy_norm[layer, head]:.2f} · prev-token {m.prev_token[layer, head]:.2f}"
                f" · sink {m.sink[layer, head]:.2f}"
            )
            if m.induction is not None:
                text += f" · induction {m.induction[layer, head]:.2f}"
        return text

    def request_ablation(self) -> None:
        insp, model, s = self.inspection, self.session.model, self.session
        if insp is None or model is None or not self.ablation:
            return
        heads, ids, req = dict(self.ablation), insp.ids, insp.request
        source, tok, cfg = s.source, s.tokenizer, model.config
        cache_key = (id(source), cfg.context_length, id(tok))
        cache = self._val_cache

        def fn():
            if cache_key not in cache:
                cache.clear()
                cache[cache_key] = validation_batches(source, cfg, tok)
            batches, note = cache[cache_key]
            return ablation_of(model, ids, heads, batches, note, request=req)

        def done(res):
            if res.heads != self.ablation:
                return
            self.ablation_result = res
            self._notify("on_ablation_result", res)
            self.ablationReady.emit(res)

        self._submit("attention.ablation", fn, done)

    def aggregates_for_current(self):
        a, insp = self.aggregates, self.inspection
        if a is None or insp is None or a.request != insp.request:
            return None
        if a.chosen_heads != self._chosen_heads():
            return None
        return a

    def _chosen_heads(self) -> list[tuple[int, int]]:
        page = self.pages["aggregates"]
        return page.chosen_heads() if page.built else []

    def request_aggregates(self) -> None:
        insp = self.inspection
        if insp is None:
            return
        weights, req = insp.weights, insp.request
        chosen = self._chosen_heads()

        def done(res):
            self.aggregates = res
            self._notify("on_aggregates", res)
            self.aggregatesReady.emit(res)

        self._submit("attention.aggregate", lambda: aggregates_of(weights, chosen, request=req), done)

    # ---- selection, ablation -------------------------------------------------------------------
    def select_head(self, layer: int, head: int) -> None:
        """Make (layer, head) the selected head of every page."""
        insp = self.inspection
        if insp is not None:
            layer = max(0, min(int(layer), insp.n_layers - 1))
            head = max(0, min(int(head), insp.n_heads - 1))
        if (layer, head) == self.selected:
            return
        self.selected = (layer, head)
        self._notify("on_head_selected", layer, head)
        page = self.current_page
        if page.needs_head_detail:
            self.request_head_detail()
        if page.key in ("head", "pipeline"):
            page.refresh()
        for key in ("head", "pipeline"):
            if self.pages[key] is not page:
                self.pages[key].stale = True

    def open_head(self, layer: int, head: int) -> None:
        """Select (layer, head) and show it large (what clicking it in the grid does)."""
        self.select_head(layer, head)
        if self.current_page is not self.pages["head"]:
            self.show_page("head")
        else:
            self.current_page.refresh()

    def set_ablation(self, heads: dict) -> None:
        """Switch ``heads`` ({(layer, head): "zero" | "mean"}) off for every view; {} = all on."""
        heads = {(int(l), int(h)): m for (l, h), m in dict(heads).items()}
        if heads == self.ablation:
            return
        self.ablation = heads
        self.ablation_result = None
        self.head_detail_entry = None
        self._update_banner()
        if self.pages["ablation"].built:
            self.pages["ablation"].sync_from_tab()
        if self.current_page is self.pages["ablation"]:
            self.pages["ablation"].refresh()
        self.run_inspection()

    def restore_heads(self) -> None:
        """Switch every head back on: the next run's logits equal the original ones exactly."""
        self.set_ablation({})

    def _update_banner(self) -> None:
        if not self.ablation:
            self.banner.setVisible(False)
            return
        names = ", ".join(f"L{l}H{h}" for l, h in sorted(self.ablation))
        modes = " / ".join(sorted(set(self.ablation.values())))
        self.banner_label.setText(
            f"<b>{len(self.ablation)} head{'s' if len(self.ablation) != 1 else ''} switched off</b> "
            f"({modes}): {names}. Every view shows the model without them."
        )
        self.banner.setVisible(True)

    # ---- pages ---------------------------------------------------------------------------------
    def _notify(self, method: str, *args) -> None:
        """Call ``method`` on every built page; a page not built yet just becomes stale."""
        for page in self.pages.values():
            if page.built:
                getattr(page, method)(*args)
            else:
                page.stale = True

    def _on_page_changed(self, _index: int) -> None:
        page = self.current_page
        if page is None:
            return
        page.ensure_built()
        if self.inspection is None:
            return
        if page.needs_head_detail:
            self.request_head_detail()
        if page.stale:
            page.refresh()

    # ---- session -------------------------------------------------------------------------------
    def _on_model_changed(self, model) -> None:
        self.head_detail_entry = None
        self.metrics = self.classification = None
        self.ablation_result = None
        self._val_cache.clear()
        if model is not None:
            cfg = model.config
            kept = {lh: m for lh, m in self.ablation.items() if lh[0] < cfg.n_layers and lh[1] < cfg.n_heads}
            if kept != self.ablation:
                self.ablation = kept
                self._update_banner()
            tok = self.session.tokenizer
            if tok is not None and self.prompt():
                try:
                    tok.encode(self.prompt())
                except ValueError:
                    self.set_prompt(self.session.probe_prompt or "", run=False)
            elif not self.prompt():
                self.set_prompt(self.session.probe_prompt or "", run=False)
        else:
            self.inspection = None
            self._notify("clear")
        self._update_empty()
        self._mark_dirty()

    def _on_training_frame(self, _frame) -> None:
        if not (self.follow_box.isChecked() and self.isVisible() and self.session.is_training):
            return
        now = time.perf_counter()
        if now - self._last_follow >= self.FOLLOW_INTERVAL_S:
            self._last_follow = now
            self.run_inspection()

    def _on_probe_prompt(self, text: str) -> None:
        if not self.prompt() and text:
            self.set_prompt(text)

    # ---- export --------------------------------------------------------------------------------
    def export_targets(self) -> dict[str, QWidget]:
        """What File → Export writes as SVG: the graphics of the page in view."""
        return self.current_page.export_widgets()

    def export_view(self, path: str | Path) -> list[str]:
        """The page in view as PNG (as on screen) or SVG (each of its graphics); returns the files."""
        path = Path(path)
        suffix = path.suffix.lower()
        if suffix == ".png":
            return [str(write_png(self.current_page, path))]
        if suffix != ".svg":
            raise ValueError(f"export as .png or .svg, not {suffix or 'a file without extension'}")
        targets = self.export_targets()
        out = []
        for name, widget in targets.items():
            p = path if len(targets) == 1 else path.with_name(f"{path.stem}-{name}{path.suffix}")
            out.append(str(write_svg(widget, p)))
        return out

    def export_head_csv(self, path: str | Path, layer: int | None = None, head: int | None = None) -> str:
        """Head (layer, head) (default: the selected one) as CSV with token labels; returns the file."""
        insp = self.inspection
        if insp is None:
            raise ValueError("there is nothing to export yet: run a prompt first")
        if layer is None or head is None:
            layer, head = self.selected
        written = str(write_head_csv(path, insp.head(layer, head), insp.labels))
        self.exported.emit(written)
        return written

    def export_npz(self, path: str | Path) -> bool:
        """Write the prompt's tensors as .npz (the ``attention-lab inspect`` format) off the GUI thread.

        ``exported(path)`` or ``failed(message)`` follows. False when there is nothing to export.
        """
        insp, model, tok = self.inspection, self.session.model, self.session.tokenizer
        if insp is None or model is None:
            return False
        ids, ablate, path = insp.ids, dict(insp.ablate), Path(path)

        arrays = with_threads(self._threads, lambda: export_arrays(model, tok, ids, ablate=ablate))

        def job():
            return str(write_npz(path, arrays()))

        def done(res, err):
            if err is not None:
                msg = f"Could not write {path}: {err}"
                self._set_status(msg, error=True)
                self.failed.emit(msg)
            else:
                self._set_status(f"Wrote {res}" + (" (with switched-off heads)" if ablate else ""))
                self.exported.emit(res)

        self.session.compute.submit("attention.export", job, done)
        return True

    def _ask_path(self, title: str, name: str, filters: str) -> str:
        start = Path(self._settings.last_dir("export")) if self._settings is not None else Path.home()
        path, _ = QFileDialog.getSaveFileName(self, title, str(start / name), filters)
        if path and self._settings is not None:
            self._settings.set_last_dir("export", Path(path).parent)
        return path

    def export_view_dialog(self, kind: str) -> None:
        page = self.current_page
        filt = "PNG image (*.png)" if kind == "png" else "SVG drawing (*.svg)"
        path = self._ask_path("Export this view", f"attention-{page.key}.{kind}", filt)
        if not path:
            return
        if not path.lower().endswith(f".{kind}"):
            path += f".{kind}"
        try:
            written = self.export_view(path)
        except Exception as exc:
            self._set_status(f"Export failed: {exc}", error=True)
            return
        self._set_status("Wrote " + ", ".join(written))
        for p in written:
            self.exported.emit(p)

    def export_npz_dialog(self) -> None:
        path = self._ask_path("Save the prompt's tensors", "attention.npz", "NumPy arrays (*.npz)")
        if path:
            self.export_npz(path)

    def export_head_csv_dialog(self) -> None:
        if self.inspection is None:
            return
        layer, head = self.selected
        path = self._ask_path("Save the head as CSV", f"attention-L{layer}H{head}.csv", "CSV table (*.csv)")
        if not path:
            return
        try:
            written = self.export_head_csv(path)
        except Exception as exc:
            self._set_status(f"Export failed: {exc}", error=True)
            return
        self._set_status(f"Wrote {written}")

    # ---- window hooks --------------------------------------------------------------------------
    def wait_ready(self, timeout: float = 60.0) -> bool:
        """Process events until the prompt has run and the page in view has everything it needs
        (screenshots, benchmarks). Runs the prompt first when it is out of date."""
        from app.session import wait_until

        if self.session.model is None:
            return True
        if self._dirty or self.inspection is None:
            if self.run_inspection() is None:
                return False
        page = self.current_page
        page.ensure_built()

        def ready() -> bool:
            if self.inspection is None or self.inspection.request != self._request:
                return False
            if not self.session.compute.idle:
                return False
            if page.needs_head_detail and self.head_detail_for_selected() is None:
                self.request_head_detail()
                return False
            if page.stale:
                page.refresh()
            return not page.stale

        ok = wait_until(ready, timeout)
        from PySide6.QtWidgets import QApplication

        for _ in range(3):  # let new child widgets (e.g. a picker's buttons) lay out before a grab
            QApplication.processEvents()
        return ok

    def screenshot_pages(self):
        """One screenshot per page; each callable shows its page with everything computed."""

        def show(key: str):
            def go():
                if key == "ablation" and not self.ablation and self.inspection is not None:
                    self._demo_ablation()
                self.show_page(key)
                self.wait_ready()

            return go

        keys = ["heads", "head", "pipeline", "lines", "focus", "aggregates", "metrics", "next", "ablation"]
        return [(f"attention-{key}", show(key)) for key in keys]

    def _demo_ablation(self) -> None:
        """For the Ablation screenshot: switch off the most previous-token-like head of layer 0."""
        self.wait_ready()
        m = self.metrics.metrics if self.metrics is not None else None
        head = int(m.prev_token[0].argmax()) if m is not None else 0
        self.set_ablation({(0, head): "zero"})

    def shutdown(self) -> None:
        """Nothing of our own runs: the session's compute worker is stopped by the session."""
        self._debounce.stop()

    def save_state(self, settings) -> None:
        settings.set_value("attention/prompt", self.prompt())
        settings.set_value("attention/page", self.current_page.key)

    def restore_state(self, settings) -> None:
        self._settings = settings
        text = settings.get_str("attention/prompt", "")
        if text:
            self.set_prompt(text, run=False)
        key = settings.get_str("attention/page", "")
        if key in self.pages:
            self.page_tabs.setCurrentWidget(self.pages[key])


__all__ = ["AttentionTab"]
