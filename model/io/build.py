"""The one build step every loader ends in: a file's tensors, checked and mapped, become our GPT.

A loader does only what is its own format's: it reads the file's config into a
:class:`~model.config.GPTConfig`, says what holding the model takes (a
:class:`~model.budget.sizing.Need`: the config's parameters, or the file's own values and stored bytes),
says how to open the file's tensors and where each goes (:class:`Weights`: a
:class:`~model.io.weights.TensorSource` and a :class:`~model.io.weights.Layout` from :mod:`model.io.hf.gpt2`,
:mod:`model.io.hf.families` or, our own names, :func:`own_layout`) and finds the tokenizer. Then
:func:`build_model` does the rest, the same for all of them, in this order:

1. the need checked against the memory left (:func:`model.budget.sizing.check`), before the weights
   are opened: a config of 10⁷ layers opens no file, lists no row and reads no byte;
2. the weights opened, and the config's counts held against the file's (:func:`check_counts`): a config
   that lies about its size (more layers than the file has tensors, or over twice as many parameters
   as it holds values) is refused in one line before its layout lists a row, whichever loader read it;
3. the layout's rows listed, and every tensor checked against them by name and shape before any is
   read, every problem in one :class:`~model.io.loaded.CheckpointError` line
   (:func:`~model.io.weights.check_weights`);
4. each tensor read once into ``dtype``, or, from a source that keeps its matrices as stored, kept so
   (:func:`~model.io.weights.map_weights`, :mod:`model.io.stored`);
5. the model built on the ``meta`` device and given those tensors, in eval mode on ``device``
   (:func:`~model.io.weights.build_from_state_dict`).

:func:`opened` wraps the result with its ``meta`` (:func:`loaded_meta`) as a
:class:`~model.io.loaded.Checkpoint`; :func:`keeps_stored` and :func:`source_need` are the choice and
the sizing of a model kept as stored.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch

from model.budget.arithmetic import parameters
from model.budget.sizing import Need, skip_init_on_meta
from model.budget.sizing import check as check_size
from model.config import GPTConfig
from model.io.loaded import Checkpoint, CheckpointError
from model.io.stored import keeps_stored_by_default, stored_plan_need
from model.io.weights import (
    Layout,
    TensorSource,
    WeightMap,
    build_from_state_dict,
    check_weights,
    map_weights,
)
from model.nn.gpt import GPT
from model.nn.quantized import StoredMatrix, has_stored, stored_bytes
from model.text.tokens import Tokenizer

__all__ = [
    "Weights",
    "build_model",
    "check_counts",
    "describe_tokenizer",
    "keeps_stored",
    "loaded_meta",
    "opened",
    "own_layout",
    "source_need",
]


class Weights(NamedTuple):
    """What a loader hands the one build step once the model is known to fit: the tensors of the file
    ``where`` (``src``) and where each goes in our model (``layout``)."""

    src: TensorSource
    layout: Layout
    where: str


def build_model(
    cfg: GPTConfig,
    weights: Callable[[], Weights],
    *,
    need: Need,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
) -> GPT:
    """Our GPT of ``cfg``: ``need`` (what holding it takes) checked against the memory left; then
    ``weights()`` (the file's tensors and their layout, asked for only once the model fits), the
    config's counts held against the file's before the layout lists a row (a lying config would list
    one for every layer it claims), and every tensor checked against the rows before any is read; then
    read (a source that keeps matrices as stored keeps them so) and built (module docstring)."""
    check_size(need)  # before the file's tensors are opened, any row listed, any tensor read or built
    src, layout, where = weights()
    check_counts(cfg, src, where, layout.implied)  # before the layout lists a row
    entries = layout.entries()
    check_weights(src, entries, where, layout.implied, set(layout.extra_ok))
    stored: dict[str, StoredMatrix] | None = {} if src.stored is not None else None
    state = map_weights(src, entries, dtype, stored)
    del src
    return build_from_state_dict(cfg, state, device, stored)


def check_counts(cfg: GPTConfig, src: TensorSource, where: str, implied: str) -> None:
    """Refuse, in one :class:`~model.io.loaded.CheckpointError` line, a config that lies about its size
    to the file ``where`` whose tensors ``src`` are: one of more layers L than the file has tensors
    (each layer holds at least one), or of more than twice as many parameters N
    (:func:`model.budget.arithmetic.parameters`) as the file holds values M = Σ numel (a file of ours
    holds exactly N; another project's holds N and a few buffers, or a tied matrix twice). Arithmetic
    on shapes only: nothing is listed or read, so 10⁷ layers or 50 000 experts cost nothing. A lie
    nearer the file's size is named tensor by tensor by :func:`~model.io.weights.check_weights`.

    The one wording, whichever loader read the config (``implied``: what it was read from and its
    sizes, as that format names them): ``"<where> does not match <implied>, which means <L> layers but
    <where> holds only <k> tensors: ..."`` or ``"..., which means <N> parameters but <where> holds <M>
    values: the config does not describe these weights"``."""
    layers, tensors = cfg.core.n_layers, len(src.keys)
    if layers > tensors:
        means = f"{layers:,} layers but {where} holds only {tensors:,} tensors"
    else:
        needed, held = parameters(cfg).total, sum(math.prod(src.shape(k)) for k in src.keys)
        if needed <= 2 * held:
            return
        means = f"{needed:,} parameters but {where} holds {held:,} values"
    raise CheckpointError(
        f"{where} does not match {implied}, which means {means}: the config does not describe these weights"
    )


def own_layout(cfg: GPTConfig, what: str) -> Layout:
    """Our own names for ``cfg``, each tensor to itself, as a file of ours stores them: the state dict
    of a GPT of ``cfg`` on the ``meta`` device (names and shapes only: nothing allocated or
    initialised), listed only when the build step asks; ``what`` names what the config was read from,
    and the layout's ``implied`` adds its sizes by our field names."""

    def entries() -> list[WeightMap]:
        with torch.device("meta"), skip_init_on_meta():
            shapes = {k: tuple(v.shape) for k, v in GPT(cfg).state_dict().items()}
        return [WeightMap(k, s, (k,)) for k, s in shapes.items()]

    sizes = dict(
        n_layers=cfg.core.n_layers,
        d_model=cfg.core.d_model,
        n_heads=cfg.attention.n_heads,
        n_kv_heads=cfg.kv_heads,
        head_dim=cfg.d_head,
        d_ff=cfg.hidden,
        vocab_size=cfg.core.vocab_size,
        n_experts=cfg.feed_forward.n_experts,
        kv_lora_rank=cfg.attention.kv_lora_rank,
    )
    named = ", ".join(f"{k}={v}" for k, v in sizes.items() if v is not None)
    return Layout(entries, f"{what} ({named})")


def keeps_stored(stored: bool | None, cfg: GPTConfig, device: str | torch.device, dtype: torch.dtype) -> bool:
    """``stored`` as asked, or, None, the default: :func:`~model.io.stored.keeps_stored_by_default`."""
    return keeps_stored_by_default(cfg, device, dtype) if stored is None else stored


def source_need(src: TensorSource, cfg: GPTConfig, what: str) -> Need:
    """What holding ``src``'s model takes with the matrices it offers as stored kept so."""
    matrices, floats = [], 0
    for key in src.keys:
        m = src.stored(key) if src.stored is not None else None
        if m is None:
            floats += math.prod(src.shape(key))
        else:
            matrices.append((m.numel(), m.nbytes, m.cols))
    return stored_plan_need(cfg, matrices, floats, what=what)


def describe_tokenizer(tok: Tokenizer) -> str:
    """One line naming a tokenizer's kind and size, e.g. ``"byte-level BPE (gpt2), 50257 tokens"``."""
    desc = getattr(tok, "description", None)
    if isinstance(desc, str):
        return desc
    kind = getattr(tok, "kind", "") or type(tok).__name__
    return f"{kind} tokenizer, {tok.vocab_size} tokens"


def loaded_meta(kind: str, name: str, model: GPT, tok: Tokenizer, path: Path, **extra: Any) -> dict[str, Any]:
    """The ``meta`` of a model opened from another project's files: ``kind``, ``source``, ``name``,
    ``n_params``, ``tokenizer``, ``path``, ``stored_bytes`` (the bytes of the matrices it keeps as the
    file stores them, when it keeps any) and ``extra`` (see :func:`model.io.pretrained.open_model`)."""
    kept = {"stored_bytes": stored_bytes(model)} if has_stored(model) else {}
    return {
        "kind": kind,
        "source": kind,
        "name": name,
        "n_params": model.num_params(),
        "tokenizer": describe_tokenizer(tok),
        "path": str(path),
        **kept,
        **extra,
    }


def opened(
    kind: str, name: str, path: Path, cfg: GPTConfig, model: GPT, tok: Tokenizer, **extra: Any
) -> Checkpoint:
    """The :class:`Checkpoint` of a model opened from another project's files (no training state),
    its ``meta`` from :func:`loaded_meta`."""
    meta = loaded_meta(kind, name, model, tok, path, **extra)
    return Checkpoint(path=path, config=cfg, model=model, tokenizer=tok, train_state=None, meta=meta)
