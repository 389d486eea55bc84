"""What only some Attention pages measure after a run: every head's metrics, what switching heads off
changes, the mean patterns, one token's row and column, the next-token table.

Each is a plain function of a model and an :class:`~model.interp.inspection.Inspection`'s arrays;
the app runs them in its compute worker after each run and keeps which run each result belongs to
(that bookkeeping is the app's, not these results'). torch is imported when a function runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from model.interp.analysis.ablation import ablation_effect, validation_batches, validation_loss_change
from model.interp.analysis.aggregate import (
    TokenFocus,
    mean_over_all,
    mean_over_heads,
    mean_over_heads_set,
    mean_over_layers,
)
from model.interp.analysis.heads import HeadMetrics, head_metrics, repeated_sequence
from model.interp.analysis.next_token import NextTokens, top_k_next_tokens
from model.interp.analysis.rollout import rollout_of_means
from model.interp.trace import run_with_trace
from model.nn.hooks import ablate_heads
from model.text.tokens import visible

if TYPE_CHECKING:
    import torch

#: Period of the repeated random sequence the induction score is measured on.
INDUCTION_PERIOD = 24

#: Top-k kept per position for the Next token page (the page shows up to this many).
K_MAX = 10


def token_labels(tokenizer, ids: np.ndarray) -> list[list[str]]:
    """The visible texts of token ids [T, k] as rows [T][k] (the ids as text without a tokenizer)."""
    T, k = ids.shape
    flat = [int(i) for i in ids.reshape(-1)]
    if tokenizer is None:
        texts = [str(i) for i in flat]
    else:
        texts = [visible(t) for t in tokenizer.token_strings(flat)]
    return [texts[t * k : (t + 1) * k] for t in range(T)]


@dataclass
class NextTokenTable:
    """The Next token page's numbers: ``tokens`` (top-:data:`K_MAX` per position with probabilities,
    the entropy, and the real next token's probability and rank) and ``labels`` [T][k] the guesses'
    visible texts."""

    tokens: NextTokens
    labels: list[list[str]]
    seconds: float = 0.0


def next_tokens_of(logits: np.ndarray, ids: list[int], tokenizer=None, *, k: int = K_MAX) -> NextTokenTable:
    """Rank the next tokens of a prompt ``ids`` [T] from its ``logits`` [T, V]: at position ``t`` the
    target is ``ids[t + 1]`` (none at the end). :func:`~model.interp.analysis.next_token.top_k_next_tokens`
    ranks a block of positions at a time, so no [T, V] temporary is made."""
    t0 = time.perf_counter()
    targets = np.full(len(ids), -1, dtype=np.int64)
    targets[:-1] = ids[1:]
    nt = top_k_next_tokens(logits, k, targets=targets)
    return NextTokenTable(nt, token_labels(tokenizer, nt.ids), time.perf_counter() - t0)


@dataclass
class MetricsResult:
    """Per-head metrics [L, H] of the prompt (induction on a repeated random sequence)."""

    metrics: Any  # model.analysis.heads.HeadMetrics
    period: int
    seconds: float = 0.0


def induction_scores(model, *, ablate: dict | None = None, period: int = INDUCTION_PERIOD, seed: int = 0):
    """Induction score [L, H] on ``block * 2`` (a random block of ``period`` tokens), and the period."""

    cfg = model.config
    period = max(2, min(period, cfg.context_length // 2))
    rp = repeated_sequence(cfg.vocab_size, period, seed=seed)

    trace = run_with_trace(model, rp.tokens.tolist(), kinds=("pattern",), hooks=ablate_heads(ablate or {}))
    return rp.score(trace.stack("pattern")), period


def head_metrics_of(
    model, weights: np.ndarray, mask: np.ndarray | torch.Tensor, *, ablate: dict | None = None
) -> MetricsResult:
    """Metrics of every head (``model.interp.analysis.heads.head_metrics``, one layer at a time to bound
    memory)."""

    t0 = time.perf_counter()
    per_layer = [
        head_metrics(np.asarray(weights[layer], dtype=np.float32), mask) for layer in range(len(weights))
    ]

    def stack(name):
        return np.stack([getattr(m, name) for m in per_layer])

    induction, period = induction_scores(model, ablate=ablate)
    metrics = HeadMetrics(
        entropy=stack("entropy"),
        entropy_norm=stack("entropy_norm"),
        prev_token=stack("prev_token"),
        sink=stack("sink"),
        self_score=stack("self_score"),
        induction=induction,
    )
    return MetricsResult(metrics, period, time.perf_counter() - t0)


@dataclass
class AblationResult:
    """What switching ``heads`` off changes: next-token effect on the prompt and validation loss.

    ``before_labels`` / ``after_labels`` [T][k]: visible texts of ``effect.top_before.ids`` and
    ``effect.top_after.ids`` (the ids as text when no tokenizer was given).
    """

    heads: dict[tuple[int, int], str]
    effect: Any  # model.analysis.ablation.AblationEffect
    loss: Any  # model.analysis.ablation.LossChange or None
    loss_note: str
    before_labels: list[list[str]] = field(default_factory=list)
    after_labels: list[list[str]] = field(default_factory=list)


#: Validation batches for the loss change: this many batches of this many sequences.
VAL_BATCHES, VAL_BATCH_SIZE, VAL_SEQ_LEN = 4, 8, 128


def held_out_batches(source, config, tokenizer, *, seed: int = 1234):
    """Fixed validation batches of ``source`` for ``config``'s model, or (None, why not).

    :data:`VAL_BATCHES` batches of :data:`VAL_BATCH_SIZE` sequences of at most :data:`VAL_SEQ_LEN`
    tokens (``model.interp.analysis.ablation.validation_batches``, every target scored), and a note that
    says what they are.
    """

    if source is None:
        return None, "no data source is loaded, so there is no validation loss to compare"
    if tokenizer is not None and getattr(source, "tokenizer", None) != tokenizer:
        return None, "the loaded data uses another vocabulary than the model"
    limits = [config.context_length, VAL_SEQ_LEN]
    m = source.max_seq_len("val")
    if m is not None:
        limits.append(int(m))
    seq = min(limits)
    if seq < 2:
        return None, "the validation split is too short"
    try:
        batches = validation_batches(source, VAL_BATCHES, VAL_BATCH_SIZE, seq, seed=seed, masked=False)
    except Exception as exc:  # a source without a usable validation split
        return None, f"no validation batches: {exc}"
    return batches, f"{VAL_BATCHES} validation batches of {VAL_BATCH_SIZE}×{seq} tokens"


def ablation_of(model, ids: list[int], heads: dict, batches, note: str, *, tokenizer=None) -> AblationResult:
    """Next-token change on the prompt and validation-loss change from switching ``heads`` off.

    ``batches``: from :func:`held_out_batches` (None: the loss change is not measured, ``note`` says
    why); ``tokenizer`` names the top next tokens before and after.
    """

    effect = ablation_effect(model, ids, heads, k=5)
    loss = validation_loss_change(model, heads, batches) if batches else None

    before, after = (token_labels(tokenizer, top.ids) for top in (effect.top_before, effect.top_after))
    return AblationResult(dict(heads), effect, loss, note, before, after)


@dataclass
class Aggregates:
    """Mean patterns of one inspection (``model.interp.analysis.aggregate``), float32.

    ``per_layer`` [L, T, T] (mean over heads), ``per_head`` [H, T, T] (mean over layers), ``overall``
    [T, T] (every head), ``chosen`` [T, T] (the mean of ``chosen_heads``; None when none is chosen),
    ``rollout`` [T, T] (attention rollout over every layer, :mod:`model.interp.analysis.rollout`; None
    unless asked for).
    """

    per_layer: np.ndarray
    per_head: np.ndarray
    overall: np.ndarray
    chosen: np.ndarray | None
    chosen_heads: list[tuple[int, int]]
    rollout: np.ndarray | None = None


def aggregates_of(weights: np.ndarray, chosen: list[tuple[int, int]], *, rollout: bool = False) -> Aggregates:
    """:class:`Aggregates` of ``weights`` [L, H, T, T], one layer (or head index) at a time so that a
    float16 model at 1024 tokens never needs a float64 copy of every head at once."""

    L, H = weights.shape[:2]
    per_layer = np.stack([mean_over_heads(weights[i : i + 1])[0] for i in range(L)]).astype(np.float32)
    per_head = np.stack([mean_over_layers(weights[:, i : i + 1])[0] for i in range(H)]).astype(np.float32)
    # every layer has H heads, so the mean of the layer means is the mean of all L·H heads
    overall = mean_over_all(per_layer[:, None]).astype(np.float32)
    chosen_arr = None
    if chosen:
        sub = np.stack([np.asarray(weights[l, h], dtype=np.float32) for l, h in chosen])[None]
        chosen_arr = mean_over_heads_set(sub, [(0, i) for i in range(len(chosen))]).astype(np.float32)
    # L products of [T, T] matrices (25 GFLOP for 12 layers at 1024 tokens): only when it is shown
    rolled = rollout_of_means(per_layer).rollout.astype(np.float32) if rollout else None
    return Aggregates(per_layer, per_head, overall, chosen_arr, list(chosen), rolled)


def token_focus_of(weights: np.ndarray, t: int):
    """:class:`~model.interp.analysis.aggregate.TokenFocus` of position ``t``: the row and column ``t`` of
    every head of ``weights`` [L, H, T, T] (float32 slices; ``aggregate.token_focus`` would first copy
    all of [L, H, T, T])."""

    T = weights.shape[-1]
    if not 0 <= t < T:
        raise ValueError(f"token position {t} is outside a prompt of {T} tokens")
    return TokenFocus(
        t,
        np.asarray(weights[:, :, t, :], dtype=np.float32),
        np.asarray(weights[:, :, :, t], dtype=np.float32),
    )


__all__ = [
    "INDUCTION_PERIOD",
    "K_MAX",
    "AblationResult",
    "Aggregates",
    "MetricsResult",
    "NextTokenTable",
    "ablation_of",
    "aggregates_of",
    "head_metrics_of",
    "held_out_batches",
    "induction_scores",
    "next_tokens_of",
    "token_focus_of",
    "token_labels",
]
