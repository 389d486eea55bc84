"""What the Attention tab says while its pages show a prompt other than the one asked for."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QWidget

from app.views.attention.job_keys import INSPECT_JOB
from app.widgets.job_bar import JobBar, Veil, quoted


def mark_previous(bar: JobBar, shown, why: str = "", header: Veil | None = None) -> None:
    """Mark the pages as showing the previous prompt (``shown``: its Inspection, or None), from the moment
    the input changes until the new run is drawn (greyed and said, see :meth:`JobBar.set_stale`); ``why``:
    what became of the new run (it failed, it was cancelled), said at once. The ``header`` (the line about
    the run shown, under its ``Veil``) is greyed while the new run is on its way."""
    if header is not None:
        header.cover(not why and shown is not None)  # a failure's or a Cancel's own words stay readable
    if shown is None:
        bar.set_stale(why or None, at_once=True)
        return
    note = f"Showing the previous prompt {quoted(shown.prompt)} ({len(shown.ids):,} tokens)"
    if why:
        bar.set_stale(f"{why} {note}.", at_once=True)
    else:
        bar.set_stale(note + " until the new one is traced.")


def trace_bar(session, pages: QWidget, header: QLabel) -> tuple[JobBar, Veil]:
    """The busy line of the trace (``attention.inspect``) lying over the bottom of the ``pages`` it greys,
    and the veil of the ``header`` that describes the run shown."""
    bar = JobBar(session.jobs, (INSPECT_JOB,), cancel=session.compute.abort)
    bar.cover(pages)
    bar.float_over(pages)
    return bar, Veil(header)


def mark_current(bar: JobBar, header: Veil) -> None:
    """The pages and the header (under its ``Veil``) show the run the input asks for."""
    bar.set_stale(None)
    header.cover(False)


__all__ = ["mark_current", "mark_previous", "trace_bar"]
