"""The attention inspection of a prompt: what the Attention tab shows, as a plain function of a model.

:func:`inspect_prompt` runs a :class:`~model.interp.plan.PromptPlan` (the one plan: the prompt as it
runs, precision, pooling) and returns an :class:`Inspection`: every head's pattern [L, H, T, T], the
mask and the logits. :func:`head_detail` takes one head apart stage by stage;
:func:`export_arrays` gives the arrays of the .npz inspection format, :func:`write_inspection`
writes its file as it is computed. What only some pages measure
after a run (metrics, ablation effects, aggregates, the next-token table) is in
:mod:`model.interp.measures`.

Each function runs the model in evaluation mode through :func:`~model.interp.trace.run_with_trace`
(which restores the mode) and returns numpy arrays and dataclasses. No Qt: the app runs these in its
compute worker (off the GUI thread, under ``model.runtime.compute_lock``). torch is imported when a
function runs, so this module (and the plan) load without it: the command line sizes an inspection
first.

Memory: the grid needs ``weights`` [L, H, T, T] of the whole model. Up to
:data:`~model.interp.plan.FLOAT32_LIMIT` values they are kept as float32 (no conversion when
drawing); beyond (e.g. 12×12 heads at 512+ tokens) as float16, half the memory, converted per head
when a view needs it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from model.config import GPTConfig
from model.interp.analysis.pipeline import PIPELINE_KINDS, head_pipeline
from model.interp.export import FILE_KEYS, inspection_arrays, write_npz
from model.interp.file_size import export_file_bytes, write_ahead
from model.interp.frame import AttentionFrame
from model.interp.npzfile import NpzWriter, RowSink, write_rows
from model.interp.plan import REQUIRED_KINDS, SQUARE_KINDS, PromptPlan, held_tokens, hook_names
from model.interp.streamed import Unembedding, stream_prompt
from model.interp.trace import run_with_trace
from model.nn.hooks import ablate_heads, reader
from model.progress import layer_hooks


@dataclass(kw_only=True)
class Inspection(AttentionFrame):
    """One prompt through the current model: what every page draws (an :class:`AttentionFrame` and more).

    ``weights`` [L, H, T, T] (float32, or float16 past :data:`~model.interp.plan.FLOAT32_LIMIT`);
    ``ids``, ``texts`` [T] the tokens and their raw texts (``labels`` their visible labels);
    Past :data:`~model.interp.plan.HELD_LIMIT` (``held`` False, :mod:`model.interp.streamed`)
    ``weights`` is a :class:`~model.interp.streamed.HeadPatterns` (one head computed when asked),
    ``logits`` an :class:`~model.interp.streamed.Unembedding` and ``overview_mean`` the mean-pooled
    overview beside the max-pooled ``overview``;
    ``dropped``: tokens of the text left out (context or memory); ``overview`` [L, H, S, S] float32,
    ``S = ceil(T / block)``, max-pooled by ``block`` for an overview of every head (the same array as
    ``weights`` when ``block == 1`` and float32); ``mask`` [T, T] bool (True = may attend); ``logits``
    [T, V] float32 (the Next token page ranks them when it is shown:
    :func:`~model.interp.measures.next_tokens_of`); ``target_labels`` [T] the token that actually
    follows ('' at the end); ``ablate``: the heads
    switched off for this run ({} = the model as it is); ``special``: positions of the tokenizer's
    special tokens (a leading BOS).
    """

    ids: list[int]
    texts: list[str]
    dropped: int
    overview: np.ndarray
    block: int
    mask: np.ndarray
    logits: np.ndarray
    target_labels: list[str]
    ablate: dict[tuple[int, int], str]
    config: GPTConfig
    seconds: float = 0.0
    special: list[int] = field(default_factory=list)
    overview_mean: np.ndarray | None = None
    held: bool = True

    @property
    def held_limit(self) -> int:
        """The most tokens whose every pattern an inspection of this model holds."""
        return held_tokens(self.config)


def inspect_prompt(model, tokenizer, plan: PromptPlan, *, ablate: dict | None = None) -> Inspection:
    """Run ``plan`` (:func:`~model.interp.plan.plan_prompt`) on ``model``: every head's pattern and
    the next tokens; see :class:`Inspection`. The plan has sized it: it is not checked again."""

    if not plan.held:
        return _inspect_streamed(model, tokenizer, plan, ablate)
    t0 = time.perf_counter()
    prompt = plan.prompt
    ids = list(prompt.ids)
    T = len(ids)
    cfg = model.config
    dtype = torch.float16 if plan.float16 else torch.float32
    layers = sorted(plan.layers) if plan.layers is not None else list(range(cfg.core.n_layers))
    b = max(1, int(plan.block))
    S = -(-T // b)
    # every head's weights written straight into one array, and pooled for the overview as each layer
    # is computed (from the values as stored): no copy of [L, H, T, T] after the run, no pass over it
    weights = np.empty(
        (len(layers), cfg.attention.n_heads, T, T), dtype=np.float16 if plan.float16 else np.float32
    )
    pooled_apart = b > 1 or plan.float16
    overview = (
        np.empty((len(layers), cfg.attention.n_heads, S, S), dtype=np.float32) if pooled_apart else weights
    )

    def pool(row: int):
        @reader
        def fn(x, hook):  # rounding to float16 is monotone: pooling then rounding = rounding then pooling
            torch.from_numpy(overview)[row].copy_(block_max(x[0], b).to(dtype))

        return fn

    pooling = [(f"blocks.{layer}.attn.pattern", pool(i)) for i, layer in enumerate(layers)]
    trace = run_with_trace(
        model,
        prompt,
        kinds=plan.kinds,
        layers=plan.layers,
        dtype=dtype,
        hooks=[*ablate_heads(ablate or {}), *(pooling if pooled_apart else []), *layer_hooks(layers)],
        sized=True,
        into={"pattern": weights},
    )
    logits = trace.logits[0]
    labels = list(prompt.labels)
    special = set(getattr(tokenizer, "special_ids", ()))
    return Inspection(
        prompt=prompt.text,
        labels=labels,
        weights=weights,
        ids=ids,
        texts=list(prompt.texts),
        dropped=prompt.dropped,
        overview=overview,
        block=b,
        mask=trace.mask.numpy().astype(bool),
        logits=logits.numpy(),
        target_labels=[*labels[1:], ""],
        ablate=dict(ablate or {}),
        config=model.config,
        seconds=time.perf_counter() - t0,
        special=[i for i, t in enumerate(ids) if int(t) in special],
    )


def _inspect_streamed(model, tokenizer, plan: PromptPlan, ablate: dict | None) -> Inspection:
    """:func:`inspect_prompt` of a prompt whose patterns are not held (:mod:`model.interp.streamed`)."""
    prompt = plan.prompt
    ids = list(prompt.ids)
    b = max(1, int(plan.block))
    run = stream_prompt(model, ids, b, ablate=ablate, limit=held_tokens(model.config))
    labels = list(prompt.labels)
    special = set(getattr(tokenizer, "special_ids", ()))
    return Inspection(
        prompt=prompt.text,
        labels=labels,
        weights=run.patterns,  # type: ignore[arg-type]  # array-like: one head at a time
        ids=ids,
        texts=list(prompt.texts),
        dropped=prompt.dropped,
        overview=run.overview,
        overview_mean=run.overview_mean,
        block=b,
        mask=run.mask,
        logits=run.logits,  # type: ignore[arg-type]
        target_labels=[*labels[1:], ""],
        ablate=dict(ablate or {}),
        config=model.config,
        seconds=run.seconds,
        special=[i for i, t in enumerate(ids) if int(t) in special],
        held=False,
    )


def block_max(x: torch.Tensor, b: int) -> torch.Tensor:
    """Max over ``b × b`` blocks of the last two axes, a short last block as it is: [..., T, S] →
    [..., ceil(T/b), ceil(S/b)] (= :func:`~model.interp.pooling.pool_max` for weights ≥ 0). Rows
    first, then columns, each a reduction over a reshaped axis: ~3× faster than ``max_pool2d``."""
    if b <= 1:
        return x

    def over(t: torch.Tensor, axis: int) -> torch.Tensor:  # blocks of b along ``axis`` (-2 or -1)
        n = t.shape[axis]
        full = n - n % b
        main = t.narrow(axis, 0, full)
        main = main.unflatten(axis, (full // b, b)).amax(dim=axis if axis == -1 else -2)
        if full == n:
            return main
        return torch.cat([main, t.narrow(axis, full, n - full).amax(dim=axis, keepdim=True)], dim=axis)

    return over(over(x, -2), -1)


def head_detail(model, ids: list[int], layer: int, head: int, *, ablate: dict | None = None):
    """:class:`~model.interp.analysis.pipeline.HeadPipeline` of one head on ``ids`` (traces only its
    layer)."""

    trace = run_with_trace(model, ids, layers=[layer], kinds=PIPELINE_KINDS, hooks=ablate_heads(ablate or {}))
    return head_pipeline(trace, layer, head)


def export_arrays(
    model,
    tokenizer,
    ids: list[int],
    *,
    ablate: dict | None = None,
    kinds: tuple[str, ...] = REQUIRED_KINDS,
    layers: list[int] | None = None,
    float16: bool = False,
    sized: bool = False,
) -> dict[str, np.ndarray]:
    """The arrays of the .npz inspection format (``model.interp.export``) in memory: ``kinds`` (the
    format's by default) of ``layers`` (all by default; a plan's, sorted), the square ones
    [L, H, T, T] in float16 or float32 (:func:`write_inspection` writes the file without holding them).

    Memory: each square kind is written once, straight from the forward pass into the array returned
    (``run_with_trace``'s ``into``), and the logits [T, V] are the trace's own: the peak is what
    :func:`~model.interp.plan.inspection_need` says (the arrays, the logits, one layer in flight), not
    a second copy of each. ``sized``: a plan has sized it already (else refused when it cannot fit)."""
    shape = _square_shape(model.config, len(ids), layers)
    dtype = np.float16 if float16 else np.float32
    squares = {k: np.empty(shape, dtype=dtype) for k in hook_names(kinds) if k in SQUARE_KINDS}
    return _recorded(model, tokenizer, ids, squares, ablate, kinds, layers, float16, sized)


def write_inspection(
    model,
    tokenizer,
    ids: list[int],
    path: str | Path,
    *,
    ablate: dict | None = None,
    kinds: tuple[str, ...] = REQUIRED_KINDS,
    layers: list[int] | None = None,
    float16: bool = False,
    compress: bool = False,
    extra: dict[str, np.ndarray] | None = None,
) -> Path:
    """:func:`export_arrays`'s arrays (and ``extra`` ones) written to the .npz ``path`` as they are
    computed: each square kind's entry is reserved in the file first, and each layer's [H, T, T] is
    written at its place while the forward pass holds it (:mod:`model.interp.npzfile`); the forward
    pass unembeds only the last position, and the logits [T, V] are unembedded from the final
    stream [T, d] into the file a block of positions at a time (``write_rows``); the other arrays
    follow, then the zip's directory, atomically (:func:`~model.interp.export.write_npz`, the file
    removed whatever happens). Memory:
    :func:`~model.interp.plan.inspection_need` ``to_file`` (one layer in flight or a block of
    logits, never [L, H, T, T] nor [T, V]); sized by the caller's plan. Returns the file written."""
    shape = _square_shape(model.config, len(ids), layers)
    dtype = np.float16 if float16 else np.float32
    wanted = hook_names(kinds)
    final: list[torch.Tensor] = []

    def keep_stream(x, hook):  # the stream after the final norm [T, d]; only the last row is unembedded
        final.append(x[0].detach().clone())
        return x[:, -1:]

    def fill(npz: NpzWriter) -> None:
        squares = {k: RowSink(npz.reserve(key, shape, dtype)) for key, k in FILE_KEYS.items() if k in wanted}
        stream = [("ln_final", keep_stream)]
        arrays = _recorded(model, tokenizer, ids, squares, ablate, kinds, layers, float16, True, stream)
        arrays.pop("logits")  # the last row's: the file's [T, V] are unembedded a block at a time
        write_rows(
            npz.reserve("logits", (len(ids), model.config.core.vocab_size), np.float32),
            Unembedding(model, final[0]),
        )
        for key, value in {**arrays, **(extra or {})}.items():
            if not isinstance(value, RowSink):
                npz.add(key, value)

    file = export_file_bytes(
        model.config, len(ids), squares=sum(k in SQUARE_KINDS for k in wanted), float16=float16
    )
    return write_npz(path, fill, compress=compress, ahead=write_ahead(file))


def _square_shape(cfg: GPTConfig, T: int, layers: list[int] | None) -> tuple[int, int, int, int]:
    """[L, H, T, T] of a square kind recorded in ``layers`` (all when None)."""
    n = len({int(i) for i in layers}) if layers is not None else cfg.core.n_layers
    return (n, cfg.attention.n_heads, T, T)


def _recorded(
    model, tokenizer, ids, squares: dict, ablate, kinds, layers, float16: bool, sized: bool, hooks=()
):
    """The format's arrays of one recorded run, each square kind going ``into`` its ``squares`` entry
    (an array or a sink), which stands under the format's key; ``hooks`` after the ablations."""
    kinds = hook_names(kinds)
    trace = run_with_trace(
        model,
        ids,
        kinds=kinds,
        layers=sorted({int(i) for i in layers}) if layers is not None else None,
        dtype=torch.float16 if float16 else torch.float32,
        hooks=[*ablate_heads(ablate or {}), *hooks],
        sized=sized,
        into=squares,
    )
    dtype = np.float16 if float16 else np.float32
    arrays: dict = inspection_arrays(trace, tokenizer.token_strings([int(i) for i in ids]), dtype=dtype)
    arrays.update({key: squares[kind] for key, kind in FILE_KEYS.items() if kind in squares})
    return arrays


__all__ = ["Inspection", "export_arrays", "head_detail", "inspect_prompt", "write_inspection"]
