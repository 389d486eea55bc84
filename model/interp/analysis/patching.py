"""Activation patching: which head (or residual-stream position) carries the answer?

Two prompts of the same length ``T``: a **clean** one (``"When Mary and John went to the store, John
gave a drink to"``, answer ``" Mary"``) and a **corrupted** one (the names swapped, answer ``" John"``).
The answer metric is the logit difference at one position ``p`` (the last by default)::

    m(run) = logit[p, answer] − logit[p, wrong]

(by default ``answer`` = the clean run's top token at ``p``, ``wrong`` = the corrupted run's, or its
runner-up when both runs predict the same token). Patching
copies one activation of the clean run into the corrupted run and measures how much of the gap it
closes::

    restored = (m(corrupted with clean activation) − m(corrupted)) / (m(clean) − m(corrupted))

1 means that activation alone carries everything the clean prompt adds; 0 means it carries nothing;
negative values push the other way. (NaN when ``m(clean) = m(corrupted)``: there is no gap to close.)

* :func:`patch_heads` patches one head's output ``z_h`` (``blocks.l.attn.z[:, h]``, every position,
  before ``W_O``) per run → ``restored`` [L, H];
* :func:`patch_resid` patches the residual stream entering block ``l`` at one position
  (``blocks.l.resid_pre[:, t]``) per run → ``restored`` [L, T].
* :func:`run_patched` is the engine: any list of runs, each a set of (hook point, index) patches.

**Path patching** (Wang et al., 2022, "Interpretability in the Wild"): how much of one *sender* head's
effect goes *through* a later *receiver* head's queries, keys or values. Every run is the corrupted
prompt's. The sender's clean output changes what its layer writes into the stream by::

    Δ = resid_mid_ℓs(corrupted, z_s ← clean z_s) − resid_mid_ℓs(corrupted)          [T, d]

(``z_s W_O`` in a Pre-LN block; through the output norm in a sandwich or output block). With everything
else frozen, the receiver ``r`` in a later layer ``ℓr`` reads ``resid_pre_ℓr(corrupted) + Δ`` in one
input ``ι ∈ {q, k, v}`` only (its other inputs keep their corrupted values); its new output replaces
its corrupted one, and the model runs on from there. With ``m`` the logit difference above::

    effect(s → r.ι) = m(corrupted, z_r ← z_r with ι reading + Δ) − m(corrupted)
    direct(s)       = m(corrupted, resid_post_{L−1} + Δ) − m(corrupted)   only the final norm reads Δ
    total(s)        = m(corrupted, z_s ← clean z_s) − m(corrupted)        plain head patching

:func:`path_patch` measures every later head's three inputs for one sender (``effects`` [3, L, H]),
the direct and the total effect; :func:`path_patch_joint` routes Δ to several receivers' inputs (and
the final norm) in one run. Two identities hold, and are tested:

1. **exact**: when the sender's only readers are the receivers' inputs and the final norm (the sender
   in the layer before the last, and no MLP reading the stream: e.g. its weights zero), patching every
   receiver's q, k and v and the direct path jointly *is* plain head patching:
   ``joint(all receivers, q+k+v, direct) = total``;
2. **first order**: in that setting, ``total = direct + Σ_r Σ_ι effect(s → r.ι) + O(‖Δ‖²)``: for a
   small write the paths add up. ``PathPatching.interaction`` (total − direct − Σ effects) is what no
   single path carries: MLPs, paths through two heads, the curvature of softmax and norms.

Post-LN models are refused (every block renormalises the whole stream after the sender's write).

Speed: the ``N`` patched runs are one forward over ``N`` copies of the corrupted prompt, each batch
row patching its own activation (in chunks of ``max_batch`` rows, by default about 8192 tokens a chunk,
to bound memory); a run patching block ``l`` first starts at block ``l``
(:meth:`~model.nn.gpt.GPT.forward_from` on the corrupted run's ``blocks.l.resid_pre``: the blocks
before it would compute the same), which halves a sweep over every layer; only the position read is
unembedded (a [N, T, V] block of logits would be
1.8 GB for 144 runs of 64 tokens of GPT-2's vocabulary). Patching ``attn.z`` or ``resid_pre`` keeps
the fused attention kernel. All runs are
in evaluation mode under ``torch.no_grad``; the model's mode is restored afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.patch_runs import (
    CHUNK_TOKENS,
    Patch,
    _metric_tokens,
    _same_length,
    as_ids,
    cache_activations,
    run_patched,
)
from model.interp.analysis.path_patching import (
    PATH_INPUTS,
    PathPatching,
    path_patch,
    path_patch_joint,
    path_unsupported,
)
from model.interp.trace import eval_mode


@dataclass
class Patching:
    """The result of a patching sweep.

    ``restored`` [L, H] (heads) or [L, T] (residual stream): the fraction of the logit difference
    restored (module docstring); ``patched`` the same shape: ``m`` of each patched run;
    ``clean_diff`` / ``corrupt_diff``: ``m`` of the unpatched runs; ``answer`` / ``wrong``: the token
    ids of the metric; ``position``: where it is read (≥ 0); ``point``: ``"attn.z"`` or ``"resid_pre"``.
    """

    restored: np.ndarray
    patched: np.ndarray
    clean_diff: float
    corrupt_diff: float
    answer: int
    wrong: int
    position: int
    point: str

    @property
    def best(self) -> tuple[int, int]:
        """(row, column) of the largest restored fraction: (layer, head) or (layer, position)."""
        flat = np.nan_to_num(self.restored, nan=-np.inf)
        row, col = np.unravel_index(int(np.argmax(flat)), flat.shape)
        return int(row), int(col)


def _sweep(model, clean, corrupt, runs, shape, point, *, answer, wrong, position, max_batch, tokenizer):
    clean, corrupt = as_ids(model, clean, tokenizer), as_ids(model, corrupt, tokenizer)
    _same_length(clean, corrupt)
    T = clean.shape[1]
    if not -T <= position < T:
        raise ValueError(f"position {position} is outside a prompt of {T} tokens")
    position %= T
    names = sorted({name for run in runs for name, _ in run})
    cache, clean_logits = cache_activations(model, clean, names)
    with torch.no_grad(), eval_mode(model):
        corrupt_logits, _ = model(corrupt)
    clean_row, corrupt_row = clean_logits[0, position].float(), corrupt_logits[0, position].float()
    answer, wrong = _metric_tokens(clean_row, corrupt_row, answer, wrong)
    logits = run_patched(model, clean, corrupt, runs, position=position, max_batch=max_batch, cache=cache)
    m_clean = float(clean_row[answer] - clean_row[wrong])
    m_corrupt = float(corrupt_row[answer] - corrupt_row[wrong])
    patched = (logits[:, answer] - logits[:, wrong]).double().cpu().numpy().reshape(shape)
    gap = m_clean - m_corrupt
    restored = (patched - m_corrupt) / gap if gap != 0 else np.full(shape, np.nan)
    return Patching(restored, patched, m_clean, m_corrupt, answer, wrong, position, point)


def patch_heads(
    model,
    clean,
    corrupt,
    *,
    answer: int | None = None,
    wrong: int | None = None,
    position: int = -1,
    max_batch: int | None = None,
    tokenizer=None,
) -> Patching:
    """Patch each head's output ``z_h`` [T, d_k] (hook ``blocks.l.attn.z``, all positions) from the clean
    run into the corrupted one, one head per run: :class:`Patching` with ``restored`` [L, H].

    ``L·H`` runs, batched (see :func:`run_patched`). Prompts as in :func:`as_ids` (text needs ``tokenizer``).
    """
    L, H = model.config.core.n_layers, model.config.attention.n_heads
    runs = [[(f"blocks.{l}.attn.z", (h,))] for l in range(L) for h in range(H)]
    return _sweep(
        model, clean, corrupt, runs, (L, H), "attn.z",
        answer=answer, wrong=wrong, position=position, max_batch=max_batch, tokenizer=tokenizer,
    )  # fmt: skip


def patch_resid(
    model,
    clean,
    corrupt,
    *,
    answer: int | None = None,
    wrong: int | None = None,
    position: int = -1,
    max_batch: int | None = None,
    tokenizer=None,
) -> Patching:
    """Patch the residual stream entering block ``l`` at position ``t`` (``blocks.l.resid_pre[:, t]``,
    [d]) from the clean run into the corrupted one, one (l, t) per run: ``restored`` [L, T].

    Positions after ``position`` cannot affect it (causal models): their cells are 0. Row 0 patches the
    embedding (+ positions) of one token.
    """
    L = model.config.core.n_layers
    T = as_ids(model, clean, tokenizer).shape[1]
    runs = [[(f"blocks.{l}.resid_pre", (t,))] for l in range(L) for t in range(T)]
    return _sweep(
        model, clean, corrupt, runs, (L, T), "resid_pre",
        answer=answer, wrong=wrong, position=position, max_batch=max_batch, tokenizer=tokenizer,
    )  # fmt: skip


__all__ = [
    "CHUNK_TOKENS",
    "PATH_INPUTS",
    "Patch",
    "Patching",
    "PathPatching",
    "as_ids",
    "cache_activations",
    "patch_heads",
    "patch_resid",
    "path_patch",
    "path_patch_joint",
    "path_unsupported",
    "run_patched",
]
