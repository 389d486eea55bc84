"""Small headless helpers the Labs tab needs beside the other analysis modules.

* :func:`prompt_ids` / :func:`trace_prompt`: a prompt as token ids (cropped to the context) and an
  inspected forward pass of it in evaluation mode, optionally under another attention mask.
* :func:`mask_stages`: one head's scores, mask, masked scores and weights, side by side.
* :func:`saturation_summary`, :func:`future_attention`: one number per model for "how one-hot is
  attention" and "how much it reads the future" (training probes).
* :func:`grad_flow_on_batch`: per-block gradient norms of a model *now*, on a fixed batch, without
  touching its weights or optimizer (a probe taken between two training steps).
* :func:`residual_profile`: the mean residual-stream norm at each layer boundary (training probes).
* :func:`without_positions`: the same weights with every position signal removed.
* :func:`permutation_predictions`: the top next-token guesses of a prompt and of its permutation.

Shapes: ``T`` tokens, ``L`` layers, ``H`` heads, ``V`` vocabulary, ``P`` stream checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.gradflow import GradFlow, block_grad_norms
from model.interp.analysis.masks import apply_mask, future_weight
from model.interp.analysis.residual import residual_norms
from model.interp.analysis.saturation import mean_max_weight
from model.interp.trace import eval_mode

__all__ = [
    "MaskStages",
    "PermutationPredictions",
    "fixed_batch",
    "future_attention",
    "grad_flow_on_batch",
    "mask_stages",
    "permutation_predictions",
    "prompt_ids",
    "residual_profile",
    "saturation_summary",
    "trace_prompt",
    "without_positions",
]


# ---------------------------------------------------------------------------------------------
# prompts and traces
# ---------------------------------------------------------------------------------------------
def prompt_ids(tokenizer, prompt: str, context_length: int, max_tokens: int | None = None) -> list[int]:
    """Token ids of ``prompt``: unknown characters replaced, the first ``max_tokens`` kept, and at most
    ``context_length`` (the *first* ones: the labs read a prompt from its start). Raises ValueError
    for an empty prompt."""
    ids = tokenizer.encode(prompt, errors="replace")
    limit = context_length if max_tokens is None else min(context_length, int(max_tokens))
    ids = ids[: max(1, limit)]
    if not ids:
        raise ValueError("the prompt is empty: type a few characters")
    return ids


def trace_prompt(model, ids, *, kinds=None, layers=None, attn_mask=None, dtype=torch.float32):
    """:func:`~model.interp.inspection.inspect` of one prompt ``ids`` [T]; ``attn_mask`` bool [T, T] or None
    replaces the model's mask (the :func:`~model.nn.hooks.use_mask` intervention)."""
    from model.interp.trace import inspect
    from model.nn.hooks import use_mask

    hooks = use_mask(attn_mask.to(model.device)) if attn_mask is not None else []
    return inspect(model, None, list(ids), kinds=kinds, layers=layers, dtype=dtype, hooks=hooks)


# ---------------------------------------------------------------------------------------------
# mask lab
# ---------------------------------------------------------------------------------------------
@dataclass
class MaskStages:
    """One head's attention, stage by stage (all float64 [T, T] except ``mask``).

    ``scores``: ``s(QKᵀ)``, what enters the softmax before masking; ``mask`` bool (True = may attend);
    ``additive``: the additive mask ``M`` (0 where allowed, −∞ where hidden); ``masked``: ``scores + M``;
    ``weights``: ``softmax_row(masked)``; ``future``: mean weight on keys after the query (j > i).
    """

    scores: np.ndarray
    mask: np.ndarray
    additive: np.ndarray
    masked: np.ndarray
    weights: np.ndarray
    future: float


def mask_stages(trace, layer: int, head: int, batch: int = 0) -> MaskStages:
    """:class:`MaskStages` of head ``(layer, head)`` (the trace holds ``scores_scaled`` and ``weights``)."""
    scores = trace["scores_scaled", layer][batch, head].double().numpy()
    weights = trace["weights", layer][batch, head].double().numpy()
    mask = trace.mask.numpy().astype(bool)
    additive = np.where(mask, 0.0, -np.inf)
    return MaskStages(
        scores=scores,
        mask=mask,
        additive=additive,
        masked=apply_mask(scores, mask),
        weights=weights,
        future=float(future_weight(weights)),
    )


# ---------------------------------------------------------------------------------------------
# training probes (called between two steps, under the compute lock)
# ---------------------------------------------------------------------------------------------
def saturation_summary(model, ids) -> dict[str, float]:
    """How peaked the model's attention is on ``ids``: means over every head of the mean max weight
    (``max_j w_ij``, 1 = one-hot) and of the row entropy normalised by ``ln`` (visible keys)."""
    from model.interp.analysis.heads import entropy_norm

    trace = trace_prompt(model, ids, kinds=("weights",))
    w = trace.stack("weights")  # [L, H, T, T]
    return {
        "max_weight": float(np.nanmean(mean_max_weight(w, trace.mask))),
        "entropy_norm": float(np.nanmean(entropy_norm(w, trace.mask))),
    }


def fixed_batch(source, batch_size: int, seq_len: int, seed: int = 0, split: str = "val"):
    """A repeatable batch ``(x, y)`` [batch_size, seq_len] of ``source`` (the same for every call)."""
    g = torch.Generator().manual_seed(int(seed))
    return source.get_batch(split, batch_size, seq_len, g)


def grad_flow_on_batch(model, x, y) -> GradFlow:
    """Per-block ``‖∂loss/∂θ_l‖₂`` of ``model`` as it is now, on the batch ``(x, y)``.

    Runs one forward and backward in evaluation mode (no dropout) and clears the gradients it made,
    so the weights, an optimizer's state and the next training step are unaffected. Call it between
    steps (the trainer sets gradients to None after each step).
    """
    params = [p for p in model.parameters() if p.requires_grad]
    saved = [p.grad for p in params]
    for p in params:
        p.grad = None
    try:
        with eval_mode(model), torch.enable_grad():
            _, loss = model(x.to(model.device), y.to(model.device))
            loss.backward()
        flow = block_grad_norms(model)
        flow.loss = float(loss.detach())
    finally:
        for p, g in zip(params, saved):
            p.grad = g
    return flow


def residual_profile(model, ids) -> tuple[list[str], np.ndarray]:
    """Mean ``‖x‖₂`` over positions at each layer boundary (``embed``, ``L{l}.post``): (names, [P])."""
    trace = trace_prompt(model, ids, kinds=("resid_pre", "resid_post"))
    norms = residual_norms(trace, mids=False)
    return norms.names, norms.mean


# ---------------------------------------------------------------------------------------------
# positions lab
# ---------------------------------------------------------------------------------------------
def without_positions(model):
    """A copy of ``model`` with ``positions = "none"``: the same token, attention and MLP weights, but
    no learned table, sinusoids or rotations. The copy is in evaluation mode on the same device."""
    from model.nn.gpt import build_model

    cfg = model.config.replace(positions="none")
    copy = build_model(cfg, seed=0, device=model.device)
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("pos_emb.")}
    copy.load_state_dict(state, strict=True)
    copy.eval()
    return copy


@dataclass
class PermutationPredictions:
    """Top next-token guesses of a prompt (``pred`` [T]) and of its permutation (``pred_permuted`` [T]).

    Position ``t`` of the permuted prompt holds original token ``perm[t]``; ``follows[t]`` is True when
    the permuted prompt's guess at ``t`` equals the original's guess at ``perm[t]`` (outputs permute
    with the inputs).
    """

    perm: np.ndarray
    pred: np.ndarray
    pred_permuted: np.ndarray
    follows: np.ndarray
    error: float
    equivariant: bool


def permutation_predictions(result) -> PermutationPredictions:
    """Turn a :class:`~model.interp.analysis.positions.PermutationResult` into per-position top-1 guesses."""
    pred = result.logits.argmax(-1)
    pred_p = result.logits_permuted.argmax(-1)
    perm = np.asarray(result.perm)
    return PermutationPredictions(
        perm=perm,
        pred=pred,
        pred_permuted=pred_p,
        follows=pred_p == pred[perm],
        error=float(result.error),
        equivariant=bool(result.equivariant),
    )


def future_attention(model, ids) -> float:
    """Mean attention weight on keys *after* the query (``j > i``) over every head, on ``ids``, under
    the model's own mask: 0 for a causal model; near 1 for one that learned to read the answer."""
    trace = trace_prompt(model, ids, kinds=("weights",))
    return float(np.mean(future_weight(trace.stack("weights"))))
