"""The Attention tab's follow-up jobs: what only some pages show, measured after each run.

Each job reads the state (and the session's model), runs in the session's compute worker through the
tab's ``_submit`` (superseded by a newer run like the run itself), writes its result into the
:class:`~app.views.attention.state.AttentionState` (whose signals redraw the pages) and then emits the
tab's matching signal (``headDetailReady``, ``metricsReady``, ``ablationReady``, ``aggregatesReady``,
``nextTokensReady``, ``expertsReady``).
"""

from __future__ import annotations

from app.views.attention.state import CausalFailure
from model.interp import causal, inspection, measures
from model.interp.prompt import PromptError


class AttentionJobs:
    """The follow-up jobs of an Attention tab ``tab`` (its ``state``, ``session`` and ``_submit``)."""

    def __init__(self, tab):
        self.tab = tab
        self.state = tab.state
        self.session = tab.session
        #: validation batches of the current data and model shape, for the ablation's loss change
        self.val_cache: dict = {}
        self._aggregates_asked = None  # (request, chosen heads) of the last aggregates job

    def for_page(self, page) -> bool:
        """Request what ``page`` needs and the state lacks; True when it lacks nothing."""
        st, ready = self.state, True
        if page.needs_head_detail and st.head_detail_for_selected() is None:
            self.head_detail()
            ready = False
        if page.needs_aggregates and st.aggregates_for_current() is None:
            self.aggregates()
            ready = False
        if page.needs_next_tokens and st.next_tokens_for_current() is None:
            self.next_tokens()
            ready = False
        if page.needs_causal and st.causal_for_current(page.needs_causal) is None:
            self.causal(page.needs_causal)
            ready = False
        if page.needs_experts and st.experts_for_current() is None:
            self.experts()
            ready = False
        return ready

    def experts(self) -> None:
        """The experts a mixture of experts' router chose for each token of the current run
        (``attention.experts``), with the run's heads switched off."""
        st, model = self.state, self.session.model
        insp = st.inspection
        if insp is None or model is None:
            return
        ids, ablate, req = list(insp.ids), dict(insp.ablate), st.request

        def done(res):
            st.set_experts(res, req)
            self.tab.expertsReady.emit(res)

        self.tab._submit(
            "attention.experts", lambda: measures.expert_choice_of(model, ids, ablate=ablate), done
        )

    def head_detail(self) -> None:
        """The selected head's pipeline (``attention.head``), unless the state has it."""
        st, model = self.state, self.session.model
        insp = st.inspection
        if insp is None or model is None or st.head_detail_for_selected() is not None:
            return
        layer, head = st.selected
        ids, ablate, req = insp.ids, dict(insp.ablate), st.request

        def fn():
            return req, layer, head, inspection.head_detail(model, ids, layer, head, ablate=ablate)

        def done(entry):
            st.set_head_detail(*entry)
            if entry[1:3] == st.selected:
                self.tab.headDetailReady.emit(entry[3])

        self.tab._submit("attention.head", fn, done)

    def metrics(self) -> None:
        """Metrics of every head (``attention.metrics``)."""
        insp, model = self.state.inspection, self.session.model
        if insp is None or model is None:
            return
        weights, mask, ablate, req = insp.weights, insp.mask, dict(insp.ablate), self.state.request

        def done(res):
            self.state.set_metrics(res, req)
            self.tab.metricsReady.emit(res)

        self.tab._submit(
            "attention.metrics",
            lambda: measures.head_metrics_of(model, weights, mask, ablate=ablate),
            done,
        )

    def ablation(self) -> None:
        """What the switched-off heads change (``attention.ablation``)."""
        st, model, s = self.state, self.session.model, self.session
        insp = st.inspection
        if insp is None or model is None or not st.ablation:
            return
        heads, ids = dict(st.ablation), insp.ids
        source, tok, cfg = s.source, s.tokenizer, model.config
        cache_key = (id(source), cfg.context_length, id(tok))
        cache = self.val_cache

        def fn():
            if cache_key not in cache:
                cache.clear()
                cache[cache_key] = measures.held_out_batches(source, cfg, tok)
            batches, note = cache[cache_key]
            return measures.ablation_of(model, ids, heads, batches, note, tokenizer=tok)

        def done(res):
            if st.set_ablation_result(res):
                self.tab.ablationReady.emit(res)

        self.tab._submit("attention.ablation", fn, done)

    def next_tokens(self) -> None:
        """The next-token table of the current run (``attention.next``)."""
        st, tok = self.state, self.session.tokenizer
        insp = st.inspection
        if insp is None:
            return
        logits, ids, req = insp.logits, list(insp.ids), st.request

        def done(table):
            st.set_next_tokens(table, req)
            self.tab.nextTokensReady.emit(table)

        self.tab._submit("attention.next", lambda: measures.next_tokens_of(logits, ids, tok), done)

    def aggregates(self) -> None:
        """Mean patterns, with the chosen heads' and, when wanted, the rollout (``attention.aggregate``)."""
        insp = self.state.inspection
        if insp is None:
            return
        weights, req = insp.weights, self.state.request
        chosen, rollout = list(self.state.chosen_heads), self.state.rollout_wanted
        if self._aggregates_asked == (req, chosen, rollout):
            return  # already on its way
        self._aggregates_asked = (req, chosen, rollout)

        def done(res):
            self.state.set_aggregates(res, req)
            self.tab.aggregatesReady.emit(res)

        self.tab._submit(
            "attention.aggregate",
            lambda: measures.aggregates_of(weights, chosen, rollout=rollout),
            done,
        )

    def causal(self, kind: str) -> None:
        """Activation patching or direct logit attribution of the current prompt
        (``attention.patching`` / ``attention.attribution``) with the state's inputs for ``kind``.
        Inputs that cannot work (a corrupted prompt of another length, a token that is two tokens, a
        Post-LN model) give a :class:`CausalFailure` the page shows."""
        st, model, tok = self.state, self.session.model, self.session.tokenizer
        insp = st.inspection
        if insp is None or model is None or tok is None:
            return
        setup, ids, req, prompt = dict(st.causal_setup[kind]), list(insp.ids), st.request, insp.prompt
        dropped = insp.dropped  # a long prompt was cut: the corrupted one is cut the same way

        def fn():
            try:
                if kind == "attribution":
                    return causal.attribution_of(
                        model, tok, ids, token=setup["token"] or None, other=setup["other"] or None,
                        position=setup["position"],
                    )  # fmt: skip
                corrupt = setup["corrupt"] or causal.suggest_corruption(tok, prompt)
                if not corrupt:
                    return CausalFailure(
                        "no two words of this prompt can be swapped without changing its token count: "
                        "type a corrupted prompt of the same length"
                    )
                return causal.patching_of(
                    model, tok, ids, corrupt, answer=setup["answer"] or None, wrong=setup["wrong"] or None,
                    prompt=prompt, dropped=dropped,
                )  # fmt: skip
            except (PromptError, ValueError) as exc:
                return CausalFailure(str(exc))

        def done(res):
            if st.set_causal(kind, req, setup, res):
                self.tab.causalReady.emit(kind, res)

        self.tab._submit(f"attention.{kind}", fn, done)


__all__ = ["AttentionJobs"]
