"""What the Attention tab's helpers ask of the tab: :class:`AttentionHost`.

The follow-up jobs (``jobs``), the exports (``exports``), the answers to the session's signals
(``follow``) and the wait for a finished run (``readiness``) are parts of the tab kept in modules of
their own. They reach the tab only through this protocol, which :class:`~app.views.attention.tab.
AttentionTab` implements: its state and session, the page in view, the prompt and its runs, the status
line, and the signals a finished job or export announces itself with. Everything else of the tab (its
widgets, its timers, its request counter) stays the tab's own; the follower and the wait are handed
the tab's jobs beside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import SignalInstance

if TYPE_CHECKING:
    from app.session.session import Session
    from app.session.settings import AppSettings
    from app.views.attention.base import AttentionPage
    from app.views.attention.state import AttentionState


class AttentionHost(Protocol):
    """The Attention tab as its helpers see it (see the module docstring)."""

    #: while training, re-run the prompt at most this often (s) when "Follow training" is on
    FOLLOW_INTERVAL_S: float

    # the signals the helpers emit (the tab's module docstring says what each carries)
    headDetailReady: SignalInstance
    metricsReady: SignalInstance
    ablationReady: SignalInstance
    aggregatesReady: SignalInstance
    nextTokensReady: SignalInstance
    causalReady: SignalInstance
    expertsReady: SignalInstance
    circuitsReady: SignalInstance
    exported: SignalInstance

    @property
    def state(self) -> AttentionState:
        """What the pages draw; the helpers write their results into it."""
        ...

    @property
    def session(self) -> Session:
        """The session: its model, tokenizer, training and compute worker."""
        ...

    @property
    def current_page(self) -> AttentionPage:
        """The page in view."""
        ...

    @property
    def threads(self) -> int | None:
        """The torch threads the current run was planned with (its follow-up jobs use as many)."""
        ...

    @property
    def settings(self) -> AppSettings | None:
        """The app's settings (the last export folder), once the window restored the tab; else None."""
        ...

    @property
    def run_due(self) -> bool:
        """Whether the prompt must run again (it was edited, or the model or the switched-off heads
        changed, since it last ran)."""
        ...

    @property
    def latest_request(self) -> int:
        """The number of the newest run asked for (the state's ``request`` once its result is in)."""
        ...

    @property
    def follows_training(self) -> bool:
        """Whether a training frame may re-run the prompt: "Follow training" is on and the tab in view."""
        ...

    def show_status(self, text: str, *, error: bool = False) -> None:
        """Put ``text`` (rich text) in the prompt bar's status line, in red for an ``error``."""
        ...

    def fail(self, message: str) -> None:
        """Say ``message`` in red in the status line and emit ``failed(message)``."""
        ...

    def prompt(self) -> str:
        """The text in the prompt box."""
        ...

    def set_prompt(self, text: str, *, run: bool = True) -> None:
        """Put ``text`` in the prompt box; ``run`` runs it (after the debounce) like typing does."""
        ...

    def schedule(self) -> None:
        """Run the prompt after the debounce (or when the tab is next shown)."""
        ...

    def run_inspection(self) -> int | None:
        """Run the prompt now; the request number, or None when it cannot run."""
        ...

    def update_for_model(self) -> None:
        """Show the pages the session's model has something for, or the no-model view without one."""
        ...


__all__ = ["AttentionHost"]
