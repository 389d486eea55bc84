"""The next-token panel: the top-k next tokens with probabilities at every position of a prompt.

At position ``t`` the model predicts token ``t + 1`` from tokens ``0..t``:
``p_t = softmax(logits_t / τ)`` (``τ`` = temperature, 1 = the model's own distribution).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class NextTokens:
    """Top-k predictions at each of ``T`` positions.

    ``ids`` int64 [T, k] and ``probs`` float [T, k], most likely first; ``entropy`` [T] of the full
    distribution in nats; ``target_prob`` / ``target_rank`` [T]: probability and rank (0 = top) of the
    token that actually comes next in the prompt (NaN / −1 at the last position, whose next token is
    unknown), or None when no targets were given.
    """

    ids: np.ndarray
    probs: np.ndarray
    entropy: np.ndarray
    target_prob: np.ndarray | None = None
    target_rank: np.ndarray | None = None

    @property
    def k(self) -> int:
        return self.ids.shape[1]

    def strings(self, decode: Callable[[int], str]) -> list[list[str]]:
        """The token texts [T][k] via ``decode(id)`` (e.g. ``lambda i: tokenizer.decode([i])``)."""
        return [[decode(int(i)) for i in row] for row in self.ids]


#: Positions ranked together: [rows, V] float32 stays in cache (64 × 49k = 12.6 MB), and no [T, V]
#: temporary is ever allocated
ROWS = 64


def top_k_next_tokens(logits, k: int = 5, *, temperature: float = 1.0, targets=None) -> NextTokens:
    """Top-``k`` of ``softmax(logits / temperature)`` at every position.

    ``logits`` [T, V] or [B, T, V] (batch row 0), numpy or torch. ``targets`` [T] (ids of the true
    next tokens, −1 where unknown) fills ``target_prob``/``target_rank``. Computed :data:`ROWS`
    positions at a time.
    """
    if torch.is_tensor(logits) or isinstance(logits, np.ndarray) or not hasattr(logits, "dim"):
        lg = torch.as_tensor(np.asarray(logits) if not torch.is_tensor(logits) else logits).detach().cpu()
    else:  # a [T, V] that gives its rows as tensors (model.interp.streamed.Unembedding)
        lg = logits
    if lg.dim() == 3:
        lg = lg[0]
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    T, V = lg.shape
    k = min(k, V)
    ids = torch.empty(T, k, dtype=torch.long)
    probs, entropy = torch.empty(T, k), torch.empty(T)
    tg = None if targets is None else torch.as_tensor(np.asarray(targets), dtype=torch.long)
    tp, rank = torch.full((T,), float("nan")), torch.full((T,), -1, dtype=torch.long)
    for r in range(0, T, ROWS):
        rows = slice(r, min(T, r + ROWS))
        x = lg[rows].float()
        x = x - x.amax(-1, keepdim=True)  # max 0: the same softmax, and log Σ eˣ = −log p_max
        if temperature != 1.0:
            x /= temperature
        p = torch.softmax(x, dim=-1)  # [rows, V]
        top = torch.topk(p, k, dim=-1)
        ids[rows], probs[rows] = top.indices, top.values
        if tg is not None:
            known = tg[rows] >= 0
            t_p = p.gather(-1, tg[rows].clamp(min=0)[:, None])[:, 0]
            tp[rows] = torch.where(known, t_p, tp[rows])
            above = torch.gt(p, t_p[:, None]).sum(-1, dtype=torch.int32).long()
            rank[rows] = torch.where(known, above, rank[rows])
        # H = −Σ p log p = log Σ eˣ − Σ p x: two non-negative terms, and no log over the vocabulary
        entropy[rows] = -torch.log(top.values[:, 0]) - x.mul_(p).sum(-1)
    out = NextTokens(ids.numpy(), probs.numpy(), entropy.numpy())
    if tg is not None:
        out.target_prob, out.target_rank = tp.numpy(), rank.numpy()
    return out


@torch.no_grad()
def prompt_next_tokens(model, idx, k: int = 5, *, temperature: float = 1.0, ablate=None) -> NextTokens:
    """Run ``model`` on the prompt ``idx`` ([T] or [1, T] ids) and rank its next-token predictions.

    Targets are the prompt's own next tokens (``idx[t + 1]``). ``ablate`` {(layer, head): mode} switches
    heads off for the pass (:func:`model.nn.hooks.ablate_heads`).
    Evaluation mode is used and the model's mode restored.
    """
    idx = torch.as_tensor(idx, dtype=torch.long, device=model.device)
    if idx.dim() == 1:
        idx = idx[None]
    from model.nn.hooks import ablate_heads

    was_training = model.training
    model.eval()
    try:
        with model.hooks(ablate_heads(ablate) if ablate else []):
            logits, _ = model(idx)
    finally:
        model.train(was_training)
    targets = torch.full((idx.shape[1],), -1, dtype=torch.long)
    targets[:-1] = idx[0, 1:].cpu()
    return top_k_next_tokens(logits[0], k, temperature=temperature, targets=targets)


__all__ = ["NextTokens", "prompt_next_tokens", "top_k_next_tokens"]
