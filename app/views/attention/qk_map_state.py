"""The Q–K map page's part of the Attention tab's state (:class:`QKMapState`, a base of
:class:`~app.views.attention.state.AttentionState`): the page's inputs, the head's joint query–key map,
the typed prompt's points placed in it and every head's thumbnail, each kept with the key of what it
was computed from, and one signal. No Qt.

A map depends on the weights and the inputs, not on the prompt: its key is (the model's ``id``, its
training step, layer, head, corpus, prompts, tokens, method), so a new prompt only places its own
points again (a follow-up of the run) and never recomputes the map; the thumbnails' key leaves out the
head, the method (PCA always) and the number of windows (a few, always).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.core.state import Signal

if TYPE_CHECKING:
    from model.interp.analysis.qk_map import PromptPoints, QKMap, Thumbnails

#: What the map is computed from (see the module docstring).
MapKey = tuple
#: The page's inputs and their defaults: ``corpus`` "" is the session's data.
QK_DEFAULTS: dict[str, Any] = {
    "layer": 0, "head": 0, "corpus": "", "prompts": 64, "seq_len": 32, "method": "pca", "colour": "kind",
}  # fmt: skip


class QKMapState:
    """What the Q–K map page reads and sets (see the module docstring)."""

    #: (what): ``"map"``, ``"prompt"``, ``"thumbs"``, ``"error"`` or ``"setup"`` changed
    qk_changed = Signal()

    def __init__(self) -> None:
        self.qk_setup: dict[str, Any] = dict(QK_DEFAULTS)
        self.qk_entry: tuple[MapKey, QKMap] | None = None
        #: (map key, run request, the points of the prompt of that run)
        self.qk_prompt_entry: tuple[MapKey, int, PromptPoints] | None = None
        self.qk_thumbs_entry: tuple[MapKey, Thumbnails] | None = None
        #: (key, one line): why the map of ``key`` could not be made (a corpus the tokenizer cannot read)
        self.qk_error: tuple[MapKey, str] | None = None

    def set_qk_setup(self, **values) -> bool:
        """Change the page's inputs (keys of :data:`QK_DEFAULTS`); whether they changed."""
        setup = {**self.qk_setup, **values}
        if setup == self.qk_setup:
            return False
        self.qk_setup = setup
        self.qk_changed.emit("setup")
        return True

    def set_qk_map(self, key: MapKey, qmap: QKMap) -> None:
        self.qk_entry = (key, qmap)
        self.qk_changed.emit("map")

    def qk_map_for(self, key: MapKey | None) -> QKMap | None:
        e = self.qk_entry
        return e[1] if e is not None and key is not None and e[0] == key else None

    def set_qk_prompt(self, key: MapKey, request: int, points: PromptPoints) -> None:
        self.qk_prompt_entry = (key, request, points)
        self.qk_changed.emit("prompt")

    def qk_prompt_for(self, key: MapKey | None, request: int) -> PromptPoints | None:
        e = self.qk_prompt_entry
        return e[2] if e is not None and key is not None and e[:2] == (key, request) else None

    def set_qk_thumbs(self, key: MapKey, thumbs: Thumbnails) -> None:
        self.qk_thumbs_entry = (key, thumbs)
        self.qk_changed.emit("thumbs")

    def qk_thumbs_for(self, key: MapKey | None) -> Thumbnails | None:
        e = self.qk_thumbs_entry
        return e[1] if e is not None and key is not None and e[0] == key else None

    def set_qk_error(self, key: MapKey, message: str) -> None:
        self.qk_error = (key, message)
        self.qk_changed.emit("error")

    def qk_error_for(self, key: MapKey | None) -> str:
        """Why the map of ``key`` could not be made ('' when it could, or was not tried)."""
        e = self.qk_error
        return e[1] if e is not None and key is not None and e[0] == key else ""

    def forget_qk(self) -> None:
        """No model: forget the maps (their keys would not match a new one anyway)."""
        self.qk_entry = self.qk_prompt_entry = self.qk_thumbs_entry = self.qk_error = None


__all__ = ["QK_DEFAULTS", "MapKey", "QKMapState"]
