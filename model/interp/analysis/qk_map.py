"""The joint query–key map of one head (AttentionViz, Yeh et al., IEEE VIS 2023).

A head (l, h) attends by the dot product of a query and a key: ``A[i, j] = softmax_j(s(q_i · k_j))``.
Sample tokens from a corpus (``N`` windows of ``T`` tokens, a fixed seed), take each token's query
``q_i`` and key ``k_i`` **as the softmax multiplies them** (after QK-norm and RoPE, the scale ``c``
folded into the query: ``c·q'`` and ``k'`` of ``Attention.scaled_qk``; under grouped-query attention
the key head ``h // n_rep`` that query head reads), and lay queries and keys out together in 2-D.

A projection keeps distances, not dot products. Two free parameters leave every softmax unchanged:

* **translate the keys** by one vector ``t``: ``q_i · (k_j + t) = q_i · k_j + q_i · t`` adds the same
  amount to every score of query ``i``'s row, and a softmax does not see it;
* **scale** the queries by ``α`` and the keys by ``1/α``: ``(α q) · (k/α) = q · k``.

They are chosen as the paper chooses them: the keys' centroid on the queries' centroid
(``t = mean(α q) − mean(k/α)``) and the mean norms equal (``mean ‖α q‖ = mean ‖k/α + t‖``; ``α`` by
bisection, both conditions hold exactly). Then ``‖q − k‖² = ‖q‖² + ‖k‖² − 2 q·k``: with the norms
alike, a query lies near the keys it attends to. How well that holds is measured, not assumed: the
Pearson correlation of distance ``‖q_i − k_j‖`` with the score ``q_i · k_j`` over pairs of one window
with ``j ≤ i`` (the pairs the causal softmax compares), in the full ``d_k`` space after the
normalisation (``corr_full``) and in the 2-D map (``corr_map``); strongly negative is good.

Embeddings: PCA (numpy SVD of the centred joint [2P, d_k] matrix, always) and t-SNE through openTSNE,
which, unlike scikit-learn's, has ``transform``: a typed prompt's queries and keys are placed into an
existing map (PCA: the same two axes). :func:`qk_map` makes a :class:`QKMap`; :func:`project_prompt`
adds a prompt's points; :func:`qk_thumbnails` gives every head of some layers a small PCA map
(AttentionViz's matrix view) from one pass per batch.

Not modelled in the map: soft-capping (monotone, so it keeps each row's order), attention sinks (an
extra logit in the denominator) and a sliding window (keys out of reach are still drawn).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from model.nn.hooks import reader
from model.progress import check, report

METHODS = ("pca", "tsne")


class QKMapError(ValueError):
    """A map that cannot be made from these inputs (a layer or head out of range, too few tokens):
    one line naming the input."""


@dataclass
class Normalisation:
    """The two free parameters: queries ``α q``, keys ``k/α + t`` (``t`` [d_k])."""

    alpha: float
    translation: np.ndarray

    def queries(self, q: np.ndarray) -> np.ndarray:
        return (self.alpha * q).astype(np.float32)

    def keys(self, k: np.ndarray) -> np.ndarray:
        return (k / self.alpha + self.translation).astype(np.float32)


def normalise(q: np.ndarray, k: np.ndarray) -> Normalisation:
    """``α`` and ``t`` for queries ``q`` [P, d_k] and keys ``k`` [P', d_k] (module docstring):
    ``t = α q̄ − k̄/α`` puts the centroids together, and ``α`` solves
    ``α·mean‖q‖ = mean‖k − k̄ + α² q̄‖ / α`` by bisection on ``log α`` (the left side grows faster)."""
    q64, k64 = q.astype(np.float64), k.astype(np.float64)
    q_norm = float(np.linalg.norm(q64, axis=1).mean())
    q_bar, k_centred = q64.mean(0), k64 - k64.mean(0)

    def gap(log_a: float) -> float:
        a = math.exp(log_a)
        return a * q_norm - float(np.linalg.norm(k_centred + a * a * q_bar, axis=1).mean()) / a

    lo, hi = -20.0, 20.0
    if q_norm == 0 or gap(lo) > 0 or gap(hi) < 0:  # degenerate: equal norms without the translation
        k_norm = float(np.linalg.norm(k64, axis=1).mean())
        alpha = math.sqrt(k_norm / q_norm) if q_norm > 0 and k_norm > 0 else 1.0
    else:
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if gap(mid) < 0 else (lo, mid)
        alpha = math.exp((lo + hi) / 2)
    t = alpha * q_bar - k64.mean(0) / alpha
    return Normalisation(alpha, t.astype(np.float32))


@dataclass
class Sample:
    """Queries and keys of sampled tokens of one head: ``q`` [P, d_k], ``k`` [P, d_k] (token ``i``'s
    own query and key), ``window`` [P] and ``position`` [P] of each token, ``ids`` [N, T] the windows,
    ``weight`` [P, 2] the head's attention: a query's largest weight, a key's mean weight received."""

    q: np.ndarray
    k: np.ndarray
    window: np.ndarray
    position: np.ndarray
    ids: np.ndarray
    weight: np.ndarray


def _head_hooks(model, layers: Sequence[int], keep: dict[int, list], pattern_head: tuple[int, int] | None):
    """Reader hooks that keep, per layer, ``(c·q' [B, H, T, d_k], k' [B, H_kv, T, d_k])`` as the softmax
    multiplies them (and the pattern of ``pattern_head``'s layer, [B, T, T] of that head)."""
    hooks: list[tuple[str, Any]] = []
    queries: dict[int, torch.Tensor] = {}
    for layer in layers:
        attn = model.blocks[layer].attn

        def on_q(layer=layer):
            @reader
            def fn(q, hook):
                queries[layer] = q

            return fn

        def on_k(layer=layer, attn=attn):
            @reader
            def fn(k, hook):  # the scaling rule of Attention.attend, the scale folded into the queries
                qs, ks, c = attn.scaled_qk(queries.pop(layer), k)
                keep[layer].append([(qs * c).float().cpu().clone(), ks.float().cpu().clone()])

            return fn

        pre = f"blocks.{layer}.attn."
        hooks += [(pre + "q", on_q()), (pre + "k", on_k())]
    if pattern_head is not None:
        layer, head = pattern_head

        @reader
        def on_pattern(p, hook):
            keep[layer][-1].append(p[:, head].float().cpu().clone())

        hooks.append((f"blocks.{layer}.attn.pattern", on_pattern))
    return hooks


def _windows(model, tokenizer, source, n_prompts: int, seq_len: int, seed: int) -> torch.Tensor:
    """``N`` windows [N, T] of ``source`` (a :class:`~model.text.datasource.DataSource`), each behind the
    tokenizer's prefix (a BOS) when it has one, drawn with ``seed``."""
    prefix = [int(i) for i in getattr(tokenizer, "prefix_ids", [])]
    if n_prompts < 1:
        raise QKMapError(f"prompts = {n_prompts}: take at least 1")
    if seq_len < len(prefix) + 2 or seq_len > model.config.core.context_length:
        raise QKMapError(
            f"seq-len = {seq_len}: must be from {len(prefix) + 2} to the model's context, "
            f"{model.config.core.context_length}"
        )
    gen = torch.Generator().manual_seed(seed)
    x, _ = source.get_batch("train", n_prompts, seq_len - len(prefix), gen)
    if prefix:
        x = torch.cat([torch.tensor(prefix, dtype=x.dtype).expand(x.shape[0], -1), x], dim=1)
    return x


def _check_head(config, layer: int, head: int | None = None) -> None:
    if not 0 <= layer < config.core.n_layers:
        raise QKMapError(f"layer {layer}: the model has layers 0 to {config.core.n_layers - 1}")
    if head is not None and not 0 <= head < config.attention.n_heads:
        raise QKMapError(f"head {head}: the model has heads 0 to {config.attention.n_heads - 1}")


def _points(N: int, T: int, first: int, max_points: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The tokens sampled from ``N`` windows of ``T``: ``(window [P], position [P])``, every position from
    ``first`` on (the prefix is never sampled), at most ``max_points`` of them drawn with ``seed``, in
    order."""
    w, p = np.divmod(np.arange(N * (T - first)), T - first)
    if len(w) > max_points:
        pick = np.sort(np.random.default_rng(seed).choice(len(w), max_points, replace=False))
        w, p = w[pick], p[pick]
    return w, p + first


def _run(model, x: torch.Tensor, layers: Sequence[int], w: np.ndarray, p: np.ndarray, pattern_head=None,
         batch: int = 8) -> dict[int, list[np.ndarray]]:  # fmt: skip
    """Forward passes of the windows ``x`` [N, T] in batches; per layer, ``[q [P, H, d_k], k [P, H_kv,
    d_k]]`` of the sampled tokens (window ``w``, position ``p``), plus, for ``pattern_head``'s layer,
    ``weight`` [P, 2] (a query's largest weight; a key's mean weight over the queries that see it).
    Each batch's activations are dropped once its sampled tokens are taken: memory grows with the
    points, not with the windows."""
    from model.interp.trace import eval_mode

    keep: dict[int, list] = {layer: [] for layer in layers}
    got: dict[int, list[list[torch.Tensor]]] = {layer: [[], [], []] for layer in layers}
    n, T = x.shape
    seen = torch.arange(T, 0, -1, dtype=torch.float32)  # key j is seen by the T − j queries i ≥ j
    with torch.no_grad(), eval_mode(model), model.hooks(_head_hooks(model, layers, keep, pattern_head)):
        for i in range(0, n, batch):
            check()
            model(x[i : i + batch].to(model.device))
            mine = (w >= i) & (w < i + batch)
            rows, cols = torch.as_tensor(w[mine] - i), torch.as_tensor(p[mine])
            for layer in layers:
                q, k, *pattern = keep[layer].pop()
                got[layer][0].append(q[rows, :, cols])  # [n, H, d_k]
                got[layer][1].append(k[rows, :, cols])
                if pattern:
                    a = pattern[0]  # [B, T, T]
                    got[layer][2].append(
                        torch.stack([a.amax(-1)[rows, cols], (a.sum(1) / seen)[rows, cols]], 1)
                    )
            report(min(n, i + batch), n, "prompts")
    return {layer: [torch.cat(parts).numpy() for parts in got[layer] if parts] for layer in layers}


def sample_head(
    model, tokenizer, source, layer: int, head: int, *, n_prompts: int = 64, seq_len: int = 32,
    max_points: int = 2000, seed: int = 0,
) -> Sample:  # fmt: skip
    """Queries and keys of head (``layer``, ``head``) at up to ``max_points`` tokens drawn (``seed``) from
    ``n_prompts`` windows of ``seq_len`` tokens of ``source``; the tokenizer's prefix is read but never
    sampled (a BOS key would sit far from everything and squeeze the map)."""
    cfg = model.config
    _check_head(cfg, layer, head)
    x = _windows(model, tokenizer, source, n_prompts, seq_len, seed)
    N, T = x.shape
    w, p = _points(N, T, len(getattr(tokenizer, "prefix_ids", [])), max_points, seed)
    q, k, weight = _run(model, x, [layer], w, p, pattern_head=(layer, head))[layer]
    return Sample(q[:, head], k[:, head // cfg.n_rep], w, p, x.numpy(), weight.astype(np.float32))


def distance_correlation(q: np.ndarray, k: np.ndarray, window: np.ndarray, position: np.ndarray,
                         *, pairs: int = 50_000, seed: int = 0) -> float:  # fmt: skip
    """Pearson correlation of ``‖q_i − k_j‖`` with ``q_i · k_j`` over pairs of one window with key
    position ≤ query position (at most ``pairs`` of them, drawn with ``seed``); ``q``, ``k`` [P, D]
    (any D: the full space, or the 2-D map). NaN with fewer than 3 pairs."""
    same = (window[:, None] == window[None, :]) & (position[None, :] <= position[:, None])
    i, j = np.nonzero(same)
    if len(i) > pairs:
        pick = np.random.default_rng(seed).choice(len(i), pairs, replace=False)
        i, j = i[pick], j[pick]
    if len(i) < 3:
        return float("nan")
    qi, kj = q[i].astype(np.float64), k[j].astype(np.float64)
    dist = np.linalg.norm(qi - kj, axis=1)
    dot = np.einsum("pd,pd->p", qi, kj)
    if dist.std() == 0 or dot.std() == 0:
        return float("nan")
    return float(np.corrcoef(dist, dot)[0, 1])


@dataclass
class PCA:
    """Two principal axes of the joint points: ``project(x) = (x − mean) @ axesᵀ`` [.., 2]."""

    mean: np.ndarray
    axes: np.ndarray  # [2, D]

    @classmethod
    def fit(cls, x: np.ndarray) -> PCA:
        mean = x.mean(0)
        _, _, vt = np.linalg.svd(x - mean, full_matrices=False)
        axes = np.zeros((2, x.shape[1]), np.float32)
        axes[: min(2, len(vt))] = vt[:2]
        return cls(mean.astype(np.float32), axes)

    def project(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) @ self.axes.T).astype(np.float32)


def _tsne(x: np.ndarray, seed: int):
    """openTSNE's embedding of ``x`` [P, D] (it keeps what ``transform`` needs), cancellable between
    iterations; progress in iterations."""
    from openTSNE import TSNE

    total = 750  # openTSNE's early exaggeration (250) + optimisation (500) iterations
    done = [0]

    def step(iteration, error, embedding):
        done[0] += 10
        check()
        report(min(done[0], total), total, "t-SNE iterations")
        return False

    tsne = TSNE(
        n_components=2, perplexity=min(30.0, max(2.0, (len(x) - 1) / 3)), random_state=seed, n_jobs=1,
        callbacks=step, callbacks_every_iters=10, verbose=False,
    )  # fmt: skip
    return tsne.fit(x)


@dataclass
class QKMap:
    """One head's joint query–key map (module docstring).

    Points ``P`` = the sampled queries, then the sampled keys: ``points`` [P, 2], ``vectors`` [P, d_k]
    (after the normalisation), ``is_query`` [P], ``window`` [P] (which sampled window; −1 for a typed
    prompt's points), ``position`` [P], ``token`` [P] (its text), ``weight`` [P] (a query's largest
    attention weight, a key's mean weight received); ``windows`` [N, T] the sampled token ids.
    ``corr_full`` / ``corr_map``: Pearson(distance, dot product) in d_k and in the map.
    """

    layer: int
    head: int
    kv_head: int
    method: str
    norm: Normalisation
    points: np.ndarray
    vectors: np.ndarray
    is_query: np.ndarray
    window: np.ndarray
    position: np.ndarray
    token: list[str]
    weight: np.ndarray
    windows: np.ndarray
    corr_full: float
    corr_map: float
    notes: list[str] = field(default_factory=list)
    #: what places new points: a :class:`PCA`, or openTSNE's embedding (its ``transform``)
    projector: Any = None

    def place(self, x: np.ndarray) -> np.ndarray:
        """Points [n, 2] of normalised vectors ``x`` [n, d_k] in this map."""
        if self.method == "pca":
            return self.projector.project(x)
        return np.asarray(self.projector.transform(x.astype(np.float64)), dtype=np.float32)

    def arrays(self) -> dict[str, np.ndarray]:
        """The map as plain arrays (for ``.npz``; no objects)."""
        return {
            "points": self.points, "is_query": self.is_query, "window": self.window,
            "position": self.position, "token": np.array(self.token, dtype=str), "weight": self.weight,
            "corr_full": np.float64(self.corr_full), "corr_map": np.float64(self.corr_map),
            "alpha": np.float64(self.norm.alpha), "translation": self.norm.translation,
            "layer": np.int64(self.layer), "head": np.int64(self.head), "method": np.array(self.method),
        }  # fmt: skip


def qk_map(
    model, tokenizer, source, layer: int, head: int, *, n_prompts: int = 64, seq_len: int = 32,
    method: str = "pca", max_points: int = 2000, seed: int = 0,
) -> QKMap:  # fmt: skip
    """The joint map of head (``layer``, ``head``) over ``source`` (:func:`sample_head`), embedded by
    ``method`` ("pca" or "tsne"), with both correlations."""
    if method not in METHODS:
        raise QKMapError(f"method {method!r}: use {' or '.join(METHODS)}")
    s = sample_head(model, tokenizer, source, layer, head, n_prompts=n_prompts, seq_len=seq_len,
                    max_points=max_points, seed=seed)  # fmt: skip
    norm = normalise(s.q, s.k)
    qn, kn = norm.queries(s.q), norm.keys(s.k)
    joint = np.concatenate([qn, kn])
    if method == "pca":
        projector: Any = PCA.fit(joint)
        points = projector.project(joint)
    else:
        projector = _tsne(joint, seed)
        points = np.asarray(projector, dtype=np.float32)
    P = len(qn)
    texts = tokenizer.token_strings([int(i) for i in s.ids[s.window, s.position]])
    corr_full = distance_correlation(qn, kn, s.window, s.position, seed=seed)
    corr_map = distance_correlation(points[:P], points[P:], s.window, s.position, seed=seed)
    notes = [
        f"queries ×{norm.alpha:.3g}, keys ÷{norm.alpha:.3g} and moved by ‖t‖ = "
        f"{float(np.linalg.norm(norm.translation)):.3g}: every softmax unchanged"
    ]
    return QKMap(
        layer, head, head // model.config.n_rep, method, norm, points, joint,
        np.r_[np.ones(P, bool), np.zeros(P, bool)], np.r_[s.window, s.window], np.r_[s.position, s.position],
        texts + texts, np.r_[s.weight[:, 0], s.weight[:, 1]], s.ids, corr_full, corr_map, notes, projector,
    )  # fmt: skip


@dataclass
class PromptPoints:
    """A typed prompt's queries then keys in a map: ``points`` [2T, 2], ``is_query`` [2T],
    ``position`` [2T], ``token`` [2T] (the prefix's tokens left out, as in the map)."""

    points: np.ndarray
    is_query: np.ndarray
    position: np.ndarray
    token: list[str]


def project_prompt(model, tokenizer, qmap: QKMap, ids: Sequence[int]) -> PromptPoints:
    """The queries and keys of token ``ids`` at ``qmap``'s head, normalised as the map's were (the same
    ``α`` and ``t``) and placed by its projector (PCA's axes, or openTSNE's ``transform``)."""
    ids = [int(i) for i in ids]
    x = torch.as_tensor(ids, dtype=torch.long)[None]
    prefix = [int(i) for i in getattr(tokenizer, "prefix_ids", [])]
    first = (
        len(prefix) if ids[: len(prefix)] == prefix and len(ids) > len(prefix) else 0
    )  # as the map: no BOS
    _, pos = _points(1, x.shape[1], first, x.shape[1], 0)
    q_all, k_all = _run(model, x, [qmap.layer], np.zeros_like(pos), pos)[qmap.layer]
    q = qmap.norm.queries(q_all[:, qmap.head])
    k = qmap.norm.keys(k_all[:, qmap.kv_head])
    T = len(q)
    texts = tokenizer.token_strings([int(i) for i in x[0, first:]])
    return PromptPoints(qmap.place(np.concatenate([q, k])), np.r_[np.ones(T, bool), np.zeros(T, bool)],
                        np.r_[pos, pos], texts + texts)  # fmt: skip


@dataclass
class Thumbnails:
    """Every head's small PCA map of some layers: ``points`` [L', H, 2P, 2] (queries, then keys, each
    head's scaled into [−1, 1]), ``corr_full`` [L', H]; ``layers`` the layers, in order."""

    layers: list[int]
    points: np.ndarray
    corr_full: np.ndarray

    @property
    def n_points(self) -> int:
        return self.points.shape[2] // 2


def qk_thumbnails(
    model, tokenizer, source, layers: Sequence[int] | None = None, *, n_prompts: int = 16,
    seq_len: int = 32, max_points: int = 150, seed: int = 0,
) -> Thumbnails:  # fmt: skip
    """Each head of ``layers`` (None: all) as a PCA map of up to ``max_points`` queries and keys, from
    one forward pass per batch of windows (AttentionViz's matrix view)."""
    cfg = model.config
    layers = list(range(cfg.core.n_layers)) if layers is None else sorted({int(i) for i in layers})
    for layer in layers:
        _check_head(cfg, layer)
    x = _windows(model, tokenizer, source, n_prompts, seq_len, seed)
    N, T = x.shape
    w, p = _points(N, T, len(getattr(tokenizer, "prefix_ids", [])), max_points, seed)
    kept = _run(model, x, layers, w, p)
    P = len(w)
    out = np.zeros((len(layers), cfg.attention.n_heads, 2 * P, 2), np.float32)
    corr = np.full((len(layers), cfg.attention.n_heads), np.nan, np.float32)
    for row, layer in enumerate(layers):
        q_all, k_all = kept[layer]  # [P, H, d_k], [P, H_kv, d_k]
        for h in range(cfg.attention.n_heads):
            check()
            q, k = q_all[:, h], k_all[:, h // cfg.n_rep]
            norm = normalise(q, k)
            joint = np.concatenate([norm.queries(q), norm.keys(k)])
            pts = PCA.fit(joint).project(joint)
            scale = float(np.abs(pts).max()) or 1.0
            out[row, h] = pts / scale
            corr[row, h] = distance_correlation(joint[:P], joint[P:], w, p, seed=seed, pairs=5000)
    return Thumbnails(layers, out, corr)


__all__ = [
    "METHODS",
    "PCA",
    "Normalisation",
    "PromptPoints",
    "QKMap",
    "QKMapError",
    "Thumbnails",
    "distance_correlation",
    "normalise",
    "project_prompt",
    "qk_map",
    "qk_thumbnails",
    "sample_head",
]
