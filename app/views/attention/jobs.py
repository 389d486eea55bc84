"""The Attention tab's follow-up jobs: what only some pages show, measured after each run.

Each job reads the state (and the session's model), runs in the session's compute worker through
:meth:`AttentionJobs.submit` (superseded by a newer run like the run itself), writes its result into the
:class:`~app.views.attention.state.AttentionState` (whose signals redraw the pages) and then emits the
tab's matching signal (``headDetailReady``, ``metricsReady``, ``ablationReady``, ``aggregatesReady``,
``nextTokensReady``, ``expertsReady``, ``circuitsReady``). The jobs see the tab as an
:class:`~app.views.attention.host.AttentionHost`.

The Circuits page's circuits depend on the weights alone: that job (``attention.circuits``) is keyed
by the model, its training step and the RoPE offset (:meth:`AttentionJobs.circuits_key`), runs once per
key, and a new prompt does not cancel it. It and the path patching leave one core to the GUI thread
(every core but one; one while training): the page draws and paints while they run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from app.session.compute import job_threads
from app.views.attention.base import AttentionPage
from app.views.attention.corpus_heads_jobs import CorpusHeadsJobs
from app.views.attention.host import AttentionHost
from app.views.attention.job_keys import CIRCUITS_JOB, FOLLOW_UPS, HEAD_JOB, PATH_JOB, TITLES
from app.views.attention.qk_map_jobs import QKMapJobs
from app.views.attention.state import CausalFailure
from app.views.attention.state_records import CircuitsKey, Head
from model.interp import causal, inspection, measures
from model.interp.prompt import PromptError
from model.runtime import with_threads

T = TypeVar("T")


class AttentionJobs:
    """The follow-up jobs of an Attention tab ``tab`` (its ``state`` and ``session``)."""

    def __init__(self, tab: AttentionHost):
        self.tab = tab
        self.state = tab.state
        self.session = tab.session
        #: validation batches of the current data and model shape, for the ablation's loss change
        self.val_cache: dict[tuple, tuple[Any, Any]] = {}
        #: (request, chosen heads, rollout) of the last aggregates job
        self._aggregates_asked: tuple[int, list[Head], bool] | None = None
        self._circuits_asked: CircuitsKey | None = None  # the key of the circuits job on its way
        #: (key, head) of the head's full circuits on their way
        self._circuit_head_asked: tuple[CircuitsKey, Head] | None = None
        self._path_asked: tuple[int, dict] | None = None  # (request, setup) of the path patching on its way
        self.qk = QKMapJobs(self.submit, tab)  # the Q–K map page's
        self.corpus = CorpusHeadsJobs(tab)  # the Heads-over-a-corpus page's

    def submit(self, key: str, fn: Callable[[], T | None], on_result: Callable[[T], None]) -> None:
        """A follow-up job of the current run (``attention.run.`` + ``key``): superseded by the next one
        with ``key`` or the next run; ``on_result`` gets what it returns (unless None)."""

        def done(res: T | None, err: BaseException | None) -> None:
            if err is not None:
                self.tab.fail(f"{key.split('.')[-1]} failed: {err}")
                return
            if res is not None:
                on_result(res)

        insp = self.state.inspection
        subject = f"“{insp.prompt[:30]}{'…' if len(insp.prompt) > 30 else ''}”" if insp is not None else ""
        self.session.compute.submit(
            FOLLOW_UPS + key,
            with_threads(self.tab.threads, fn),
            done,
            title=TITLES.get(key, key),
            subject=subject,
        )

    def for_page(self, page: AttentionPage) -> bool:
        """Request what ``page`` needs and the state lacks; True when it lacks nothing."""
        st, ready = self.state, True
        if not st.patterns_held and page.needs_every_pattern:
            return True  # the page says it needs a shorter prompt
        if page.needs_head_detail and st.head_detail_for_selected() is None and st.patterns_held:
            self.head_detail()
            ready = False
        if page.needs_aggregates and st.patterns_held:
            st.rollout_wanted = page.needs_rollout  # L products of [T, T]: only for the page that shows them
            if st.aggregates_for_current() is None:
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
        if page.needs_circuits and not self.circuits_ready():
            ready = False
        if page.needs_qk_map and not self.qk.ready():
            ready = False
        if page.needs_corpus_heads and not self.corpus.ready():
            ready = False
        return ready

    # ---- the Circuits page ---------------------------------------------------------------------
    def circuits_key(self) -> CircuitsKey | None:
        """What the circuits of the current weights depend on: (the model, its step, the RoPE offset);
        None without a model."""
        model = self.session.model
        if model is None:
            return None
        return (id(model), self.session.step, int(self.state.circuit_setup["rope_offset"]))

    def circuits_ready(self) -> bool:
        """Request what the Circuits page lacks (the circuits first; then the selected head's full
        circuits and the sender's path patching); True when it lacks nothing."""
        st, key = self.state, self.circuits_key()
        if key is None or st.inspection is None:
            return True
        res = st.circuits_for(key)
        if res is None:
            self.circuits()
            return False
        ready = True
        if res.circuits is not None and st.circuit_head_for(key, st.selected) is None:
            self.circuit_head()
            ready = False
        if st.path_for_current() is None:
            self.path()
            ready = False
        return ready

    def circuits(self) -> None:
        """Every composition score and every head's circuits of the current weights
        (``attention.circuits``), unless they are on their way."""
        st, s, model, key = self.state, self.session, self.session.model, self.circuits_key()
        if model is None or key is None or st.circuits_for(key) is not None:
            return
        if self._circuits_asked == key and s.compute.outstanding(CIRCUITS_JOB):
            return
        self._circuits_asked = key
        offset = key[2]
        # the weights alone: every core but one (the GUI thread keeps a core to paint on), one while training

        def done(res, err):
            if self._circuits_asked == key:
                self._circuits_asked = None
            if err is not None:
                self.tab.fail(f"circuits failed: {err}")
                return
            if res is None or key != self.circuits_key():
                return
            st.set_circuits(key, res)
            self.tab.circuitsReady.emit("circuits", res)
            page = self.tab.current_page
            if page.needs_circuits:
                self.circuits_ready()  # what it needs next

        s.compute.submit(
            CIRCUITS_JOB,
            with_threads(job_threads(s), lambda: measures.circuits_of(model, rope_offset=offset)),
            done,
            title="Computing every head's circuits and every composition score",
        )

    def circuit_head(self) -> None:
        """The selected head's full circuits over a few tokens (``attention.circuit_head``)."""
        st, model, tok, key = self.state, self.session.model, self.session.tokenizer, self.circuits_key()
        insp = st.inspection
        if insp is None or model is None or key is None:
            return
        res = st.circuits_for(key)
        if res is None or res.circuits is None:
            return
        head = st.selected
        if st.circuit_head_for(key, head) is not None:
            return
        if self._circuit_head_asked == (key, head) and self.session.compute.outstanding(HEAD_JOB):
            return
        self._circuit_head_asked = (key, head)
        ids, offset = list(insp.ids), key[2]

        def done(detail):
            self._circuit_head_asked = None
            if key == self.circuits_key():
                st.set_circuit_head(key, head, detail)
                self.tab.circuitsReady.emit("head", detail)

        self.submit(
            "attention.circuit_head",
            lambda: measures.circuit_head_of(model, tok, ids, *head, rope_offset=offset),
            done,
        )

    def path(self) -> None:
        """Path patching of the sender through every head of the receiver's layer (``attention.path``)
        on the Patching page's prompts (a corruption of its own when no two words can be swapped)."""
        st, model, tok = self.state, self.session.model, self.session.tokenizer
        insp = st.inspection
        if insp is None or model is None or tok is None:
            return
        setup, req = st.path_setup(), st.request
        if self._path_asked == (req, setup) and self.session.compute.outstanding(PATH_JOB):
            return
        self._path_asked = (req, setup)
        ids, prompt, dropped = list(insp.ids), insp.prompt, insp.dropped
        sender, layers = setup["sender"], [] if setup["layer"] is None else [setup["layer"]]

        def fn():
            try:
                return causal.path_patching_of(
                    model, tok, ids, setup["corrupt"] or None, sender, answer=setup["answer"] or None,
                    wrong=setup["wrong"] or None, prompt=prompt, dropped=dropped, layers=layers,
                )  # fmt: skip
            except (PromptError, ValueError) as exc:
                return CausalFailure(str(exc))

        def done(res):
            self._path_asked = None
            if st.set_path(req, setup, res):
                self.tab.circuitsReady.emit("path", res)

        # every core but one (one while training): the page that asked is drawing and painting meanwhile
        self.submit("attention.path", with_threads(job_threads(self.session), fn), done)

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

        self.submit("attention.experts", lambda: measures.expert_choice_of(model, ids, ablate=ablate), done)

    def head_detail(self) -> None:
        """The selected head's pipeline (``attention.head``), unless the state has it."""
        st, model = self.state, self.session.model
        insp = st.inspection
        if insp is None or model is None or st.head_detail_for_selected() is not None:
            return
        if not st.patterns_held:
            return  # one layer's scores [H, T, T]: the Head page shows the weights alone
        layer, head = st.selected
        ids, ablate, req = insp.ids, dict(insp.ablate), st.request

        def fn():
            return req, layer, head, inspection.head_detail(model, ids, layer, head, ablate=ablate)

        def done(entry):
            st.set_head_detail(*entry)
            if entry[1:3] == st.selected:
                self.tab.headDetailReady.emit(entry[3])

        self.submit("attention.head", fn, done)

    def metrics(self) -> None:
        """Metrics of every head (``attention.metrics``)."""
        insp, model = self.state.inspection, self.session.model
        if insp is None or model is None or not self.state.patterns_held:
            return  # every head's pattern is not held: the pages say which prompt length they need
        weights, mask, ablate, req = insp.weights, insp.mask, dict(insp.ablate), self.state.request

        def done(res):
            self.state.set_metrics(res, req)
            self.tab.metricsReady.emit(res)

        self.submit(
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
        loss_mask = bool(getattr(s.train_settings, "loss_mask", True))  # the training's own loss rule
        cache_key = (id(source), cfg.core.context_length, id(tok), loss_mask)
        cache = self.val_cache

        def fn():
            if cache_key not in cache:
                cache.clear()
                cache[cache_key] = measures.held_out_batches(source, cfg, tok, loss_mask=loss_mask)
            batches, note = cache[cache_key]
            return measures.ablation_of(model, ids, heads, batches, note, tokenizer=tok)

        def done(res):
            if st.set_ablation_result(res):
                self.tab.ablationReady.emit(res)

        self.submit("attention.ablation", fn, done)

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

        self.submit("attention.next", lambda: measures.next_tokens_of(logits, ids, tok), done)

    def aggregates(self) -> None:
        """Mean patterns, with the chosen heads' and, when wanted, the rollout (``attention.aggregate``)."""
        insp = self.state.inspection
        if insp is None or not self.state.patterns_held:
            return
        weights, req = insp.weights, self.state.request
        chosen, rollout = list(self.state.chosen_heads), self.state.rollout_wanted
        if self._aggregates_asked == (req, chosen, rollout):
            return  # already on its way
        self._aggregates_asked = (req, chosen, rollout)

        def done(res):
            self.state.set_aggregates(res, req)
            self.tab.aggregatesReady.emit(res)

        self.submit(
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

        self.submit(f"attention.{kind}", fn, done)


__all__ = ["AttentionJobs"]
