"""What the Attention tab's pages draw, in one object without Qt: :class:`AttentionState`.

The tab writes results into it as its jobs finish (``model.interp.inspection`` computes them); the pages
read it and connect to its signals (:class:`app.core.state.Signal`: called at once, in the emitting
thread). The pages never read the tab, nor each other: a page that changes something (the selected
head, the switched-off heads, the thresholds, the heads to average) calls the state, and whoever
cares follows the signal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from app.core.state import Signal
from app.views.attention.circuits_state import CircuitsState
from app.views.attention.corpus_heads_state import CorpusHeadsState
from app.views.attention.qk_map_state import QKMapState
from app.views.attention.state_records import CausalEntry, CausalFailure, Head
from model.interp.analysis.heads import HeadClassification, HeadThresholds, classify_heads
from model.interp.measures import layer_masks

if TYPE_CHECKING:
    from model.interp.analysis.pipeline import HeadPipeline
    from model.interp.inspection import Inspection
    from model.interp.measures import AblationResult, Aggregates, ExpertChoice, MetricsResult, NextTokenTable

#: Short names written in a grid cell for each role of model.analysis.heads.HEAD_ROLES.
ROLE_SHORT = {
    "induction": "induction",
    "previous-token": "prev",
    "self": "self",
    "sink": "sink",
    "broad": "broad",
}


class AttentionState(CircuitsState, QKMapState, CorpusHeadsState):
    """The Attention tab's state and its change signals (see the module docstring).

    ``inspection``: the current :class:`~model.interp.inspection.Inspection` (None before the first run or
    without a model); ``selected``: the (layer, head) every page shows; ``ablation``: the heads
    switched off, ``{(layer, head): "zero" | "mean"}``; ``metrics``
    (:class:`~model.interp.inspection.MetricsResult`), ``thresholds`` and the ``classification`` they give;
    ``ablation_result``, ``aggregates``, the next-token table (:meth:`next_tokens_for_current`) and
    the selected head's pipeline
    (:meth:`head_detail_for_selected`) once measured; ``chosen_heads``: the heads the Aggregates
    page averages; ``causal_setup`` and ``causal``: the inputs and results of activation patching
    and direct logit attribution (:meth:`causal_for_current`).
    """

    #: (Inspection | None): a new run arrived, or the model went away
    inspection_changed = Signal()
    #: (layer, head)
    selection_changed = Signal()
    #: (heads): the switched-off heads changed
    ablation_changed = Signal()
    #: (HeadPipeline): the selected head's stages arrived
    head_detail_changed = Signal()
    #: (): new metrics, or new thresholds (the classification and ``head_tips`` follow)
    metrics_changed = Signal()
    #: (AblationResult)
    ablation_result_changed = Signal()
    #: (Aggregates)
    aggregates_changed = Signal()
    #: (NextTokenTable): the current run's next-token table arrived
    next_tokens_changed = Signal()
    #: (heads): the heads to average changed
    chosen_heads_changed = Signal()
    #: (kind, result): a causal tool's result arrived (``"patching"`` or ``"attribution"``)
    causal_changed = Signal()
    #: (kind): the inputs of a causal tool changed (corrupted prompt, tokens, position)
    causal_setup_changed = Signal()
    #: (ExpertChoice): the experts the router chose for the current run's tokens arrived
    experts_changed = Signal()
    # circuits_changed, circuit_setup_changed: the Circuits page's (CircuitsState)
    #: (): no model any more; pages forget what they draw
    cleared = Signal()
    #: (text): a page asks for this prompt to be run (a top example of a corpus run, opened)
    prompt_requested = Signal()

    def __init__(self) -> None:
        CircuitsState.__init__(self)
        QKMapState.__init__(self)
        CorpusHeadsState.__init__(self)
        self.inspection: Inspection | None = None
        self.selected: Head = (0, 0)
        self.ablation: dict[Head, str] = {}
        self.request = 0  # the tab's number of the run ``inspection`` shows
        self.head_detail_entry: tuple[int, int, int, HeadPipeline] | None = None  # (request, layer, head, ·)
        self.metrics_request = self.aggregates_request = 0  # the runs they were measured for
        self.metrics: MetricsResult | None = None
        self.thresholds = HeadThresholds()
        self.classification: HeadClassification | None = None
        self.head_tips: dict[Head, str] = {}
        self.ablation_result: AblationResult | None = None
        self.aggregates: Aggregates | None = None
        self.next_tokens: tuple[int, NextTokenTable] | None = None  # (request, table)
        self.experts: tuple[int, ExpertChoice] | None = None  # (request, choice)
        #: (inspection, its per-layer masks)
        self._layer_masks: tuple[Inspection, list[np.ndarray]] | None = None
        self.chosen_heads: list[Head] = []
        #: whether the aggregates include attention rollout (set for the page in view: the Rollout page)
        self.rollout_wanted = False
        #: the causal tools' inputs: ``corrupt`` "" = suggest one from the prompt; tokens "" = the top
        #: prediction; ``position`` -1 = the last token
        self.causal_setup: dict[str, dict] = {
            "patching": {"corrupt": "", "answer": "", "wrong": ""},
            "attribution": {"token": "", "other": "", "position": -1},
        }
        self.causal: dict[str, CausalEntry] = {}

    @property
    def patterns_held(self) -> bool:
        """Whether the current run holds every head's pattern (False: a long prompt, streamed: the
        grid draws its pooled overview and a head is computed when it is opened)."""
        return getattr(self.inspection, "held", True)

    def shorter_prompt_note(self, what: str) -> str:
        """The one line a page shows when it needs every head's pattern of a streamed run."""
        insp = self.inspection
        tokens, limit = (insp.T, insp.held_limit) if insp is not None else (0, 0)
        return (
            f"{what} needs every head's pattern at once: this prompt of {tokens:,} tokens is too long to "
            f"hold them. Use a prompt of at most {limit:,} tokens (the Heads and Head pages show any length)."
        )

    @property
    def prompt(self) -> str:
        """The prompt the pages show ('' before the first run)."""
        return self.inspection.prompt if self.inspection is not None else ""

    # ---- results -------------------------------------------------------------------------------
    def set_inspection(self, inspection, request: int = 0) -> None:
        """A new run (the tab's ``request`` number): keeps the selection (clamped to the new shape) and
        the metrics while the shape is the same (they follow shortly); the aggregates belong to the old
        run."""
        prev = self.inspection
        self.inspection = inspection
        self.request = request
        L, H = inspection.n_layers, inspection.n_heads
        if prev is None or (prev.n_layers, prev.n_heads) != (L, H) or not self.patterns_held:
            self.metrics = self.classification = None
            self.head_tips = {}
            self.selected = (min(self.selected[0], L - 1), min(self.selected[1], H - 1))
        self.aggregates = self.next_tokens = None
        self.inspection_changed.emit(inspection)

    def forget_results(self) -> None:
        """The model changed: what was measured on the old one no longer holds (nothing is emitted;
        the next inspection announces itself)."""
        self.head_detail_entry = None
        self.experts = None
        self.metrics = self.classification = None
        self.head_tips = {}
        self.ablation_result = None
        self.causal = {}
        self.circuits = self.circuit_head = self.path = None
        self.circuit_setup = {**self.circuit_setup, "sender": None, "receiver": None}

    def clear(self) -> None:
        """No model: forget everything drawn."""
        self.forget_results()
        self.forget_qk()
        self.forget_corpus()
        self.inspection = None
        self.aggregates = self.next_tokens = None
        self._layer_masks = None
        self.cleared.emit()
        self.inspection_changed.emit(None)

    def set_head_detail(self, request: int, layer: int, head: int, detail) -> None:
        self.head_detail_entry = (request, layer, head, detail)
        if (layer, head) == self.selected:
            self.head_detail_changed.emit(detail)

    def head_detail_for_selected(self):
        """The selected head's :class:`~model.interp.analysis.pipeline.HeadPipeline` for the current run, or
        None."""
        e, insp = self.head_detail_entry, self.inspection
        if e is None or insp is None:
            return None
        req, layer, head, detail = e
        return detail if (req, layer, head) == (self.request, *self.selected) else None

    def set_metrics(self, metrics, request: int = 0) -> None:
        """The metrics measured for run ``request``."""
        self.metrics, self.metrics_request = metrics, request
        self._classify()

    def set_thresholds(self, thresholds) -> None:
        """Name the heads again with new thresholds (no recomputation)."""
        self.thresholds = thresholds
        self._classify()

    def _classify(self) -> None:
        if self.metrics is None:
            self.classification = None
            self.head_tips = {}
            return
        self.classification = classify_heads(self.metrics.metrics, self.thresholds)
        self.head_tips = {
            (l, h): str(lab)
            for l, row in enumerate(self.classification.labels)
            for h, lab in enumerate(row)
            if lab.name
        }
        self.metrics_changed.emit()

    def set_ablation_result(self, result) -> bool:
        """Keep ``result`` if it measured the heads switched off now; returns whether it was kept."""
        if result.heads != self.ablation:
            return False
        self.ablation_result = result
        self.ablation_result_changed.emit(result)
        return True

    def set_aggregates(self, aggregates, request: int) -> None:
        """The aggregates measured for run ``request``."""
        self.aggregates, self.aggregates_request = aggregates, request
        self.aggregates_changed.emit(aggregates)

    def aggregates_for_current(self):
        """The aggregates of the current run and the current ``chosen_heads``, or None."""
        a, insp = self.aggregates, self.inspection
        if a is None or insp is None or self.aggregates_request != self.request:
            return None
        if a.chosen_heads != self.chosen_heads or (self.rollout_wanted and a.rollout is None):
            return None
        return a

    def set_next_tokens(self, table, request: int) -> None:
        """The next-token table (:class:`~model.interp.measures.NextTokenTable`) of run ``request``."""
        self.next_tokens = (request, table)
        if request == self.request:
            self.next_tokens_changed.emit(table)

    def next_tokens_for_current(self):
        """The next-token table of the current run, or None (not ranked yet)."""
        e = self.next_tokens
        return e[1] if e is not None and self.inspection is not None and e[0] == self.request else None

    def set_experts(self, choice, request: int) -> None:
        """The experts chosen per token (:class:`~model.interp.measures.ExpertChoice`) in run
        ``request``."""
        self.experts = (request, choice)
        if request == self.request:
            self.experts_changed.emit(choice)

    def experts_for_current(self):
        """The experts chosen per token in the current run, or None (not measured yet)."""
        e = self.experts
        return e[1] if e is not None and self.inspection is not None and e[0] == self.request else None

    # ---- local and global layers ---------------------------------------------------------------
    def local_layers(self) -> list[int]:
        """The layers of the current run's model that attend through a sliding window (every layer
        of a model with ``sliding_window`` and no ``window_pattern``); [] without a window."""
        insp = self.inspection
        cfg = getattr(insp, "config", None)
        if (
            insp is None
            or cfg is None
            or cfg.attention.sliding_window is None
            or insp.n_layers != cfg.core.n_layers
        ):
            return []
        return [layer for layer in range(insp.n_layers) if cfg.is_local_layer(layer)]

    def layer_masks(self) -> list:
        """The mask [T, T] of each layer of the current run (True = may attend): the run's ``mask``,
        narrowed to the window in a local layer of a ``window_pattern``; one array shared by the
        layers that attend alike (:func:`~model.interp.measures.layer_masks`)."""
        insp = self.inspection
        if insp is None:
            return []
        if self._layer_masks is None or self._layer_masks[0] is not insp:
            cfg = getattr(insp, "config", None)
            masks = [insp.mask] * insp.n_layers if cfg is None else layer_masks(cfg, insp.mask, insp.n_layers)
            self._layer_masks = (insp, masks)
        return self._layer_masks[1]

    def layer_mask(self, layer: int):
        """The mask [T, T] of ``layer`` in the current run (see :meth:`layer_masks`)."""
        masks = self.layer_masks()
        return masks[layer] if 0 <= layer < len(masks) else getattr(self.inspection, "mask", None)

    def set_causal(self, kind: str, request: int, setup: dict, result) -> bool:
        """Keep a causal tool's ``result`` (a :class:`~model.interp.causal.PatchingResult`,
        :class:`~model.interp.causal.AttributionResult` or a :class:`CausalFailure`) measured for run
        ``request`` with inputs ``setup``; False (dropped) when those inputs changed meanwhile."""
        if setup != self.causal_setup[kind]:
            return False
        self.causal[kind] = CausalEntry(request, dict(setup), result)
        self.causal_changed.emit(kind, result)
        return True

    def causal_for_current(self, kind: str):
        """The result of ``kind`` for the current run and inputs, or None (not measured yet)."""
        e, insp = self.causal.get(kind), self.inspection
        if e is None or insp is None or e.request != self.request or e.setup != self.causal_setup[kind]:
            return None
        return e.result

    def set_causal_setup(self, kind: str, **values) -> bool:
        """Change the inputs of ``kind`` (keys of :attr:`causal_setup`); returns whether they changed."""
        setup = {**self.causal_setup[kind], **values}
        if setup == self.causal_setup[kind]:
            return False
        self.causal_setup[kind] = setup
        self.causal_setup_changed.emit(kind)
        return True

    # ---- what the user changes -----------------------------------------------------------------
    def select(self, layer: int, head: int) -> bool:
        """Make (layer, head) the selected head (clamped to the model); returns whether it changed."""
        insp = self.inspection
        layer, head = int(layer), int(head)
        if insp is not None:
            layer = max(0, min(layer, insp.n_layers - 1))
            head = max(0, min(head, insp.n_heads - 1))
        if (layer, head) == self.selected:
            return False
        self.selected = (layer, head)
        self.selection_changed.emit(layer, head)
        return True

    def request_prompt(self, text: str) -> None:
        """Ask for ``text`` to be run as the prompt (the tab follows ``prompt_requested``)."""
        self.prompt_requested.emit(text)

    def set_ablation(self, heads: dict) -> bool:
        """Switch ``heads`` ({(layer, head): "zero" | "mean"}) off; {} = every head on. Returns whether
        anything changed; the ablation's result and the head's pipeline are then out of date."""
        heads = {(int(l), int(h)): m for (l, h), m in dict(heads).items()}
        if heads == self.ablation:
            return False
        self.ablation = heads
        self.ablation_result = None
        self.head_detail_entry = None
        self.ablation_changed.emit(dict(heads))
        return True

    def restrict_ablation(self, n_layers: int, n_heads: int) -> bool:
        """Keep only the switched-off heads a model of ``n_layers`` × ``n_heads`` has."""
        return self.set_ablation(
            {lh: m for lh, m in self.ablation.items() if lh[0] < n_layers and lh[1] < n_heads}
        )

    def set_chosen_heads(self, heads) -> bool:
        """The heads the Aggregates page averages; returns whether they changed."""
        heads = sorted((int(l), int(h)) for l, h in heads)
        if heads == self.chosen_heads:
            return False
        self.chosen_heads = heads
        self.chosen_heads_changed.emit(list(heads))
        return True

    # ---- words ---------------------------------------------------------------------------------
    def role_rules_text(self, *, long: bool = False, period: int | None = None) -> str:
        """The naming rules with their thresholds, in order of precedence."""
        t = self.thresholds
        per = f" on 2 × {period} random tokens" if period else ""
        used = self.classification.effective if self.classification is not None else {}
        metrics = self.metrics.metrics if self.metrics is not None else None

        def bar(role: str, fixed: float, field: str) -> str:
            """``≥ x``, or the model's own bar when the fixed one would name too many heads."""
            level = used.get(role, fixed)
            if not long or metrics is None or level <= fixed:
                return f"≥ {fixed:.2f}"
            values = getattr(metrics, field)
            many = int((values >= fixed).sum())
            return (
                f"≥ {level:.2f}, this model's top quarter (the fixed {fixed:.2f} would name {many} of "
                f"{values.size} heads)"
            )

        rules = [
            ("induction", f"induction score ≥ {t.induction:.2f}{per if long else ''}"),
            ("previous-token", f"previous-token score ≥ {t.previous_token:.2f}"),
            ("self", f"self score ≥ {t.self:.2f}"),
            ("sink", f"first-token score {bar('sink', t.sink, 'sink')}"),
            (
                "broad",
                f"spread {bar('broad', t.uniform, 'entropy_norm')} (attention nearly even over the keys "
                "it sees)",
            ),
        ]
        if long:
            return (
                "Rules, first match wins: "
                + "; ".join(f"{i}. <b>{name}</b> if {rule}" for i, (name, rule) in enumerate(rules, start=1))
                + ". Other heads stay unnamed. Within a name, #1 is the head with the highest score."
            )
        return "; ".join(f"{ROLE_SHORT[name]} = {name} ({rule})" for name, rule in rules)

    def head_summary(self, layer: int, head: int) -> str:
        """One line about head (layer, head): its name and key metrics, once measured."""
        text = f"layer {layer}, head {head}"
        if self.classification is not None and self.metrics is not None:
            lab = self.classification.labels[layer][head]
            m = self.metrics.metrics
            text += f": {lab}" if lab.name else ": no named role"
            text += (
                f" · on the prompt: spread {m.entropy_norm[layer, head]:.2f}, prev-token "
                f"{m.prev_token[layer, head]:.2f}, sink {m.sink[layer, head]:.2f}"
            )
            if m.induction is not None:  # measured on its own sequence, not on the prompt
                text += (
                    f" · induction {m.induction[layer, head]:.2f} on 2 × {self.metrics.period} random tokens"
                )
            insp = self.inspection
            config = getattr(insp, "config", None)
            if m.learned_sink is not None and config is not None and config.attention.attn_sinks:
                text += f" · learned sink {m.learned_sink[layer, head]:.2f}"
        insp = self.inspection
        if insp is not None and layer in self.local_layers():
            text += f" · local layer (sliding window of {insp.config.attention.sliding_window} keys)"
        return text


__all__ = ["ROLE_SHORT", "AttentionState", "CausalEntry", "CausalFailure", "Head"]
