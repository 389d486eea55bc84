"""A path as a person reads it in a label: the home folder written ``~``."""

from __future__ import annotations

from pathlib import Path


def shown_path(where: str | Path, home: Path | None = None) -> str:
    """``where`` with the home folder (``home``, default the user's) as ``~``; as given outside it."""
    home = Path.home() if home is None else home
    try:
        rel = Path(where).relative_to(home)
    except ValueError:
        return str(where)
    return "~" if str(rel) == "." else f"~/{rel.as_posix()}"


__all__ = ["shown_path"]
