"""The page protocol every tab's sub-views follow, and a lazy base class that implements it.

A tab with pages (Attention, Compare, ...) keeps what its pages draw in a Qt-free state object
(``app/views/<tab>/state.py``, signals from :mod:`app.core.state`). A page:

- builds its widgets the first time it is needed (:meth:`Page.ensure_built`: plots are costly to
  create, and most sessions never open most pages);
- draws from the state in :meth:`Page.refresh`, and is only marked ``stale`` while out of view:
  the tab refreshes the page in view, and a stale page when it comes into view, so a new result costs
  the drawing of one page whatever the number of pages;
- names what File → Export writes (:meth:`Page.export_targets`) and brings itself into the state its
  screenshot shows (:meth:`Page.prepare_screenshot`); the tab's ``screenshot_pages`` and
  ``export_targets`` hooks go through them, with :func:`screenshot_steps` and :func:`page_targets`;
- explains itself: ``help_html()`` is the text of its header (a ``blurb`` by default), what Help →
  What am I looking at? shows (:func:`page_help`).

Two bases implement it: :class:`LazyPage` (built on first use, drawn from a state object: Attention,
and the Labs pages, which their tab creates on first use) and :class:`PushedPage` (built with its tab,
which pushes each new result into it: Budget). :func:`bring_into_view` is what a tab does when a page
comes into view.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, runtime_checkable

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QSplitter, QVBoxLayout, QWidget


@runtime_checkable
class Page(Protocol):
    """One sub-view of a tab (see the module docstring)."""

    #: the page's tab text
    title: str
    #: short name for file names and screenshots
    key: str
    #: out of date: redraw when next in view
    stale: bool

    def ensure_built(self) -> None:
        """Build the widgets if not done yet."""

    def refresh(self) -> None:
        """Redraw from the tab's state (clears ``stale`` once everything is drawn)."""

    def clear(self) -> None:
        """Forget what is drawn (the model went away)."""

    def export_targets(self) -> dict[str, QWidget]:
        """What File → Export writes, by name."""

    def prepare_screenshot(self) -> None:
        """Bring the page into the state its screenshot shows."""


class PushedPage(QWidget):
    """A :class:`Page` built with its tab, which pushes every new result into it (so it is never
    stale); it writes nothing to File → Export unless it says so."""

    title = ""
    key = ""
    stale = False
    #: one sentence for the user (Help → What am I looking at?)
    blurb = ""

    def help_html(self) -> str:
        """The page's own explanation: its ``blurb``."""
        return self.blurb

    def ensure_built(self) -> None:
        """Built in ``__init__``."""

    def refresh(self) -> None:
        """Drawn when its tab pushes a result."""

    def clear(self) -> None:
        """Nothing to forget by default."""

    def export_targets(self) -> dict[str, QWidget]:
        return {}

    def prepare_screenshot(self) -> None:
        """Nothing by default: the page as its tab drew it."""


class LazyPage(QWidget):
    """A :class:`Page` built on first use over a state object ``state``.

    Subclasses set ``title``/``key``/``blurb``, create their widgets in :meth:`build` and draw in
    :meth:`refresh`; :meth:`follow` connects a state signal so that a page not built yet only becomes
    stale.
    """

    title = ""
    key = ""
    #: one sentence for the user (under the title, and the page tab's tooltip)
    blurb = ""

    def __init__(self, state, parent: QWidget | None = None):
        super().__init__(parent)
        self.state = state
        self.stale = True
        self.built = False

    def ensure_built(self) -> None:
        if not self.built:
            self.built = True
            self.build()

    def build(self) -> None:
        """Create the page's widgets (called once, by :meth:`ensure_built`)."""

    def refresh(self) -> None:
        """Redraw from the state."""

    def clear(self) -> None:
        """Forget what is drawn."""

    def export_targets(self) -> dict[str, QWidget]:
        """The page itself by default."""
        return {self.key: self}

    def prepare_screenshot(self) -> None:
        """Nothing by default: the page as the state has it."""

    def help_html(self) -> str:
        """The page's own explanation, the text of its header: its ``blurb`` by default."""
        return self.blurb

    def in_view(self) -> bool:
        """Whether this is the page its tab shows (even while the tab itself is hidden)."""
        return self.built and self.isVisibleTo(self.window())

    def redraw(self) -> None:
        """Refresh now if in view, else mark stale."""
        if self.in_view():
            self.refresh()
        else:
            self.stale = True

    def follow(self, signal, slot: Callable[..., Any]) -> None:
        """Connect ``slot`` to a state ``signal``; until the page is built the signal only marks it stale."""

        def call(*args):
            if self.built:
                slot(*args)
            else:
                self.stale = True

        signal.connect(call)


def bring_into_view(page: Page) -> None:
    """What a tab does when ``page`` comes into view: build it if needed, redraw it if stale."""
    page.ensure_built()
    if page.stale:
        page.refresh()


def page_help(page: Any) -> str:
    """What ``page`` says about itself, as rich text: its ``help_html()``, else its ``blurb``; "" when
    it says nothing (Help → What am I looking at? then says what the tab is)."""
    hook = getattr(page, "help_html", None)
    text = hook() if callable(hook) else getattr(page, "blurb", "")
    return text if isinstance(text, str) else ""


def page_targets(page: Page | None, prefix: str = "") -> dict[str, QWidget]:
    """``page``'s export targets ({} without a page), each name after ``prefix`` (a tab's
    ``export_targets`` hook: the page in view)."""
    if page is None:
        return {}
    page.ensure_built()
    return {f"{prefix}{name}": widget for name, widget in page.export_targets().items()}


def screenshot_steps(
    keys: Iterable[str],
    page_of: Callable[[str], Page],
    show: Callable[[str], Any],
    *,
    prefix: str = "",
    before: Callable[[], Any] | None = None,
    settle: Callable[[Page], Any] | None = None,
) -> list[tuple[str, Callable[[], bool]]]:
    """A tab's ``screenshot_pages`` hook: one ``(prefix + key, go)`` per page key, in order.

    ``go()`` runs ``before()``, builds the page (``page_of(key)``) and calls its
    :meth:`Page.prepare_screenshot`, shows it (``show(key)``), then waits with ``settle(page)`` until
    what it draws is computed; it returns False when ``settle`` gave up (False), else True.
    """

    def step(key: str) -> Callable[[], bool]:
        def go() -> bool:
            if before is not None:
                before()
            page = page_of(key)
            page.ensure_built()
            page.prepare_screenshot()
            show(key)
            return settle is None or settle(page) is not False

        return go

    return [(f"{prefix}{key}", step(key)) for key in keys]


def panel_beside_pages(owner: QWidget, panel: QWidget, pages: QWidget, panel_width: int) -> QSplitter:
    """Lay ``owner`` out as a tab with a setup panel: ``panel`` left at ``panel_width`` px (it keeps
    its width when the window grows), ``pages`` right taking the rest; returns the splitter."""
    split = QSplitter(Qt.Orientation.Horizontal)
    split.addWidget(panel)
    split.addWidget(pages)
    split.setStretchFactor(0, 0)
    split.setStretchFactor(1, 1)
    split.setSizes([panel_width, 1100])
    root = QVBoxLayout(owner)
    root.setContentsMargins(4, 4, 4, 4)
    root.addWidget(split)
    return split


__all__ = [
    "LazyPage",
    "Page",
    "PushedPage",
    "bring_into_view",
    "page_help",
    "page_targets",
    "panel_beside_pages",
    "screenshot_steps",
]
