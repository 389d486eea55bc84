"""Head ablation: switch heads off and measure what changes.

Ablating head ``(l, h)`` replaces its output ``A_h V_h`` [T, d_k] before ``W_O`` by zeros ("zero") or by
its mean over positions ("mean"): the intervention :func:`model.nn.hooks.ablate_heads` on the hook points
``blocks.l.attn.z``. Nothing in the model is modified, so *restoring* is simply running without the
hooks: the logits come back bit for bit.

Numbers, for next-token distributions ``p_t`` (before) and ``q_t`` (after) at each position ``t``:

* ``kl[t] = KL(p_t ‖ q_t) = Σ_v p_t(v) (ln p_t(v) − ln q_t(v))`` (nats)
* ``max_prob_change[t] = max_v |q_t(v) − p_t(v)|``
* ``top1_changed[t]``: the most likely next token differs
* validation loss: mean cross-entropy over the same batches with and without the ablation.

These functions run under ``torch.no_grad`` in evaluation mode and restore the model's mode; callers
sharing the CPU with training hold the compute lock around them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.next_token import NextTokens, top_k_next_tokens
from model.interp.trace import eval_mode
from model.nn.hooks import ablate_heads

ABLATION_MODES = ("zero", "mean")


def ablation_dict(heads, mode: str = "zero", config=None) -> dict[tuple[int, int], str]:
    """``{(layer, head): mode}`` from a mapping or an iterable of (layer, head) pairs.

    With ``config`` every head is checked against ``n_layers`` × ``n_heads`` (ValueError otherwise).
    """
    if mode not in ABLATION_MODES:
        raise ValueError(f"ablation mode {mode!r} is not one of {', '.join(ABLATION_MODES)}")
    if isinstance(heads, Mapping):
        out = {(int(l), int(h)): m for (l, h), m in heads.items()}
    else:
        out = {(int(l), int(h)): mode for l, h in heads}
    for (l, h), m in out.items():
        if m not in ABLATION_MODES:
            raise ValueError(
                f"ablation mode {m!r} for head ({l}, {h}) is not one of {', '.join(ABLATION_MODES)}"
            )
        if config is not None and not (0 <= l < config.core.n_layers and 0 <= h < config.attention.n_heads):
            raise ValueError(
                f"head ({l}, {h}) is outside the model's {config.core.n_layers} layers × "
                f"{config.attention.n_heads} heads"
            )
    return out


@dataclass
class AblationEffect:
    """Next-token distributions of a prompt before and after ablating ``heads``.

    ``probs_before``, ``probs_after`` [T, V]; ``kl``, ``max_prob_change`` [T]; ``top1_changed`` bool
    [T]; ``top_before``/``top_after``: :class:`NextTokens` (top-k ids and probabilities) per position;
    ``logits_max_abs_diff``: max |Δ logit| over the prompt (0 means the ablation changed nothing).
    """

    heads: dict[tuple[int, int], str]
    probs_before: np.ndarray
    probs_after: np.ndarray
    kl: np.ndarray
    max_prob_change: np.ndarray
    top1_changed: np.ndarray
    top_before: NextTokens
    top_after: NextTokens
    logits_max_abs_diff: float

    @property
    def mean_kl(self) -> float:
        return float(self.kl.mean())


def kl_divergence(logits_p, logits_q) -> np.ndarray:
    """``KL(softmax(p) ‖ softmax(q))`` along the last axis, in nats: [..., V] × [..., V] → [...]."""
    lp = torch.log_softmax(torch.as_tensor(logits_p).double(), -1)
    lq = torch.log_softmax(torch.as_tensor(logits_q).double(), -1)
    return (lp.exp() * (lp - lq)).sum(-1).clamp(min=0).numpy()


@torch.no_grad()
def ablation_effect(model, idx, heads, mode: str = "zero", *, k: int = 5) -> AblationEffect:
    """Run prompt ``idx`` ([T] or [1, T]) with and without ablating ``heads``; compare next-token predictions.

    ``heads``: iterable of (layer, head) ablated with ``mode``, or a ``{(layer, head): mode}`` dict.
    """
    ablate = ablation_dict(heads, mode, model.config)
    idx = torch.as_tensor(idx, dtype=torch.long, device=model.device)
    if idx.dim() == 1:
        idx = idx[None]
    with eval_mode(model):
        before, _ = model(idx)
        with model.hooks(ablate_heads(ablate)):
            after, _ = model(idx)
    b, a = before[0].float().cpu(), after[0].float().cpu()
    pb, pa = torch.softmax(b.double(), -1), torch.softmax(a.double(), -1)
    targets = torch.full((idx.shape[1],), -1, dtype=torch.long)
    targets[:-1] = idx[0, 1:].cpu()
    return AblationEffect(
        heads=ablate,
        probs_before=pb.numpy(),
        probs_after=pa.numpy(),
        kl=kl_divergence(b, a),
        max_prob_change=(pa - pb).abs().max(-1).values.numpy(),
        top1_changed=(pb.argmax(-1) != pa.argmax(-1)).numpy(),
        top_before=top_k_next_tokens(b, k, targets=targets),
        top_after=top_k_next_tokens(a, k, targets=targets),
        logits_max_abs_diff=float((a - b).abs().max()),
    )


@torch.no_grad()
def mean_loss(model, batches: Iterable[tuple[torch.Tensor, torch.Tensor]], ablate=None) -> float:
    """Mean cross-entropy (nats per token) of ``model`` over ``(x, y)`` batches, optionally ablated."""
    total, n = 0.0, 0
    with eval_mode(model), model.hooks(ablate_heads(ablate) if ablate else []):
        for x, y in batches:
            _, loss = model(x.to(model.device), y.to(model.device))
            total += float(loss)
            n += 1
    if n == 0:
        raise ValueError("no batches to evaluate")
    return total / n


@dataclass
class LossChange:
    """Validation loss without (``before``) and with (``after``) an ablation; ``delta = after − before``."""

    before: float
    after: float

    @property
    def delta(self) -> float:
        return self.after - self.before


def validation_batches(
    source, n_batches: int, batch_size: int, seq_len: int, *, seed: int = 0, masked: bool = True
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``n_batches`` fixed validation batches ``(x, y)`` [batch_size, seq_len] from a data source.

    With ``masked`` and a source that scores only some targets (the synthetic tasks'
    ``get_masked_batch``), unscored targets become −100 and are ignored by the loss, as in training.
    The same ``seed`` gives the same batches, so before/after losses are comparable.
    """
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_batches):
        if masked and hasattr(source, "get_masked_batch"):
            x, y, keep = source.get_masked_batch("val", batch_size, seq_len, g)
            y = y.masked_fill(~keep.bool(), -100)
        else:
            x, y = source.get_batch("val", batch_size, seq_len, g)
        out.append((x, y))
    return out


def _collect(batch_fn: Callable[[], tuple[torch.Tensor, torch.Tensor]] | Iterable, n_batches: int):
    if callable(batch_fn):
        return [batch_fn() for _ in range(n_batches)]
    return list(batch_fn)


def validation_loss_change(model, heads, batch_fn, *, n_batches: int = 4, mode: str = "zero") -> LossChange:
    """Loss on the same ``n_batches`` batches with and without ablating ``heads``.

    ``batch_fn()`` returns one ``(x, y)`` validation batch (e.g. a closure over
    ``source.get_batch("val", ...)`` with a fixed generator); a list of batches works too, e.g.
    :func:`validation_batches`.
    """
    ablate = ablation_dict(heads, mode, model.config)
    batches = _collect(batch_fn, n_batches)
    return LossChange(before=mean_loss(model, batches), after=mean_loss(model, batches, ablate))


def head_importance(model, batch_fn, *, n_batches: int = 2, mode: str = "zero") -> np.ndarray:
    """Loss increase from ablating each head alone, ``loss(ablate {(l, h)}) − loss``: [L, H].

    Costs ``L·H + 1`` evaluations of the batches; large values mark the heads the model relies on.
    """
    batches = _collect(batch_fn, n_batches)
    base = mean_loss(model, batches)
    cfg = model.config
    out = np.zeros((cfg.core.n_layers, cfg.attention.n_heads))
    for l in range(cfg.core.n_layers):
        for h in range(cfg.attention.n_heads):
            out[l, h] = mean_loss(model, batches, {(l, h): mode}) - base
    return out


__all__ = [
    "ABLATION_MODES",
    "AblationEffect",
    "LossChange",
    "ablation_dict",
    "ablation_effect",
    "head_importance",
    "kl_divergence",
    "mean_loss",
    "validation_batches",
    "validation_loss_change",
]
