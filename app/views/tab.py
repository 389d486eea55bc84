"""What the window asks of a tab (:class:`Tab`), what a tab may ask of the window (:class:`TabHost`),
and :class:`TabBase`, the widget every tab derives from, which answers every hook with "nothing".

A tab is built from the window's registry (``app.shell.window.TABS``) as ``Class(session)``. The window
then calls :meth:`Tab.attach` with itself as the host, and from then on talks to the tab only through
the hooks below; a tab that has nothing to say for one keeps :class:`TabBase`'s default. Beside it,
:class:`app.views.page.Page` is the same contract one level down: a tab's pages.

===========================  ====================================================================
hook                         what the window does with it
===========================  ====================================================================
``docks``                    the setup docks (keys of ``MainWindow.docks``: "data", "model",
                             "training") the tab wants beside it; the others are hidden while it is
                             current. ``None`` keeps the user's own layout.
``attach(host)``             the window the tab lives in (:class:`TabHost`); what a tab asks of
                             another tab is a message on the session's hub instead
                             (:mod:`app.session.messages`, :meth:`TabBase.listen`)
``on_activated()``           the tab became the current one (compute lazily here)
``current_page``             the page in front (:class:`~app.views.page.Page`), or None: its
                             header text is Help → What am I looking at?, unless ``current_help()``
                             says otherwise
``current_help()``           ``(title, html)`` for Help → What am I looking at? (F1), or None
``menu_actions()``           actions to add to the named menus
``export_targets()``         what File → Export current view writes, by name (empty: the whole tab)
``screenshot_pages()``       named sub-pages: the screenshot command calls each callable (which
                             shows that page), then renders the tab
``show_page(key)``           bring the page ``key`` forward (KeyError when there is none)
``wait_ready(timeout)``      wait until what the tab computes in the background is drawn
``set_prompt(text)``         run ``text`` as the tab's prompt (a tab without one ignores it)
``save_state(settings)``     persist what the tab wants between launches
``restore_state(settings)``  and read it back
``shutdown()``               the window closes: stop the tab's own workers and wait for them
===========================  ====================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QWidget

from app.core.hub import Hub, Subscription

if TYPE_CHECKING:
    from app.session.settings import AppSettings
    from app.views.page import Page

M = TypeVar("M")

#: a screenshot's sub-page: its name and what shows it
ScreenshotPage = tuple[str, Callable[[], object]]


class TabHost(Protocol):
    """What a tab may ask of the window it lives in (the window is the one host). What it asks of
    another tab is a message on the session's hub instead (:meth:`TabBase.listen`)."""

    def maybe_save(self, what: str) -> bool:
        """Whether the shown model may be replaced by ``what`` ("Start a fresh run"): asks about
        unsaved training first."""
        ...

    def save_checkpoint_as(self) -> None:
        """File → Save checkpoint as…: asks where, then saves."""
        ...


class NoHost:
    """The host of a tab built outside a window (a test, a script): replacing the model needs no
    question, and there is nowhere to save to."""

    def maybe_save(self, what: str) -> bool:
        return True

    def save_checkpoint_as(self) -> None:
        return None


class Tab(Protocol):
    """What the window asks of a tab; see the module docstring for each hook."""

    docks: tuple[str, ...] | None

    def attach(self, host: TabHost) -> None: ...
    def on_activated(self) -> None: ...
    @property
    def current_page(self) -> Page | None: ...
    def current_help(self) -> tuple[str, str] | None: ...
    def menu_actions(self) -> dict[str, list[QAction]]: ...
    def export_targets(self) -> dict[str, QWidget]: ...
    def screenshot_pages(self) -> list[ScreenshotPage]: ...
    def show_page(self, key: str) -> Page: ...
    def wait_ready(self, timeout: float = 60.0) -> bool: ...
    def set_prompt(self, text: str) -> None: ...
    def save_state(self, settings: AppSettings) -> None: ...
    def restore_state(self, settings: AppSettings) -> None: ...
    def shutdown(self) -> None: ...


class TabBase(QWidget):
    """A :class:`Tab` whose every hook does nothing: a tab overrides the ones it has something for."""

    docks: tuple[str, ...] | None = None

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.host: TabHost = NoHost()

    def attach(self, host: TabHost) -> None:
        self.host = host

    def listen(self, hub: Hub, message_type: type[M], handler: Callable[[M], object]) -> Subscription:
        """Answer ``message_type`` requests of other tabs (:mod:`app.session.messages`) with ``handler``
        for as long as this tab exists: the subscription ends when the widget is destroyed (or its
        Python object collected, for a bound method)."""
        sub = hub.subscribe(message_type, handler)
        self.destroyed.connect(lambda *_: sub.cancel())
        return sub

    def on_activated(self) -> None:
        return None

    @property
    def current_page(self) -> Page | None:
        return None

    def current_help(self) -> tuple[str, str] | None:
        return None

    def menu_actions(self) -> dict[str, list[QAction]]:
        return {}

    def export_targets(self) -> dict[str, QWidget]:
        return {}

    def screenshot_pages(self) -> list[ScreenshotPage]:
        return [("", lambda: None)]

    def show_page(self, key: str) -> Page:
        raise KeyError(f"the tab has no page {key!r}")

    def wait_ready(self, timeout: float = 60.0) -> bool:
        return True

    def set_prompt(self, text: str) -> None:
        return None

    def save_state(self, settings: AppSettings) -> None:
        return None

    def restore_state(self, settings: AppSettings) -> None:
        return None

    def shutdown(self) -> None:
        return None


__all__ = ["NoHost", "ScreenshotPage", "Tab", "TabBase", "TabHost"]
