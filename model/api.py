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
:func:`qk_map`         one head's queries and keys over a corpus in one 2-D map (AttentionViz), a
                       typed prompt's placed into it, and how well distance tracks the dot product
:func:`budget_report`  parameters, FLOPs, KV cache, memory and training cost of a model, a config or
                       a preset (:func:`budget_table` writes it as the command line prints it)
:func:`head_scores`    every head's scores over a corpus (previous-token, induction, sink, entropy,
                       ...) with 95% bootstrap intervals, top examples and clusters of alike heads
:func:`sae_train`      a sparse autoencoder on one site of one layer, streamed from a corpus,
                       saved in SAELens's format (:func:`open_sae` opens one; :func:`sae_eval`
                       measures it: variance explained, L0, dead features, loss recovered)
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
from model.interp.analysis.qk_map import PromptPoints, QKMap, project_prompt
from model.interp.analysis.qk_map import qk_map as _qk_map
from model.interp.causal import AttributionResult, PatchingResult, attribution_of, patching_of
from model.interp.corpus import CorpusSettings, HeadScores, corpus_run
from model.interp.prompt import Prompt, encode_prompt, prompt_of_ids
from model.interp.sae.dashboard import FeatureStats
from model.interp.sae.dashboard import feature_stats as _feature_stats
from model.interp.sae.evaluate import SAEEvaluation, evaluate_sae
from model.interp.sae.format import load_sae
from model.interp.sae.prompt import PromptFeatures
from model.interp.sae.prompt import prompt_features as _prompt_features
from model.interp.sae.readout import FeatureLogits
from model.interp.sae.readout import feature_logits as _feature_logits
from model.interp.sae.sae import SparseAutoencoder
from model.interp.sae.site import Site
from model.interp.sae.train import SAETrainResult, SAETrainSettings, train_sae
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


def qk_map(
    lm: Checkpoint,
    layer: int,
    head: int,
    corpus: str = "builtin:primer",
    *,
    prompts: int = 64,
    seq_len: int = 32,
    method: str = "pca",
    prompt: str | Prompt | list[int] | None = None,
    max_points: int = 2000,
    seed: int = 0,
) -> tuple[QKMap, PromptPoints | None]:
    """Head (``layer``, ``head``)'s joint query–key map (AttentionViz) over ``corpus`` (``builtin:NAME``,
    ``task:NAME`` or a text file, encoded by ``lm.tokenizer``): up to ``max_points`` queries and as many
    keys of ``prompts`` windows of ``seq_len`` tokens (``seed``), keys moved and both scaled so that
    distance tracks the dot product, embedded by ``method`` ("pca" or "tsne", openTSNE). Returns
    ``(map, points)``: ``map.points`` [P, 2], ``map.is_query``, ``map.token``, ``map.position``,
    ``map.corr_full`` / ``map.corr_map`` (Pearson of distance with q·k, in d_k and in 2-D); ``points``
    the typed ``prompt``'s queries and keys placed into the map (None without one)."""
    from model.text.sources import resolve_source

    source = resolve_source(corpus, tokenizer=lm.tokenizer)
    got = _qk_map(lm.model, lm.tokenizer, source, layer, head, n_prompts=prompts, seq_len=seq_len,
                  method=method, max_points=max_points, seed=seed)  # fmt: skip
    placed = (
        None if prompt is None else project_prompt(lm.model, lm.tokenizer, got, prompt_of(lm, prompt).ids)
    )
    return got, placed


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


def head_scores(
    lm: Checkpoint,
    corpus: str,
    *,
    prompts: int = 256,
    seq_len: int = 128,
    seed: int = 0,
    cache: bool = True,
    **settings: Any,
) -> HeadScores:
    """Every head of ``lm`` over ``prompts`` prompts of ``seq_len`` tokens from ``corpus``
    (``"builtin:tales"``, ``"task:induction"``, a text file: :func:`model.text.sources.resolve_source`),
    drawn with ``seed``; cached on disk unless ``cache=False``. ``result.score("induction")`` [L, H] and
    ``result.interval("induction")`` its 95% bootstrap interval over prompts, for every score of
    ``result.names`` (:data:`model.interp.corpus.SCORES`); ``result.top_heads(name, n)``;
    ``result.examples["attention"]`` / ``["z"]`` the top examples per head with
    ``result.example_texts``; ``result.clusters`` (labels [L, H], names, 2-D ``coords``);
    ``result.csv()`` the heads × scores table. ``settings``: the other fields of
    :class:`~model.interp.corpus.CorpusSettings` (``batch_size``, ``top_k``, ``context``, ``window``,
    ``resamples``, ``n_clusters``). Progress and cancel: :mod:`model.progress`."""
    chosen = CorpusSettings(corpus, n_prompts=prompts, seq_len=seq_len, seed=seed, **settings)
    return corpus_run(lm.model, lm.tokenizer, chosen, use_cache=cache)


# ---- sparse autoencoders on a site (model.interp.sae) ---------------------------------------------
def sae_train(
    lm: Checkpoint,
    site: str,
    layer: int,
    corpus: str,
    *,
    out: str | Path | None = None,
    features: int = 0,
    tokens: int = 1_000_000,
    on_step=None,
    **settings: Any,
) -> SAETrainResult:
    """Train a sparse autoencoder on ``site`` (``"z"``, ``"attn_out"``, ``"resid_pre"``, ``"mlp_out"``) of
    block ``layer`` over ``tokens`` tokens of ``corpus``, ``features`` features (0: ``expansion`` × d_in,
    8 by default) — what ``attention-lab sae train`` runs. ``out``: the folder it is saved to in SAELens's
    format, and resumed from. ``settings``: the other fields of
    :class:`~model.interp.sae.train.SAETrainSettings` (``architecture`` topk|standard, ``k``,
    ``l1_coefficient``, ``lr``, ``batch_tokens``, ``seq_len``, ``seed``, ``expansion``). Returns
    ``result.sae`` (``encode(x)`` [..., d_sae], ``decode(f)`` [..., d_in]) and ``result.curves`` (MSE,
    variance explained, L0, dead features per step); ``on_step(step)`` sees each step as it ends."""
    chosen = SAETrainSettings(Site(site, layer), corpus, tokens=tokens, d_sae=features, **settings)
    return train_sae(
        lm.model, lm.tokenizer, chosen, out=out, on_step=on_step, model_name=str(lm.meta.get("name", ""))
    )


def sae_eval(
    lm: Checkpoint, sae: SparseAutoencoder, corpus: str | None = None, **settings: Any
) -> SAEEvaluation:
    """``sae`` measured as SAELens's evals do, over ``corpus`` (default: the one it was trained on):
    ``variance_explained``, ``l0``, ``dead`` and ``dense`` features, the next-token loss clean / with the
    SAE spliced in / with the site zeroed and ``loss_recovered`` — what ``attention-lab sae eval`` prints.
    ``settings``: ``n_tokens``, ``seq_len``, ``batch_tokens``, ``seed``
    (:func:`~model.interp.sae.evaluate.evaluate_sae`)."""
    corpus = corpus or sae.config.extra.get("corpus")
    if not corpus:
        raise ValueError("the SAE does not say what it was trained on: name a corpus")
    settings.setdefault("seq_len", int(sae.config.extra.get("seq_len") or 128))
    return evaluate_sae(lm.model, lm.tokenizer, sae, corpus=corpus, **settings)


def open_sae(path: str | Path, lm: Checkpoint | None = None) -> SparseAutoencoder:
    """The SAE in folder ``path`` (SAELens's format: ours, or one SAELens wrote), checked against
    ``lm``'s width at its site when given; a hostile folder is refused in one line before allocating
    (:func:`~model.interp.sae.format.load_sae`)."""
    return load_sae(path, model_config=lm.config if lm is not None else None)


def feature_stats(
    lm: Checkpoint,
    sae: SparseAutoencoder,
    corpus: str,
    *,
    prompts: int = 256,
    seq_len: int = 64,
    **settings: Any,
) -> FeatureStats:
    """Every feature of ``sae`` over ``prompts`` prompts of ``seq_len`` tokens of ``corpus``, streamed only
    as deep as its site, memory independent of ``prompts``: ``stats.frequency`` [F], ``.max_activation``,
    ``.mean_activation``, ``.histogram(i)`` (counts, edges), ``.top(i)`` the top examples (activation,
    prompt, position) and ``.example_text(i, rank, lm.tokenizer)`` each with the activating token
    marked. ``settings``: ``top_k``, ``context``, ``seed``, ``batch_size``."""
    return _feature_stats(lm.model, lm.tokenizer, sae, corpus, n_prompts=prompts, seq_len=seq_len, **settings)


def feature_logits(
    lm: Checkpoint, sae: SparseAutoencoder, features: int | list[int] | None = None, k: int = 10
) -> FeatureLogits:
    """The ``k`` tokens each feature's decoder direction promotes most and suppresses most through the
    final norm's gain and the unembedding: ``.top_ids`` / ``.top_values`` and ``.bottom_ids`` /
    ``.bottom_values`` [n, k], ``.tokens(lm.tokenizer)`` their texts; ``features`` None: every one."""
    return _feature_logits(lm.model, sae, features, k)


def prompt_features(
    lm: Checkpoint, sae: SparseAutoencoder, prompt: str | Prompt | list[int]
) -> PromptFeatures:
    """The features of ``sae`` active at each position of ``prompt`` (:func:`prompt_of`):
    ``.active(t)`` the (feature, activation) pairs of position ``t``, strongest first."""
    return _prompt_features(lm.model, sae, list(prompt_of(lm, prompt).ids))


__all__ = [*API]
