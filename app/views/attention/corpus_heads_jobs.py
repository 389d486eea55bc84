"""The Heads-over-a-corpus page's job (:class:`CorpusHeadsJobs`, a part of
:class:`~app.views.attention.jobs.AttentionJobs`).

One job, ``attention.corpus`` (:data:`~app.views.attention.job_keys.CORPUS_JOB`): every head scored over
``N`` prompts of ``T`` tokens of the corpus (:func:`model.interp.corpus.corpus_run`), in the session's
compute worker (progress in prompts, the time left, Cancel), never on the GUI thread. It is keyed by the
weights and the page's inputs, not by the prompt (a new prompt does not redo it), and a run made before
with the same key comes back from memory at once (from the on-disk cache when the session is new). The
user's Cancel holds until an input changes; a cancelled run writes nothing, to the state or the cache.

A top example names its prompt by its index in the run; :meth:`CorpusHeadsJobs.example_prompt` draws
that prompt again (the run's prompts are drawn from one seeded generator, batch by batch) from the
corpus the run read, kept beside its result.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.session.compute import job_threads
from app.views.attention.job_keys import CORPUS_JOB
from app.widgets.corpus_box import corpus_spec
from model.runtime import with_threads

if TYPE_CHECKING:
    from app.views.attention.host import AttentionHost
    from model.interp.corpus import HeadScores
    from model.text.sources import DataSource


class CorpusHeadsJobs:
    """The Heads-over-a-corpus page's job of an Attention tab (see the module docstring)."""

    def __init__(self, tab: AttentionHost):
        self.tab, self.state, self.session = tab, tab.state, tab.session
        self.state.corpus_changed.connect(self._on_changed)
        self._asked: tuple | None = None  # the key of the run on its way
        self._sources: dict[
            tuple, DataSource
        ] = {}  # key -> the corpus its run read (for its examples' prompts)

    def corpus(self) -> str:
        """The corpus the page's inputs name (:func:`~app.widgets.corpus_box.corpus_spec`)."""
        return corpus_spec(self.session, self.state.corpus_setup["corpus"])

    def key(self) -> tuple | None:
        """What the run the inputs ask for is computed from; None without a model."""
        model = self.session.model
        if model is None:
            return None
        s = self.state.corpus_setup
        return (id(model), self.session.step, self.corpus(), s["prompts"], s["seq_len"])

    def _on_changed(self, what: str) -> None:
        """New inputs ask for their run; a new result redraws the page (when it is the one in view)."""
        page = self.tab.current_page
        if not page.needs_corpus_heads:
            return
        page.refresh()
        if what == "setup" and self.state.inspection is not None:
            self.ready()

    def ready(self) -> bool:
        """Ask for the run the inputs name unless it is here, failed or was cancelled; True when
        nothing is on its way."""
        st, key = self.state, self.key()
        if key is None or st.inspection is None or st.corpus_error_for(key):
            return True
        if st.corpus_result_for(key) is not None or self.cancelled():
            return True
        self._run(key)
        return False

    def cancelled(self) -> bool:
        """Whether the user cancelled the run the inputs ask for (asked again once they change)."""
        ended = self.session.jobs.get(CORPUS_JOB)
        return self._asked == self.key() and ended is not None and ended.state == "cancelled"

    def _run(self, key: tuple) -> None:
        from model.interp.corpus import CorpusSettings, corpus_run
        from model.interp.corpus.run import open_source

        s = self.session
        if self._asked == key and s.compute.outstanding(CORPUS_JOB):
            return
        self._asked = key
        model, tok, spec = s.model, s.tokenizer, self.corpus()
        settings = CorpusSettings(spec, n_prompts=key[3], seq_len=key[4])

        def fn():
            source = open_source(spec, tok)
            return source, corpus_run(model, tok, settings, source=source)

        def done(res, err):
            if err is not None:
                self.state.set_corpus_error(key, str(err))  # the page says it; not asked again
                return
            if res is not None:
                self._sources[key] = res[0]
                self.state.set_corpus_result(key, res[1])
                self._sources = {k: v for k, v in self._sources.items() if k in self.state.corpus_results}

        subject = f"{spec} ({key[3]:,} prompts × {key[4]} tokens)"
        s.compute.submit(
            CORPUS_JOB,
            with_threads(job_threads(s), fn),
            done,
            title="Scoring every head over",
            subject=subject,
        )

    def example_prompt(self, result: HeadScores, prompt: int) -> str | None:
        """The text of prompt ``prompt`` of the run ``result`` (its BOS left to the tab's own run to add),
        or None when the corpus that run read is not at hand."""
        from model.interp.corpus.run import batch_size_for, bos_prefix, prompt_batches

        key = next((k for k, r in self.state.corpus_results.items() if r is result), None)
        source = self._sources.get(key) if key is not None else None
        model, tok = self.session.model, self.session.tokenizer
        if source is None or model is None or tok is None:
            return None
        settings = result.settings
        prefix = bos_prefix(tok, settings.seq_len)
        for first, ids in prompt_batches(source, settings, prefix, batch_size_for(model.config, settings)):
            if first <= prompt < first + len(ids):
                return tok.decode([int(i) for i in ids[prompt - first, len(prefix) :]])
        return None


__all__ = ["CorpusHeadsJobs"]
