"""What the Features tab shows, without Qt: the SAE open and, for each result, the inputs it is of.

The SAE shown is the one of ``folder``, loaded for the session's model (``version`` counts each load).
Every result (the evaluation, the corpus pass of the features, one feature's dashboard) is kept with
the :meth:`FeaturesState.key` it was computed for, ``(model, step, folder, version)``; a page draws a
result whose key is not the current one greyed, under a line saying what it is of, until it is
recomputed (:meth:`FeaturesState.current`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.core.state import Signal


@dataclass
class Kept:
    """A result and the key of the inputs it was computed for; ``what`` names them for a stale line."""

    key: tuple
    value: Any
    what: str


class FeaturesState:
    """The SAE open and the results of the tab (module docstring). ``sae_changed(folder)`` when another
    SAE (or the same folder loaded again) is shown; ``result_changed(name)`` when a result is kept."""

    sae_changed = Signal()
    result_changed = Signal()

    def __init__(self) -> None:
        self.folder = ""
        self.sae: Any = None
        self.model_id = 0
        self.step = 0
        self.version = 0
        self.results: dict[str, Kept] = {}

    def key(self) -> tuple:
        """The current inputs: the model (its identity and step) and the SAE (its folder and load)."""
        return (self.model_id, self.step, self.folder, self.version)

    def set_model(self, model_id: int, step: int) -> None:
        self.model_id, self.step = model_id, step

    def set_sae(self, folder: str, sae: Any) -> None:
        """Show ``sae`` (None: none could be loaded) from ``folder``: every result becomes stale."""
        self.folder, self.sae = folder, sae
        self.version += 1
        self.sae_changed.emit(folder)

    def keep(self, name: str, key: tuple, value: Any, what: str) -> None:
        self.results[name] = Kept(key, value, what)
        self.result_changed.emit(name)

    def get(self, name: str) -> Kept | None:
        return self.results.get(name)

    def current(self, name: str) -> bool:
        """Whether the result ``name`` is the current inputs' (False when there is none)."""
        kept = self.results.get(name)
        return kept is not None and kept.key == self.key()


__all__ = ["FeaturesState", "Kept"]
