"""What a scaled-vs-unscaled training comparison measured, in words that follow its numbers.

Two copies of one model, one computing ``softmax(QKᵀ/√d_k)V`` and one ``softmax(QKᵀ)V``, train from
the same seed on the same batches. At the end each has a training loss ``ℓ`` (nats; the mean of its
last logged steps, so one noisy batch does not decide) and a probe of how one-hot its attention is
(the mean over heads of ``mean_i max_j A_ij``, 1 = one-hot). A model that learned nothing predicts
every token uniformly: ``ℓ = ln V``, V the vocabulary. :func:`scaling_run_summary` says which model
learned, which is ahead and by how much, and which attends more one-hot — whichever way they came out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: nats: a loss within this of ``ln V`` learned nothing; two losses within it of each other are level
LEVEL = 0.05
#: the share of the logged steps at the end whose mean is a variant's final loss
FINAL_SHARE = 0.1


def final_loss(losses: Sequence[float], share: float = FINAL_SHARE) -> float:
    """The mean of the last ``share`` of ``losses`` (at least one): the loss a run ended at."""
    if not losses:
        raise ValueError("no loss was logged")
    n = max(1, round(len(losses) * share))
    return float(sum(losses[-n:]) / n)


@dataclass(frozen=True)
class ScalingOutcome:
    """The end of one comparison: final losses (nats), last mean max weights, and the vocabulary."""

    loss_scaled: float
    loss_unscaled: float
    max_weight_scaled: float
    max_weight_unscaled: float
    vocab_size: int

    @property
    def ln_vocab(self) -> float:
        """``ln V``: the loss of a uniform guess over the vocabulary."""
        return math.log(self.vocab_size)

    @property
    def gap(self) -> float:
        """``ℓ_unscaled − ℓ_scaled``: positive when the unscaled model is behind."""
        return self.loss_unscaled - self.loss_scaled

    def learned(self, loss: float) -> bool:
        return loss < self.ln_vocab - LEVEL


def _one(name: str, loss: float, outcome: ScalingOutcome) -> str:
    below = outcome.ln_vocab - loss
    if outcome.learned(loss):
        return f"the {name} model ends at {loss:.3f} nats, {below:.2f} below ln V"
    return f"the {name} model ends at {loss:.3f} nats, no lower than ln V: it learned nothing"


def scaling_run_summary(outcome: ScalingOutcome) -> str:
    """One paragraph of what the run measured: both final losses against ``ln V``, the gap in words
    that follow its sign, and which model's attention is the more one-hot."""
    o = outcome
    losses = (
        f"With ln V = {o.ln_vocab:.3f} (V = {o.vocab_size}), {_one('scaled', o.loss_scaled, o)} and "
        f"{_one('unscaled', o.loss_unscaled, o)}. "
    )
    if o.gap > LEVEL:
        gap = f"The unscaled model is {o.gap:.2f} nats behind, as the theory says. "
    elif o.gap < -LEVEL:
        gap = f"The unscaled model is {-o.gap:.2f} nats ahead: these settings do not show the effect. "
    else:
        gap = f"The two end level (within {LEVEL} nats): these settings do not show the effect. "
    if o.max_weight_unscaled > o.max_weight_scaled:
        peaked = "the unscaled model's attention is the more one-hot"
    else:
        peaked = "the scaled model's attention is the more one-hot, not the unscaled one's"
    return (
        f"{losses}{gap}On the probe prompt {peaked}: mean max weight {o.max_weight_unscaled:.2f} "
        f"unscaled against {o.max_weight_scaled:.2f} scaled."
    )


__all__ = ["FINAL_SHARE", "LEVEL", "ScalingOutcome", "final_loss", "scaling_run_summary"]
