"""What a corpus run keeps of each batch of prompts: per prompt one value per head and score, the top
examples' heaps, a mixture of experts' router load, and (its first prompts) the heads' pattern
similarity (:mod:`.patterns`); never a pattern [B, H, T, T] past its layer.

:class:`Collector` gives reading hooks (:func:`model.nn.hooks.reader`) on every layer's
``attn.pattern``, ``attn.z`` and (a mixture of experts) ``mlp.chosen``. The pattern hook reduces the
layer's square ``A`` [B, H, T, T] to scores [B, H] and lets it go: the forward pass writes the next
layer's pattern into the same buffer, so memory holds one layer's square at a time, whatever N (and,
for the shared prompts of the batch, every head's visible rows in float16 until the pass ends:
:class:`~model.interp.corpus.patterns.PatternSimilarity`).

Each score is the single-prompt function of :mod:`model.interp.analysis.head_scores` applied to the
batch (the Metrics page's own definitions, under each layer's mask as
:func:`~model.interp.measures.layer_masks` gives it), so a prompt's corpus score is its page score.
"""

from __future__ import annotations

import numpy as np
import torch

from model.interp.analysis.head_scores import (
    LOCAL_WINDOW,
    as_numpy,
    duplicate_token_score,
    induction_score,
    informative_rows,
    local_share,
    mean_distance,
    repeat_induction_score,
)
from model.interp.analysis.heads import head_metrics
from model.interp.corpus.examples import TopExamples
from model.interp.corpus.patterns import PatternSimilarity
from model.interp.measures import layer_masks
from model.nn.hooks import reader

#: Every score a corpus run measures per prompt and head, in the order of its arrays, with its formula
#: (``w`` = the head's attention weights, averaged over informative queries ``i`` unless said).
SCORES: dict[str, str] = {
    "prev_token": "w_{i,i-1}: weight on the previous token",
    "induction": "Σ w_{i,j+1} over earlier j with x_j = x_i: induction on the corpus's own repeats",
    "induction_random": "w_{i,i-P+1} on a random block repeated twice (period P): the Metrics page's",
    "duplicate_token": "Σ w_ij over earlier j with x_j = x_i: weight on earlier copies of the token",
    "sink": "w_{i,0}: weight on position 0 (BOS, the attention sink)",
    "entropy": "-Σ_j w_ij ln w_ij (nats)",
    "distance": "Σ_j w_ij (i - j): mean distance looked back (tokens)",
    "local": f"Σ_{{i-j<{LOCAL_WINDOW}}} w_ij: share on the last {LOCAL_WINDOW} keys (the query's own too)",
    "self_score": "w_ii: weight on the query itself",
}


class Collector:
    """Per-prompt scores ``values`` [n_scores, N, L, H] (float32, NaN where a prompt has no query a
    score counts), the top examples (:class:`~model.interp.corpus.examples.TopExamples`, one per
    kind), ``router_load`` [N, L, E] (fraction of a prompt's expert choices per expert; NaN in a dense
    layer) and ``similarity`` (the heads' patterns compared over the first ``shared`` prompts), filled
    batch by batch: set :meth:`at` before each forward pass."""

    def __init__(
        self, config, n_prompts: int, *, top_k: int, context: int, window: int, prefix: int, shared: int
    ):
        L, H = config.core.n_layers, config.attention.n_heads
        self.config = config
        self.window = int(window)
        self.prefix = int(prefix)
        self.values = np.full((len(SCORES), n_prompts, L, H), np.nan, dtype=np.float32)
        self.top = {
            "attention": TopExamples.empty("attention", L, H, top_k, context),
            "z": TopExamples.empty("z", L, H, top_k, context),
        }
        E = int(config.feed_forward.n_experts or 0)
        self.router_load = np.full((n_prompts, L, E), np.nan, dtype=np.float32) if E else None
        self.similarity = PatternSimilarity(L, H, min(int(shared), n_prompts))
        self._first = 0
        self._ids = np.zeros((0, 0), dtype=np.int64)
        self._masks: list = []
        self._support = np.zeros((0, 0), dtype=bool)  # [T, T]: what any layer's queries see
        self._best_key: dict[int, np.ndarray] = {}

    @property
    def nbytes(self) -> int:
        """Bytes of everything kept (the per-prompt rows grow with N; the rest is bounded by settings)."""
        arrays = [self.values, *(a for t in self.top.values() for a in _arrays(t))]
        if self.router_load is not None:
            arrays.append(self.router_load)
        return sum(a.nbytes for a in arrays) + self.similarity.nbytes

    def at(self, first: int, ids: np.ndarray) -> None:
        """The next forward pass reads prompts ``first ..`` whose ids are ``ids`` [B, T]."""
        self._first, self._ids = int(first), np.asarray(ids, dtype=np.int64)
        T = self._ids.shape[1]
        if not self._masks or self._masks[0].shape[-1] != T:
            self._masks = layer_masks(self.config, np.tril(np.ones((T, T), dtype=bool)))
            self._support = np.logical_or.reduce(self._masks)

    def hooks(self, points) -> list:
        pairs = []
        for layer in range(self.config.core.n_layers):
            pairs.append((f"blocks.{layer}.attn.pattern", self._pattern_hook(layer)))
            pairs.append((f"blocks.{layer}.attn.z", self._z_hook(layer)))
            if self.router_load is not None and f"blocks.{layer}.mlp.chosen" in points:
                pairs.append((f"blocks.{layer}.mlp.chosen", self._router_hook(layer)))
        return pairs

    # ---- the hooks -------------------------------------------------------------------------------
    def _pattern_hook(self, layer: int):
        @reader
        def fn(pattern: torch.Tensor, hook) -> None:
            self.pattern(layer, as_numpy(pattern))

        return fn

    def pattern(self, layer: int, w: np.ndarray) -> None:
        """Reduce layer ``layer``'s weights ``w`` [B, H, T, T] to every score and the top examples."""
        mask = self._masks[layer]
        ids = self._ids[:, None]  # [B, 1, T] against [B, H, T, T]
        m = head_metrics(w, mask)
        got = {
            "prev_token": m.prev_token,
            "induction": repeat_induction_score(w, ids),
            "duplicate_token": duplicate_token_score(w, ids),
            "sink": m.sink,
            "entropy": m.entropy,
            "distance": mean_distance(w, mask),
            "local": local_share(w, mask, self.window),
            "self_score": m.self_score,
        }
        rows = slice(self._first, self._first + w.shape[0])
        for s, name in enumerate(SCORES):
            if name in got:
                self.values[s, rows, layer] = got[name]
        # the top examples: queries that chose among two keys or more, keys after position 0 (the BOS,
        # or the first token a model without one parks weight on: the sink score's) and the prefix
        allowed = mask & informative_rows(mask)[:, None]
        allowed[:, : max(1, self.prefix)] = False
        masked = np.where(allowed, w, -np.inf)
        B, H, T, _ = w.shape
        flat = masked.reshape(B, H, T * T).argmax(-1)
        best = np.take_along_axis(masked.reshape(B, H, T * T), flat[..., None], -1)[..., 0]
        self.top["attention"].offer(layer, best, flat // T, flat % T, self._first, self._ids)
        self._best_key[layer] = masked.argmax(-1)  # [B, H, T]: the key each query weighted most
        self.similarity.offer(layer, w, self._first, self._support)

    def _z_hook(self, layer: int):
        @reader
        def fn(z: torch.Tensor, hook) -> None:
            norms = z.detach().float().norm(dim=-1).cpu().numpy()  # [B, H, T]
            rows = informative_rows(self._masks[layer])
            norms[..., ~rows] = -np.inf
            q = norms.argmax(-1)  # [B, H]
            value = np.take_along_axis(norms, q[..., None], -1)[..., 0]
            key = np.take_along_axis(self._best_key.pop(layer), q[..., None], -1)[..., 0]
            self.top["z"].offer(layer, value, q, key, self._first, self._ids)

        return fn

    def _router_hook(self, layer: int):
        load = self.router_load
        assert load is not None
        E = load.shape[-1]

        @reader
        def fn(chosen: torch.Tensor, hook) -> None:
            ids = chosen.detach().cpu().numpy().reshape(chosen.shape[0], -1)  # [B, T·k]
            for b, row in enumerate(ids):
                counts = np.bincount(row, minlength=E)[:E]
                load[self._first + b, layer] = counts / max(1, row.size)

        return fn

    # ---- induction on repeated random tokens ------------------------------------------------------
    def random_hooks(self, period: int) -> list:
        """Hooks for the pass over repeated random blocks of ``period`` tokens, twice
        (:func:`~model.interp.analysis.heads.repeated_sequence`): fill ``induction_random`` of the
        prompts :meth:`at` names."""
        s = list(SCORES).index("induction_random")

        def hook(layer: int):
            @reader
            def fn(pattern: torch.Tensor, h) -> None:
                w = as_numpy(pattern)
                rows = slice(self._first, self._first + w.shape[0])
                self.values[s, rows, layer] = induction_score(w, period)

            return fn

        return [(f"blocks.{layer}.attn.pattern", hook(layer)) for layer in range(self.config.core.n_layers)]


def _arrays(t: TopExamples) -> list[np.ndarray]:
    return [t.value, t.prompt, t.query, t.key, t.tokens]


__all__ = ["SCORES", "Collector"]
