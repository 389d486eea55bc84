"""The Attention tab's answers to the session: what a new model, a training frame, the end of training
and a new probe prompt do to the prompt in the box and the run on the pages.

A new model forgets the results (and the validation batches of the old shape), keeps the switched-off
heads that still exist and puts the probe prompt (or, when the new tokenizer cannot encode that
either, the first fallback prompt it can) in place of a prompt it cannot encode (or of none); then
the prompt runs again, as it does when training ends. While training, with "Follow training" on and
the tab in view, a training frame re-runs the prompt at most every
:attr:`AttentionTab.FOLLOW_INTERVAL_S`, and only once the last run and its follow-up jobs are in (so a
head's scores are never superseded before they arrive).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject

from app.views.attention.host import AttentionHost
from app.views.attention.jobs import AttentionJobs
from model.text.sources import prompt_for

if TYPE_CHECKING:
    from model.nn.gpt import GPT


class SessionFollower(QObject):
    """Connects the Attention tab ``tab`` (and its ``jobs``) to its session's signals (a child of
    ``parent``, the tab's widget, so the connections end with it)."""

    def __init__(self, tab: AttentionHost, jobs: AttentionJobs, parent: QObject):
        super().__init__(parent)
        self.tab = tab
        self.jobs = jobs
        self._last_follow = 0.0
        s = tab.session
        s.modelChanged.connect(self._on_model_changed)
        s.trainingFinished.connect(lambda *_: tab.schedule())
        s.traceUpdated.connect(self._on_training_frame)
        s.probePromptChanged.connect(self._on_probe_prompt)

    def _on_model_changed(self, model: GPT | None) -> None:
        tab = self.tab
        tab.state.forget_results()
        self.jobs.val_cache.clear()
        if model is not None:
            tab.state.restrict_ablation(model.config.core.n_layers, model.config.attention.n_heads)
            tok = tab.session.tokenizer
            if tok is not None and tab.prompt():
                try:
                    tok.encode(tab.prompt())
                except ValueError:  # text the new model cannot read: the first candidate it can
                    # (the session adopts its own probe prompt only after this signal)
                    tab.set_prompt(prompt_for(tok, tab.session.probe_prompt or ""), run=False)
            elif not tab.prompt():
                tab.set_prompt(tab.session.probe_prompt or "", run=False)
        else:
            tab.state.clear()
        tab.update_for_model()
        tab.schedule()

    def _on_training_frame(self, _frame: object) -> None:
        tab = self.tab
        if not (tab.follows_training and tab.session.is_training):
            return
        if tab.session.compute.outstanding("attention."):
            return  # the last run or its follow-ups (the head's scores, metrics) are not in yet
        now = time.perf_counter()
        if now - self._last_follow >= tab.FOLLOW_INTERVAL_S:
            self._last_follow = now
            tab.run_inspection()

    def _on_probe_prompt(self, text: str) -> None:
        if not self.tab.prompt() and text:
            self.tab.set_prompt(text)


__all__ = ["SessionFollower"]
