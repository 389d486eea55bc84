"""Heads compared by their patterns on shared prompts: the Jensen–Shannon similarity of every pair of
heads, of all layers, over the first prompts of a corpus run (Clark et al., 2019, "What Does BERT Look
At?", §6: the distance between two heads is the Jensen–Shannon divergence of their attention
distributions summed over the data, and multidimensional scaling places them in two dimensions).

For shared prompt ``n`` and head ``a`` (of any layer), ``A_a[i]`` is query ``i``'s row of its pattern
[T, T]: a distribution over the keys. Two heads' rows differ by the Jensen–Shannon divergence, in bits

    JS(p, q) = H((p + q) / 2) − (H(p) + H(q)) / 2,      H(p) = −Σ_j p_j log₂ p_j,      0 ≤ JS ≤ 1,

and the heads' similarity is one minus its mean over the ``N_s`` shared prompts and the ``R`` queries
that choose among two keys or more (``i ≥ 1`` under the causal mask):

    S[a, b] = 1 − (1 / (N_s R)) Σ_n Σ_i JS(A_a^n[i], A_b^n[i])          S: [L·H, L·H], heads layer-major

symmetric, in [0, 1], 1 on the diagonal and between heads whose patterns are the same. ``1 − S`` is a
mean of divergences whose square root is a metric that embeds in a Euclidean space (Fuglede & Topsøe,
2004), so classical MDS of ``√(1 − S)`` places the heads
(:func:`~model.interp.corpus.similarity.cluster_heads`).

Memory: JS does not split into per-head sums, so a prompt's heads are compared once all are in, and
nothing of a prompt is kept past its forward pass. The pattern hook of layer ``l`` keeps the batch's
shared prompts' rows, flattened to the ``D`` entries a query can see (the lower triangle of rows
``i ≥ 1``: ``D = T(T + 1)/2 − 1``) in float16, and compares layer ``l``'s heads with those of layers
``0 … l``; after the last layer they are let go. That costs ``b·L·H·D·2`` bytes while a batch is in
flight (``b``: the batch's shared prompts, at most the batch size; SmolLM2-135M, 30 × 9 heads, at
``T = 128`` and ``b = 10``: 45 MB), with the sums ``(L·H)²`` float64 kept, whatever ``N``. Compute:
``(L·H)²/2`` pairs of ``D`` entries a shared prompt (about 0.35 s for SmolLM2 at ``T = 64`` on one core).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from model.interp.analysis.head_scores import informative_rows
from model.runtime import threads


class PatternSimilarity:
    """Accumulates :math:`S` (module docstring) over the first ``n_shared`` prompts of a run: give each
    layer's weights to :meth:`offer` in layer order, batch by batch; :meth:`matrix` is ``S``."""

    def __init__(self, n_layers: int, n_heads: int, n_shared: int):
        self.L, self.H, self.n_shared = int(n_layers), int(n_heads), int(n_shared)
        n = self.L * self.H
        #: Σ over the shared prompts done of each pair's mean JS over queries (bits) [L·H, L·H]
        self.js_sum = np.zeros((n, n))
        #: how many shared prompts are in ``js_sum``
        self.prompts = 0
        self._held: torch.Tensor | None = None  # [b, L·H, D] float16: the batch's rows so far
        self._entropy: torch.Tensor | None = None  # [b, L·H] float32: H of each head's held rows (nats)

    @property
    def nbytes(self) -> int:
        """Bytes held now: the sums, and the rows of the batch in flight (module docstring)."""
        held = self._held.numel() * 2 if self._held is not None else 0
        return self.js_sum.nbytes + held

    def offer(self, layer: int, w: np.ndarray, first: int, mask: np.ndarray) -> None:
        """Layer ``layer``'s weights ``w`` [B, H, T, T] of prompts ``first ..``, under the union
        ``mask`` [T, T] of the layers' masks: keep the shared prompts' rows and compare their heads with
        those of the layers before (module docstring)."""
        b = min(w.shape[0], self.n_shared - int(first))
        if b <= 0:
            return
        rows = informative_rows(mask)
        seen = np.asarray(mask, dtype=bool) & rows[:, None]  # the entries a compared query can see
        flat = torch.from_numpy(np.ascontiguousarray(w[:b][..., seen])).to(torch.float16)  # [b, H, D]
        H, n = self.H, self.L * self.H
        if layer == 0 or self._held is None:
            self._held = torch.zeros((b, n, flat.shape[-1]), dtype=torch.float16)
            self._entropy = torch.zeros((b, n))
        assert self._entropy is not None
        lo, hi = layer * H, (layer + 1) * H
        self._held[:, lo:hi] = flat
        p_new = flat.float()
        scale = 1.0 / (max(1, int(rows.sum())) * math.log(2))  # nats summed over R queries → mean bits
        with threads(1):  # many small products: two threads on two loaded cores took 18× as long
            self._entropy[:, lo:hi] = -torch.special.xlogy(p_new, p_new).sum(-1)
            self._compare(layer, p_new, scale)
        if layer == self.L - 1:
            self.prompts += b
            self._held = self._entropy = None

    def _compare(self, layer: int, p_new: torch.Tensor, scale: float) -> None:
        """Add the JS of layer ``layer``'s heads ``p_new`` [b, H, D] against every held head (of layers
        ``0 … layer``) to ``js_sum``, both ways round."""
        assert self._held is not None and self._entropy is not None
        H = self.H
        lo, hi = layer * H, (layer + 1) * H
        for prompt in range(len(p_new)):
            held = self._held[prompt, :hi].float()  # [(l+1)·H, D]: every head so far
            h_held = self._entropy[prompt, :hi]
            for h in range(H):
                m = 0.5 * (p_new[prompt, h] + held)
                js = -torch.special.xlogy(m, m).sum(-1) - 0.5 * (h_held[lo + h] + h_held)
                js = js.clamp_min(0.0).double().numpy() * scale
                self.js_sum[lo + h, :hi] += js
                self.js_sum[:lo, lo + h] += js[:lo]  # the pairs with earlier layers, both ways

    def matrix(self) -> np.ndarray:
        """``S`` [L·H, L·H] float64 (module docstring): symmetric, 1 on the diagonal; all 1 before any
        shared prompt."""
        s = 1.0 - np.clip(self.js_sum / max(1, self.prompts), 0.0, 1.0)
        s = 0.5 * (s + s.T)
        np.fill_diagonal(s, 1.0)
        return s


__all__ = ["PatternSimilarity"]
