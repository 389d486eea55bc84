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


def top_k_next_tokens(logits, k: int = 5, *, temperature: float = 1.0, targets=None) -> NextTokens:
    """Top-``k`` of ``softmax(logits / temperature)`` at every position.

    ``logits`` [T, V] or [B, T, V] (batch row 0), numpy or torch. ``targets`` [T] (ids of the true
    next tokens, −1 where unknown) fills ``target_prob``/``target_rank``.
    """
    lg = torch.as_tensor(np.asarray(logits) if not torch.is_tensor(logits) else logits).detach().float().cpu()
    if lg.dim() == 3:
        lg = lg[0]
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    logp = torch.log_softmax(lg / temperature, dim=-1)
    p = logp.exp()
    k = min(k, lg.shape[-1])
    top = torch.topk(p, k, dim=-1)
    ent = torch.special.entr(p).sum(-1)  # −Σ p log p, 0 where p = 0: one pass over [T, V]
    out = NextTokens(top.indices.numpy().astype(np.int64), top.values.numpy(), ent.numpy())
    if targets is not None:
        tg = torch.as_tensor(np.asarray(targets), dtype=torch.long)
        known = tg >= 0
        safe = tg.clamp(min=0)
        tp = p.gather(-1, safe[:, None])[:, 0]
        rank = (p > tp[:, None]).sum(-1)
        out.target_prob = torch.where(known, tp, torch.tensor(float("nan"))).numpy()
        out.target_rank = torch.where(known, rank, torch.tensor(-1)).numpy().astype(np.int64)
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
