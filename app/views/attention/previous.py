"""What the Attention tab says while its pages show a prompt other than the one asked for."""

from __future__ import annotations

from app.widgets.job_bar import JobBar, quoted


def mark_previous(bar: JobBar, shown, why: str = "") -> None:
    """Mark the pages as showing the previous prompt (``shown``: its Inspection, or None), from the moment
    the input changes until the new run is drawn (greyed and said, see :meth:`JobBar.set_stale`); ``why``:
    what became of the new run (it failed, it was cancelled), said at once."""
    if shown is None:
        bar.set_stale(why or None, at_once=True)
        return
    note = f"Showing the previous prompt {quoted(shown.prompt)} ({len(shown.ids):,} tokens)"
    if why:
        bar.set_stale(f"{why} {note}.", at_once=True)
    else:
        bar.set_stale(note + " until the new one is traced.")


__all__ = ["mark_previous"]
