"""The positions lab: sinusoidal tables, RoPE's relative-offset property, and permutation symmetry.

Sinusoidal (Vaswani et al.): ``PE[p, 2i] = sin(p ω_i)``, ``PE[p, 2i+1] = cos(p ω_i)`` with
``ω_i = 10000^(-2i/d)``. Each pair is a point on the unit circle at angle ``p ω_i``, so
``PE[p] · PE[q] = Σ_i cos(ω_i (p − q))``: the dot product depends only on the offset ``p − q``.

RoPE rotates each pair of a head's query/key channels by the angle ``m θ_i`` of its position ``m``
(``θ_i = base^(-2i/d_k)``). Rotations compose, so ``rot_m(q) · rot_n(k) = q · rot_{n−m}(k)`` depends
only on ``m − n``. The model pairs channel ``i`` with ``i + d_k/2`` (GPT-NeoX/Llama "half split")
rather than ``(2i, 2i+1)``; the mathematics is the same. Everything here uses the model's own
``rope_tables``/``apply_rope``/``sinusoidal_table`` so the lab shows what the model computes.

On the model's own heads: with RoPE nothing position-dependent enters the residual stream, so a
prompt placed at positions ``s..s+T−1`` instead of ``0..T−1`` gives every layer the same scores (to
float rounding); with learned or sinusoidal positions, already layer 0's scores move
(:func:`shift_check`).

Permutation: without any position information and without a mask, attention treats its input as a
set, so permuting the prompt permutes every position's output the same way (each output depends on
its own token and the multiset of all tokens). A causal mask or positions break the symmetry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.interp.trace import eval_mode
from model.nn.layers import apply_rope, rope_tables, sinusoidal_table


def sinusoidal_heatmap(n_positions: int, d_model: int) -> np.ndarray:
    """The model's sinusoidal table as float32 numpy [n_positions, d_model] (rows = positions)."""
    if d_model % 2:
        raise ValueError(f"d_model must be even for sinusoidal positions, got {d_model}")
    return sinusoidal_table(n_positions, d_model).numpy()


def position_similarity(table) -> np.ndarray:
    """Dot products of every pair of position vectors, ``S[p, q] = PE[p] · PE[q]``: [P, d] → [P, P]."""
    t = np.asarray(table, dtype=np.float64)
    return t @ t.T


@dataclass
class OffsetProfile:
    """Dot product as a function of the offset ``Δ = p − q``.

    ``offsets`` [K] (from ``-(P-1)`` to ``P-1``); ``mean`` [K]: average of ``S[p, q]`` over the pairs
    with that offset; ``spread`` [K]: max − min over those pairs (≈ 0 when only the offset matters);
    ``theory`` [K]: ``Σ_i cos(ω_i Δ)`` for the sinusoidal table (None for other inputs).
    """

    offsets: np.ndarray
    mean: np.ndarray
    spread: np.ndarray
    theory: np.ndarray | None = None

    @property
    def max_spread(self) -> float:
        return float(self.spread.max())


def by_offset(similarity) -> OffsetProfile:
    """Group a [P, P] matrix by diagonal (offset ``p − q``): mean and spread per offset."""
    s = np.asarray(similarity, dtype=np.float64)
    P = s.shape[0]
    offsets = np.arange(-(P - 1), P)
    means, spreads = [], []
    for d in offsets:
        diag = np.diagonal(s, offset=-d)  # entries with p - q = d
        means.append(diag.mean())
        spreads.append(diag.max() - diag.min())
    return OffsetProfile(offsets, np.array(means), np.array(spreads))


def sinusoidal_offset_profile(n_positions: int, d_model: int) -> OffsetProfile:
    """:func:`by_offset` of the sinusoidal table's dot products, with ``theory = Σ_i cos(ω_i Δ)``."""
    prof = by_offset(position_similarity(sinusoidal_heatmap(n_positions, d_model)))
    omega = np.exp(-np.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    prof.theory = np.cos(np.outer(prof.offsets, omega)).sum(-1)
    return prof


def rope_rotate(x, positions, base: float = 10000.0) -> np.ndarray:
    """Rotate one head vector ``x`` [d_k] to each of ``positions`` [P] with the model's RoPE: → [P, d_k]."""
    x = torch.as_tensor(np.asarray(x, dtype=np.float32))
    d_k = x.shape[-1]
    if d_k % 2:
        raise ValueError(f"RoPE needs an even head size, got {d_k}")
    pos = np.asarray(positions, dtype=np.int64)
    cos, sin = rope_tables(int(pos.max()) + 1, d_k, base)
    xs = x.expand(len(pos), d_k)[None, None]  # [1, 1, P, d_k]
    return apply_rope(xs, cos[pos], sin[pos])[0, 0].numpy()


def rope_pair_path(x, positions, pair: int = 0, base: float = 10000.0) -> np.ndarray:
    """The 2-D point of channel pair ``pair`` (channels ``pair`` and ``pair + d_k/2``) at each position.

    Returns [P, 2]: a circle traced at angular speed ``θ_pair`` — the rotation the lab draws.
    """
    r = rope_rotate(x, positions, base)
    half = r.shape[-1] // 2
    return np.stack([r[:, pair], r[:, pair + half]], axis=-1)


@dataclass
class RopeCheck:
    """Scores of one rotated query/key pair at every position pair.

    ``scores`` [P, P]: ``rot_m(q) · rot_n(k)`` for query position ``m`` (row) and key position ``n``;
    ``profile``: grouped by offset ``m − n`` (``max_spread`` ≈ 0 proves the score depends only on it).
    """

    scores: np.ndarray
    profile: OffsetProfile


def rope_scores(q, k, n_positions: int, base: float = 10000.0) -> RopeCheck:
    """:class:`RopeCheck` for vectors ``q`` and ``k`` [d_k] placed at every position ``0..n_positions-1``."""
    pos = np.arange(n_positions)
    rq = rope_rotate(q, pos, base).astype(np.float64)
    rk = rope_rotate(k, pos, base).astype(np.float64)
    s = rq @ rk.T
    return RopeCheck(s, by_offset(s))


@dataclass
class ShiftCheck:
    """One layer's scores for a prompt at positions ``0..T−1`` and at ``shift..shift+T−1``.

    ``scores``, ``shifted`` [H, T, T]: what each head's softmax compares (``s(QKᵀ)``), NaN where the
    mask hides the pair. ``positions``: the model's kind of positions.
    """

    layer: int
    shift: int
    positions: str
    scores: np.ndarray
    shifted: np.ndarray

    @property
    def change(self) -> np.ndarray:
        """[H]: the largest ``|shifted − scores|`` over the visible pairs of each head."""
        return np.nanmax(np.abs(self.shifted - self.scores), axis=(-2, -1))

    @property
    def size(self) -> np.ndarray:
        """[H]: the largest ``|score|`` of each head (what the change is small against)."""
        return np.nanmax(np.abs(self.scores), axis=(-2, -1))

    @property
    def invariant(self) -> bool:
        """True when no head's scores moved by more than float32 rounding (1e-5 of their size, with
        the margin that the rotations' own rounding at large positions needs)."""
        return bool(np.all(self.change <= 1e-5 * np.maximum(self.size, 1.0) * max(1.0, self.shift / 64)))


def shift_check(model, ids, *, layer: int = 0, shift: int = 100) -> ShiftCheck:
    """:class:`ShiftCheck` of block ``layer`` for ``ids`` [T] at offset 0 and at offset ``shift``.

    RoPE makes ``rot_m(q)·rot_n(k)`` depend on ``m − n`` only, and adds nothing to the residual stream,
    so every layer's scores are shift-invariant; learned or sinusoidal positions are added to the
    stream, so they are not. Raises ValueError when ``shift + T`` passes the context length.
    """
    from model.interp.trace import run_with_trace

    cfg = model.config
    if not 0 <= layer < cfg.core.n_layers:
        raise ValueError(f"layer {layer} is not one of the model's {cfg.core.n_layers} blocks")
    T = len(ids)
    if shift < 0 or (cfg.positional.positions != "none" and shift + T > cfg.core.context_length):
        raise ValueError(
            f"a shift of {shift} puts the {T}-token prompt past the context length {cfg.core.context_length}"
        )

    def scores(offset: int) -> np.ndarray:
        trace = run_with_trace(model, ids, kinds=("scores",), layers=[layer], position_offset=offset)
        recorded = trace.get("scores", layer)
        assert recorded is not None, "run_with_trace records the scores it was asked for"
        z = recorded[0].double().numpy()  # [H, T, T]
        visible = trace.layer_mask(layer).cpu().numpy()
        return np.where(visible, z, np.nan)

    return ShiftCheck(layer, shift, cfg.positional.positions, scores(0), scores(shift))


@dataclass
class PermutationResult:
    """Outputs of a prompt and of its permutation ``perm`` (new position ``t`` holds old token ``perm[t]``).

    ``logits`` and ``logits_permuted`` [T, V]; ``error`` = ``max |logits_permuted − logits[perm]|``:
    ≈ 0 (float rounding) when the model is permutation-equivariant.
    """

    perm: np.ndarray
    logits: np.ndarray
    logits_permuted: np.ndarray
    error: float
    scale: float

    @property
    def equivariant(self) -> bool:
        """True when the error is at the level of float32 rounding (1e-4 of the logits' size)."""
        return self.error <= 1e-4 * max(self.scale, 1.0)


@torch.no_grad()
def permutation_experiment(model, idx, *, perm=None, seed: int = 0, mask: str = "none") -> PermutationResult:
    """Run ``idx`` ([T] or [1, T]) and a permutation of it; check whether the outputs permute alike.

    ``mask``: "none" (no mask at all, the lab's setting) or "model" (the config's own mask). Only a
    model with ``positions = "none"`` is equivariant without a mask; with a causal mask or positions
    the error is large.
    """
    idx = torch.as_tensor(idx, dtype=torch.long, device=model.device)
    if idx.dim() == 1:
        idx = idx[None]
    T = idx.shape[1]
    if perm is None:
        perm = np.random.default_rng(seed).permutation(T)
    perm = np.asarray(perm, dtype=np.int64)
    if sorted(perm.tolist()) != list(range(T)):
        raise ValueError(f"perm must be a permutation of 0..{T - 1}")
    from model.nn.hooks import use_mask

    hooks = use_mask(torch.ones(T, T, dtype=torch.bool, device=idx.device)) if mask == "none" else []
    with eval_mode(model), model.hooks(hooks):
        a, _ = model(idx)
        b, _ = model(idx[:, torch.as_tensor(perm, device=idx.device)])
    a, b = a[0].float().cpu().numpy(), b[0].float().cpu().numpy()
    return PermutationResult(perm, a, b, float(np.abs(b - a[perm]).max()), float(np.abs(a).max()))


def without_positions(model):
    """A copy of ``model`` with ``positions = "none"``: the same token, attention and MLP weights, but
    no learned table, sinusoids or rotations. The copy is in evaluation mode on the same device."""
    from model.nn.gpt import init_model

    cfg = model.config.replace(positions="none")
    copy = init_model(cfg, seed=0, device=model.device)
    state = {k: v for k, v in model.state_dict().items() if not k.startswith("pos_emb.")}
    copy.load_state_dict(state, strict=True)
    copy.eval()
    return copy


@dataclass
class PermutationPredictions:
    """Top next-token guesses of a prompt (``pred`` [T]) and of its permutation (``pred_permuted`` [T]).

    Position ``t`` of the permuted prompt holds original token ``perm[t]``; ``follows[t]`` is True when
    the permuted prompt's guess at ``t`` equals the original's guess at ``perm[t]`` (outputs permute
    with the inputs).
    """

    perm: np.ndarray
    pred: np.ndarray
    pred_permuted: np.ndarray
    follows: np.ndarray
    error: float
    equivariant: bool


def permutation_predictions(result) -> PermutationPredictions:
    """Turn a :class:`~model.interp.analysis.positions.PermutationResult` into per-position top-1 guesses."""
    pred = result.logits.argmax(-1)
    pred_p = result.logits_permuted.argmax(-1)
    perm = np.asarray(result.perm)
    return PermutationPredictions(
        perm=perm,
        pred=pred,
        pred_permuted=pred_p,
        follows=pred_p == pred[perm],
        error=float(result.error),
        equivariant=bool(result.equivariant),
    )


__all__ = [
    "OffsetProfile",
    "PermutationPredictions",
    "PermutationResult",
    "RopeCheck",
    "ShiftCheck",
    "by_offset",
    "permutation_experiment",
    "permutation_predictions",
    "position_similarity",
    "rope_pair_path",
    "rope_rotate",
    "rope_scores",
    "shift_check",
    "sinusoidal_heatmap",
    "sinusoidal_offset_profile",
    "without_positions",
]
