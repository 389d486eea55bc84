"""Intervals over prompts, and heads that behave alike.

:func:`bootstrap_interval`: the percentile bootstrap of a mean over prompts. Resampling ``N`` prompts
with replacement ``R`` times is a count matrix ``C`` [R, N] (multinomial rows, fixed seed; drawn
:data:`BOOTSTRAP_CHUNK` rows at a time), so every
resample's mean of every head at once is one product ``C X / C 1`` with ``X`` [N, L·H]; a prompt where
a score is undefined (NaN: no repeated token, say) counts in neither sum. The interval is the 2.5th and
97.5th percentiles of the ``R`` means.

:func:`cluster_heads`: each head as the vector of its corpus scores, each score standardised over the
heads (``z = (s − mean) / std``); average-linkage agglomerative clustering of those vectors
(Euclidean) cut into ``n_clusters`` groups, each named by its dominant score (the highest mean ``z``
among its heads); and a 2-D placement, the first two principal components of the same vectors. Given
the heads' pattern similarity ``S`` [L·H, L·H] (:mod:`.patterns`), the same grouping and naming of the
distances ``d = √(1 − S)`` instead, placed by their classical MDS.

Both placements are one computation, :func:`plane`: the top two eigenvectors of a doubly centred Gram
matrix ``B = −½ J D⁽²⁾ J`` (``J = I − 11ᵀ/n``, ``D⁽²⁾`` the squared distances) scaled by the square
roots of their eigenvalues. For the scores ``B = z_c z_cᵀ`` (``z_c`` the centred vectors: classical MDS
of Euclidean distances is their PCA); for the patterns ``D⁽²⁾ = 1 − S``, so ``B = ½ J S J``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

#: The seed of every bootstrap, so a result is the same on every run of the same settings.
BOOTSTRAP_SEED = 0
#: Resamples drawn at a time: the counts held are [chunk, N], not [R, N].
BOOTSTRAP_CHUNK = 100


def bootstrap_interval(
    per_prompt: np.ndarray, resamples: int = 1000, *, level: float = 0.95, seed: int = BOOTSTRAP_SEED
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(mean, low, high)`` of ``per_prompt`` [N, ...] over its first axis, each [...]: the mean over
    prompts (NaN ignored) and its ``level`` percentile-bootstrap interval over ``resamples`` resamples."""
    x = np.asarray(per_prompt, dtype=np.float64)
    N = x.shape[0]
    flat = x.reshape(N, -1)
    finite = np.isfinite(flat)
    values = np.where(finite, flat, 0.0)
    rng = np.random.default_rng(seed)
    means = np.empty((int(resamples), flat.shape[1]))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = values.sum(0) / finite.sum(0)
        for r in range(0, int(resamples), BOOTSTRAP_CHUNK):  # [chunk, N] counts at a time
            counts = rng.multinomial(N, np.full(N, 1.0 / N), size=min(BOOTSTRAP_CHUNK, resamples - r))
            counts = counts.astype(np.float64)
            means[r : r + len(counts)] = (counts @ values) / (counts @ finite)
    alpha = (1.0 - level) / 2
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a score no prompt defines: NaN, said so
        low, high = np.nanpercentile(means, [100 * alpha, 100 * (1 - alpha)], axis=0) if N else (mean, mean)
    shape = x.shape[1:]
    return mean.reshape(shape), np.asarray(low).reshape(shape), np.asarray(high).reshape(shape)


@dataclass
class HeadClusters:
    """Heads grouped by how alike they are (their scores, or their patterns): ``labels`` [L, H] (cluster
    index), ``names`` (one per cluster, its dominant score; a name used twice gets ``#2``), ``profile``
    [n_clusters, n_scores] (each cluster's mean standardised score), ``coords`` [L, H, 2] (the plane,
    :func:`plane`) and ``explained`` [2] (the share of the variance each axis carries)."""

    labels: np.ndarray
    names: list[str]
    profile: np.ndarray
    coords: np.ndarray
    explained: np.ndarray


def standardised(scores: np.ndarray) -> np.ndarray:
    """Heads × scores ``[n_heads, n_scores]`` with each column as ``z = (s − mean) / std`` (NaN → 0, a
    constant column → 0)."""
    x = np.where(np.isfinite(scores), scores, np.nan)
    mean = np.nanmean(x, axis=0) if x.size else np.zeros(x.shape[1])
    std = np.nanstd(x, axis=0) if x.size else np.ones(x.shape[1])
    z = (x - np.nan_to_num(mean)) / np.where(np.nan_to_num(std) > 1e-12, std, 1.0)
    return np.nan_to_num(z, nan=0.0)


def _average_linkage(d: np.ndarray, n_clusters: int) -> np.ndarray:
    """Cluster labels of ``n`` items at distances ``d`` [n, n] by average-linkage agglomeration, stopped
    at ``n_clusters``."""
    n = len(d)
    d = np.array(d, dtype=np.float64)
    np.fill_diagonal(d, np.inf)
    size = np.ones(n)
    members = {i: [i] for i in range(n)}
    alive = np.ones(n, dtype=bool)
    while alive.sum() > n_clusters:
        i, j = np.unravel_index(np.argmin(d), d.shape)
        a, b = int(min(i, j)), int(max(i, j))
        merged = (size[a] * d[a] + size[b] * d[b]) / (size[a] + size[b])  # Lance–Williams, average
        d[a], d[:, a] = merged, merged
        d[a, a] = np.inf
        d[b], d[:, b] = np.inf, np.inf
        size[a] += size[b]
        alive[b] = False
        members[a] += members.pop(b)
    labels = np.empty(n, dtype=np.int64)
    order = sorted(members.values(), key=lambda m: (-len(m), m[0]))  # the largest cluster first
    for c, rows in enumerate(order):
        labels[rows] = c
    return labels


def plane(gram: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Classical MDS: ``(coords [n, 2], explained [2])`` of items whose doubly centred Gram matrix is
    ``gram`` ``B`` [n, n] (module docstring): ``coords[:, k] = √λ_k v_k`` for the two largest eigenvalues
    ``λ_k`` of ``B`` (each axis's sign set so that its largest coordinate is positive), ``explained[k] =
    λ_k / Σ λ⁺`` (negative eigenvalues, rounding's, count as 0)."""
    b = 0.5 * (gram + gram.T)
    n = len(b)
    coords, explained = np.zeros((n, 2)), np.zeros(2)
    if n == 0:
        return coords, explained
    lam, vec = np.linalg.eigh(b)  # ascending
    lam, vec = lam[::-1], vec[:, ::-1]
    total = float(np.clip(lam, 0.0, None).sum())
    for k in range(min(2, n)):
        if lam[k] <= 1e-12 * max(1.0, total):
            break
        axis = vec[:, k] * np.sqrt(lam[k])
        coords[:, k] = axis if axis.max() >= -axis.min() else -axis
        explained[k] = lam[k] / total
    return coords, explained


def cluster_heads(
    mean_scores: np.ndarray,
    score_names: list[str],
    n_clusters: int = 6,
    *,
    similarity: np.ndarray | None = None,
) -> HeadClusters:
    """:class:`HeadClusters` of heads whose corpus scores are ``mean_scores`` [n_scores, L, H], grouped
    and placed by those scores, or (``similarity``: their pattern similarity ``S`` [L·H, L·H],
    :mod:`.patterns`) by the distances ``√(1 − S)``; named by their scores either way."""
    S, L, H = mean_scores.shape
    z = standardised(mean_scores.reshape(S, L * H).T)  # [L·H, S]
    k = max(1, min(int(n_clusters), L * H))
    if similarity is None:
        centred = z - z.mean(0)
        gram = centred @ centred.T
        d = np.sqrt(((z[:, None, :] - z[None, :, :]) ** 2).sum(-1))
    else:
        s = np.asarray(similarity, dtype=np.float64)
        j = np.eye(L * H) - 1.0 / (L * H)
        gram = 0.5 * j @ s @ j
        d = np.sqrt(np.clip(1.0 - s, 0.0, None))
    labels = _average_linkage(d, k)
    profile = np.stack([z[labels == c].mean(0) for c in range(k)])
    names: list[str] = []
    for c in range(k):
        name = score_names[int(np.argmax(profile[c]))]
        seen = sum(1 for n in names if n == name or n.startswith(f"{name} #"))
        names.append(f"{name} #{seen + 1}" if seen else name)
    coords, explained = plane(gram)
    return HeadClusters(labels.reshape(L, H), names, profile, coords.reshape(L, H, 2), explained)


__all__ = ["BOOTSTRAP_SEED", "HeadClusters", "bootstrap_interval", "cluster_heads", "plane", "standardised"]
