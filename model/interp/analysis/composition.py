"""Q-, K- and V-composition of every writer head into every head of a later layer, against chance
(Elhage et al. 2021; the formulas, the norms and the sampled baseline are in
``model.interp.analysis.circuits``'s docstring)::

    Q: ‖W_OV¹ W_QK²‖ / (‖W_OV¹‖ ‖W_QK²‖)   K: ‖W_OV¹ W_QK²ᵀ‖ / (…)   V: ‖W_OV¹ W_OV²‖ / (‖W_OV¹‖ ‖W_OV²‖)

computed from ``d_k × d_k`` factors, one ``(H·d_k × d) @ (d × 3·H·d_k)`` product per pair of layers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from model.interp.analysis.circuit_weights import CircuitsUnsupported, HeadWeights, _r_factor, head_weights
from model.progress import report

#: Composition kinds, in the order of :attr:`Composition.scores`' first axis.
KINDS = ("Q", "K", "V")
#: What each kind means, for a tool tip or a legend.
KIND_WORDS = {
    "Q": "the writer's output feeds the reader's queries",
    "K": "the writer's output feeds the reader's keys",
    "V": "the writer's output feeds the reader's values",
}
#: Random pairs behind the chance level, and their seed.
BASELINE_SAMPLES = 256
BASELINE_SEED = 0
#: Above this many multiply-adds, :func:`composition_scores` refuses (minutes of work).
MAX_COMPOSITION_FLOPS = 3e12


@dataclass
class Composition:
    """Composition scores of every writer head into every head of a later layer.

    ``scores`` [3, L, H, L, H]: ``scores[kind, ℓ1, h1, ℓ2, h2]`` (kind 0/1/2 = Q/K/V, :data:`KINDS`),
    NaN where ``ℓ2 ≤ ℓ1``; ``baseline`` (sampled mean for random matrices of the same shapes),
    ``baseline_p95`` (their 95th percentile), ``baseline_rms`` = √(1/d) (analytic); ``d``, ``d_k``;
    ``samples``/``seed`` of the baseline; ``seconds`` spent on the scores."""

    scores: np.ndarray
    baseline: float
    baseline_p95: float
    baseline_rms: float
    d: int
    d_k: int
    samples: int = BASELINE_SAMPLES
    seed: int = BASELINE_SEED
    seconds: float = 0.0
    #: the pairs sorted by score, per choice of kinds (filled on first use: a view asks often)
    _sorted: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_layers(self) -> int:
        return int(self.scores.shape[1])

    @property
    def n_heads(self) -> int:
        return int(self.scores.shape[2])

    def strongest(
        self, kind: str | None = None, top: int | None = None, *, minimum: float = -np.inf
    ) -> list[tuple[str, tuple[int, int], tuple[int, int], float]]:
        """(kind, writer (ℓ, h), reader (ℓ, h), score) of every pair at least ``minimum``, strongest
        first (``kind`` None: every kind), at most ``top``."""
        kinds = (0, 1, 2) if kind is None else (KINDS.index(kind.upper()),)
        if kinds not in self._sorted:
            flat = self.scores[list(kinds)].reshape(-1)
            finite = np.flatnonzero(np.isfinite(flat))  # NaN: no later layer
            order = finite[np.argsort(-flat[finite], kind="stable")]
            self._sorted[kinds] = (order, flat[order])
        order, values = self._sorted[kinds]
        n = int(np.searchsorted(-values, -minimum, side="right"))  # values descend: those ≥ minimum
        keep = order[: n if top is None else min(n, max(0, int(top)))]
        shape = (len(kinds), *self.scores.shape[1:])
        out = []
        for i, v in zip(keep, values):
            c, l1, h1, l2, h2 = np.unravel_index(int(i), shape)
            out.append((KINDS[kinds[c]], (int(l1), int(h1)), (int(l2), int(h2)), float(v)))
        return out

    def reads_from(self, layer: int, head: int, top: int | None = None):
        """(kind, writer (ℓ, h), score) of every earlier head into reader (layer, head), strongest first."""
        s = self.scores[:, :, :, layer, head]  # [3, L, H]
        flat = np.nan_to_num(s, nan=-np.inf).reshape(-1)
        order = [i for i in np.argsort(-flat, kind="stable") if np.isfinite(flat[i])]
        out = []
        for i in order[: top if top is not None else len(order)]:
            c, l1, h1 = np.unravel_index(int(i), s.shape)
            out.append((KINDS[c], (int(l1), int(h1)), float(flat[i])))
        return out

    def writes_to(self, layer: int, head: int, top: int | None = None):
        """(kind, reader (ℓ, h), score) of every later head that writer (layer, head) feeds."""
        s = self.scores[:, layer, head]  # [3, L, H]
        flat = np.nan_to_num(s, nan=-np.inf).reshape(-1)
        order = [i for i in np.argsort(-flat, kind="stable") if np.isfinite(flat[i])]
        out = []
        for i in order[: top if top is not None else len(order)]:
            c, l2, h2 = np.unravel_index(int(i), s.shape)
            out.append((KINDS[c], (int(l2), int(h2)), float(flat[i])))
        return out


def _reader_factors(hw: HeadWeights) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(X [L, H, d_k, d] the writers, Yt [L, 3·H·d_k, d] the readers' rows (Q, K, V blocks, each head's
    ``Yᵀ``), ‖W_OV‖ [L, H], ‖W_QK‖ [L, H]); the numerator of a score is ``‖X¹ Y²‖``."""
    L, H, d, k = hw.shape
    R_Q, R_K, R_V = _r_factor(hw.W_Q), _r_factor(hw.W_K), _r_factor(hw.W_V)  # float64 [L, H, k, k]
    R_O = _r_factor(hw.O.transpose(-1, -2))  # W_Oᵀ = Q R: ‖M W_O‖ = ‖M R_Oᵀ‖
    f = hw.Q.dtype
    X = R_V.to(f) @ hw.O  # [L, H, k, d]: ‖W_OV¹ M‖ = ‖V R⁻¹ R O M‖ = ‖X M‖
    YQ = R_K.to(f) @ hw.Q  # rows of W_Q R_Kᵀ: ‖M W_QK‖ = ‖M W_Q R_Kᵀ‖
    YK = R_Q.to(f) @ hw.K  # rows of W_K R_Qᵀ: ‖M W_QKᵀ‖ = ‖M W_K W_Qᵀ‖ = ‖M W_K R_Qᵀ‖
    YV = R_O.to(f) @ hw.V  # rows of W_V R_Oᵀ: ‖M W_OV‖ = ‖M W_V R_Oᵀ‖
    Yt = torch.stack([YQ, YK, YV], dim=1).reshape(L, 3 * H * k, d)
    ov_norm = torch.linalg.matrix_norm(R_V @ R_O.transpose(-1, -2))
    qk_norm = torch.linalg.matrix_norm(R_Q @ R_K.transpose(-1, -2))
    return X, Yt, ov_norm, qk_norm


def _scores_of(X: torch.Tensor, Yt: torch.Tensor, H: int, k: int) -> torch.Tensor:
    """``‖X_i Y_j‖`` for writers X [H, k, d] and readers' rows Yt [3·H·k, d]: [H, 3·H] (float32 or
    float64)."""
    P = X.reshape(H * k, -1) @ Yt.T  # [H·k, 3·H·k]
    if P.dtype not in (torch.float32, torch.float64):
        P = P.float()  # bfloat16 products: the squares summed in float32
    P = P.square_().view(H * k * 3 * H, k).sum(-1)  # over the reader's k (contiguous) ...
    return P.view(H, k, 3 * H).sum(1).sqrt_()  # ... then the writer's


#: Above this many multiply-adds the big products of :func:`composition_scores` run in bfloat16 (float32
#: accumulation) where that is faster (:func:`fast_dtype`): scores within ~1e-3 of float32's (tested).
BF16_MIN_WORK = 5e9

_FAST: dict[str, torch.dtype] = {}


def fast_dtype(device: torch.device | str = "cpu") -> torch.dtype:
    """bfloat16 when this machine multiplies bfloat16 matrices at least 1.5× faster than float32
    (measured once per process: a CPU with AVX-512 BF16 or AMX, ~4×), else float32."""
    key = str(device)
    if key not in _FAST:
        dt = torch.float32
        if torch.device(device).type == "cpu":
            a = torch.randn(384, 384)
            b = torch.randn(384, 1152)
            times = {}
            for dtype in (torch.float32, torch.bfloat16):
                x, y = a.to(dtype), b.to(dtype)
                x @ y  # warm up
                t0 = time.perf_counter()
                for _ in range(3):
                    x @ y
                times[dtype] = time.perf_counter() - t0
            if times[torch.bfloat16] * 1.5 < times[torch.float32]:
                dt = torch.bfloat16
        _FAST[key] = dt
    return _FAST[key]


def baseline_scores(
    d: int, d_k: int, *, samples: int = BASELINE_SAMPLES, seed: int = BASELINE_SEED
) -> np.ndarray:
    """Composition scores of ``samples`` pairs of random matrices of a head's shapes: a writer
    ``V O`` (V [d, d_k], O [d_k, d]) and a reader ``A Bᵀ`` (A, B [d, d_k]), every entry N(0, 1)
    (a torch generator seeded with ``seed``) → [samples]. Their mean square is 1/d. Cached per
    arguments (a few hundred ms for d = 768)."""
    key = (int(d), int(d_k), int(samples), int(seed))
    if key not in _BASELINES:
        g = torch.Generator().manual_seed(int(seed))
        out = []
        chunk = max(1, min(samples, int(2e7 // max(1, 4 * d * d_k))))
        for start in range(0, samples, chunk):
            n = min(chunk, samples - start)
            V, A, B = (torch.randn(n, d, d_k, generator=g) for _ in range(3))
            O = torch.randn(n, d_k, d, generator=g)
            R_V, R_O, R_A, R_B = (_r_factor(M) for M in (V, O.transpose(-1, -2), A, B))
            X = R_V.float() @ O  # [n, k, d]
            Y = A @ R_B.float().transpose(-1, -2)  # [n, d, k]
            num = torch.linalg.matrix_norm((X @ Y).double())
            ov = torch.linalg.matrix_norm(R_V @ R_O.transpose(-1, -2))
            qk = torch.linalg.matrix_norm(R_A @ R_B.transpose(-1, -2))
            out.append(num / (ov * qk))
        _BASELINES[key] = torch.cat(out).numpy()
    return _BASELINES[key].copy()


_BASELINES: dict[tuple[int, int, int, int], np.ndarray] = {}


def composition_work(config) -> float:
    """Multiply-adds of every composition score of a model of ``config`` (the refusal's estimate)."""
    L, H, d, k = config.core.n_layers, config.attention.n_heads, config.core.d_model, config.d_head
    pairs = H * H * L * (L - 1) / 2
    return 3 * pairs * k * k * d


@torch.no_grad()
def composition_scores(
    model_or_weights,
    *,
    rope_offset: int = 0,
    samples: int = BASELINE_SAMPLES,
    seed: int = BASELINE_SEED,
    precision: str = "auto",
) -> Composition:
    """Q-, K- and V-composition of every head into every head of every later layer
    (:class:`Composition`; formulas, norms and the baseline in the module doc).

    ``model_or_weights``: a model, or its :class:`HeadWeights` (then ``rope_offset`` is theirs).
    ``precision``: the dtype of the big products: ``"auto"`` (the weights', or bfloat16 above
    :data:`BF16_MIN_WORK` where that is faster), ``"float32"``, ``"bfloat16"`` or ``"float64"``; the
    norms and the small factors are float64 whatever it is."""
    t0 = time.perf_counter()
    hw = model_or_weights if isinstance(model_or_weights, HeadWeights) else None
    if hw is None:
        cfg = model_or_weights.config
        work = composition_work(cfg)
        if work > MAX_COMPOSITION_FLOPS:
            raise CircuitsUnsupported(
                f"{cfg.core.n_layers} layers × {cfg.attention.n_heads} heads: every pair of heads is "
                f"{work:.1e} "
                f"multiply-adds, more than the {MAX_COMPOSITION_FLOPS:.0e} this computes in minutes"
            )
        hw = head_weights(model_or_weights, rope_offset=rope_offset)
    L, H, d, k = hw.shape
    X, Yt, ov_norm, qk_norm = _reader_factors(hw)
    work = 3 * H * H * L * (L - 1) / 2 * k * k * d
    if precision == "auto":
        low = fast_dtype(X.device) if work >= BF16_MIN_WORK and X.dtype == torch.float32 else X.dtype
    else:
        low = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float64": torch.float64}[precision]
    X, Yt = X.to(low), Yt.to(low)
    reader_norm = torch.stack([qk_norm, qk_norm, ov_norm], dim=1).view(L, 3 * H)  # float64
    scores = torch.full((3, L, H, L, H), float("nan"), dtype=torch.float64)
    pairs = L * (L - 1) // 2
    report(0, pairs, "layer pairs")
    for l1 in range(L - 1):
        for l2 in range(l1 + 1, L):
            num = _scores_of(X[l1], Yt[l2], H, k).double()  # [H, 3·H]
            s = num / (ov_norm[l1][:, None] * reader_norm[l2][None])
            scores[:, l1, :, l2, :] = s.view(H, 3, H).permute(1, 0, 2).cpu()
            done = l1 * L - l1 * (l1 + 1) // 2 + (l2 - l1)  # pairs (a, b), a < b, up to (l1, l2)
            report(done, pairs, "layer pairs")
    base = baseline_scores(d, k, samples=samples, seed=seed)
    return Composition(
        scores=scores.numpy(),
        baseline=float(base.mean()),
        baseline_p95=float(np.percentile(base, 95)),
        baseline_rms=1.0 / math.sqrt(d),
        d=d,
        d_k=k,
        samples=samples,
        seed=seed,
        seconds=time.perf_counter() - t0,
    )


__all__ = [
    "BASELINE_SAMPLES",
    "BASELINE_SEED",
    "BF16_MIN_WORK",
    "KINDS",
    "KIND_WORDS",
    "MAX_COMPOSITION_FLOPS",
    "Composition",
    "baseline_scores",
    "composition_scores",
    "composition_work",
    "fast_dtype",
]
