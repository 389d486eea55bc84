"""The Attention tab: type a prompt, see every head, and take any head apart.

Layout (``controls``): the prompt bar (with the token count and timings) on top, a banner while heads
are switched off, then the pages under a row of page tabs that wraps onto a second row on a narrow
window (every page's name whole, none behind scroll arrows): Heads (the L×H grid), Head (one head
large), Pipeline, Lines, Token focus, Aggregates, Rollout, Metrics, Experts (mixture-of-experts
models only: a page whose ``applies_to`` fails for the model's config is hidden), Ablation,
Patching, Circuits, Q–K map, Corpus (heads over a corpus), Logit attribution, SAE (a sparse
autoencoder's features on the prompt), Next token. With no
model the tab says so and offers to build the default one. What the pages draw is in ``state``
(:class:`AttentionState`, no Qt): pages read it and follow its signals, never the tab or each other.

Computation (``model.interp.inspection``). Typing re-runs the prompt after :attr:`AttentionTab.DEBOUNCE_MS`
of quiet, on the session's current model, in the session's :class:`~app.session.compute.ComputeWorker` (off
the GUI thread, under the shared compute lock). Every run gets a request number; a job whose request
is no longer the newest returns at once when it starts, and a result that is no longer the newest is
dropped, so a newer prompt always supersedes an older one. The main job (``attention.inspect``)
traces the attention weights of every head and ranks the next tokens; follow-up jobs (``jobs``),
superseded the same way, measure what only some pages show. Only the page in view is redrawn; the
others redraw when shown. What the session's signals (a new model, a training frame, the probe prompt)
do to the prompt and the run: ``follow``. Exports: ``exports``.

Signals for tests and benchmarks: ``inspected(Inspection)`` once the page in view shows a new run;
``headDetailReady``, ``metricsReady``, ``ablationReady``, ``aggregatesReady``, ``causalReady(kind,
result)`` (Patching, Logit attribution), ``expertsReady``, ``circuitsReady(kind, result)`` (Circuits:
``"circuits"``, ``"head"``, ``"path"``); ``exported(path)``
and ``failed(message)``.
"""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.session.messages import InspectPrompt
from app.views.attention.ablation_page import AblationPage
from app.views.attention.aggregate_page import AggregatePage
from app.views.attention.attribution_page import AttributionPage
from app.views.attention.base import AttentionPage
from app.views.attention.circuits_page import CircuitsPage
from app.views.attention.controls import AblationBanner, NoModelView, PromptBar, run_status
from app.views.attention.corpus_heads_page import CorpusHeadsPage
from app.views.attention.experts_page import ExpertsPage
from app.views.attention.exports import AttentionExports
from app.views.attention.features_page import FeaturesPage
from app.views.attention.focus_page import FocusPage
from app.views.attention.follow import SessionFollower
from app.views.attention.grid_page import GridPage
from app.views.attention.head_page import HeadPage
from app.views.attention.job_keys import FOLLOW_UPS, INSPECT_JOB
from app.views.attention.jobs import AttentionJobs
from app.views.attention.lines_page import LinesPage
from app.views.attention.metrics_page import MetricsPage
from app.views.attention.next_token_page import NextTokenPage
from app.views.attention.patching_page import PatchingPage
from app.views.attention.pipeline_page import PipelinePage
from app.views.attention.previous import mark_current, mark_previous, trace_bar
from app.views.attention.qk_map_page import QKMapPage
from app.views.attention.readiness import wait_ready
from app.views.attention.rollout_page import RolloutPage
from app.views.attention.state import AttentionState
from app.views.page import screenshot_steps
from app.views.tab import TabBase
from app.widgets.job_bar import quoted
from app.widgets.page_stack import CurrentPageStack, WrappingPageTabs
from model.interp.inspection import inspect_prompt
from model.interp.plan import plan_prompt
from model.interp.prompt import PromptError
from model.runtime import with_threads

if TYPE_CHECKING:
    from app.session.session import Session
    from app.session.settings import AppSettings

#: The pages, in the order of their tabs.
PAGES = (
    *(GridPage, HeadPage, PipelinePage, LinesPage, FocusPage, AggregatePage, RolloutPage, MetricsPage),
    *(ExpertsPage, AblationPage, PatchingPage, CircuitsPage, QKMapPage, CorpusHeadsPage, AttributionPage),
    FeaturesPage,
    NextTokenPage,
)
#: Screenshot order: the Ablation page last, since its picture switches a head off (a page the model
#: does not offer, e.g. Experts of a dense model, is left out).
SCREENSHOT_ORDER = (
    *("heads", "head", "pipeline", "lines", "focus", "aggregates", "rollout", "metrics", "experts"),
    *("patching", "circuits", "qkmap", "corpus", "attribution", "features", "next", "ablation"),
)


class AttentionTab(TabBase):
    """The Attention inspector; see the module docstring. Constructed as ``AttentionTab(session)``.
    Its helpers (jobs, exports, follow, readiness) see it as an :class:`~app.views.attention.host.
    AttentionHost`."""

    inspected = Signal(object)
    headDetailReady = Signal(object)
    metricsReady = Signal(object)
    ablationReady = Signal(object)
    aggregatesReady = Signal(object)
    nextTokensReady = Signal(object)
    causalReady = Signal(str, object)
    expertsReady = Signal(object)
    circuitsReady = Signal(str, object)
    exported = Signal(str)
    failed = Signal(str)

    #: quiet time after the last keystroke before the prompt runs (ms)
    DEBOUNCE_MS = 40
    #: while training, re-run the prompt at most this often (s) when "Follow training" is on
    FOLLOW_INTERVAL_S = 1.0

    def __init__(self, session: Session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self.state = AttentionState()
        self.exports = AttentionExports(self, self)
        self.jobs = AttentionJobs(self)
        self.timings: dict[str, float] = {}
        self._request = 0
        self._run_due = True
        self._edit_started: float | None = None
        #: the app's settings (the last export folder), from ``restore_state``
        self.settings: AppSettings | None = None
        #: the torch threads of the current run's plan (its follow-up jobs use as many)
        self.threads: int | None = 1

        root = QVBoxLayout(self)
        self.prompt_bar = bar = PromptBar(self.FOLLOW_INTERVAL_S)
        self.prompt_edit, self.status_label, self.follow_box = bar.edit, bar.status_label, bar.follow_box
        self.refresh_button = bar.refresh_button
        root.addWidget(bar)
        self.banner = AblationBanner(self.state)
        self.banner_label, self.banner_restore = self.banner.label, self.banner.restore_button
        root.addWidget(self.banner)
        #: the trace's busy line, and whether the pages show an older input than asked for
        self.stack = CurrentPageStack()
        self.empty = NoModelView(session)
        self.build_button = self.empty.build_button
        self.stack.addWidget(self.empty)
        self.page_tabs = WrappingPageTabs()  # every page's name in sight: the row wraps, never scrolls
        self.page_tabs.setObjectName("attentionPages")
        self.pages: dict[str, AttentionPage] = {}
        for cls in PAGES:
            page = cls(self.state)
            page.openHeadRequested.connect(self.open_head)
            page.use_jobs(session.jobs, session.compute.abort)
            page.use_tab_jobs(self.jobs)
            if isinstance(page, HeadPage):
                page.csvRequested.connect(self.exports.head_csv_dialog)
            self.pages[page.key] = page
            self.page_tabs.addTab(page, page.title)
            if page.blurb:
                self.page_tabs.setTabToolTip(self.page_tabs.count() - 1, page.blurb)
        self.stack.addWidget(self.page_tabs)
        self.job_bar, self.header_veil = trace_bar(session, self.page_tabs, self.status_label)
        self.job_bar.jobEnded.connect(self._on_job_ended)
        root.addWidget(self.stack, 1)
        self.current_page.ensure_built()

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(self.DEBOUNCE_MS)
        self._debounce.timeout.connect(self.run_inspection)
        self.prompt_edit.textChanged.connect(self._on_text_changed)
        self.page_tabs.currentChanged.connect(self._on_page_changed)
        self.refresh_button.clicked.connect(self.run_inspection)
        self.prompt_bar.cut_box.toggled.connect(lambda _=False: self.schedule(changed=True))
        for key, action in bar.export_actions.items():
            action.triggered.connect(lambda _=False, key=key: self.exports.dialog(key))

        st = self.state
        st.selection_changed.connect(self._on_head_selected)
        st.prompt_requested.connect(self.set_prompt)
        st.ablation_changed.connect(lambda _heads: self.schedule(changed=True))
        st.chosen_heads_changed.connect(lambda _heads: self.jobs.aggregates())
        st.causal_setup_changed.connect(self._on_causal_setup)
        st.circuit_setup_changed.connect(self._on_circuit_setup)

        self.follower = SessionFollower(self, self.jobs, self)
        self.listen(session.hub, InspectPrompt, lambda request: self.set_prompt(request.text))
        if session.probe_prompt:
            self.set_prompt(session.probe_prompt, run=False)
        self.update_for_model()

    # what the pages draw lives in ``state``; these read it for callers of the tab
    inspection = property(lambda self: self.state.inspection, doc="the current Inspection (or None)")
    selected = property(lambda self: self.state.selected, doc="the selected (layer, head)")
    ablation = property(lambda self: self.state.ablation, doc="the switched-off heads")
    metrics = property(lambda self: self.state.metrics, doc="the head metrics of the current model")
    classification = property(lambda self: self.state.classification, doc="the heads' names")
    thresholds = property(lambda self: self.state.thresholds, doc="the thresholds that name heads")

    # ---- state helpers -------------------------------------------------------------------------
    @property
    def current_page(self) -> AttentionPage:
        return list(self.pages.values())[self.page_tabs.currentIndex()]  # the pages in their tabs' order

    @property
    def run_due(self) -> bool:
        """Whether the prompt must run again (edited, or the model or the switched-off heads changed)."""
        return self._run_due

    @property
    def latest_request(self) -> int:
        """The number of the newest run asked for (the state's ``request`` once its result is in)."""
        return self._request

    @property
    def follows_training(self) -> bool:
        """Whether a training frame may re-run the prompt: "Follow training" is on and the tab in view."""
        return self.follow_box.isChecked() and self.isVisible()

    def show_page(self, key: str) -> AttentionPage:
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
        self._run_due = True
        if run:
            self.schedule()

    def show_status(self, text: str, *, error: bool = False) -> None:
        """Put ``text`` (rich text) in the status line, in red for an ``error``."""
        self.prompt_bar.set_status(text, error=error)

    def fail(self, message: str) -> None:
        """Say ``message`` in red in the status line and emit ``failed(message)``."""
        self.show_status(message, error=True)
        self.failed.emit(message)

    def offers(self, page: AttentionPage) -> bool:
        """Whether the current model has something for ``page`` (its tab is shown; every page while
        there is no model, whose tab shows the no-model view instead)."""
        model = self.session.model
        return model is None or page.applies_to(model.config)

    def offered_pages(self) -> list[AttentionPage]:
        """The pages shown for the current model (the Experts page only for a mixture of experts)."""
        return [page for page in self.pages.values() if self.offers(page)]

    def _update_pages(self) -> None:
        """Show the pages the model has something for; leave a page it lost for the Heads page."""
        model = self.session.model
        for i, page in enumerate(self.pages.values()):
            self.page_tabs.setTabVisible(i, self.offers(page))
        if model is not None and not self.offers(self.current_page):
            self.show_page("heads")

    def update_for_model(self) -> None:
        """Show the pages the session's model has something for, or the no-model view without one."""
        has_model = self.session.model is not None
        self._update_pages()
        self.stack.setCurrentWidget(self.page_tabs if has_model else self.empty)
        self.prompt_edit.setEnabled(True)
        for w in (self.refresh_button, self.prompt_bar.export_button):
            w.setEnabled(has_model)
        if not has_model:
            self.show_status("No model yet: build or load one to inspect it.")

    # ---- running the prompt --------------------------------------------------------------------
    def _on_text_changed(self) -> None:
        if self._edit_started is None:
            self._edit_started = time.perf_counter()
        self._run_due = True
        self._mark_previous()
        self._debounce.start()

    def _mark_previous(self, why: str = "") -> None:
        mark_previous(self.job_bar, self.state.inspection, why, self.header_veil)

    def _on_job_ended(self, _key: str, state: str) -> None:  # a cancelled trace leaves the previous run
        if state == "cancelled":
            self._run_due = False
            self._mark_previous(f"Cancelled: press {self.refresh_button.text()} to trace the new prompt.")

    def schedule(self, *, changed: bool = False) -> None:
        """Run the prompt after the debounce (or when the tab is next shown); ``changed``: the run's input
        changed (heads switched off, cut or refuse), so the pages show the previous run till then."""
        if changed:
            self._mark_previous()
        self._run_due = True
        if self.isVisible():
            self._debounce.start()

    def showEvent(self, event):
        super().showEvent(event)
        if self._run_due:
            self._debounce.start()

    def on_activated(self) -> None:
        if self._run_due and self.session.model is not None:
            self._debounce.start()

    def run_inspection(self) -> int | None:
        """Run the prompt now on the current model; returns the request number (None if it cannot)."""
        self._debounce.stop()
        s = self.session
        model, tok = s.model, s.tokenizer
        self.update_for_model()
        if model is None or tok is None:
            return None
        if not self.prompt() and s.probe_prompt:
            self.set_prompt(s.probe_prompt, run=False)
        try:  # the one plan: the prompt cut to the context and to memory, precision, threads, pooling
            over = "cut" if self.prompt_bar.cut_box.isChecked() else "refuse"
            plan = plan_prompt(model.config, tok, self.prompt(), training=s.is_training, over_context=over)
        except PromptError as exc:
            self._edit_started = None
            self._show_failure(str(exc))
            return None
        self._run_due = False
        self._request += 1
        req = self._request
        ablate = dict(self.state.ablation)
        t_submit = time.perf_counter()
        t_edit = self._edit_started
        self._edit_started = None
        self.threads = plan.threads
        run = with_threads(plan.threads, lambda: inspect_prompt(model, tok, plan, ablate=ablate))

        s.compute.cancel(FOLLOW_UPS)  # the older run's follow-up jobs are stale now
        n = len(plan.prompt.ids)
        s.compute.submit(
            INSPECT_JOB,
            run,
            lambda res, err: self._on_inspection(res, err, req, plan, t_submit, t_edit),
            title="Tracing",
            subject=f"{quoted(plan.prompt.text, 40)} ({n:,} token{'s' if n != 1 else ''})",
        )
        return req

    def _show_failure(self, message: str) -> None:  # the pages show an older prompt's run (greyed)
        self._mark_previous("This prompt cannot run (see above).")
        self.show_status(html.escape(message, quote=False), error=True)
        self.failed.emit(message)

    stale = property(
        lambda self: self.job_bar.stale, doc="whether the pages show an older run than asked for"
    )

    def _on_inspection(self, res, err, req: int, plan, t_submit: float, t_edit: float | None) -> None:
        if err is not None:
            self._show_failure(f"Could not run the prompt: {err}")
            return
        if res is None or req != self._request:
            return
        mark_current(self.job_bar, self.header_veil)
        self.state.set_inspection(res, req)  # every page becomes stale; the one in view is drawn now
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
        step = self.session.step if self.session.is_training else None
        self.show_status(run_status(res, plan, self.timings, training_step=step))
        self.inspected.emit(res)
        self._follow_up()

    def _follow_up(self) -> None:
        """The jobs the new run makes due: metrics always, the rest for the page in view."""
        self.jobs.metrics()
        if self.state.ablation:
            self.jobs.ablation()
        self.jobs.for_page(self.current_page)

    def set_thresholds(self, thresholds) -> None:
        """Name the heads again with new thresholds (no recomputation)."""
        self.state.set_thresholds(thresholds)

    # ---- selection, ablation -------------------------------------------------------------------
    def select_head(self, layer: int, head: int) -> None:
        """Make (layer, head) the selected head of every page."""
        self.state.select(layer, head)

    def _on_head_selected(self, _layer: int, _head: int) -> None:
        if self.current_page.needs_head_detail:
            self.jobs.head_detail()
        if self.current_page.needs_circuits and self.state.inspection is not None:
            self.jobs.circuits_ready()

    def open_head(self, layer: int, head: int) -> None:
        """Select (layer, head) and show it large (what clicking it in the grid does)."""
        self.select_head(layer, head)
        if self.current_page is not self.pages["head"]:
            self.show_page("head")
        else:
            self.current_page.refresh()

    def set_ablation(self, heads: dict) -> None:
        """Switch ``heads`` ({(layer, head): "zero" | "mean"}) off for every view; {} = all on.
        The prompt runs again (after the debounce) without them."""
        self.state.set_ablation(heads)

    # ---- pages ---------------------------------------------------------------------------------
    def _on_page_changed(self, _index: int) -> None:
        page = self.current_page
        page.ensure_built()
        if self.state.inspection is None:
            return
        if page.stale:
            page.refresh()
        self.jobs.for_page(page)

    def _on_causal_setup(self, kind: str) -> None:
        if self.current_page.needs_causal == kind and self.state.inspection is not None:
            self.jobs.causal(kind)
            self.current_page.refresh()  # the old numbers are marked as the old inputs' at once
        if kind == "patching" and self.current_page.needs_circuits and self.state.inspection is not None:
            self.jobs.circuits_ready()  # path patching reads the Patching page's prompts

    def _on_circuit_setup(self) -> None:
        if self.current_page.needs_circuits and self.state.inspection is not None:
            self.jobs.circuits_ready()

    # ---- export (``exports``) ------------------------------------------------------------------
    def export_targets(self) -> dict[str, QWidget]:
        """What File → Export writes as SVG: the graphics of the page in view."""
        return self.exports.targets()

    def export_view(self, path: str | Path) -> list[str]:
        """The page in view as PNG (as on screen) or SVG (each of its graphics); returns the files."""
        return self.exports.view(path)

    def export_head_csv(self, path: str | Path, layer: int | None = None, head: int | None = None) -> str:
        """Head (layer, head) (default: the selected one) as CSV with token labels; returns the file."""
        return self.exports.head_csv(path, layer, head)

    def export_numbers(self, path: str | Path) -> list[str]:
        """The page in view's own numbers (Patching, Logit attribution) as .csv tables or .npz arrays."""
        return self.exports.numbers(path)

    def export_npz(self, path: str | Path) -> bool:
        """Write the prompt's tensors as .npz off the GUI thread; ``exported`` or ``failed`` follows."""
        return self.exports.npz(path)

    # ---- window hooks --------------------------------------------------------------------------
    def wait_ready(self, timeout: float = 60.0) -> bool:
        """Process events until the prompt has run and the page in view has everything it needs
        (screenshots, benchmarks): :func:`~app.views.attention.readiness.wait_ready`."""
        return wait_ready(self, self.jobs, timeout)

    def screenshot_pages(self):
        """One screenshot per page; each callable shows its page with everything computed (first
        what a page prepares from: the Ablation page switches a head off by the metrics)."""
        offered = {page.key for page in self.offered_pages()}
        return screenshot_steps(
            [key for key in SCREENSHOT_ORDER if key in offered],
            self.pages.__getitem__,
            self.show_page,
            prefix="attention-",
            before=self.wait_ready,
            settle=lambda _page: self.wait_ready(),
        )

    def shutdown(self) -> None:
        """Nothing of our own runs: the session's compute worker is stopped by the session."""
        self._debounce.stop()

    def save_state(self, settings: AppSettings) -> None:
        settings.set_value("attention/prompt", self.prompt())
        settings.set_value("attention/page", self.current_page.key)

    def restore_state(self, settings: AppSettings) -> None:
        self.settings = settings
        text = settings.get_str("attention/prompt", "")
        if text:
            self.set_prompt(text, run=False)
        key = settings.get_str("attention/page", "")
        if key in self.pages and self.offers(self.pages[key]):
            self.page_tabs.setCurrentWidget(self.pages[key])


__all__ = ["AttentionTab"]
