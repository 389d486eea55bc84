"""What a trace will take, before anything is traced, and the one plan of a prompt's inspection: the
trace kinds, their bytes (:func:`estimate_nbytes`), an inspection's whole need
(:func:`inspection_need`), the richest export within a budget and a disk (:func:`plan_file_export`), and
:func:`plan_prompt`: the prompt, what was left out and why, the kinds and layers kept, the precision,
the threads and the pooling, decided once for the command line, the Attention tab and its worker.

Arithmetic on a :class:`~model.config.GPTConfig` only, no torch: a command can size (and refuse) an
inspection in milliseconds, before torch is even imported. For L layers, H heads, T tokens, d_model d,
head_dim d_k, batch B and b bytes per value, a trace holds per layer H·T² per square kind (``scores_raw``,
``scores``, ``pattern``), H·T·d_k per other head kind, T·d per stream kind and T per norm kind, plus T·d for
``ln_final``: (L · per_layer + once) · B · b bytes. Kinds are the hook names of :mod:`model.interp.trace`;
the names they had before (:data:`RETIRED`) are refused, naming the hook name (:func:`hook_name`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from model.budget import sizing
from model.budget.arithmetic import human_bytes
from model.budget.sizing import Available, ModelTooLarge, Need, largest_knob, load_need, size_or_zero
from model.config import GPTConfig
from model.interp.file_size import (
    LOGITS_BLOCK,
    DiskTooSmall,
    export_file_bytes,
    streamed_file_bytes,
    write_ahead,
)
from model.interp.pooling import MAX_CELL, block_size
from model.interp.prompt import Prompt, PromptError, Tokenizer, encode_prompt
from model.interp.threads import pick_threads

HEAD_KINDS = ("q", "k", "v", "scores_raw", "scores", "pattern", "z")
SQUARE_KINDS = ("scores_raw", "scores", "pattern")
STREAM_KINDS = ("attn_out", "mlp_out", "resid_pre", "resid_mid", "resid_post")
NORM_KINDS = ("attn_write_norm", "mlp_write_norm")
#: a mixture of experts' router logits [T, E], and the experts chosen per token and their weights [T, k]
EXPERT_KINDS = ("router", "chosen", "gates")
LAYER_KINDS = HEAD_KINDS + STREAM_KINDS + NORM_KINDS + EXPERT_KINDS
GLOBAL_KINDS = ("ln_final",)
ALL_KINDS = LAYER_KINDS + GLOBAL_KINDS
#: The kinds' names before they took their hook points' → the hook name: refused wherever a kind is
#: given (:func:`hook_name`). The .npz format keeps two as file keys (``model.interp.export.FILE_KEYS``).
RETIRED = {"weights": "pattern", "scores_scaled": "scores", "head_out": "z", "resid_final": "ln_final"}
#: What the .npz inspection format (``model.interp.export``) records.
REQUIRED_KINDS = ("pattern", "scores_raw", "scores", "resid_pre", "resid_mid", "resid_post")


def hook_name(kind: str) -> str:
    """``kind`` as given, unless retired (:data:`RETIRED`): a ValueError naming its hook name,
    ``'weights' is now 'pattern'`` (whether it is a kind at all: :func:`~model.interp.trace.check_kinds`)."""
    if kind in RETIRED:
        raise ValueError(f"{kind!r} is now {RETIRED[kind]!r}")
    return kind


def hook_names(kinds: Iterable[str] | str) -> tuple[str, ...]:
    """``kinds`` in order, each once, every one checked by :func:`hook_name`."""
    kinds = [kinds] if isinstance(kinds, str) else kinds
    return tuple(dict.fromkeys(hook_name(k) for k in kinds))


def estimate_nbytes(
    n_layers: int,
    n_heads: int,
    seq_len: int,
    d_model: int,
    head_dim: int,
    *,
    kinds: Iterable[str] | None = None,
    batch: int = 1,
    bytes_per_value: int = 4,
    n_experts: int = 0,
    experts_per_token: int = 0,
) -> int:
    """Bytes a trace of these kinds takes (logits excluded): the formula in the module docstring, plus
    a mixture of experts' ``T·E`` router logits and ``T·k`` choices and weights per layer (8 bytes
    for a chosen expert's id)."""
    kinds = set(ALL_KINDS if kinds is None else hook_names(kinds))
    per_layer = 0
    experts = {"router": seq_len * n_experts, "gates": seq_len * experts_per_token}
    ids = seq_len * experts_per_token * 8 * batch if "chosen" in kinds else 0
    for kind in kinds:
        per_layer += experts.get(kind, 0)
        if kind in SQUARE_KINDS:
            per_layer += n_heads * seq_len * seq_len
        elif kind in HEAD_KINDS:
            per_layer += n_heads * seq_len * head_dim
        elif kind in STREAM_KINDS:
            per_layer += seq_len * d_model
        elif kind in NORM_KINDS:
            per_layer += seq_len
    once = seq_len * d_model if "ln_final" in kinds else 0
    return (per_layer * n_layers + once) * batch * bytes_per_value + ids * n_layers


# ---------------------------------------------------------------------------------------------
# inspection within a budget
# ---------------------------------------------------------------------------------------------
def inspection_need(
    cfg: GPTConfig,
    seq_len: int,
    *,
    kinds: Iterable[str],
    n_layers: int | None = None,
    bytes_per_value: int = 4,
    with_model: bool = False,
    batch: int = 1,
    to_file: bool = False,
) -> Need:
    """Bytes to trace ``seq_len`` tokens recording ``kinds`` in ``n_layers`` layers (all by default):
    the one estimate of a recorded run, whoever runs it (:func:`~model.interp.trace.run_with_trace`,
    the Attention tab's :func:`held_need`, :func:`~model.interp.inspection.export_arrays`, which
    write each kind once, into what they return, and ``attention-lab inspect``'s
    :func:`~model.interp.inspection.write_inspection`, which writes the square kinds to the file as
    each layer makes them: ``to_file``, none of them held, only the layer in flight).

    With ``A = 4·B·H·T²`` (one layer's square of float32 scores) and ``V`` the vocabulary, the peak is

    * the recorded kinds, :func:`estimate_nbytes`;
    * the larger of the logits ``4·B·T·V`` (float32, made after the last layer) and one layer in
      flight before them: ``2·A`` when the scores are recorded (the written-out softmax of the whole
      square: the scores, then the weights; ``3·A`` with attention sinks written ``to_file``: their
      column joins a copy of the scores, at a moment when a held layer's weights are not written
      yet), else ``A`` for the pattern buffer the layers share when only the pattern is read
      (:meth:`~model.nn.attention.Attention.attend_causal`, let go before the logits) and a block
      of 64 query rows ``3·4·B·H·64·T``; plus the layer's activations ``4·B·T·(4·d + 3·f)``, ``f``
      the feed-forward's width in flight (:func:`_ffn_width`);
    * ``to_file``: the logits are unembedded into the file a block of ``r`` rows at a time
      (``4·V·r`` ≈ :data:`LOGITS_BLOCK`): ``4·B·V·min(T, r)`` in place of ``4·B·T·V``; and, for a
      file of gigabytes, what waits for the writer thread (:func:`~model.interp.file_size.write_ahead`:
      the block before, or layers made ahead);
    * ``with_model``: :func:`~model.budget.sizing.load_need` (a model not built yet).

    Within 15% of the peak resident set measured for the families' shapes
    (``tests/model/test_inspection_memory.py``)."""
    core, ff, att = cfg.core, cfg.feed_forward, cfg.attention
    L = size_or_zero(core.n_layers) if n_layers is None else n_layers
    H, d, V, d_k = (size_or_zero(v) for v in (att.n_heads, core.d_model, core.vocab_size, cfg.d_head))
    T, B = max(1, size_or_zero(seq_len)), max(1, size_or_zero(batch))
    E, k = (size_or_zero(ff.n_experts), size_or_zero(ff.n_experts_per_token)) if ff.n_experts else (0, 0)
    kinds = hook_names(kinds)
    held = [k for k in kinds if not (to_file and k in SQUARE_KINDS)]
    trace = estimate_nbytes(
        L, H, T, d, d_k, kinds=held, bytes_per_value=bytes_per_value, batch=B, n_experts=E,
        experts_per_token=k,
    )  # fmt: skip
    square = 4 * B * H * T * T
    written_out = any(k in ("scores", "scores_raw") for k in kinds)
    softmax = (3 if att.attn_sinks and to_file else 2) * square
    squares = softmax if written_out else square + 3 * 4 * B * H * 64 * T if "pattern" in kinds else 0
    logit_rows = min(T, max(1, LOGITS_BLOCK // (4 * max(1, V))) if to_file else T)
    layer = squares + 4 * B * T * (4 * d + 3 * _ffn_width(cfg))
    parts = {
        "recorded heads" if not to_file else "recorded streams": trace,
        "the logits, or one layer in flight before them": max(4 * B * V * logit_rows, layer),
    }
    file = B * export_file_bytes(cfg, T, squares=sum(k in SQUARE_KINDS for k in kinds))
    if to_file and (ahead := write_ahead(file)):
        parts["bytes waiting to be written"] = ahead
    if with_model:
        parts["the model"] = load_need(cfg, copies=1).total
    lower = f"the prompt's {T} tokens" if any(k in SQUARE_KINDS for k in kinds) else largest_knob(cfg)
    return Need(f"inspecting {T} tokens in {L} layers × {H} heads", parts, lower)


def _ffn_width(cfg: GPTConfig) -> int:
    """The feed-forward's hidden values per token in flight: ``d_ff``, or in a mixture of experts with
    no dense layer the ``k`` of ``E`` experts run one at a time, ``f·k/E``, plus the shared experts."""
    if not (ff := cfg.feed_forward).n_experts or ff.moe_dense_layers:
        return size_or_zero(cfg.hidden)
    E, k, f = (size_or_zero(v) for v in (ff.n_experts, ff.n_experts_per_token, cfg.expert_hidden))
    return f * k // max(1, E) + f * size_or_zero(ff.n_shared_experts)


@dataclass(frozen=True)
class InspectionPlan:
    """What an inspection records so that it fits: ``kinds``, ``layers`` (None = all), ``float16``;
    ``need`` its memory; an export's ``file`` bytes and, when it keeps less than everything, ``why``."""

    kinds: tuple[str, ...]
    layers: list[int] | None
    float16: bool
    need: Need
    dropped: list[str] = field(default_factory=list)
    file: int = 0
    why: str = ""


# ---------------------------------------------------------------------------------------------
# the one plan of a prompt's inspection: plan_prompt
# ---------------------------------------------------------------------------------------------
#: Largest L·H·T² the Attention tab keeps as float32 (128 MB); above it the pattern is float16.
FLOAT32_LIMIT = 32 * 2**20

#: Largest L·H·T² whose every pattern the Attention tab holds (1 GiB of float16: SmolLM2-135M's 270
#: heads up to 1,410 tokens, 12 × 12 heads up to 1,930). Past it the inspection is streamed
#: (:mod:`model.interp.streamed`): per layer the queries and keys, a pooled overview, one head's
#: pattern when it is opened.
HELD_LIMIT = 2**29


def _big(cfg: GPTConfig, T: int) -> bool:
    return cfg.core.n_layers * cfg.attention.n_heads * T * T > FLOAT32_LIMIT


def holds_patterns(cfg: GPTConfig, T: int) -> bool:
    """Whether an inspection of ``T`` tokens holds every head's pattern (L·H·T² ≤ :data:`HELD_LIMIT`)."""
    return size_or_zero(cfg.core.n_layers) * size_or_zero(cfg.attention.n_heads) * T * T <= HELD_LIMIT


def held_tokens(cfg: GPTConfig) -> int:
    """The most tokens whose every pattern an inspection holds."""
    heads = size_or_zero(cfg.core.n_layers) * size_or_zero(cfg.attention.n_heads)
    return math.isqrt(HELD_LIMIT // max(1, heads))


def streamed_need(cfg: GPTConfig, n_tokens: int) -> Need:
    """The bytes of a streamed inspection of ``n_tokens`` (no pattern held): per layer the scaled
    queries and keys ``T·(H + H_kv)·d_k``, the overviews ``2·H·S²`` (max and mean, ``S ≤ 256``), the
    final stream ``T·d``, the mask ``T²`` bools, and in flight one block of rows ``3·H·64·T`` plus one
    layer's activations ``T·(4·d + 3·d_ff)``, float32."""
    core, att = cfg.core, cfg.attention
    L, H, d, d_k = (size_or_zero(v) for v in (core.n_layers, att.n_heads, core.d_model, cfg.d_head))
    H_kv, d_ff = size_or_zero(cfg.kv_heads), size_or_zero(cfg.feed_forward.d_ff)
    T = max(1, size_or_zero(n_tokens))
    S = min(T, MAX_CELL)  # at most: the side of a pooled head (an upper bound that grows with T)
    parts = {
        "queries and keys": 4 * L * T * (H + H_kv) * d_k,
        "pooled overviews": 4 * 2 * L * H * S * S,
        "final stream": 4 * T * d,
        "mask": T * T,
        "one layer in flight": 4 * (3 * H * 64 * T + T * (4 * d + 3 * d_ff)),
    }
    return Need(
        f"inspecting {T} tokens in {L} layers × {H} heads (streamed)", parts, f"the prompt's {T} tokens"
    )


def held_need(cfg: GPTConfig, n_tokens: int) -> Need:
    """The bytes of an inspection that holds every head's pattern L·H·T² (float32 up to
    :data:`FLOAT32_LIMIT` values, else float16; :func:`inspection_need`) and, when it is pooled or
    float16, the overview beside it, ``4·L·H·S²`` with ``S = ceil(T / block)``."""
    big = _big(cfg, n_tokens)
    need = inspection_need(cfg, n_tokens, kinds=("pattern",), bytes_per_value=2 if big else 4)
    heads = size_or_zero(cfg.core.n_layers) * size_or_zero(cfg.attention.n_heads)
    T = max(1, size_or_zero(n_tokens))
    b = block_size(T, heads)
    S = -(-T // b)
    overview = 4 * heads * S * S if b > 1 or big else 0
    return Need(need.what, {**need.parts, "pooled overview": overview}, need.lower)


def holds_within(cfg: GPTConfig, n_tokens: int, budget: int | None = None) -> bool:
    """Whether the Attention tab's inspection of ``n_tokens`` holds every pattern: at most
    :data:`HELD_LIMIT` values, and (with a ``budget``) they fit in it; else it is streamed."""
    if not holds_patterns(cfg, n_tokens):
        return False
    return budget is None or held_need(cfg, n_tokens).total <= budget


def view_need(cfg: GPTConfig, n_tokens: int, budget: int | None = None) -> Need:
    """The bytes the Attention tab's inspection needs for ``n_tokens``: :func:`held_need` when it holds
    the patterns (:func:`holds_within` ``budget``), else :func:`streamed_need`."""
    if holds_within(cfg, n_tokens, budget):
        return held_need(cfg, n_tokens)
    return streamed_need(cfg, n_tokens)


def _tokens_that_fit(cfg: GPTConfig, n_tokens: int, budget: int) -> int:
    """The most tokens, up to ``n_tokens``, whose :func:`view_need` fits in ``budget`` bytes; 0 when not
    even one does. Held or streamed, whichever fits: the streamed need grows with T, so it is
    bisected; the held one too, except where the pattern switches to float16 (past
    :data:`FLOAT32_LIMIT`), where it halves: each side of the switch is bisected on its own."""

    def last_fitting(lo: int, hi: int, fits) -> int:
        if lo > hi or not fits(lo):
            return 0
        while lo < hi:  # lo fits; find the last T in [lo, hi] that does
            mid = (lo + hi + 1) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid - 1
        return lo

    def streamed(T: int) -> bool:
        return streamed_need(cfg, T).total <= budget

    def held(T: int) -> bool:
        return held_need(cfg, T).total <= budget

    if view_need(cfg, n_tokens, budget).total <= budget:
        return n_tokens
    heads = max(1, cfg.core.n_layers * cfg.attention.n_heads)
    switch = math.isqrt(FLOAT32_LIMIT // heads)
    while heads * switch * switch <= FLOAT32_LIMIT:
        switch += 1  # the first T kept as float16
    most = min(n_tokens, held_tokens(cfg))
    found = [last_fitting(1, n_tokens, streamed)]
    for lo, hi in ((max(1, switch), most), (1, min(most, switch - 1))):
        found.append(last_fitting(lo, hi, held))
    return max(found)


@dataclass(frozen=True)
class PromptPlan:
    """How one prompt is inspected so that it fits: what :func:`plan_prompt` decided.

    ``prompt``: the :class:`~model.interp.prompt.Prompt` as it will run (cut to the context, then
    to memory); ``for_context`` and ``for_memory``: how many tokens each cut left out (the latter
    with ``need_all``, the bytes all of them would have needed, and ``budget``); ``kinds`` and
    ``layers`` (None = all) recorded, in ``float16`` or float32; ``dropped_kinds`` the kinds given up
    to fit; ``threads`` for torch (None = every core); ``block``: the pooling block of the overview
    of every head (1 = every token); ``need``: the bytes the plan needs; ``held``: every head's
    pattern is kept (False past :data:`HELD_LIMIT`, or for an export that does not fit whole:
    streamed, :mod:`model.interp.streamed`); an export's ``file`` bytes and ``why`` it keeps less
    than everything.
    """

    prompt: Prompt
    kinds: tuple[str, ...]
    layers: list[int] | None
    float16: bool
    threads: int | None
    block: int
    need: Need
    budget: int
    for_context: int = 0
    for_memory: int = 0
    need_all: int = 0
    dropped_kinds: tuple[str, ...] = ()
    held: bool = True
    file: int = 0
    why: str = ""


def plan_prompt(
    cfg: GPTConfig,
    tokenizer: Tokenizer,
    text: str | Prompt,
    *,
    budget: int | None = None,
    export: bool = False,
    float16: bool | None = None,
    with_model: bool = False,
    training: bool = False,
    over_context: str = "cut",
    streamed: bool = False,
    disk: int | None = None,
) -> PromptPlan:
    """The one memory plan of a prompt's inspection: encode ``text`` by the one rule
    (:func:`~model.interp.prompt.encode_prompt`: the last ``context_length`` tokens, BOS kept), then
    make it fit in ``budget`` bytes (default: :func:`~model.budget.sizing.usable_bytes`). ``text`` may
    be a :class:`~model.interp.prompt.Prompt` already (token ids: :func:`~model.interp.prompt.prompt_of_ids`).

    The Attention tab (``export=False``) records every head's pattern (float16 past
    :data:`FLOAT32_LIMIT`) and keeps the last tokens that fit (by the one rule), refused with
    :class:`~model.interp.prompt.PromptError` when not even one does. An export (``attention-lab
    inspect``, ``export=True``): :func:`_plan_export` (``float16`` pins the precision, ``with_model``
    counts a model not built yet, ``disk`` the free bytes of the file's disk). A prompt longer than
    the context is cut from the left (``over_context="cut"``, the plan's ``for_context`` says how
    much) or refused in one line naming both lengths (``"refuse"``). Arithmetic only, no torch.
    """
    budget = sizing.usable_bytes() if budget is None else int(budget)
    if over_context not in ("cut", "refuse"):
        raise ValueError(f"over_context={over_context!r}: use 'cut' or 'refuse'")
    if isinstance(text, Prompt):  # already encoded (token ids): cut to the context by its own rule
        before = text.dropped
        prompt = text.cut(cfg.core.context_length)
        for_context = prompt.dropped - before
    else:
        prompt = encode_prompt(tokenizer, text, cfg.core.context_length)
        for_context = prompt.dropped
    if for_context and over_context == "refuse":
        raise PromptError(
            f"the prompt is {prompt.T + for_context:,} tokens, longer than the model's context of "
            f"{cfg.core.context_length:,}: shorten it, or let its first tokens be left out"
        )
    held = True
    if export:
        p = _plan_export(cfg, prompt.T, budget, float16, with_model, streamed, for_context, disk)
        kinds, layers, f16, need, dropped = p.kinds, p.layers, p.float16, p.need, tuple(p.dropped)
        for_memory, need_all, held, file, why = 0, 0, bool(p.kinds), p.file, p.why
    else:
        fit = _tokens_that_fit(cfg, prompt.T, budget)
        need_all = view_need(cfg, prompt.T, budget).total
        if fit == 0:
            least = min(view_need(cfg, 1).total, view_need(cfg, 1, 0).total)
            raise PromptError(
                f"inspecting this model needs about {human_bytes(least)} even for "
                f"one token, but {human_bytes(budget)} of memory is free: close other programs or use "
                "a smaller model"
            )
        for_memory = prompt.T - fit
        prompt = prompt.cut(fit)
        kinds, layers, f16, dropped = ("pattern",), None, _big(cfg, prompt.T), ()
        need = view_need(cfg, prompt.T, budget)
        held = holds_within(cfg, prompt.T, budget)
        file, why = 0, ""
    return PromptPlan(
        prompt=prompt,
        kinds=kinds,
        layers=layers,
        float16=f16,
        threads=pick_threads(cfg, prompt.T, training=training),
        block=block_size(prompt.T, cfg.core.n_layers * cfg.attention.n_heads),
        need=need,
        budget=budget,
        for_context=for_context,
        for_memory=for_memory,
        need_all=need_all if for_memory else 0,
        dropped_kinds=dropped,
        held=held,
        file=file,
        why=why,
    )


def plan_file_export(
    cfg: GPTConfig,
    seq_len: int,
    *,
    budget: int,
    disk: int | None = None,
    float16: bool | None = None,
    with_model: bool = False,
) -> tuple[InspectionPlan | None, str]:
    """The richest held export of ``seq_len`` tokens written as it is computed
    (:func:`~model.interp.inspection.write_inspection`), or None when none fits, and why the richer
    ones did not (the first's reason when one fits, else the last's). In memory it holds
    :func:`inspection_need` ``to_file`` (the model, the logits or one layer in flight, the streams),
    which must fit in ``budget``; the file (:func:`export_file_bytes`) must fit in ``disk`` free
    bytes (None: not checked). Tried in order: :data:`REQUIRED_KINDS` in float32, in float16, then
    the weights alone in float32, in float16; ``float16`` True/False pins the precision."""
    T = max(1, size_or_zero(seq_len))
    small = tuple(k for k in REQUIRED_KINDS if k not in ("scores_raw", "scores"))
    precisions = [False, True] if float16 is None else [bool(float16)]
    first, why = "", ""
    for ks in (REQUIRED_KINDS, small):
        for f16 in precisions:
            need = inspection_need(cfg, T, kinds=ks, with_model=with_model, to_file=True)
            file = export_file_bytes(cfg, T, squares=sum(k in SQUARE_KINDS for k in ks), float16=f16)
            if need.total > budget:
                why = f"{human_bytes(need.total)} of memory is needed and {human_bytes(budget)} may be used"
            elif disk is not None and file > disk:
                why = f"the file takes {human_bytes(file)} on a disk with {human_bytes(disk)} free"
            else:
                dropped = [k for k in REQUIRED_KINDS if k not in ks]
                return InspectionPlan(ks, None, f16, need, dropped, file=file, why=first), first
            first = first or why
    return None, why


def _plan_export(
    cfg: GPTConfig,
    T: int,
    budget: int,
    float16,
    with_model: bool,
    streamed: bool,
    for_context: int,
    disk: int | None = None,
) -> InspectionPlan:
    """An export's recording: every layer's heads written to the file as they are computed
    (:func:`plan_file_export`, which may give up precision and the scores to fit in memory and on
    disk) up to :data:`HELD_LIMIT`, as the tab; else (or ``streamed``) streamed: no kinds,
    :func:`streamed_need` (with the model when ``with_model``), refused with the numbers when not
    even that fits in ``budget`` (:class:`~model.budget.sizing.ModelTooLarge`) or its file in
    ``disk`` free bytes (:class:`DiskTooSmall`), naming the prompt's own length when it was cut to
    the context (``for_context`` tokens left out)."""
    why = ""
    if not streamed and holds_patterns(cfg, T):
        held, why = plan_file_export(cfg, T, budget=budget, disk=disk, float16=float16, with_model=with_model)
        if held is not None:
            return held
    need = streamed_need(cfg, T)
    parts = {**need.parts, "the model": load_need(cfg, copies=1).total} if with_model else need.parts
    what, lower = need.what, need.lower
    if for_context:  # the user gave a longer prompt: say so, not only the context's length
        what = (
            f"inspecting the last {T:,} of the prompt's {T + for_context:,} tokens (the model's context) "
            f"in {cfg.core.n_layers} layers × {cfg.attention.n_heads} heads (streamed)"
        )
        lower = f"the prompt's {T + for_context:,} tokens (at most {T:,} are read)"
    need = Need(what, parts, lower)
    if need.total > budget:
        raise ModelTooLarge(need, Available(budget, "the inspection budget"), budget)
    file = streamed_file_bytes(cfg, T)
    if disk is not None and file > disk:
        raise DiskTooSmall(
            f"{what} writes a file of about {human_bytes(file)} but its folder's disk has "
            f"{human_bytes(disk)} free: free some space, write to another disk or lower {lower}"
        )
    return InspectionPlan((), None, bool(float16), need, file=file, why=why)
