"""Attention Lab's public API: what a notebook imports, one function per step of a study.

Everything here is a thin door onto the functions the app and the command line use, so a notebook
gets the same numbers as the window::

    from model import open_model, run_with_trace, ablate_heads, patch, attribute, circuits, budget_report

    lm = open_model("assets/starter")                 # a folder, a .gguf, "hf:gpt2", "package:NAME"
    trace = run_with_trace(lm, "abcabc", names=lambda name: name == "pattern")
    trace["pattern", 1][0, 2]                         # layer 1, head 2: A [T, T], rows sum to 1

=====================  =============================================================================
function               what it gives
=====================  =============================================================================
:func:`open_model`     a :class:`~model.io.loaded.Checkpoint` ``lm``: ``lm.model`` (the
                       :class:`~model.nn.gpt.GPT`), ``lm.tokenizer``, ``lm.config``, ``lm.meta``
:func:`run_with_trace` a :class:`~model.interp.trace.Trace` keyed by (hook name, layer), as
                       TransformerLens's ``run_with_cache``; ``names`` a list of hook names or a
                       predicate over them (its ``names_filter``)
:func:`ablate_heads`   hooks that zero (or mean-ablate) heads, for ``run_with_trace(..., hooks=)``
:func:`patch`          activation patching of a clean prompt into a corrupted one, per head [L, H]
                       and per residual-stream position [L, T]
:func:`attribute`      direct logit attribution: each head's, MLP's and the embedding's part of a
                       logit, summing to it
:func:`circuits`       QK/OV circuits, Q/K/V composition of every pair of heads, copying scores,
                       from the weights alone
:func:`budget_report`  parameters, FLOPs, KV cache, memory and training cost of a model, a config or
                       a preset (:func:`budget_table` writes it as the command line prints it)
=====================  =============================================================================

The trace's hook names and shapes (``B`` batch, ``H`` heads, ``T`` tokens, ``d`` d_model, ``d_k``
head_dim, ``V`` vocabulary): ``q`` ``k`` ``v`` ``z`` [B, H, T, d_k]; ``scores_raw`` (Q Kᵀ),
``scores`` (Q Kᵀ/√d_k) and ``pattern`` (A = softmax(mask(scores))) [B, H, T, T];
``attn_out`` ``mlp_out`` ``resid_pre`` ``resid_mid`` ``resid_post`` [B, T, d]; ``ln_final`` [B, T, d]
(layer −1); ``trace.logits`` [B, T, V]; the full table is :mod:`model.interp.trace`'s.

A prompt is text (encoded by ``lm.tokenizer``, cut to the model's context from the left, a BOS kept in
front), token ids [T], or a :class:`~model.interp.prompt.Prompt`. Importing :mod:`model` stays cheap:
these names load on first use.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from model import API
from model.budget import arithmetic, presets
from model.budget.table import render_text
from model.config import GPTConfig
from model.interp.analysis.circuits import Circuits, model_circuits
from model.interp.causal import AttributionResult, PatchingResult, attribution_of, patching_of
from model.interp.prompt import Prompt, encode_prompt, prompt_of_ids
from model.interp.trace import Kinds, Trace
from model.interp.trace import run_with_trace as _record
from model.io.hub import resolve
from model.io.loaded import Checkpoint
from model.io.pretrained import open_model as _open
from model.nn.gpt import GPT
from model.nn.hooks import ablate_heads as ablate_heads


def open_model(
    source: str | Path,
    device: str | torch.device = "cpu",
    *,
    dtype: torch.dtype = torch.float32,
    stored: bool | None = None,
) -> Checkpoint:
    """The model at ``source``, in evaluation mode on ``device``: one of our checkpoint folders (or a
    run folder), a Hugging Face folder, a ``.gguf`` file, a nanoGPT ``ckpt.pt``, ``hf:REPO[@REV]``
    (fetched into the Hugging Face cache first) or ``package:NAME`` (a model a Python package
    carries). ``stored``: keep the matrices as the file stores them (GGUF, Llama-era families),
    decoded one layer at a time (None: chosen by size). Refused in one line
    (:class:`~model.io.loaded.CheckpointError`, :class:`~model.io.hub.HubError`,
    :class:`~model.budget.sizing.ModelTooLarge`)."""
    return _open(resolve(source), device, dtype=dtype, stored=stored)


def prompt_of(lm: Checkpoint, prompt: str | Prompt | list[int]) -> Prompt:
    """``prompt`` as the model reads it: text encoded by ``lm.tokenizer`` (the last
    ``context_length`` tokens, a BOS kept in front), token ids [T], or a Prompt as given."""
    if isinstance(prompt, Prompt):
        return prompt
    if isinstance(prompt, str):
        return encode_prompt(lm.tokenizer, prompt, lm.config.core.context_length)
    return prompt_of_ids(lm.tokenizer, prompt, lm.config.core.context_length)


def run_with_trace(
    lm: Checkpoint,
    prompt: str | Prompt | list[int],
    *,
    names: Kinds = None,
    layers: list[int] | None = None,
    hooks=(),
    dtype: torch.dtype | None = None,
) -> Trace:
    """One forward pass of ``prompt`` (:func:`prompt_of`), recorded: a Trace with ``trace[name, layer]``
    (e.g. ``trace["pattern", 3]`` [1, H, T, T]), ``trace.stack(name)`` [L, ...] as numpy,
    ``trace.logits`` [1, T, V] and ``trace.tokens`` [1, T].

    ``names``: the hook names to record, a list or a predicate ``names(name) -> bool`` (None: all);
    a name the trace kinds had before they took their hook points' (``weights``) is refused naming the
    one to use. ``layers``: the blocks to record (None: all). ``hooks``: interventions during the pass,
    e.g. :func:`ablate_heads` ``({(layer, head): "zero"})``, or ``{hook point: fn(x, hook)}``.
    ``dtype``: the stored precision (float32; logits are always float32). A trace the machine cannot
    hold is refused before it runs (:class:`~model.budget.sizing.ModelTooLarge`)."""
    return _record(lm.model, prompt_of(lm, prompt), kinds=names, layers=layers, hooks=hooks, dtype=dtype)


def patch(
    lm: Checkpoint,
    clean: str | Prompt | list[int],
    corrupt: str,
    *,
    answer: str | None = None,
    wrong: str | None = None,
    position: int = -1,
) -> PatchingResult:
    """Activation patching of ``corrupt`` (text of as many tokens as ``clean``) from the clean run. With
    ``m = logit[position, answer] − logit[position, wrong]`` (``answer``/``wrong`` tokens as text; None:
    the clean run's top token, the corrupted run's), each patched run restores
    ``(m(patched) − m(corrupt)) / (m(clean) − m(corrupt))`` of the gap: ``result.heads.restored``
    [L, H] (one head's ``z`` per run), ``result.resid.restored`` [L, T] (the stream entering a block
    at one position per run); ``result.heads.best`` is the (layer, head) that restores most."""
    p = prompt_of(lm, clean)
    return patching_of(
        lm.model, lm.tokenizer, list(p.ids), corrupt,
        answer=answer, wrong=wrong, position=position, prompt=p.text, dropped=p.dropped,
    )  # fmt: skip


def attribute(
    lm: Checkpoint,
    prompt: str | Prompt | list[int],
    *,
    token: str | None = None,
    other: str | None = None,
    position: int = -1,
) -> AttributionResult:
    """Direct logit attribution of ``logit[position, token]`` (``− logit[position, other]``; tokens as
    text, None: the top prediction), the final norm's scale frozen: ``result.attr.heads`` [L, H],
    ``result.attr.mlp`` [L], ``result.attr.embed`` and the biases add up to ``result.attr.logit``."""
    ids = list(prompt_of(lm, prompt).ids)
    return attribution_of(lm.model, lm.tokenizer, ids, token=token, other=other, position=position)


def circuits(lm: Checkpoint | GPT, *, rope_offset: int = 0) -> Circuits:
    """The weights' own circuits (no prompt): ``result.composition.scores`` [3, L, H, L, H] (Q, K and V
    composition of every later head with every earlier one), ``result.heads`` (each head's QK and OV
    circuit: singular values, norms, ranks, copying scores [L, H]). ``rope_offset``: the relative
    position a rotary model's QK circuit is read at."""
    return model_circuits(lm.model if isinstance(lm, Checkpoint) else lm, rope_offset=rope_offset)


def budget_report(what: Checkpoint | GPT | GPTConfig | str, **settings: Any) -> dict[str, Any]:
    """The budget of a model, a config or a preset's name (``"llama2-7b"``; ``model.budget.presets``):
    the JSON-ready report ``attention-lab budget --json`` prints (``params``, ``flops``, ``kv_cache``,
    ``memory``, and ``training`` when ``tokens=`` is given). ``settings``: ``seq_len``, ``batch``,
    ``bytes_per_value``, ``tokens``, ``peak_flops``, ``mfu``, ``gpus``, ``precision``, ...
    (:func:`model.budget.arithmetic.report`)."""
    if isinstance(what, str):
        cfg = presets.get(what).gpt_config()
    elif isinstance(what, Checkpoint | GPT):
        cfg = what.config
    else:
        cfg = what
    return arithmetic.report(cfg, **settings)


def budget_table(report: dict[str, Any]) -> str:
    """A :func:`budget_report` as the table ``attention-lab budget`` prints: parameters per component
    with formulas, FLOPs per token, KV cache, memory (and training cost), section by section."""
    return render_text(report)


__all__ = [*API]
