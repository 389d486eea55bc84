"""The attention inspection of a prompt: what the Attention tab shows, as plain functions of a model.

Each function puts the model in evaluation mode for its forward passes (and restores the mode) and
returns numpy arrays and dataclasses; the numbers themselves come from :func:`inspect` and
``model.interp.analysis.*``. No Qt: the app runs these in its compute worker (off the GUI thread, under
``model.runtime.compute_lock``), and anything else may call them directly.

- :func:`inspect` (:func:`model.interp.trace.inspect`): a prompt (text or ids) →
:class:`~model.interp.trace.Trace`, in
  evaluation mode, with optional interventions (hooks);
- :func:`inspect_prompt`: every head's weights [L, H, T, T], the mask, the logits and the top next
  tokens (:class:`Inspection`), plus a max-pooled overview of long prompts (:func:`pool_max`);
- :func:`head_detail`: one head's pipeline, stage by stage;
- :func:`head_metrics_of`: per-head metrics [L, H] (:class:`MetricsResult`);
- :func:`ablation_of`: what switching heads off changes (:class:`AblationResult`);
- :func:`aggregates_of`, :func:`token_focus_of`: mean patterns, one token's row and column;
- :func:`export_arrays`: the arrays of the .npz inspection format (``model.interp.export``).

Memory: the grid needs ``weights`` [L, H, T, T] of the whole model. Up to :data:`FLOAT32_LIMIT`
values they are kept as float32 (no conversion when drawing); beyond (e.g. 12×12 heads at 512+
tokens) as float16, half the memory, converted per head when a view needs it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from model.errors import AttentionLabError
from model.interp.pooling import pool_max

#: Largest L·H·T² kept as float32 (128 MB); above it weights are kept as float16.
FLOAT32_LIMIT = 32 * 2**20
#: Top-k kept per position for the next-token panel (the panel shows up to this many).
K_MAX = 10
#: Period of the repeated random sequence the induction score is measured on.
INDUCTION_PERIOD = 24


#: Below this many FLOPs a forward pass runs on one thread: thread start-up and barriers would cost
#: more than they save, and far more when other processes keep the cores busy.
SMALL_FLOPS = 1e9


def pick_threads(model, T: int, *, training: bool = False) -> int | None:
    """Torch threads for an inspection job: ``None`` (every core) only for big work on an idle CPU.

    One thread while training runs (the trainer's threads still hold the cores between steps), for
    small work (below :data:`SMALL_FLOPS`; work ≈ ``2 · params · T`` for the linear layers ``+ 4 · L
    · T² · d`` for scores and weights × V), and when other processes already keep every core busy
    (1-minute load average ≥ cores − ½): there, threads wait on each other at every operation.
    Measured on 2 shared cores at load 12, a 12×12-head d=768 model at 256 tokens traced in 2.0 s
    on 1 thread and 8 s on 2.
    """
    import os

    from model.runtime import available_cores

    if training:
        return 1
    cfg = model.config
    n_params = sum(p.numel() for p in model.parameters())
    flops = 2 * n_params * T + 4 * cfg.n_layers * T * T * cfg.d_model
    if flops < SMALL_FLOPS:
        return 1
    try:
        busy = os.getloadavg()[0] >= available_cores() - 0.5
    except (AttributeError, OSError):  # no load average on this platform
        busy = False
    return 1 if busy else None


def with_threads(n: int | None, fn):
    """``fn`` wrapped to run at ``n`` torch threads in the calling (worker) thread."""
    from model.runtime import threads

    def run():
        with threads(n):
            return fn()

    return run


class PromptError(AttentionLabError, ValueError):
    """The prompt cannot be inspected (empty, or characters the vocabulary lacks): one clear line."""


def encode_prompt(tokenizer, text: str, context_length: int) -> tuple[list[int], int]:
    """Token ids of ``text`` (its last ``context_length``) and how many were dropped from the front.

    The special tokens a tokenizer puts in front (Llama's BOS ``<s>``: ``prefix_ids``) stay in front
    when the text is cut: the model was trained to see them first.
    """
    if not text:
        raise PromptError("the prompt is empty: type some text to inspect")
    try:
        ids = tokenizer.encode(text)
    except ValueError as exc:
        raise PromptError(str(exc)) from None
    if not ids:
        raise PromptError("the prompt encodes to no tokens")
    dropped = max(0, len(ids) - int(context_length))
    return keep_last(tokenizer, ids, int(context_length)), dropped


def keep_last(tokenizer, ids: list[int], n: int) -> list[int]:
    """The last ``n`` of ``ids``; the special tokens a tokenizer puts in front (``prefix_ids``) stay."""
    dropped = len(ids) - n
    if dropped <= 0:
        return list(ids)
    prefix = list(getattr(tokenizer, "prefix_ids", None) or [])
    if prefix and ids[: len(prefix)] == prefix and len(prefix) < n:
        return prefix + ids[len(prefix) + dropped :]
    return ids[dropped:]


def prompt_need(cfg, n_tokens: int):
    """The bytes :func:`inspect_prompt` needs for ``n_tokens`` (a :class:`model.budget.sizing.Need`): every
    head's weights L·H·T² (float32 up to :data:`FLOAT32_LIMIT` values, else float16), one layer's
    scores in flight and the logits [T, V]."""
    from model.interp.trace_size import inspection_need

    big = cfg.n_layers * cfg.n_heads * n_tokens * n_tokens > FLOAT32_LIMIT
    return inspection_need(cfg, n_tokens, kinds=("pattern",), bytes_per_value=2 if big else 4)


def tokens_that_fit(cfg, n_tokens: int, budget: int | None = None) -> int:
    """The most tokens, up to ``n_tokens``, whose :func:`prompt_need` fits in ``budget`` bytes (default
    :func:`model.budget.sizing.usable_bytes`); 0 when not even one does.

    The need grows with T except where the weights switch to float16 (past :data:`FLOAT32_LIMIT`),
    where it halves: each side of the switch is bisected on its own, the float16 side first.
    """
    if budget is None:
        from model.budget.sizing import usable_bytes

        budget = usable_bytes()

    def fits(T: int) -> bool:
        return prompt_need(cfg, T).total <= budget

    if fits(n_tokens):
        return n_tokens
    heads = max(1, cfg.n_layers * cfg.n_heads)
    switch = math.isqrt(FLOAT32_LIMIT // heads)
    while heads * switch * switch <= FLOAT32_LIMIT:
        switch += 1  # the first T kept as float16
    for lo, hi in ((max(1, switch), n_tokens), (1, min(n_tokens, switch - 1))):
        if lo > hi or not fits(lo):
            continue
        while lo < hi:  # lo fits; find the last T in [lo, hi] that does
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo
    return 0


def token_labels(tokenizer, ids) -> tuple[list[str], list[str]]:
    """(raw token texts, visible labels with ␣ ⏎ ⇥ and escapes) of ``ids``."""
    from model.text.tokens import visible

    texts = tokenizer.token_strings([int(i) for i in ids])
    return texts, [visible(s) for s in texts]


@dataclass
class Inspection:
    """One prompt through the current model: what every page draws.

    ``weights`` [L, H, T, T] (float32, or float16 past :data:`FLOAT32_LIMIT`); ``overview``
    [L, H, S, S] float32, ``S = ceil(T / block)``, max-pooled by ``block`` for an overview of every
    head (the same array as ``weights`` when ``block == 1`` and float32); ``mask`` [T, T] bool
    (True = may attend); ``logits`` [T, V] float32;
    ``next_tokens``: top-:data:`K_MAX` per position (``model.interp.analysis.next_token``) with
    ``next_labels``
    [T][k] their visible texts and ``target_labels`` [T] the token that actually follows ('' at the end).
    ``ablate``: the heads switched off for this run ({} = the model as it is).
    """

    request: int
    prompt: str
    ids: list[int]
    texts: list[str]
    labels: list[str]
    dropped: int
    weights: np.ndarray
    overview: np.ndarray
    block: int
    mask: np.ndarray
    logits: np.ndarray
    next_tokens: Any
    next_labels: list[list[str]]
    target_labels: list[str]
    ablate: dict[tuple[int, int], str]
    config: Any
    seconds: float = 0.0
    model_key: Any = None
    extra: dict = field(default_factory=dict)

    @property
    def n_layers(self) -> int:
        return int(self.weights.shape[0])

    @property
    def n_heads(self) -> int:
        return int(self.weights.shape[1])

    @property
    def T(self) -> int:  # noqa: N802 (the literature's name)
        return int(self.weights.shape[-1])

    def head(self, layer: int, head: int) -> np.ndarray:
        """One head's weights [T, T] as float32."""
        return np.asarray(self.weights[layer, head], dtype=np.float32)


def _ablation_hooks(ablate):
    from model.nn.hooks import ablate_heads

    return ablate_heads(ablate) if ablate else []


def inspect_prompt(
    model,
    tokenizer,
    ids: list[int],
    *,
    ablate: dict | None = None,
    block: int = 1,
    request: int = 0,
    prompt: str = "",
    dropped: int = 0,
    model_key: Any = None,
    memory_note: str = "",
) -> Inspection:
    """Trace ``ids`` (weights of every head) and rank the next tokens; see :class:`Inspection`.

    ``block``: the overview's pooling block (1 = every token; the caller knows how much it can draw).
    ``memory_note``: why tokens were left out to fit in memory (:func:`tokens_that_fit`), for the
    status line (``extra["memory_note"]``).
    """
    import torch

    from model.interp.analysis.next_token import top_k_next_tokens

    t0 = time.perf_counter()
    cfg = model.config
    T = len(ids)
    big = cfg.n_layers * cfg.n_heads * T * T > FLOAT32_LIMIT
    from model.interp.trace import run_with_trace  # torch, when a function runs

    trace = run_with_trace(
        model,
        ids,
        kinds=("pattern",),
        dtype=torch.float16 if big else torch.float32,
        hooks=_ablation_hooks(ablate),
    )
    weights = trace.take_stack("pattern")  # [L, H, T, T], never two copies at once
    b = max(1, int(block))
    overview = pool_max(weights, b)
    logits = trace.logits[0]
    targets = torch.full((T,), -1, dtype=torch.long)
    targets[:-1] = torch.tensor(ids[1:], dtype=torch.long)
    nxt = top_k_next_tokens(logits, K_MAX, targets=targets)
    texts, labels = token_labels(tokenizer, ids)
    flat = tokenizer.token_strings([int(i) for i in nxt.ids.reshape(-1)])
    from model.text.tokens import visible

    k = nxt.ids.shape[1]
    next_labels = [[visible(flat[t * k + j]) for j in range(k)] for t in range(T)]
    return Inspection(
        request=request,
        prompt=prompt,
        ids=list(ids),
        texts=texts,
        labels=labels,
        dropped=dropped,
        weights=weights,
        overview=overview,
        block=b,
        mask=trace.mask.numpy().astype(bool),
        logits=logits.numpy(),
        next_tokens=nxt,
        next_labels=next_labels,
        target_labels=labels[1:] + [""],
        ablate=dict(ablate or {}),
        config=cfg,
        seconds=time.perf_counter() - t0,
        model_key=model_key,
        extra={
            "special": [i for i, t in enumerate(ids) if int(t) in getattr(tokenizer, "special_ids", ())],
            "memory_note": memory_note,
        },
    )


def head_detail(model, ids: list[int], layer: int, head: int, *, ablate: dict | None = None):
    """:class:`~model.interp.analysis.pipeline.HeadPipeline` of one head on ``ids`` (traces only its
    layer)."""
    from model.interp.analysis.pipeline import PIPELINE_KINDS, head_pipeline
    from model.interp.trace import run_with_trace  # torch, when a function runs

    trace = run_with_trace(model, ids, layers=[layer], kinds=PIPELINE_KINDS, hooks=_ablation_hooks(ablate))
    return head_pipeline(trace, layer, head)


@dataclass
class MetricsResult:
    """Per-head metrics [L, H] of the prompt (induction on a repeated random sequence)."""

    metrics: Any  # model.analysis.heads.HeadMetrics
    period: int
    request: int = 0
    seconds: float = 0.0


def induction_scores(model, *, ablate: dict | None = None, period: int = INDUCTION_PERIOD, seed: int = 0):
    """Induction score [L, H] on ``block * 2`` (a random block of ``period`` tokens), and the period."""
    from model.interp.analysis.heads import repeated_sequence

    cfg = model.config
    period = max(2, min(period, cfg.context_length // 2))
    rp = repeated_sequence(cfg.vocab_size, period, seed=seed)
    from model.interp.trace import run_with_trace  # torch, when a function runs

    trace = run_with_trace(model, rp.tokens.tolist(), kinds=("pattern",), hooks=_ablation_hooks(ablate))
    return rp.score(trace.stack("pattern")), period


def head_metrics_of(
    model, weights: np.ndarray, mask: np.ndarray, *, ablate: dict | None = None, request: int = 0
) -> MetricsResult:
    """Metrics of every head (``model.interp.analysis.heads.head_metrics``, one layer at a time to bound
    memory)."""
    from model.interp.analysis.heads import HeadMetrics, head_metrics

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
    return MetricsResult(metrics, period, request, time.perf_counter() - t0)


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
    request: int = 0
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
    from model.interp.analysis.ablation import validation_batches

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


def ablation_of(
    model, ids: list[int], heads: dict, batches, note: str, *, tokenizer=None, request: int = 0
) -> AblationResult:
    """Next-token change on the prompt and validation-loss change from switching ``heads`` off.

    ``batches``: from :func:`held_out_batches` (None: the loss change is not measured, ``note`` says
    why); ``tokenizer`` names the top next tokens before and after.
    """
    from model.interp.analysis.ablation import ablation_effect, validation_loss_change

    effect = ablation_effect(model, ids, heads, k=5)
    loss = validation_loss_change(model, heads, batches) if batches else None

    def names(top) -> list[list[str]]:
        T, k = top.ids.shape
        flat = [int(i) for i in top.ids.reshape(-1)]
        if tokenizer is None:
            texts = [str(i) for i in flat]
        else:
            from model.text.tokens import visible

            texts = [visible(t) for t in tokenizer.token_strings(flat)]
        return [texts[t * k : (t + 1) * k] for t in range(T)]

    return AblationResult(
        dict(heads), effect, loss, note, request, names(effect.top_before), names(effect.top_after)
    )


@dataclass
class Aggregates:
    """Mean patterns of one inspection (``model.interp.analysis.aggregate``), float32.

    ``per_layer`` [L, T, T] (mean over heads), ``per_head`` [H, T, T] (mean over layers), ``overall``
    [T, T] (every head), ``chosen`` [T, T] (the mean of ``chosen_heads``; None when none is chosen),
    ``rollout`` [T, T] (attention rollout over every layer, :mod:`model.interp.analysis.rollout`; None
    unless asked for).
    """

    request: int
    per_layer: np.ndarray
    per_head: np.ndarray
    overall: np.ndarray
    chosen: np.ndarray | None
    chosen_heads: list[tuple[int, int]]
    rollout: np.ndarray | None = None


def aggregates_of(
    weights: np.ndarray, chosen: list[tuple[int, int]], *, rollout: bool = False, request: int = 0
) -> Aggregates:
    """:class:`Aggregates` of ``weights`` [L, H, T, T], one layer (or head index) at a time so that a
    float16 model at 1024 tokens never needs a float64 copy of every head at once."""
    from model.interp.analysis.aggregate import (
        mean_over_all,
        mean_over_heads,
        mean_over_heads_set,
        mean_over_layers,
    )
    from model.interp.analysis.rollout import rollout_of_means

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
    return Aggregates(request, per_layer, per_head, overall, chosen_arr, list(chosen), rolled)


def token_focus_of(weights: np.ndarray, t: int):
    """:class:`~model.interp.analysis.aggregate.TokenFocus` of position ``t``: the row and column ``t`` of
    every head of ``weights`` [L, H, T, T] (float32 slices; ``aggregate.token_focus`` would first copy
    all of [L, H, T, T])."""
    from model.interp.analysis.aggregate import TokenFocus

    T = weights.shape[-1]
    if not 0 <= t < T:
        raise ValueError(f"token position {t} is outside a prompt of {T} tokens")
    return TokenFocus(
        t,
        np.asarray(weights[:, :, t, :], dtype=np.float32),
        np.asarray(weights[:, :, :, t], dtype=np.float32),
    )


def export_arrays(model, tokenizer, ids: list[int], *, ablate: dict | None = None) -> dict[str, np.ndarray]:
    """The arrays of the .npz inspection format (``model.interp.export``), as ``attention-lab inspect``
    writes."""
    from model.interp.export import inspection_arrays
    from model.interp.trace import run_with_trace  # torch, when a function runs
    from model.interp.trace_size import REQUIRED_KINDS

    trace = run_with_trace(model, ids, kinds=REQUIRED_KINDS, hooks=_ablation_hooks(ablate))
    return inspection_arrays(trace, tokenizer.token_strings([int(i) for i in ids]))


__all__ = [
    "FLOAT32_LIMIT",
    "INDUCTION_PERIOD",
    "K_MAX",
    "SMALL_FLOPS",
    "AblationResult",
    "Aggregates",
    "Inspection",
    "MetricsResult",
    "PromptError",
    "ablation_of",
    "aggregates_of",
    "encode_prompt",
    "export_arrays",
    "head_detail",
    "head_metrics_of",
    "held_out_batches",
    "induction_scores",
    "inspect_prompt",
    "pick_threads",
    "token_focus_of",
    "token_labels",
    "with_threads",
]
