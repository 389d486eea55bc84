"""Each head's own circuits and the direct path through it (``model.interp.analysis.circuits`` has
the conventions): the singular values, norms and ranks of ``W_QK`` and ``W_OV``; the copying score from
the eigenvalues λ of ``W_E W_OV W_U`` [V, V] (those of ``W_O (W_U W_E) W_V`` [d_k, d_k]):
``copying = Σ_{Re λ > 0} |λ| / Σ |λ|``; and the full circuits ``W_E W_QK W_Eᵀ`` [n, n] and
``W_E W_OV W_U`` [n, V] over chosen tokens (MLPs and other heads left out)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.circuit_weights import (
    HeadWeights,
    _fold_read,
    _fold_write,
    _gain,
    head_weights,
    numerical_rank,
)

#: ``d² · V`` multiply-adds of ``W_U W_E`` allowed before the copying scores use a token subset.
COPY_FLOPS = 4e10
#: Seed of that subset.
COPY_SEED = 0


def _unembedding(model) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, bool]:
    """(E [V, d] the embedding as the stream gets it, W_U [d, V], the final norm's gain, whether it
    centres)."""
    cfg = model.config
    E = model.tok_emb.weight.detach().float()
    if cfg.core.embed_scale:
        E = E * math.sqrt(cfg.core.d_model)
    W_U = (model.lm_head.weight if model.lm_head is not None else model.tok_emb.weight).detach().float().T
    gain, centre = (None, False)
    if model.norm_f is not None:
        gain, centre = _gain(model.norm_f, "the final norm")
    return E, W_U, gain, centre


def _unembed(x: torch.Tensor, W_U: torch.Tensor, gain: torch.Tensor | None, centre: bool) -> torch.Tensor:
    """``x P diag(γ_f) W_U``: rows ``x`` [..., d] of the stream → logits [..., V] (scale left out)."""
    return _fold_write(x, gain, centre) @ W_U


@dataclass
class HeadCircuits:
    """Each head's own circuits, [L, H, ...]: singular values ``qk_svals``/``ov_svals`` [L, H, d_k]
    (descending), their Frobenius norms and numerical ranks, and the copying scores (module doc);
    ``copying_tokens``: the tokens the copying was measured over (the vocabulary, or fewer);
    ``eigenvalues`` [L, H, d_k] complex of the full OV circuit."""

    qk_svals: np.ndarray
    ov_svals: np.ndarray
    qk_norm: np.ndarray
    ov_norm: np.ndarray
    qk_rank: np.ndarray
    ov_rank: np.ndarray
    copying: np.ndarray
    copying_signed: np.ndarray
    eigenvalues: np.ndarray
    copying_tokens: int
    vocab: int
    seconds: float = 0.0


def copy_subset(
    vocab: int, d: int, *, budget: float = COPY_FLOPS, seed: int = COPY_SEED
) -> np.ndarray | None:
    """The token ids the copying scores use: None (every token) while ``d² · V`` is within ``budget``,
    else ``budget / d²`` ids drawn without replacement (seeded), ascending."""
    if d * d * vocab <= budget:
        return None
    n = max(256, int(budget // (d * d)))
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(vocab, size=min(n, vocab), replace=False))


@torch.no_grad()
def head_circuits(model, hw: HeadWeights | None = None) -> HeadCircuits:
    """Every head's QK and OV singular values, norms and ranks, and its copying score
    (:class:`HeadCircuits`, module doc)."""
    t0 = time.perf_counter()
    hw = hw if hw is not None else head_weights(model)
    d, k = hw.shape[2:]
    qk_core, ov_core = hw.qk().core(), hw.ov().core()
    qk_s, ov_s = torch.linalg.svdvals(qk_core), torch.linalg.svdvals(ov_core)
    E, W_U, gain, centre = _unembedding(model)
    subset = copy_subset(E.shape[0], d)
    if subset is not None:
        ids = torch.as_tensor(subset, device=E.device)
        E, W_U = E[ids], W_U[:, ids]
    G = _fold_read(W_U.to(hw.W_V) @ E.to(hw.W_V), gain, centre)  # P diag(γ_f) W_U E [d, d]
    M = hw.W_O @ G @ hw.W_V  # [L, H, k, k]: its eigenvalues are the full OV circuit's non-zero ones
    lam = torch.linalg.eigvals(M.double())
    mag = lam.abs()
    total = mag.sum(-1).clamp_min(1e-300)
    copying = (mag * (lam.real > 0)).sum(-1) / total
    signed = lam.real.sum(-1) / total
    return HeadCircuits(
        qk_svals=qk_s.double().cpu().numpy(),
        ov_svals=ov_s.double().cpu().numpy(),
        qk_norm=torch.linalg.matrix_norm(qk_core).double().cpu().numpy(),
        ov_norm=torch.linalg.matrix_norm(ov_core).double().cpu().numpy(),
        qk_rank=numerical_rank(qk_s, max(d, k)).cpu().numpy(),
        ov_rank=numerical_rank(ov_s, max(d, k)).cpu().numpy(),
        copying=copying.cpu().numpy(),
        copying_signed=signed.cpu().numpy(),
        eigenvalues=lam.cpu().numpy(),
        copying_tokens=int(E.shape[0]),
        vocab=int(model.config.core.vocab_size),
        seconds=time.perf_counter() - t0,
    )


@torch.no_grad()
def full_ov_circuit(model, layer: int, head: int, sources: Sequence[int], hw: HeadWeights | None = None):
    """Rows of the full OV circuit ``W_E W_OV W_U`` for the ``sources`` token ids: [n, V] float32
    numpy, how much attending to each source token raises each logit (direct path, module doc)."""
    hw = hw if hw is not None else head_weights(model)
    E, W_U, gain, centre = _unembedding(model)
    ids = torch.as_tensor(list(sources), dtype=torch.long, device=E.device)
    x = (E[ids].to(hw.W_V) @ hw.W_V[layer, head]) @ hw.W_O[layer, head]  # [n, d]
    return _unembed(x, W_U.to(x), gain, centre).float().cpu().numpy()


@torch.no_grad()
def full_qk_circuit(model, layer: int, head: int, tokens: Sequence[int], hw: HeadWeights | None = None):
    """The full QK circuit ``W_E W_QK W_Eᵀ`` over ``tokens``: [n, n] float32 numpy, row = query token,
    column = key token (before the attention's scale; RoPE at ``hw``'s offset; positions left out)."""
    hw = hw if hw is not None else head_weights(model)
    E, _W_U, _gain_f, _centre = _unembedding(model)
    ids = torch.as_tensor(list(tokens), dtype=torch.long, device=E.device)
    e = E[ids].to(hw.W_Q)
    return ((e @ hw.W_Q[layer, head]) @ (e @ hw.W_K[layer, head]).T).float().cpu().numpy()


@torch.no_grad()
def promoted_tokens(
    model, sources: Sequence[int], layer: int, head: int, *, top: int = 8, hw: HeadWeights | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``top`` tokens head (layer, head)'s OV circuit raises most when it attends to each source
    token: (ids [n, top], logit changes [n, top]), from :func:`full_ov_circuit`'s rows."""
    rows = torch.from_numpy(full_ov_circuit(model, layer, head, sources, hw))
    top = min(int(top), rows.shape[1])
    values, ids = rows.topk(top, dim=-1)
    return ids.numpy(), values.numpy()


__all__ = [
    "COPY_FLOPS",
    "COPY_SEED",
    "HeadCircuits",
    "copy_subset",
    "full_ov_circuit",
    "full_qk_circuit",
    "head_circuits",
    "promoted_tokens",
]
