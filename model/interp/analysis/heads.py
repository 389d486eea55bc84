"""Per-head metrics of attention patterns, and names for the heads they recognise.

Every metric takes attention weights of shape ``[..., T, T]`` (rows = queries ``i``, columns = keys
``j``, rows summing to 1) and reduces the last two axes, so ``[L, H, T, T]`` gives ``[L, H]``,
``[H, T, T]`` gives ``[H]`` and one ``[T, T]`` head gives a 0-d array. Inputs may be numpy arrays or
torch tensors of any float dtype; outputs are float64 numpy arrays.

Which rows count. Under a causal mask query 0 sees only key 0, so its row is forced to ``[1, 0, ...]``
whatever the head does. A metric averages only over *informative rows*: queries with at least two
visible keys (``mask[i].sum() >= 2``). The mask is ``[T, T]`` bool, True = may attend (what
``Trace.mask`` holds); ``None`` means the causal lower triangle.

===================  ====================================================================
metric               formula, averaged over informative queries ``i``
===================  ====================================================================
entropy              ``H_i = -Σ_j w_ij ln w_ij`` (nats)
entropy_norm         ``H_i / ln n_i`` with ``n_i`` visible keys: 1 = uniform, 0 = one-hot
prev_token           ``w_{i, i-1}`` (queries ``i >= 1``)
sink                 ``w_{i, 0}`` (weight on the first token)
self_score           ``w_{i, i}`` (the diagonal)
induction            on a sequence repeating with period ``P`` from ``start``:
                     ``w_{i, i-P+1}`` for ``i`` in every copy after the first
learned_sink         ``1 - Σ_j w_ij``: the share of query ``i``'s attention that went to the
                     head's *learned* sink (``attn_sinks``: a logit ``b_h`` in the softmax's
                     denominator, no key's), over every query that sees a key; 0 without sinks
                     (``head_metrics(..., sinks=)``: measured only when told whether there are)
===================  ====================================================================

``sink`` and ``learned_sink`` are two different things. ``sink`` is the weight a head puts on the
first *token* (an emergent sink: heads park attention they do not need on BOS). ``learned_sink`` is
what a model with ``attn_sinks`` gives to no token at all: its rows sum to less than 1, and the
missing part is the sink's share, ``exp(b_h) / (exp(b_h) + Σ_j exp(s_ij))``.

An induction head at position ``i`` of the second copy finds the previous occurrence of the current
token (``i - P``) and attends to the token that followed it (``i - P + 1``), which is what comes
next. :func:`repeated_sequence` builds such a prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import torch

from model.interp.analysis.head_scores import (
    _entropy_from_rows,
    _entropy_norm_from_rows,
    _mask_for,
    as_numpy,
    causal_mask_np,
    entropy,
    entropy_norm,
    induction_positions,
    induction_score,
    informative_rows,
    learned_sink_share,
    prev_token_score,
    row_entropy,
    self_score,
    sink_score,
)
from model.interp.analysis.head_scores import _mean_rows as _mean_rows  # saturation reads it from here

#: The names :func:`classify_heads` gives, in order of precedence ("" = no recognisable role).
HEAD_ROLES = ("induction", "previous-token", "self", "sink", "broad")

#: The roles most heads of a trained model may share (the BOS sink): named only for the heads that
#: stand out in their model when many pass (:attr:`HeadThresholds.max_share`). Not "broad": every head
#: of an untrained model is broad, and saying so of each is the truth about it.
CATCH_ALL_ROLES = ("sink",)


# ---------------------------------------------------------------------------------------------
# repeated-sequence prompts
# ---------------------------------------------------------------------------------------------
@dataclass
class RepeatedPrompt:
    """A prompt ``prefix + block * n_repeats`` for measuring induction heads.

    ``tokens`` int64 [T]; ``period`` = len(block); ``start`` = len(prefix), where the first copy begins.
    """

    tokens: np.ndarray
    period: int
    start: int
    n_repeats: int

    def score(self, weights: Any) -> np.ndarray:
        """:func:`induction_score` of ``weights`` [..., T, T] taken on this prompt."""
        return induction_score(weights, self.period, self.start)


def repeated_sequence(
    vocab_size: int,
    period: int,
    *,
    n_repeats: int = 2,
    prefix: tuple[int, ...] | list[int] = (),
    exclude: tuple[int, ...] | list[int] = (),
    seed: int = 0,
) -> RepeatedPrompt:
    """A random block of ``period`` token ids repeated ``n_repeats`` times after ``prefix``.

    The block draws distinct ids (when ``period`` ≤ the usable vocabulary) so each token's previous
    occurrence is unique, avoiding ids in ``exclude`` (e.g. special tokens). Total length
    ``len(prefix) + period * n_repeats``.
    """
    if n_repeats < 2:
        raise ValueError("an induction prompt needs at least 2 copies of the block")
    allowed = np.setdiff1d(np.arange(vocab_size), np.asarray(exclude, dtype=np.int64))
    if len(allowed) == 0:
        raise ValueError("every token id is excluded")
    rng = np.random.default_rng(seed)
    block = rng.choice(allowed, size=period, replace=period > len(allowed))
    tokens = np.concatenate([np.asarray(prefix, dtype=np.int64), np.tile(block, n_repeats)]).astype(np.int64)
    return RepeatedPrompt(tokens=tokens, period=period, start=len(prefix), n_repeats=n_repeats)


# ---------------------------------------------------------------------------------------------
# all metrics and names
# ---------------------------------------------------------------------------------------------
@dataclass
class HeadMetrics:
    """Every per-head metric as float arrays of one shape (``[L, H]`` for a whole model).

    ``induction`` is None unless measured on a repeated prompt (see :func:`head_metrics`);
    ``learned_sink`` (the share of attention a learned sink took, :func:`learned_sink_share`; not the
    first-token ``sink``) is 0 for a model without ``attn_sinks``, None when not measured (the
    default of :func:`head_metrics`; :func:`~model.interp.measures.head_metrics_of` always measures it).
    """

    entropy: np.ndarray
    entropy_norm: np.ndarray
    prev_token: np.ndarray
    sink: np.ndarray
    self_score: np.ndarray
    induction: np.ndarray | None = None
    learned_sink: np.ndarray | None = None

    #: Column names of :meth:`rows` for a sortable table (in this order).
    COLUMNS = (
        *("layer", "head", "entropy", "entropy_norm", "prev_token", "sink", "self_score", "induction"),
        "learned_sink",
    )

    @property
    def shape(self) -> tuple[int, ...]:
        return self.entropy.shape

    def as_dict(self) -> dict[str, np.ndarray]:
        """Metric name → array (``induction`` only when measured)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def rows(self) -> list[dict[str, float | int | None]]:
        """One dict per head of an ``[L, H]`` set, keyed by :attr:`COLUMNS` (for a sortable table)."""
        if len(self.shape) != 2:
            raise ValueError(f"rows() needs [L, H] metrics, these have shape {self.shape}")
        out = []
        for layer in range(self.shape[0]):
            for head in range(self.shape[1]):
                row: dict[str, float | int | None] = {"layer": layer, "head": head}
                for name in self.COLUMNS[2:]:
                    arr = getattr(self, name)
                    row[name] = None if arr is None else float(arr[layer, head])
                out.append(row)
        return out


def head_metrics(
    weights: Any,
    mask: Any = None,
    *,
    induction_weights: Any = None,
    period: int | None = None,
    start: int = 0,
    sinks: bool | None = None,
) -> HeadMetrics:
    """All metrics of ``weights`` [..., T, T] (e.g. ``trace.stack("pattern")`` with ``trace.mask``).

    Induction is measured on ``induction_weights`` (the same heads on a repeated prompt of ``period``
    from ``start``) when given, else on ``weights`` themselves when ``period`` is given.
    ``sinks``: True, the heads have learned sinks (``config.attention.attn_sinks``), whose share
    :func:`learned_sink_share` measures; False, they have none: ``learned_sink`` is exactly 0; None
    (default): not measured, ``learned_sink`` is None (and not among :meth:`HeadMetrics.as_dict`).
    """
    w = as_numpy(weights)
    m = _mask_for(w, mask)
    induction = None
    if period is not None:
        induction = induction_score(w if induction_weights is None else induction_weights, period, start)
    h = row_entropy(w)
    return HeadMetrics(
        entropy=_entropy_from_rows(h, m),
        entropy_norm=_entropy_norm_from_rows(h, m),
        prev_token=prev_token_score(w, mask),
        sink=sink_score(w, mask),
        self_score=self_score(w, mask),
        induction=induction,
        learned_sink=None if sinks is None else learned_sink_share(w, m) if sinks else np.zeros(w.shape[:-2]),
    )


def head_metrics_from_trace(
    trace: Any, induction: RepeatedPrompt | None = None, induction_trace: Any = None
) -> HeadMetrics:
    """:func:`head_metrics` of every recorded layer of a :class:`~model.interp.trace.Trace` (batch row 0): [L,
    H].

    Pass ``induction`` (the prompt) and ``induction_trace`` (a trace of it) to fill ``induction``.
    """
    w = trace.stack("pattern")
    sinks = True if trace.config.attention.attn_sinks else None  # the sinks' share, when it has them
    if induction is None or induction_trace is None:
        return head_metrics(w, trace.mask, sinks=sinks)
    return head_metrics(
        w,
        trace.mask,
        induction_weights=induction_trace.stack("pattern"),
        period=induction.period,
        start=induction.start,
        sinks=sinks,
    )


def measure_induction(
    model: Any, period: int = 24, *, n_repeats: int = 2, prefix=(), exclude=(), seed: int = 0
) -> tuple[np.ndarray, RepeatedPrompt]:
    """Induction score [L, H] of every head of ``model`` on a fresh :func:`repeated_sequence` prompt.

    Runs ``model.interp.trace`` (weights only) on ``prefix + block * n_repeats``; returns (scores, prompt).
    The caller holds whatever compute lock it shares with training.
    """

    V = model.config.core.vocab_size
    prompt = repeated_sequence(V, period, n_repeats=n_repeats, prefix=prefix, exclude=exclude, seed=seed)
    from model.interp.trace import run_with_trace

    trace = run_with_trace(model, torch.as_tensor(prompt.tokens)[None], kinds=("pattern",))
    return prompt.score(trace.stack("pattern")), prompt


@dataclass(frozen=True)
class HeadThresholds:
    """Where a metric is high enough to name a head (each compared with ``>=``).

    Defaults: a role takes at least 40% (induction) or half (the others) of a query's attention on
    average; "broad" means normalised entropy ≥ 0.9, i.e. close to averaging every visible key (what
    every head of a freshly initialised model does, what a layer-0 "bag of words" head does, and what
    an unused head may do).

    ``max_share``: the sink describes most heads of a trained model (a BOS sink in half of SmolLM2's
    270 heads), which tells nothing about any one of them. When more than this share of the heads pass
    the sink rule, its threshold rises to the model's own ``1 − max_share`` quantile of the first-token
    score, so the name goes to the heads that stand out in this model (:data:`CATCH_ALL_ROLES`). None:
    the fixed thresholds only.
    """

    induction: float = 0.4
    previous_token: float = 0.5
    self: float = 0.5
    sink: float = 0.5
    uniform: float = 0.9
    max_share: float | None = 0.25


@dataclass(frozen=True)
class HeadLabel:
    """The name given to one head and why: ``metric`` ``value`` ≥ ``threshold`` ("" = no name);
    ``rank`` (1 = the highest ``metric``) among the ``of`` heads given the same name; ``relative``: the
    threshold is the model's own quantile (:attr:`HeadThresholds.max_share`), above the fixed one."""

    name: str
    metric: str = ""
    value: float = float("nan")
    threshold: float = float("nan")
    rank: int = 0
    of: int = 0
    relative: bool = False

    def __str__(self) -> str:
        if not self.name:
            return ""
        where = f" #{self.rank} of {self.of}" if self.of > 1 else ""
        bar = "this model's top quarter" if self.relative else "threshold"
        return f"{self.name}{where} ({self.metric} {self.value:.2f} ≥ {self.threshold:.2f}, {bar})"


@dataclass
class HeadClassification:
    """Names of every head: ``labels`` [L][H] of :class:`HeadLabel`, ``names`` str array [L, H];
    ``effective``: {role: the threshold used} (a catch-all role's may be the model's quantile)."""

    labels: list[list[HeadLabel]]
    thresholds: HeadThresholds = field(default_factory=HeadThresholds)
    effective: dict[str, float] = field(default_factory=dict)

    @property
    def names(self) -> np.ndarray:
        return np.array([[lab.name for lab in row] for row in self.labels], dtype=object)

    def heads_named(self, name: str) -> list[tuple[int, int]]:
        """(layer, head) of every head given ``name``, strongest first (by :attr:`HeadLabel.rank`)."""
        found = [
            (lab.rank, l, h)
            for l, row in enumerate(self.labels)
            for h, lab in enumerate(row)
            if lab.name == name
        ]
        return [(l, h) for _, l, h in sorted(found)]

    def counts(self) -> dict[str, int]:
        """{role: how many heads bear it}, every role of :data:`HEAD_ROLES` listed."""
        names = self.names.ravel().tolist()
        return {role: names.count(role) for role in HEAD_ROLES}


def role_title(name: str, bos: str = "") -> str:
    """The role ``name`` as a page shows it. When the prompt starts with the tokenizer's BOS token
    ``bos`` (e.g. Llama's ``<s>``), a "sink" head rests on that token: the *attention sink* of Xiao et
    al. (2023), where heads park weight they do not need elsewhere; the title says so."""
    if name == "sink" and bos:
        return f"sink (on the BOS token {bos}, the attention sink)"
    return name


def classify_heads(metrics: HeadMetrics, thresholds: HeadThresholds | None = None) -> HeadClassification:
    """Name each head of ``[L, H]`` metrics by the first rule that holds, in this order:

    1. "induction": ``induction >= thresholds.induction`` (only when induction was measured)
    2. "previous-token": ``prev_token >= thresholds.previous_token``
    3. "self": ``self_score >= thresholds.self``
    4. "sink": ``sink >= thresholds.sink``
    5. "broad": ``entropy_norm >= thresholds.uniform``

    Specific patterns come before the catch-all ones: a head that looks at its previous token is named
    for that even if it also leaks weight to the first token. Heads matching no rule get "". A
    catch-all rule that more than ``max_share`` of the heads pass uses the model's own quantile
    instead (:class:`HeadThresholds`). Each named head is ranked within its name by its metric.
    """
    t = thresholds or HeadThresholds()
    if len(metrics.shape) != 2:
        raise ValueError(f"classify_heads needs [L, H] metrics, got shape {metrics.shape}")
    rules = [
        ("induction", "induction", metrics.induction, t.induction),
        ("previous-token", "prev_token", metrics.prev_token, t.previous_token),
        ("self", "self_score", metrics.self_score, t.self),
        ("sink", "sink", metrics.sink, t.sink),
        ("broad", "entropy_norm", metrics.entropy_norm, t.uniform),
    ]
    effective, relative = {}, set()
    for name, _, values, threshold in rules:
        if values is None:
            continue
        effective[name] = threshold
        finite = np.asarray(values, dtype=np.float64)
        finite = finite[np.isfinite(finite)]
        share = t.max_share
        widespread = share is not None and finite.size > 0 and (finite >= threshold).mean() > share
        if name in CATCH_ALL_ROLES and share is not None and widespread:
            effective[name] = max(threshold, float(np.quantile(finite, 1.0 - share)))
            relative.add(name)
    L, H = metrics.shape
    chosen: list[list[tuple[str, str, float]]] = []
    for layer in range(L):
        row = []
        for head in range(H):
            pick = ("", "", float("nan"))
            for name, metric, values, _ in rules:
                if values is None:
                    continue
                v = float(values[layer, head])
                if np.isfinite(v) and v >= effective[name]:
                    pick = (name, metric, v)
                    break
            row.append(pick)
        chosen.append(row)
    ranks: dict[tuple[int, int], tuple[int, int]] = {}
    for name in effective:
        members = sorted(
            ((-v, l, h) for l, row in enumerate(chosen) for h, (n, _, v) in enumerate(row) if n == name)
        )
        for rank, (_, l, h) in enumerate(members, start=1):
            ranks[(l, h)] = (rank, len(members))
    labels = [
        [
            HeadLabel(n, m, v, effective[n], *ranks[(l, h)], n in relative) if n else HeadLabel("")
            for h, (n, m, v) in enumerate(row)
        ]
        for l, row in enumerate(chosen)
    ]
    return HeadClassification(labels, t, effective)


__all__ = [
    "CATCH_ALL_ROLES",
    "HEAD_ROLES",
    "HeadClassification",
    "HeadLabel",
    "HeadMetrics",
    "HeadThresholds",
    "RepeatedPrompt",
    "as_numpy",
    "causal_mask_np",
    "classify_heads",
    "entropy",
    "entropy_norm",
    "head_metrics",
    "head_metrics_from_trace",
    "induction_positions",
    "induction_score",
    "informative_rows",
    "learned_sink_share",
    "measure_induction",
    "prev_token_score",
    "repeated_sequence",
    "role_title",
    "row_entropy",
    "self_score",
    "sink_score",
]
