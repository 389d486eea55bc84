"""What only some Attention pages measure after a run: every head's metrics, what switching heads off
changes, the mean patterns, one token's row and column, the next-token table, the experts a
mixture of experts' router chose for each token, and the circuits of the weights (how heads compose,
and one head's full circuits over a few tokens).

Each is a plain function of a model and an :class:`~model.interp.inspection.Inspection`'s arrays;
the app runs them in its compute worker after each run and keeps which run each result belongs to
(that bookkeeping is the app's, not these results'). torch is imported when a function runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

import model.interp.analysis.circuits as circuit_analysis
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
    period = max(2, min(period, cfg.core.context_length // 2))
    rp = repeated_sequence(cfg.core.vocab_size, period, seed=seed)

    trace = run_with_trace(model, rp.tokens.tolist(), kinds=("pattern",), hooks=ablate_heads(ablate or {}))
    return rp.score(trace.stack("pattern")), period


def layer_masks(config, mask: np.ndarray | torch.Tensor | None, n_layers: int | None = None) -> list:
    """The mask [T, T] each block attended with, from the model's (global) ``mask``: a local layer of a
    ``window_pattern`` sees only the last ``sliding_window`` keys (:meth:`GPTConfig.is_local_layer`),
    the others ``mask`` itself (as :meth:`~model.interp.trace.Trace.layer_mask` narrows it). One
    windowed array is shared by every local layer, so the list costs at most two masks.

    ``n_layers`` (default ``config.core.n_layers``): how many layers the list has; when it is not the
    model's (an inspection of some layers only) the layers cannot be told apart and all get ``mask``.
    """
    L = config.core.n_layers if n_layers is None else int(n_layers)
    if mask is None:
        return [None] * L
    m = np.asarray(mask.cpu().numpy() if hasattr(mask, "cpu") else mask, dtype=bool)
    if not config.attention.window_pattern or L != config.core.n_layers:
        return [m] * L
    T, S = m.shape
    q, k = np.arange(S - T, S)[:, None], np.arange(S)[None, :]
    local = m & (k > q - int(config.attention.sliding_window or 0))
    return [local if config.is_local_layer(layer) else m for layer in range(L)]


def head_metrics_of(
    model, weights: np.ndarray, mask: np.ndarray | torch.Tensor, *, ablate: dict | None = None
) -> MetricsResult:
    """Metrics of every head (``model.interp.analysis.heads.head_metrics``, one layer at a time to bound
    memory), each layer under the mask it attended with (:func:`layer_masks`: a local layer's window)
    and with the learned sinks' share when the model has ``attn_sinks``."""

    t0 = time.perf_counter()
    cfg = model.config
    masks = layer_masks(cfg, mask, len(weights))
    sinks = bool(cfg.attention.attn_sinks)
    per_layer = [
        head_metrics(np.asarray(weights[layer], dtype=np.float32), masks[layer], sinks=sinks)
        for layer in range(len(weights))
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
        learned_sink=stack("learned_sink"),
    )
    return MetricsResult(metrics, period, time.perf_counter() - t0)


@dataclass
class ExpertChoice:
    """Which experts a mixture of experts' router chose for each token of a prompt, layer by layer.

    ``moe_layers``: the blocks with a router (ascending; a dense block, e.g. one of DeepSeek's
    ``moe_dense_layers``, has none); ``chosen`` int64 [M, T, k]: the ``k`` experts of token ``t`` in
    ``moe_layers[m]``, as the router ordered them; ``gates`` float32 [M, T, k]: their weights in the
    token's output; ``n_layers``, ``n_experts`` (E) and ``router`` (the rule) of the model.
    """

    moe_layers: list[int]
    chosen: np.ndarray
    gates: np.ndarray
    n_layers: int
    n_experts: int
    router: str = ""
    n_shared: int = 0
    seconds: float = 0.0

    @property
    def k(self) -> int:
        return int(self.chosen.shape[-1]) if self.chosen.ndim == 3 else 0

    @property
    def T(self) -> int:
        return int(self.chosen.shape[1]) if self.chosen.ndim == 3 else 0

    def ranked(self) -> tuple[np.ndarray, np.ndarray]:
        """(ids, weights) [M, T, k] with each token's choices by weight, largest first (the router's
        order is the rule's: top logits or top probabilities, which the weights follow, but a tie or a
        sigmoid rule's renormalisation can reorder them)."""
        order = np.argsort(-self.gates, axis=-1, kind="stable")
        return np.take_along_axis(self.chosen, order, -1), np.take_along_axis(self.gates, order, -1)

    def top(self, rank: int = 0) -> np.ndarray:
        """float [L, T]: the expert of each token with the ``rank``-th largest weight (0 = the top
        one), every layer of the model; NaN in a dense layer."""
        out = np.full((self.n_layers, self.T), np.nan)
        if self.moe_layers and 0 <= rank < self.k:
            ids, _ = self.ranked()
            out[self.moe_layers] = ids[..., rank]
        return out

    def top_weight(self, rank: int = 0) -> np.ndarray:
        """float [L, T]: the weight of :meth:`top`'s expert (NaN in a dense layer)."""
        out = np.full((self.n_layers, self.T), np.nan)
        if self.moe_layers and 0 <= rank < self.k:
            _, w = self.ranked()
            out[self.moe_layers] = w[..., rank]
        return out

    def load(self) -> np.ndarray:
        """float [M, E]: each expert's share of the prompt's ``T·k`` token-to-expert assignments per
        router layer (``1/E`` each when balanced), as a training step's ``router_load`` counts them."""
        E = self.n_experts
        out = np.zeros((len(self.moe_layers), E))
        for m in range(len(self.moe_layers)):
            ids = self.chosen[m].reshape(-1)
            if ids.size:
                out[m] = np.bincount(ids, minlength=E)[:E] / ids.size
        return out

    def arrays(self) -> dict[str, np.ndarray]:
        """Plain arrays for the ``.npz`` export."""
        return {
            "moe_layers": np.asarray(self.moe_layers, dtype=np.int64),
            "chosen": self.chosen,
            "gates": self.gates,
            "load": self.load().astype(np.float32),
            "n_experts": np.asarray(self.n_experts),
        }


def expert_choice_of(model, ids: list[int], *, ablate: dict | None = None) -> ExpertChoice:
    """:class:`ExpertChoice` of the prompt ``ids`` [T]: one forward pass recording the hook points
    ``blocks.l.mlp.chosen`` [1, T, k] and ``blocks.l.mlp.gates`` [1, T, k] of every block with a
    router (``ablate``: the heads switched off for the run shown, so the choices are that run's).
    A dense model gives no layers."""

    t0 = time.perf_counter()
    cfg = model.config
    E = int(cfg.feed_forward.n_experts or 0)
    T = len(ids)
    if not E:
        empty = np.zeros((0, T, 0))
        return ExpertChoice([], empty.astype(np.int64), empty.astype(np.float32), cfg.core.n_layers, 0)
    trace = run_with_trace(model, list(ids), kinds=("chosen", "gates"), hooks=ablate_heads(ablate or {}))
    layers = [layer for layer in trace.layers if trace.has("chosen", layer)]
    chosen = np.stack([trace["chosen", layer][0].numpy() for layer in layers]).astype(np.int64)
    gates = np.stack([trace["gates", layer][0].float().numpy() for layer in layers]).astype(np.float32)
    return ExpertChoice(
        layers,
        chosen,
        gates,
        cfg.core.n_layers,
        E,
        router=cfg.feed_forward.router,
        n_shared=int(cfg.feed_forward.n_shared_experts or 0),
        seconds=time.perf_counter() - t0,
    )


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


def held_out_batches(source, config, tokenizer, *, seed: int = 1234, loss_mask: bool = True):
    """Fixed validation batches of ``source`` for ``config``'s model, or (None, why not).

    :data:`VAL_BATCHES` batches of :data:`VAL_BATCH_SIZE` sequences of at most :data:`VAL_SEQ_LEN`
    tokens (``model.interp.analysis.ablation.validation_batches``), scored as training scores them:
    with ``loss_mask`` (``TrainSettings.loss_mask``) and a task that marks its answers, only the answer
    tokens count, as in the Train tab's loss; otherwise every next token. The note says which.
    """

    if source is None:
        return None, "no data source is loaded, so there is no validation loss to compare"
    if tokenizer is not None and getattr(source, "tokenizer", None) != tokenizer:
        return None, "the loaded data uses another vocabulary than the model"
    limits = [config.core.context_length, VAL_SEQ_LEN]
    m = source.max_seq_len("val")
    if m is not None:
        limits.append(int(m))
    seq = min(limits)
    if seq < 2:
        return None, "the validation split is too short"
    try:
        batches = validation_batches(source, VAL_BATCHES, VAL_BATCH_SIZE, seq, seed=seed, masked=loss_mask)
    except Exception as exc:  # a source without a usable validation split
        return None, f"no validation batches: {exc}"
    masked = any(bool((y == -100).any()) for _x, y in batches)  # a corpus's batches score every target
    scored = "the task's answer tokens only" if masked else "every next token"
    return batches, (
        f"{VAL_BATCHES} validation batches of {VAL_BATCH_SIZE}×{seq} tokens, "
        f"scoring {scored}, as the Train tab's loss does"
    )


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


@dataclass
class CircuitsResult:
    """The circuits of the current weights (:class:`~model.interp.analysis.circuits.Circuits`), or why
    there are none (``failure``: one line, e.g. a Post-LN model); ``config`` the model's."""

    circuits: circuit_analysis.Circuits | None
    failure: str | None
    config: Any
    seconds: float = 0.0


def circuits_of(model, *, rope_offset: int = 0) -> CircuitsResult:
    """Every head's circuits and every composition score of ``model`` (the Circuits page's heavy job:
    the weights only, so once per model or training step)."""
    t0 = time.perf_counter()
    try:
        got = circuit_analysis.model_circuits(model, rope_offset=rope_offset)
    except circuit_analysis.CircuitsUnsupported as exc:
        return CircuitsResult(None, str(exc), model.config, time.perf_counter() - t0)
    return CircuitsResult(got, None, model.config, time.perf_counter() - t0)


#: At most this many tokens in a head's full circuits on the page (the whole vocabulary up to it).
CIRCUIT_TOKENS = 40


def circuit_tokens(vocab_size: int, ids, limit: int = CIRCUIT_TOKENS) -> tuple[list[int], str]:
    """The tokens a head's full circuits are shown over, and the words for them: the whole vocabulary
    when it has at most ``limit`` tokens, else the prompt's distinct tokens in order (at most
    ``limit``)."""
    if vocab_size <= limit:
        return list(range(vocab_size)), f"all {vocab_size} tokens"
    seen = list(dict.fromkeys(int(i) for i in ids))
    kept = seen[:limit]
    more = f" (the first {limit} of {len(seen)})" if len(seen) > limit else ""
    return kept, f"the prompt's {len(kept)} distinct tokens{more}, of {vocab_size}"


@dataclass
class HeadCircuitDetail:
    """One head's full circuits over a few tokens (direct path; the module doc of
    :mod:`~model.interp.analysis.circuits` says what is left out): ``tokens`` and their ``labels``
    [n]; ``full_ov`` [n, n] (row: the token attended to, column: a token's logit raised), ``full_qk``
    [n, n] (row: query token, column: key token); ``promoted_ids`` / ``promoted_values`` [n, top] the
    tokens each source raises most over the whole vocabulary, ``promoted_labels`` their texts;
    ``subset``: which tokens, in words."""

    layer: int
    head: int
    tokens: list[int]
    labels: list[str]
    full_ov: np.ndarray
    full_qk: np.ndarray
    promoted_ids: np.ndarray
    promoted_values: np.ndarray
    promoted_labels: list[list[str]]
    row_mean: np.ndarray
    row_std: np.ndarray
    subset: str
    rope_offset: int | None = None
    seconds: float = 0.0

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "head": np.array([self.layer, self.head], dtype=np.int64),
            "circuit_tokens": np.array(self.tokens, dtype=np.int64),
            "circuit_token_labels": np.array(self.labels, dtype=str),
            "full_ov_circuit": self.full_ov.astype(np.float64),
            "full_qk_circuit": self.full_qk.astype(np.float64),
            "promoted_ids": self.promoted_ids.astype(np.int64),
            "promoted_values": self.promoted_values.astype(np.float64),
        }


def circuit_head_of(
    model, tokenizer, ids, layer: int, head: int, *, rope_offset: int = 0, top: int = 8
) -> HeadCircuitDetail:
    """Head (layer, head)'s full OV and QK circuits over :func:`circuit_tokens` and the tokens its OV
    circuit raises most for each of them (the Circuits page's light job)."""
    t0 = time.perf_counter()
    tokens, subset = circuit_tokens(int(model.config.core.vocab_size), ids)
    hw = circuit_analysis.head_weights(model, rope_offset=rope_offset, layers=[layer])
    rows = circuit_analysis.full_ov_circuit(model, 0, head, tokens, hw)  # [n, V]
    full_qk = circuit_analysis.full_qk_circuit(model, 0, head, tokens, hw)
    k = min(int(top), rows.shape[1])
    order = np.argsort(-rows, axis=1, kind="stable")[:, :k]
    values = np.take_along_axis(rows, order, axis=1)
    labels = token_labels(tokenizer, np.asarray(tokens, dtype=np.int64)[:, None])
    return HeadCircuitDetail(
        layer=int(layer),
        head=int(head),
        tokens=tokens,
        labels=[row[0] for row in labels],
        full_ov=rows[:, tokens],
        full_qk=full_qk,
        promoted_ids=order,
        promoted_values=values,
        promoted_labels=token_labels(tokenizer, order),
        row_mean=rows.mean(axis=1),
        row_std=rows.std(axis=1),
        subset=subset,
        rope_offset=hw.rope_offset,
        seconds=time.perf_counter() - t0,
    )


__all__ = [
    "CIRCUIT_TOKENS",
    "INDUCTION_PERIOD",
    "K_MAX",
    "AblationResult",
    "Aggregates",
    "CircuitsResult",
    "ExpertChoice",
    "HeadCircuitDetail",
    "MetricsResult",
    "NextTokenTable",
    "ablation_of",
    "aggregates_of",
    "circuit_head_of",
    "circuit_tokens",
    "circuits_of",
    "expert_choice_of",
    "head_metrics_of",
    "held_out_batches",
    "induction_scores",
    "layer_masks",
    "next_tokens_of",
    "token_focus_of",
    "token_labels",
]
