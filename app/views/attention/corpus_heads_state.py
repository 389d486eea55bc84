"""The Heads-over-a-corpus page's part of the Attention tab's state (:class:`CorpusHeadsState`, a base
of :class:`~app.views.attention.state.AttentionState`): the page's inputs, the corpus runs already
made (each kept with the key of what it was computed from), the last error, and one signal. No Qt.

A run depends on the weights and the inputs, not on the prompt: its key is (the model's ``id``, its
training step, corpus, prompts ``N``, tokens ``T``). The last :data:`KEPT_RUNS` results are kept, so
going back to inputs that ran before shows their result at once (the on-disk cache of
:func:`model.interp.corpus.corpus_run` keeps them across sessions).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from app.core.state import Signal

if TYPE_CHECKING:
    from model.interp.corpus import HeadScores

#: What a run is computed from (see the module docstring).
RunKey = tuple
#: The page's inputs and their defaults: ``corpus`` "" is the session's data; ``alike``: what places and
#: groups the heads that behave alike (a key of :data:`model.interp.corpus.ALIKE_BASES`).
CORPUS_DEFAULTS: dict[str, Any] = {
    "corpus": "", "prompts": 64, "seq_len": 64, "score": "induction", "alike": "scores"
}  # fmt: skip
#: Results kept in memory (the newest last).
KEPT_RUNS = 8


class CorpusHeadsState:
    """What the Heads-over-a-corpus page reads and sets (see the module docstring)."""

    #: (what): ``"result"``, ``"error"`` or ``"setup"`` changed
    corpus_changed = Signal()

    def __init__(self) -> None:
        self.corpus_setup: dict[str, Any] = dict(CORPUS_DEFAULTS)
        self.corpus_results: dict[RunKey, HeadScores] = {}
        #: (key, one line): why the run of ``key`` could not be made
        self.corpus_error: tuple[RunKey, str] | None = None

    def set_corpus_setup(self, **values) -> bool:
        """Change the page's inputs (keys of :data:`CORPUS_DEFAULTS`); whether they changed."""
        setup = {**self.corpus_setup, **values}
        if setup == self.corpus_setup:
            return False
        self.corpus_setup = setup
        self.corpus_changed.emit("setup")
        return True

    def set_corpus_result(self, key: RunKey, result: HeadScores) -> None:
        self.corpus_results.pop(key, None)
        self.corpus_results[key] = result
        while len(self.corpus_results) > KEPT_RUNS:
            del self.corpus_results[next(iter(self.corpus_results))]
        self.corpus_changed.emit("result")

    def corpus_result_for(self, key: RunKey | None) -> HeadScores | None:
        return self.corpus_results.get(key) if key is not None else None

    def set_corpus_error(self, key: RunKey, message: str) -> None:
        self.corpus_error = (key, message)
        self.corpus_changed.emit("error")

    def corpus_error_for(self, key: RunKey | None) -> str:
        """Why the run of ``key`` could not be made ('' when it could, or was not tried)."""
        e = self.corpus_error
        return e[1] if e is not None and key is not None and e[0] == key else ""

    def forget_corpus(self) -> None:
        """No model: forget the runs (their keys would not match a new one anyway)."""
        self.corpus_results = {}
        self.corpus_error = None


__all__ = ["CORPUS_DEFAULTS", "KEPT_RUNS", "CorpusHeadsState", "RunKey"]
