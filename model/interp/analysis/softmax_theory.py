"""Softmax saturation in theory: what the 1/√d_k scale does to attention, measured by sampling.

For a head size ``d_k`` draw query ``q`` and ``n_keys`` keys ``k_j`` with independent unit-variance
components. The raw score ``s_j = q · k_j = Σ_m q_m k_m`` sums ``d_k`` products of mean 0 and variance
1, so ``Var(s_j) = d_k``: its standard deviation is ``√d_k`` (8 at d_k = 64, 11.3 at 128). A softmax
over such widely spread logits is nearly one-hot and its Jacobian ``J = diag(p) − p pᵀ`` nearly
vanishes, so gradients stall. The variants put a scale somewhere (the logits ``z_j`` fed to softmax):

=================  ==============================================  ===========================
variant            logits ``z_j``                                  std of ``z``
=================  ==============================================  ===========================
``unscaled``       ``q · k_j``                                     ``√d_k``
``scaled``         ``q · k_j / √d_k``                              1
``temperature``    ``q · k_j / τ`` (a fixed τ, default 8 = √64)     ``√d_k / τ``
``cosine``         ``g · cos(q, k_j)`` (QK-norm; gain ``g``)        ``≈ g / √d_k``
``init``           ``q' · k'_j`` with q', k' of std ``d_k^(-1/4)``   1
=================  ==============================================  ===========================

``cosine`` uses ``g = √d_k`` (the model's qk_norm init) unless a fixed ``gain`` is given; ``init`` is
the scale baked into ``W_Q`` and ``W_K`` (q and k of std ``d_k^(-1/4)``), identical to ``scaled``
at initialisation (the difference appears only in training: the learning rate then acts on a
rescaled parameter). Per row ``p = softmax(z)`` the measured numbers are averaged over rows:

* ``score_std``: standard deviation of ``z`` over all sampled logits
* ``max_weight``: ``max_j p_j`` (1/n_keys = uniform, 1 = one-hot)
* ``entropy``: ``−Σ p_j ln p_j`` in nats (at most ``ln n_keys``)
* ``jacobian_norm``: Frobenius norm ``‖diag(p) − p pᵀ‖_F = √(Σp² − 2Σp³ + (Σp²)²)``
  (≈ ``1/√n_keys`` for uniform p, 0 for one-hot)
* ``vanished``: the share of rows whose ``‖J‖_F`` is below a tenth of a uniform row's,
  ``√(1/n − 1/n²) / 10``: rows that pass back all but no gradient

The mean ``‖J‖_F`` is not monotone in the spread: as weight gathers on a few keys the Jacobian first
*grows* (a uniform row's is small, ≈ 1/√n; two keys sharing it equally give 0.5), and it shrinks
only once one key takes almost everything. The mean over rows mixes rows still in the rise with
rows already one-hot, so the gradient vanishes row by row (``vanished``) before it does on average.
With 64 keys the unscaled mean falls below the scaled one between d_k = 64 and 128.

Everything is seeded: the same arguments give the same numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

VARIANTS = ("unscaled", "scaled", "temperature", "cosine", "init")
#: The lab's default d_k grid: powers of two and their midpoints from 1 to 512.
D_K_GRID = np.unique(np.round(np.geomspace(1, 512, 19)).astype(int))


def _sample_qk(d_k: int, n_rows: int, n_keys: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit-variance q [n_rows, d_k] and k [n_rows, n_keys, d_k]; the same draw for every variant."""
    if d_k < 1:
        raise ValueError(f"d_k must be at least 1, got {d_k}")
    rng = np.random.default_rng([seed, d_k])
    q = rng.standard_normal((n_rows, d_k), dtype=np.float32)
    k = rng.standard_normal((n_rows, n_keys, d_k), dtype=np.float32)
    return q, k


def _logits(q: np.ndarray, k: np.ndarray, variant: str, temperature: float, gain: float | None) -> np.ndarray:
    d_k = q.shape[-1]
    if variant not in VARIANTS:
        raise ValueError(f"variant {variant!r} is not one of {', '.join(VARIANTS)}")
    raw = np.matmul(k, q[:, :, None])[..., 0].astype(np.float64)  # [n_rows, n_keys], q · k_j
    if variant == "unscaled":
        return raw
    if variant == "scaled":
        return raw / np.sqrt(d_k)
    if variant == "init":
        c = d_k**-0.25  # q' = c q, k' = c k  →  q' · k' = c² q · k
        return raw * c * c
    if variant == "temperature":
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        return raw / temperature
    g = np.sqrt(d_k) if gain is None else float(gain)
    norms = np.linalg.norm(q, axis=-1)[:, None].astype(np.float64) * np.linalg.norm(k, axis=-1)
    return g * raw / np.maximum(norms, 1e-30)


def sample_logits(
    d_k: int,
    variant: str = "scaled",
    *,
    n_rows: int = 512,
    n_keys: int = 64,
    temperature: float = 8.0,
    gain: float | None = None,
    seed: int = 0,
) -> np.ndarray:
    """Sampled softmax inputs ``z`` [n_rows, n_keys] for one ``variant`` at head size ``d_k``.

    Each row is one query against ``n_keys`` keys (the table in the module docstring). All variants
    transform the same draw of q and k (common random numbers), so their curves differ only by the
    scaling rule; ``init`` is then exactly ``scaled``, which is the point: at initialisation the scale
    in the weights and the scale in the formula are the same thing.
    """
    q, k = _sample_qk(d_k, n_rows, n_keys, seed)
    return _logits(q, k, variant, temperature, gain)


def softmax_rows(z: np.ndarray) -> np.ndarray:
    """Row-wise softmax of logits [..., n] (−∞ entries get weight 0; large logits do not overflow).

    Same dtype as ``z`` (float32 or float64).
    """
    z = np.asarray(z)
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def jacobian_norm(p: np.ndarray) -> np.ndarray:
    """Frobenius norm of the softmax Jacobian ``diag(p) − p pᵀ`` of each row: [..., n] → [...]."""
    s2 = (p * p).sum(-1)
    s3 = (p * p * p).sum(-1)
    return np.sqrt(np.maximum(s2 - 2 * s3 + s2 * s2, 0.0))


@dataclass
class SoftmaxStats:
    """The four measured numbers for one set of sampled logits (see the module docstring)."""

    score_std: float
    max_weight: float
    entropy: float
    jacobian_norm: float
    vanished: float


def uniform_jacobian_norm(n_keys: int) -> float:
    """``‖diag(p) − p pᵀ‖_F`` of a uniform row of ``n_keys``: √(1/n − 1/n²)."""
    return float(np.sqrt(1 / n_keys - 1 / n_keys**2))


#: a row's gradient has "vanished" below this share of a uniform row's Jacobian norm
VANISHED_SHARE = 0.1


def softmax_stats(z: np.ndarray) -> SoftmaxStats:
    """Measure logits ``z`` [rows, n_keys]: their std, and the mean max weight, entropy, Jacobian norm,
    and the share of rows whose Jacobian norm is below ``VANISHED_SHARE`` of a uniform row's."""
    p = softmax_rows(z)
    plogp = np.where(p > 0, p * np.log(np.where(p > 0, p, 1.0)), 0.0)
    jac = jacobian_norm(p)
    return SoftmaxStats(
        score_std=float(z.std()),
        max_weight=float(p.max(-1).mean()),
        entropy=float(-plogp.sum(-1).mean()),
        jacobian_norm=float(jac.mean()),
        vanished=float((jac < VANISHED_SHARE * uniform_jacobian_norm(z.shape[-1])).mean()),
    )


def theory_summary(d_k: int, unscaled: SoftmaxStats, scaled: SoftmaxStats) -> str:
    """What the sampled numbers at ``d_k`` say about the unscaled softmax's gradient, against the
    scaled one: the ratio of the mean Jacobian norms ``r = ‖J‖_unscaled / ‖J‖_scaled`` in words that
    follow its side of 1, and both shares of rows whose gradient vanished. The lab's "What to notice"
    is this sentence, so it never says more than its table shows."""
    ratio = unscaled.jacobian_norm / scaled.jacobian_norm if scaled.jacobian_norm > 0 else float("inf")
    head = (
        f"at d_k = {d_k} the unscaled scores spread {unscaled.score_std:.1f} wide and put "
        f"{unscaled.max_weight:.2f} on the top key on average (scaled: {scaled.max_weight:.2f}); "
    )
    if ratio < 1:
        jac = (
            f"the unscaled softmax Jacobian averages {unscaled.jacobian_norm:.4f}, {ratio:.2f}× the scaled "
            f"{scaled.jacobian_norm:.4f}"
        )
    else:
        jac = (
            f"the unscaled softmax Jacobian averages {unscaled.jacobian_norm:.4f}, still {ratio:.2f}× the "
            f"scaled {scaled.jacobian_norm:.4f}: its rows are peaked but not yet one-hot, where the Jacobian "
            "is largest (raise d_k to watch it fall)"
        )
    rows = (
        f"{unscaled.vanished:.0%} of the unscaled rows pass back under a tenth of a uniform row's "
        f"gradient (scaled: {scaled.vanished:.0%})"
    )
    verdict = (
        "the gradient vanishes row by row"
        if unscaled.vanished > scaled.vanished
        else "no row's gradient has vanished yet"
    )
    return f"{head}{jac}; {rows}: {verdict}."


@dataclass
class SoftmaxCurves:
    """One variant's numbers over a d_k grid: every array [G] aligned with ``d_k``.

    ``expected_std`` is the theoretical std of the logits (NaN where there is no simple formula);
    ``uniform_entropy`` = ln n_keys and ``uniform_jacobian`` = √(1/n − 1/n²) are the flat references.
    """

    variant: str
    d_k: np.ndarray
    score_std: np.ndarray
    max_weight: np.ndarray
    entropy: np.ndarray
    jacobian_norm: np.ndarray
    expected_std: np.ndarray
    n_keys: int

    @property
    def uniform_entropy(self) -> float:
        return float(np.log(self.n_keys))

    @property
    def uniform_jacobian(self) -> float:
        return uniform_jacobian_norm(self.n_keys)


def expected_std(variant: str, d_k, *, temperature: float = 8.0, gain: float | None = None) -> np.ndarray:
    """Theoretical std of the logits: √d_k, 1, √d_k/τ, g/√d_k (≈, cosine; 1 when g = √d_k), 1."""
    d = np.asarray(d_k, dtype=np.float64)
    if variant == "unscaled":
        return np.sqrt(d)
    if variant in ("scaled", "init"):
        return np.ones_like(d)
    if variant == "temperature":
        return np.sqrt(d) / temperature
    if variant == "cosine":
        return np.ones_like(d) if gain is None else float(gain) / np.sqrt(d)
    raise ValueError(f"variant {variant!r} is not one of {', '.join(VARIANTS)}")


def softmax_curves(
    d_ks: Iterable[int] = D_K_GRID,
    variants: Iterable[str] = VARIANTS,
    *,
    n_rows: int = 512,
    n_keys: int = 64,
    temperature: float = 8.0,
    gain: float | None = None,
    seed: int = 0,
) -> dict[str, SoftmaxCurves]:
    """:class:`SoftmaxCurves` for each variant over ``d_ks`` (the lab's theory panel), by sampling."""
    d_ks = np.asarray(list(d_ks), dtype=int)
    variants = list(variants)
    stats: dict[str, list[SoftmaxStats]] = {v: [] for v in variants}
    for d in d_ks:
        q, k = _sample_qk(int(d), n_rows, n_keys, seed)
        for v in variants:
            stats[v].append(softmax_stats(_logits(q, k, v, temperature, gain)))
    return {
        v: SoftmaxCurves(
            variant=v,
            d_k=d_ks,
            score_std=np.array([s.score_std for s in stats[v]]),
            max_weight=np.array([s.max_weight for s in stats[v]]),
            entropy=np.array([s.entropy for s in stats[v]]),
            jacobian_norm=np.array([s.jacobian_norm for s in stats[v]]),
            expected_std=expected_std(v, d_ks, temperature=temperature, gain=gain),
            n_keys=n_keys,
        )
        for v in variants
    }


def score_histogram(
    d_k: int, variant: str = "unscaled", *, bins: int = 60, limit: float | None = None, **kwargs
) -> tuple[np.ndarray, np.ndarray]:
    """(bin edges [bins+1], density [bins]) of sampled logits for the score-distribution plot.

    ``limit`` fixes the range to ``[-limit, limit]`` so histograms for different d_k share axes;
    by default it is 4 × the largest of the expected std and 1. ``kwargs`` go to :func:`sample_logits`.
    """
    z = sample_logits(d_k, variant, **kwargs)
    if limit is None:
        extra = {k: kwargs[k] for k in ("temperature", "gain") if k in kwargs}
        limit = 4 * max(float(expected_std(variant, d_k, **extra)), 1.0)
    density, edges = np.histogram(z, bins=bins, range=(-limit, limit), density=True)
    return edges, density


__all__ = [
    "D_K_GRID",
    "VARIANTS",
    "SoftmaxCurves",
    "SoftmaxStats",
    "expected_std",
    "jacobian_norm",
    "sample_logits",
    "score_histogram",
    "softmax_curves",
    "softmax_rows",
    "softmax_stats",
    "theory_summary",
    "uniform_jacobian_norm",
]
