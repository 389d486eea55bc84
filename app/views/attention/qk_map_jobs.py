"""The Q–K map page's jobs (:class:`QKMapJobs`, a part of :class:`~app.views.attention.jobs.AttentionJobs`).

Three jobs, each in the session's compute worker (progress, Cancel, superseded by a newer request
under its key), none on the GUI thread:

* ``attention.qkmap`` — the chosen head's map (:func:`model.interp.analysis.qk_map.qk_map`) over the
  corpus: keyed by the weights and the page's inputs, not by the prompt (a new prompt does not redo it);
* ``attention.qkthumbs`` — every head's small PCA map (:func:`~model.interp.analysis.qk_map.qk_thumbnails`);
* ``attention.run.attention.qkprompt`` — the prompt's queries and keys placed into the map
  (:func:`~model.interp.analysis.qk_map.project_prompt`), a follow-up of the run.

The corpus "" is the session's data: its source is used as it is when it reads the model's tokens, so
the default corpus is never encoded a second time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from app.session.compute import job_threads
from app.views.attention.job_keys import QK_MAP_JOB, QK_THUMBS_JOB
from app.widgets.corpus_box import corpus_spec
from model.interp.analysis import qk_map as qk
from model.runtime import with_threads

if TYPE_CHECKING:
    from app.views.attention.host import AttentionHost

#: Thumbnails: windows, tokens per window and points per head (PCA only, AttentionViz's first view).
THUMB_PROMPTS, THUMB_POINTS = 16, 150


class QKMapJobs:
    """The Q–K map page's jobs of an Attention tab (see the module docstring)."""

    def __init__(
        self, follow_up: Callable[[str, Callable[[], Any], Callable[[Any], None]], None], tab: AttentionHost
    ):
        #: the tab's ``AttentionJobs.submit``: a follow-up job of the run
        self.follow_up = follow_up
        self.tab, self.state, self.session = tab, tab.state, tab.session
        self.state.qk_changed.connect(self._on_changed)
        self._asked: dict[str, tuple] = {}  # job -> the key of the request on its way

    def corpus(self) -> str:
        """The corpus the page's inputs name (:func:`~app.widgets.corpus_box.corpus_spec`)."""
        return corpus_spec(self.session, self.state.qk_setup["corpus"])

    def key(self, *, thumbs: bool = False) -> tuple | None:
        """What the map (``thumbs``: the thumbnails, whose windows are :data:`THUMB_PROMPTS` whatever the
        inputs say) is computed from; None without a model."""
        model = self.session.model
        if model is None:
            return None
        s = self.state.qk_setup
        base = (id(model), self.session.step, self.corpus(), s["seq_len"])
        return base if thumbs else (*base, s["prompts"], s["layer"], s["head"], s["method"])

    def _on_changed(self, what: str) -> None:
        """New inputs ask for their map; a new result redraws the page (when it is the one in view)."""
        page = self.tab.current_page
        if not page.needs_qk_map:
            return
        if what != "setup":
            page.refresh()
        elif self.state.inspection is not None:
            self.ready()

    def ready(self) -> bool:
        """Ask for what the page lacks (thumbnails, map, then the prompt's points); True when nothing."""
        st, key = self.state, self.key()
        if key is None or st.inspection is None or st.qk_error_for(key):
            return True  # nothing to map, or the page says why it cannot
        ready = True
        thumbs = self.key(thumbs=True)
        if st.qk_thumbs_for(thumbs) is None and not self._cancelled(QK_THUMBS_JOB, thumbs):
            self._thumbs()
            ready = False
        if st.qk_map_for(key) is None:
            if self._cancelled(QK_MAP_JOB, key):
                return ready  # the user's Cancel holds until the inputs change
            self._map()
            return False
        if st.qk_prompt_for(key, st.request) is None:
            self._prompt()
            ready = False
        return ready

    def map_cancelled(self) -> bool:
        """Whether the user cancelled the map the inputs ask for (it is asked again once they change)."""
        return self._cancelled(QK_MAP_JOB, self.key())

    def _cancelled(self, job: str, key: tuple | None) -> bool:
        """Whether the user cancelled the request of ``job`` for ``key`` (not asked again for it)."""
        ended = self.session.jobs.get(job)
        return self._asked.get(job) == key and ended is not None and ended.state == "cancelled"

    def _source(self):
        """The corpus as a data source read with the model's tokenizer (a DataError says why not)."""
        from model.text.sources import resolve_source

        s, spec = self.session, self.corpus()
        if spec == s.source_spec and s.source is not None and s.source.tokenizer == s.tokenizer:
            return s.source
        return resolve_source(spec, tokenizer=s.tokenizer)

    def _submit(self, job: str, key: tuple, fn, on_result, title: str) -> None:
        s = self.session
        if self._asked.get(job) == key and s.compute.outstanding(job):
            return
        self._asked[job] = key

        def done(res, err):
            self._asked.pop(job, None)
            now = self.key()
            if err is not None:
                if now is not None:
                    self.state.set_qk_error(now, str(err))  # the page says it; not asked again
                return
            if res is not None and self.key(thumbs=job == QK_THUMBS_JOB) == key:
                on_result(res)
                if self.tab.current_page.needs_qk_map:
                    self.ready()  # what the page needs next

        s.compute.submit(
            job, with_threads(job_threads(s), fn), done, title=title, subject=f"over {self.corpus()}"
        )

    def _map(self) -> None:
        key, st, s = self.key(), self.state, self.session
        if key is None:
            return
        model, tok, setup = s.model, s.tokenizer, dict(st.qk_setup)
        layer, head = setup["layer"], setup["head"]

        def fn():
            return qk.qk_map(
                model, tok, self._source(), layer, head, n_prompts=setup["prompts"], seq_len=setup["seq_len"],
                method=setup["method"], seed=0,
            )  # fmt: skip

        title = f"Mapping the queries and keys of L{layer}H{head} ({setup['method'].upper()})"
        self._submit(QK_MAP_JOB, key, fn, lambda res: st.set_qk_map(key, res), title)

    def _thumbs(self) -> None:
        key, st, s = self.key(thumbs=True), self.state, self.session
        if key is None:
            return
        model, tok, T = s.model, s.tokenizer, st.qk_setup["seq_len"]

        def fn():
            return qk.qk_thumbnails(
                model, tok, self._source(), n_prompts=THUMB_PROMPTS, seq_len=T, max_points=THUMB_POINTS
            )

        self._submit(QK_THUMBS_JOB, key, fn, lambda res: st.set_qk_thumbs(key, res), "Mapping every head")

    def _prompt(self) -> None:
        key, st, s = self.key(), self.state, self.session
        insp, qmap = st.inspection, st.qk_map_for(key)
        if key is None or insp is None or qmap is None:
            return
        model, tok, ids, request = s.model, s.tokenizer, list(insp.ids), st.request
        self.follow_up(
            "attention.qkprompt",
            lambda: qk.project_prompt(model, tok, qmap, ids),
            lambda res: st.set_qk_prompt(key, request, res) if self.key() == key else None,
        )


__all__ = ["QKMapJobs"]
