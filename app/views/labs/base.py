"""What every lab page shares: the header (explanation, formula, what to notice), background jobs,
the prompt as token ids, and the hooks the Labs tab calls.

A page subclasses :class:`LabPage`, sets ``slug``/``lab``/``title``/``explanation``/``formula``/
``notice``, adds its controls and plots to ``self.body`` in ``build()``, hears the session's training
in ``on_training_events(events)`` if it wants to, and submits its torch work in ``compute()`` with
:meth:`LabPage.submit` (the session's compute worker: off the GUI thread, under the compute lock,
latest request per key wins, results of superseded requests are dropped).

A lab page is an :class:`app.views.page.LazyPage` (the tabs' page protocol, ``key`` = ``slug``) over
the session. The Labs tab creates a page the first time it is shown, so the page builds at once.
Pages compute lazily: a change of model or prompt only marks a page ``stale``; it recomputes when it
is shown (or at once if it is on screen).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from PySide6.QtCore import QEvent, QPoint, Qt, QTimer
from PySide6.QtWidgets import QFrame, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.core.pace import sharing_note
from app.views.page import LazyPage
from app.widgets.layouts import vertical_scroll
from app.widgets.wrapped_label import WrappedLabel
from model.interp.prompt import encode_prompt

HEADER_STYLE = """
QLabel#labTitle { font-size: 15px; font-weight: bold; }
QLabel#labFormula { font-family: 'DejaVu Sans Mono', monospace; background: #f4f4f8;
                    border: 1px solid #ddd; padding: 3px 6px; }
QLabel#labNotice { background: #fff6da; border: 1px solid #ecd68a; padding: 3px 6px; }
QLabel#labMessage { color: #555; }
"""


R = TypeVar("R")


class NoModel(Exception):
    """The page needs a model and there is none yet."""


class LabPage(LazyPage):
    """One page of a lab (see the module docstring)."""

    slug = "lab"
    lab = "Lab"
    title = "Lab"
    #: the page's name in the Labs tree (default: ``title``)
    short = ""
    explanation = ""
    formula = ""
    notice = ""
    #: recompute when the model, its weights or the prompt change
    uses_model = True
    #: refresh (throttled) while the session trains, when on screen
    follows_training = True
    #: built with the tab, not when first shown (it must listen from the start)
    eager = False

    def __init__(
        self, session, prompt_source: Callable[[], str] | None = None, parent: QWidget | None = None
    ):
        super().__init__(session, parent)
        #: the tabs' name of the page (file names, screenshots): its ``slug``
        self.key: str = self.slug
        self.session = session
        self._prompt_source = prompt_source
        self.results: dict[str, Any] = {}
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        # the whole page scrolls up and down when the window is short: the header's text and the
        # plots keep their height instead of being squeezed (a 1024×768 screen)
        area, root = vertical_scroll(frame=False)
        self.scroll_area = area
        self._in_view: list[QWidget] = []
        outer.addWidget(area)
        root.setContentsMargins(6, 4, 6, 4)
        root.setSpacing(4)
        self.header = self._header()
        root.addWidget(self.header)
        self.message = QLabel(" ")
        self.message.setObjectName("labMessage")
        self.message.setWordWrap(True)
        self.body = QVBoxLayout()
        self.body.setSpacing(4)
        root.addLayout(self.body, 1)
        root.addWidget(self.message)
        self.setStyleSheet(HEADER_STYLE)
        self.ensure_built()

    # ---- to override -----------------------------------------------------------------------
    def build(self) -> None:
        """Add the page's controls and plots to ``self.body`` (called once, from ``__init__``)."""

    def compute(self) -> None:
        """Submit the page's work (called by :meth:`refresh`)."""

    def shutdown(self) -> None:
        """Stop the page's own workers and wait for them."""

    def on_training_events(self, events: list[dict[str, Any]]) -> None:
        """The session's training appended ``events`` (every page hears them, on screen or not);
        nothing by default."""

    def export_targets(self) -> dict[str, QWidget]:
        """Plots File → Export can write, by name."""
        return {}

    def prepare_screenshot(self) -> None:
        """Bring the page into the state its screenshot shows (default: fresh numbers)."""
        self.refresh()

    @property
    def idle(self) -> bool:
        """No result of this page is outstanding."""
        return not self.session.compute.outstanding(f"labs.{self.slug}.")

    # ---- header ------------------------------------------------------------------------------
    def help_html(self) -> str:
        """What the header says: the explanation, the formula and what to notice (Help → What am I
        looking at?)."""
        parts = [f"<p>{self.explanation}</p>"] if self.explanation else []
        if self.formula:
            parts.append(f"<p style='font-family: monospace; background: #f4f4f8'>{self.formula}</p>")
        if self.notice:
            parts.append(f"<p><b>What to notice:</b> {self.notice}</p>")
        return "".join(parts)

    def _header(self) -> QWidget:
        box = QFrame()
        lay = QVBoxLayout(box)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.setSpacing(3)
        title = WrappedLabel(f"{self.lab} — {self.title}")
        title.setTextFormat(Qt.TextFormat.PlainText)  # an apostrophe stays one, a "<" stays text
        title.setObjectName("labTitle")
        title.setWordWrap(True)
        lay.addWidget(title)
        if self.explanation:
            text = WrappedLabel(self.explanation)
            text.setWordWrap(True)
            text.setTextFormat(Qt.TextFormat.RichText)
            lay.addWidget(text)
        if self.formula:
            f = WrappedLabel(self.formula)
            f.setObjectName("labFormula")
            f.setTextFormat(Qt.TextFormat.RichText)
            f.setWordWrap(True)
            f.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            lay.addWidget(f)
        if self.notice:
            n = WrappedLabel(f"<b>What to notice:</b> {self.notice}")
            n.setObjectName("labNotice")
            n.setWordWrap(True)
            n.setTextFormat(Qt.TextFormat.RichText)
            lay.addWidget(n)
        box.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        return box

    def keep_in_view(self, widget: QWidget) -> None:
        """Keep ``widget`` (a row of plots under the header) no taller than the room left for it in
        the page's view at scroll 0, never below its minimum: the page opens with the plots whole,
        and what is under them is a scroll away (at 1280×800 the plots reached past the view)."""
        self._in_view.append(widget)
        self.scroll_area.viewport().installEventFilter(self)
        widget.installEventFilter(self)  # moved: the header above it grew (a notice set later)

    def eventFilter(self, watched, event) -> bool:
        if (event.type() == QEvent.Type.Resize and watched is self.scroll_area.viewport()) or (
            event.type() == QEvent.Type.Move and watched in self._in_view
        ):
            QTimer.singleShot(0, self._fit_in_view)  # once the layout has settled at this size
        return super().eventFilter(watched, event)

    def _fit_in_view(self) -> None:
        content = self.scroll_area.widget()
        if content is None:
            return
        room = self.scroll_area.viewport().height()
        for w in self._in_view:
            top = w.mapTo(content, QPoint(0, 0)).y()
            height = max(w.minimumHeight(), room - top - 4)
            if w.maximumHeight() != height:
                w.setMaximumHeight(height)

    def set_notice(self, text: str) -> None:
        """The header's "What to notice" (and Help's copy of it) says ``text``: a page whose notice is
        built from what it measured sets it here once the numbers are in."""
        self.notice = text
        label = self.header.findChild(QLabel, "labNotice")
        if label is not None:
            label.setText(f"<b>What to notice:</b> {text}")

    # ---- refresh logic -----------------------------------------------------------------------
    def in_view(self) -> bool:
        """On screen (a page of a hidden tab waits until shown)."""
        return self.isVisible()

    def mark_dirty(self) -> None:
        """The model or prompt changed: recompute now if on screen, else when next shown."""
        self.redraw()

    def refresh(self) -> None:
        self.stale = False
        try:
            self.compute()
        except NoModel:
            self.say("No model yet: build, train or open one (Train tab, File menu); this page reads it.")
        except Exception as exc:  # a prompt the tokenizer cannot read, a bad control value
            self.say(f"Cannot compute: {exc}", error=True)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self.stale:
            self.refresh()

    def say(self, text: str, *, error: bool = False) -> None:
        self.message.setStyleSheet("color: #b00020;" if error else "")
        self.message.setText(text)

    # ---- background jobs ---------------------------------------------------------------------
    def submit(self, key: str, fn: Callable[[], R], done: Callable[[R], None]) -> None:
        """Run ``fn()`` off the GUI thread; ``done(result)`` in the GUI thread if still the newest."""

        def callback(result, error):  # only ever the newest request's result (ComputeWorker)
            if error is not None:
                self.say(f"{type(error).__name__}: {error}", error=True)
                return
            self.results[key] = result
            try:
                done(result)
            except Exception as exc:  # a drawing bug must not take the app down
                traceback.print_exc()
                self.say(f"Cannot draw: {exc}", error=True)

        note = sharing_note(self.session)
        if note and key not in self.results:  # nothing drawn yet: say why it takes a while
            self.say(f"Computing… ({note}).")
        self.session.compute.submit(f"labs.{self.slug}.{key}", fn, callback)

    # ---- model and prompt --------------------------------------------------------------------
    def require_model(self):
        model = self.session.model
        if model is None or self.session.tokenizer is None:
            raise NoModel()
        return model, self.session.tokenizer

    def require_source(self):
        """The session's data source (what a training comparison trains on)."""
        if self.session.source is None:
            raise ValueError("choose a data source first (the Data panel)")
        return self.session.source

    def prompt_text(self) -> str:
        if self._prompt_source is not None:
            return self._prompt_source()
        return self.session.probe_prompt

    def prompt_ids(self, max_tokens: int | None = None) -> tuple[list[int], list[str]]:
        """The prompt's token ids and their axis labels: the labs read a prompt from its *start*
        (``keep="first"``: its first ``max_tokens``, at most the context), characters the vocabulary
        lacks replaced."""
        model, tok = self.require_model()
        limit = (
            model.config.core.context_length
            if max_tokens is None
            else min(model.config.core.context_length, max_tokens)
        )
        prompt = encode_prompt(tok, self.prompt_text(), limit, keep="first", errors="replace")
        return list(prompt.ids), list(prompt.labels)


def describe_model(session) -> str:
    """One line about the model the labs read (shape, positions, mask, training step)."""
    model = session.model
    if model is None:
        return "no model yet"
    c = model.config
    if session.step:
        trained = f"step {session.step}"
    elif session.checkpoint_meta.get("kind") not in (None, "ours"):  # a GGUF file, an HF folder, …
        trained = "weights as opened"
    else:
        trained = "untrained"
    mask = "causal" if c.core.causal else "no mask"
    return (
        f"{c.core.n_layers} layers × {c.attention.n_heads} heads, d_model {c.core.d_model}, d_k {c.d_head}, "
        f"{c.positional.positions} "
        "positions, "
        f"{c.normalization.norm_position}-{c.normalization.norm}, scale {c.attention.attn_scale}, {mask}; "
        f"{trained}"
    )
