"""The one build step every loader ends in: a file's tensors, checked and mapped, become our GPT.

A loader does only what is its own format's: it reads the file's config into a
:class:`~model.config.GPTConfig`, names where each of the file's tensors goes (a
:class:`~model.io.weights.Layout`: :mod:`model.io.gpt2`, :mod:`model.io.families`, our own names in
:mod:`model.io.checkpoint`) and finds the tokenizer. Then :func:`build_model` does the rest, the same
for all of them:

1. every tensor checked against the layout by name and shape before any is read, every problem in
   one :class:`~model.io.loaded.CheckpointError` line (:func:`~model.io.weights.check_weights`);
2. what holding the model takes checked against the memory left, when the loader gives it
   (:func:`model.budget.sizing.check`), before any tensor is read;
3. each tensor read once into ``dtype``, or, from a source that keeps its matrices as stored, kept so
   (:func:`~model.io.weights.map_weights`, :mod:`model.io.stored`);
4. the model built on the ``meta`` device and given those tensors, in eval mode on ``device``
   (:func:`~model.io.weights.build_from_state_dict`).

:func:`opened` wraps the result with its ``meta`` (:func:`loaded_meta`) as a
:class:`~model.io.loaded.Checkpoint`; :func:`keeps_stored` and :func:`source_need` are the choice and
the sizing of a model kept as stored.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from model.budget.sizing import Need
from model.budget.sizing import check as check_size
from model.config import GPTConfig
from model.io.loaded import Checkpoint
from model.io.stored import keeps_stored_by_default, stored_plan_need
from model.io.weights import Layout, TensorSource, build_from_state_dict, check_weights, map_weights
from model.nn.gpt import GPT
from model.nn.quantized import StoredMatrix, has_stored, stored_bytes
from model.text.tokens import Tokenizer

__all__ = ["build_model", "describe_tokenizer", "keeps_stored", "loaded_meta", "opened", "source_need"]


def build_model(
    cfg: GPTConfig,
    src: TensorSource,
    layout: Layout,
    *,
    where: str,
    device: str | torch.device = "cpu",
    dtype: torch.dtype = torch.float32,
    need: Need | None = None,
) -> GPT:
    """Our GPT of ``cfg`` from ``src`` (the file ``where``), its tensors placed as ``layout`` says: all
    checked before any is read, then ``need`` (what holding the model takes) when given, then read
    (a source that keeps matrices as stored keeps them so) and built (module docstring)."""
    check_weights(src, layout.entries, where, layout.implied, set(layout.extra_ok))
    if need is not None:
        check_size(need)  # before any tensor is read or built
    stored: dict[str, StoredMatrix] | None = {} if src.stored is not None else None
    state = map_weights(src, layout.entries, dtype, stored)
    del src
    return build_from_state_dict(cfg, state, device, stored)


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
