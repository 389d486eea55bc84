"""What one tab asks of another, as typed messages on the session's hub (:class:`~app.core.hub.Hub`).

A tab never holds another tab: it publishes a request, and the tab that answers it subscribed to that
request's type in its own package. Each request names its answerer by the stable id of a tab in the
window's registry (``app.shell.window.TABS``), never by the title the tab bar shows.

==========================  ==================================  ===================================
message                     asked by                            answered by
==========================  ==================================  ===================================
:class:`CompareRuns`        History ("compare these steps")     Compare: the runs, A − B shown
:class:`InspectPrompt`      Train (generation: "this prompt")   Attention: the prompt run
:class:`OpenFeature`        Attention (a feature on the prompt) Features: that feature's dashboard
:class:`ShowTab`            :func:`ask`, after a request        the window: that tab brought forward
==========================  ==================================  ===================================

:func:`ask` publishes a request and, when a tab answered it, :class:`ShowTab` for that tab.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from app.core.hub import Hub
from app.session.compare_runs import Run


@dataclass(frozen=True)
class ShowTab:
    """Bring the tab ``tab`` (its stable id, e.g. ``"compare"``) forward: the window's job."""

    tab: str


@dataclass(frozen=True)
class TabRequest:
    """A request of one tab to another; ``tab`` is the stable id of the tab that answers it."""

    tab: ClassVar[str]


@dataclass(frozen=True)
class CompareRuns(TabRequest):
    """Add ``runs`` (in order) to the comparison, run ``prompt`` through them, and show the first two
    as A − B. The Compare tab renames a run whose name is taken, so read ``run.name`` afterwards."""

    tab: ClassVar[str] = "compare"
    runs: tuple[Run, ...]
    prompt: str


@dataclass(frozen=True)
class InspectPrompt(TabRequest):
    """Run ``text`` as the prompt whose every head is shown."""

    tab: ClassVar[str] = "attention"
    text: str


@dataclass(frozen=True)
class OpenFeature(TabRequest):
    """Show feature ``feature`` of the sparse autoencoder in the folder ``sae`` (SAELens's format):
    its dashboard."""

    tab: ClassVar[str] = "features"
    sae: str
    feature: int


@dataclass(frozen=True)
class SAEChosen:
    """An announcement, not a request: the sparse autoencoder in the folder ``sae`` was trained or
    opened, for pages that read features (the Attention tab's features on the prompt) to offer it."""

    sae: str


def ask(hub: Hub, request: TabRequest) -> bool:
    """Publish ``request`` on ``hub``; when a tab answered it, ask (:class:`ShowTab`) for that tab to be
    brought forward. False: no tab of this window answers it (it is not open)."""
    if hub.publish(request) == 0:
        return False
    hub.publish(ShowTab(request.tab))
    return True


#: every request a tab may make (a test checks that each names a tab of the registry)
REQUESTS: tuple[type[TabRequest], ...] = (CompareRuns, InspectPrompt, OpenFeature)

__all__ = [
    "REQUESTS",
    "CompareRuns",
    "InspectPrompt",
    "OpenFeature",
    "SAEChosen",
    "ShowTab",
    "TabRequest",
    "ask",
]
