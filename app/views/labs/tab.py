"""The Labs tab: the Transformer's textbook claims as experiments on a real model.

Left, the labs and their pages (a tree); right, the page. Every page has a short explanation, the
formula, its controls, its plots and a "what to notice" line (see :mod:`app.views.labs.base`).

=================  ==============================================================================
lab                pages
=================  ==============================================================================
Mask               scores / mask / weights under causal, none, sliding-window and prefix-LM masks;
                   the missing-mask bug trained side by side
Softmax scaling    the 1/√d_k theory by sampling (and its alternatives); the real model's heads with
                   and without its scale; scaled vs unscaled training at a large head size
Residual stream    norms along the stream and what each sublayer writes; the same norms during
                   training; gradient flow Pre-LN vs Post-LN; the logit lens
Positions          the sinusoidal table; RoPE's offset property; no positions → permutation symmetry
Worked example     the three-token attention example, editable, every number shown
KV cache           a token's cost in the cache under MHA, GQA, MQA and latent attention, by the
                   formula and as allocated
=================  ==============================================================================

All numbers come from ``model/`` (``model.interp.analysis``), computed off the GUI thread by the session's
compute worker; the training comparisons run in their own worker threads, stopped by
:meth:`LabsTab.shutdown`. The prompt the pages read is the labs' prompt (by default the session's
probe prompt, followed as it changes until the user types another here).
"""

from __future__ import annotations

import time

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSplitter,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.session.event_wait import wait_until
from app.views.labs.base import LabPage, describe_model
from app.views.labs.kvcache import KVCachePage
from app.views.labs.lens import LensPage
from app.views.labs.mask import MaskBugPage, MaskStagesPage
from app.views.labs.positions import PermutationPage, RopeModelPage, RopePage, SinusoidalPage
from app.views.labs.residual import GradFlowPage, LiveNormsPage, StreamNormsPage
from app.views.labs.softmax import SoftmaxModelPage, SoftmaxTheoryPage
from app.views.labs.softmax_training import SoftmaxTrainingPage
from app.views.labs.worked import WorkedExamplePage
from app.views.page import bring_into_view, page_targets, screenshot_steps
from app.views.tab import TabBase
from app.widgets.page_stack import CurrentPageStack

#: Refresh the page on screen at most this often while the session trains (seconds).
LIVE_INTERVAL_S = 2.0
#: How long a screenshot waits for a page's numbers (its training comparisons included), seconds.
SCREENSHOT_TIMEOUT_S = 240.0


def page_classes() -> list[type[LabPage]]:
    """Every lab page, in the order of the tree."""
    return [
        MaskStagesPage,
        MaskBugPage,
        SoftmaxTheoryPage,
        SoftmaxModelPage,
        SoftmaxTrainingPage,
        StreamNormsPage,
        LiveNormsPage,
        GradFlowPage,
        LensPage,
        SinusoidalPage,
        RopePage,
        RopeModelPage,
        PermutationPage,
        WorkedExamplePage,
        KVCachePage,
    ]


class LabsTab(TabBase):
    """The Labs tab (see the module docstring).

    Pages are built when first shown (a page holds several plots; building all of them would slow the
    app's start), except those marked ``eager`` (the live norms record during training). ``classes``
    {slug: page class} lists every page; ``pages`` {slug: LabPage} those built so far;
    ``show_page(slug)`` builds, selects and returns one.
    """

    def __init__(self, session, parent: QWidget | None = None):
        super().__init__(parent)
        self.session = session
        self._prompt_edited = False
        self._last_live = 0.0

        root = QVBoxLayout(self)
        root.setContentsMargins(4, 4, 4, 4)
        top = QHBoxLayout()
        top.addWidget(QLabel("Prompt the labs read:"))
        self.prompt_edit = QLineEdit(session.probe_prompt)
        self.prompt_edit.setToolTip(
            "The text every model-based lab page reads. It follows the probe prompt until you type another "
            "here; press Enter to apply. Characters the vocabulary lacks are replaced."
        )
        self.prompt_edit.editingFinished.connect(self._prompt_entered)
        top.addWidget(self.prompt_edit, 3)
        self.model_label = QLabel()
        self.model_label.setStyleSheet("color: #444;")
        self.model_label.setWordWrap(True)  # two lines on a small screen, not a wider tab
        top.addWidget(self.model_label, 2)
        root.addLayout(top)

        split = QSplitter(Qt.Orientation.Horizontal)
        self.tree = QTreeWidget()
        self.tree.setHeaderHidden(True)
        self.tree.setMinimumWidth(150)
        self.tree.setMaximumWidth(280)
        self.stack = CurrentPageStack()
        split.addWidget(self.tree)
        split.addWidget(self.stack)
        split.setStretchFactor(1, 1)
        split.setSizes([220, 1300])
        root.addWidget(split, 1)

        self.classes: dict[str, type[LabPage]] = {cls.slug: cls for cls in page_classes()}
        self.pages: dict[str, LabPage] = {}
        self._items: dict[str, QTreeWidgetItem] = {}
        labs: dict[str, QTreeWidgetItem] = {}
        for cls in self.classes.values():
            group = labs.get(cls.lab)
            if group is None:
                group = QTreeWidgetItem([cls.lab])
                group.setData(0, Qt.ItemDataRole.UserRole, cls.slug)
                f = group.font(0)
                f.setBold(True)
                group.setFont(0, f)
                self.tree.addTopLevelItem(group)
                labs[cls.lab] = group
            item = QTreeWidgetItem([cls.short or cls.title])
            item.setData(0, Qt.ItemDataRole.UserRole, cls.slug)
            item.setToolTip(0, cls.title)
            group.addChild(item)
            self._items[cls.slug] = item
            if cls.eager:
                self.page(cls.slug)
        self.tree.expandAll()
        self.tree.currentItemChanged.connect(self._item_changed)
        self.tree.setCurrentItem(self._items[next(iter(self.classes))])

        session.modelChanged.connect(lambda *_: self._model_changed())
        session.historyReset.connect(lambda *_: self._model_changed())
        session.trainingFinished.connect(lambda *_: self._model_changed())
        session.probePromptChanged.connect(self._probe_prompt_changed)
        session.eventsAppended.connect(self._events)
        self._update_model_label()

    # ---- prompt and model --------------------------------------------------------------------
    def prompt(self) -> str:
        return self.prompt_edit.text() or self.session.probe_prompt

    def set_prompt(self, text: str) -> None:
        """Use ``text`` as the labs' prompt (as if typed and Enter pressed)."""
        self.prompt_edit.setText(text)
        self._prompt_entered()

    def _prompt_entered(self) -> None:
        self._prompt_edited = self.prompt_edit.text() != self.session.probe_prompt
        self._mark_model_pages()

    def _probe_prompt_changed(self, text: str) -> None:
        if not self._prompt_edited:
            self.prompt_edit.setText(text)
            self._mark_model_pages()

    def _model_changed(self) -> None:
        self._update_model_label()
        self._mark_model_pages()

    def _mark_model_pages(self) -> None:
        for page in self.pages.values():
            if page.uses_model:
                page.mark_dirty()

    def _update_model_label(self) -> None:
        self.model_label.setText(f"Model: {describe_model(self.session)}")

    def _events(self, events) -> None:
        """While the session trains, refresh the page on screen every few seconds (weights move)."""
        for listener in self.pages.values():
            listener.on_training_events(events)
        now = time.monotonic()
        if now - self._last_live < LIVE_INTERVAL_S:
            return
        self._last_live = now
        self._update_model_label()
        page = self.current_page
        if page is None:
            return
        if page.uses_model and page.follows_training and page.isVisible() and page.idle:
            page.refresh()
        for other in self.pages.values():
            if other is not page and other.uses_model:
                other.stale = True

    # ---- navigation --------------------------------------------------------------------------
    def page(self, slug: str) -> LabPage:
        """The page ``slug``, built on first use."""
        page = self.pages.get(slug)
        if page is None:
            page = self.classes[slug](self.session, self.prompt)
            self.pages[slug] = page
            self.stack.addWidget(page)
        return page

    def _item_changed(self, item: QTreeWidgetItem | None, _previous=None) -> None:
        if item is None:
            return
        slug = item.data(0, Qt.ItemDataRole.UserRole)
        self.stack.setCurrentWidget(self.page(slug))

    @property
    def current_page(self) -> LabPage | None:
        page = self.stack.currentWidget()  # the stack holds only lab pages (``page``)
        return page if isinstance(page, LabPage) else None

    def show_page(self, slug: str) -> LabPage:
        """Select the page ``slug`` in the tree and show it (building it if needed); returns it."""
        self.tree.setCurrentItem(self._items[slug])
        return self.page(slug)

    # ---- hooks the window calls --------------------------------------------------------------
    def on_activated(self) -> None:
        self._update_model_label()
        page = self.current_page
        if page is not None and page.in_view():
            bring_into_view(page)

    def shutdown(self) -> None:
        for page in self.pages.values():
            page.shutdown()

    def export_targets(self) -> dict[str, QWidget]:
        page = self.current_page
        return page_targets(page, f"{page.key} " if page is not None else "")

    def screenshot_pages(self):
        """One (name, show) per page: ``show()`` prepares and selects it, and waits for its numbers."""
        return screenshot_steps(
            self.classes,
            self.page,
            self.show_page,
            prefix="labs-",
            settle=lambda page: wait_until(
                lambda: not isinstance(page, LabPage) or page.idle, SCREENSHOT_TIMEOUT_S
            ),
        )
