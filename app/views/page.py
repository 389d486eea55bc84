"""The page protocol every tab's sub-views follow, and a lazy base class that implements it.

A tab with pages (Attention, Compare, ...) keeps what its pages draw in a Qt-free state object
(``app/views/<tab>/state.py``, signals from :mod:`app.state`). A page:

- builds its widgets the first time it is needed (:meth:`Page.ensure_built`: plots are costly to
  create, and most sessions never open most pages);
- draws from the state in :meth:`Page.refresh`, and is only marked ``stale`` while out of view:
  the tab refreshes the page in view, and a stale page when it comes into view, so a new result costs
  the drawing of one page whatever the number of pages;
- names what File → Export writes (:meth:`Page.export_targets`) and brings itself into the state its
  screenshot shows (:meth:`Page.prepare_screenshot`); the tab's ``screenshot_pages`` and
  ``export_targets`` hooks go through them.
"""

from __future__ import annotations

from collections.abc import Callable
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


__all__ = ["LazyPage", "Page", "panel_beside_pages"]
