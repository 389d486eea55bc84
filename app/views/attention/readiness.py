"""When the Attention tab is ready to be looked at: the prompt has run and the page in view has
everything it draws (what screenshots, benchmarks and the window walk wait for)."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication

from app.session.event_wait import wait_until
from app.views.attention.host import AttentionHost
from app.views.attention.jobs import AttentionJobs


def wait_ready(tab: AttentionHost, jobs: AttentionJobs, timeout: float = 60.0) -> bool:
    """Process events until the prompt has run and the page in view has everything it needs
    (screenshots, benchmarks). Runs the prompt first when it is out of date."""
    if tab.session.model is None:
        return True
    st = tab.state
    if (tab.run_due or st.inspection is None) and tab.run_inspection() is None:
        return False
    page = tab.current_page
    page.ensure_built()

    def ready() -> bool:
        if st.inspection is None or st.request != tab.latest_request:
            return False
        if not tab.session.compute.idle:
            return False
        if page.stale:
            page.refresh()  # also settles what it needs (e.g. the heads the Aggregates page averages)
        if not jobs.for_page(page):
            return False
        if page.stale:
            page.refresh()
        return not page.stale

    ok = wait_until(ready, timeout)

    for _ in range(3):  # let new child widgets (e.g. a picker's buttons) lay out before a grab
        QApplication.processEvents()
    return ok
