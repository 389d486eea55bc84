"""Circuits from the weights alone: each head's QK and OV circuits, how heads compose, and copying
(Elhage et al., 2021, "A Mathematical Framework for Transformer Circuits"; TransformerLens's
``FactoredMatrix``, ``all_composition_scores`` and ``OV.eigenvalues`` compute the same numbers).

**Conventions** (row vectors, as TransformerLens): a token's stream ``x`` [d] is a row; ``nn.Linear``
weights are [out, in], so for head ``h`` of a layer (GQA: query head ``h`` reads key/value head
``h // n_rep``)::

    W_Q^h, W_K^h, W_V^h = q_proj / k_proj / v_proj rows of the head, transposed      [d, d_k]
    W_O^h               = o_proj columns of the head, transposed                     [d_k, d]
    QK circuit  W_QK^h = W_Q^h W_K^hᵀ  [d, d]   score(x_q, x_k) = x_q W_QK x_kᵀ (before the attention's
                                                 scale 1/√d_k, its soft-cap and softmax)
    OV circuit  W_OV^h = W_V^h W_O^h   [d, d]   what the head writes for a key x it attends to: x W_OV

Both are kept factored (:class:`FactoredMatrix`, ``A [d, r] @ B [r, d]``, r = d_k): their norms,
singular values, ranks and eigenvalues come from ``r × r`` matrices, and no ``d × d`` matrix per head
is formed.

**Composition** of a writer head 1 (layer ℓ1) into a reader head 2 (a later layer ℓ2), with the
Frobenius norm, as TransformerLens's ``all_composition_scores`` (``composition_scores(OV¹, right)``)::

    Q: ‖W_OV¹ W_QK²‖  / (‖W_OV¹‖ ‖W_QK²‖)    what head 1 writes moves head 2's queries
    K: ‖W_OV¹ W_QK²ᵀ‖ / (‖W_OV¹‖ ‖W_QK²‖)    ... head 2's keys
    V: ‖W_OV¹ W_OV²‖  / (‖W_OV¹‖ ‖W_OV²‖)    ... head 2's values

In the paper's column-vector notation (``W_OV = W_O W_V``, ``W_QK = W_Qᵀ W_K``) the same numbers read
``‖W_QKᵀ W_OV‖``, ``‖W_QK W_OV‖`` and ``‖W_OV² W_OV¹‖``. Each score is in [0, 1] (sub-multiplicativity).
They are computed with ``‖A M Bᵀ‖ = ‖R_A M R_Bᵀ‖`` (``A = Q_A R_A``, a thin QR: ``Q_A`` has
orthonormal columns; ``R_A`` is found as the Cholesky factor of ``Aᵀ A``, in float64): with
``X¹ = R_V¹ W_O¹`` [d_k, d] for the writer and ``Y² = W_Q² R_K²ᵀ`` (Q), ``W_K² R_Q²ᵀ`` (K),
``W_V² R_O²ᵀ`` (V) [d, d_k] for the reader, the numerator is ``‖X¹ Y²‖``: one
``(H·d_k × d) @ (d × 3·H·d_k)`` product per pair of layers (all pairs of a 12 × 12-head d 768 model:
~180 GFLOP; above :data:`BF16_MIN_WORK` in bfloat16 with float32 accumulation where the CPU multiplies
it faster, scores within 10⁻³ of float32's: under a second on two cores, ``bench/circuits.py``).

**Chance.** ``baseline`` is the mean score of :data:`BASELINE_SAMPLES` pairs of random matrices of
the same shapes (Gaussian factors ``d × d_k`` and ``d_k × d``, torch generator seeded with
:data:`BASELINE_SEED`): sampled, with a fixed seed. Analytically ``E[score²] = 1/d`` exactly for any
rotation-invariant random matrix (``E_R ‖M₁ R M₂‖² = ‖M₁‖² ‖M₂‖² / d`` for a Haar rotation R), so
``√(1/d)`` (``baseline_rms``) is the root mean square and the sampled mean lies just below it. A score
well above it (the app draws edges from 2 × chance) is composition the weights chose, not chance.

**Norms.** A pre-norm block reads ``Norm(x)``. Its learned gain γ is folded into the weights that read
it (``W_Q, W_K, W_V ← P diag(γ) W``), LayerNorm's centring kept as the projection
``P = I − 11ᵀ/d`` (and every writer's ``W_O`` centred too: no reader sees the mean), and the per-token
scale (1/σ or 1/rms) left out: TransformerLens's ``fold_ln`` and ``center_writing_weights``. The final
norm is folded into the unembedding the same way (``W_U ← P diag(γ_f) W_U``). A ``sandwich`` (Gemma)
or ``output`` (OLMo 2) norm on the attention's output is folded into ``W_O`` (its scale left out);
Qwen3's / OLMo 2's QK-norm gains into ``W_Q``, ``W_K`` (per-token scale left out: a QK circuit is then
known up to a positive factor per query and per key, as with cosine attention). **Biases** are left
out: ``b_Q``, ``b_K`` add a term that does not depend on the other token, ``b_V W_O`` and ``b_O`` the
same vector whatever the head attends to.

**Positions.** RoPE rotates queries and keys by their positions, so a QK circuit (and Q- and
K-composition) depends on the relative offset Δ = query − key: ``W_QK(Δ) = W_Q R_Δ R_0ᵀ W_Kᵀ`` with
the model's own rotation tables. The default Δ = 0 (query and key at the same position) is the
unrotated ``W_Q W_Kᵀ``; ``rope_offset`` chooses another. Values are not rotated: OV circuits,
V-composition and copying do not depend on position. Learned or sinusoidal positions are added to
the stream; the full circuits below are of tokens alone (the positions' part is left out).

**Full circuits** (the direct path embedding → head → unembedding; MLPs and other heads left out):
``W_E W_QK W_Eᵀ`` over a token subset [n, n], ``W_E W_OV W_U`` [n, V] rows for source tokens
(:func:`promoted_tokens`), and the **copying score** of each head: the eigenvalues λ of
``W_E W_OV W_U`` [V, V] are those of ``W_O (W_U W_E) W_V`` [d_k, d_k] (plus zeros); ``copying`` =
Σ_{Re λ > 0} |λ| / Σ |λ| (the share of the eigenvalues' mass with positive real part, 1 = a pure
copier) and ``copying_signed`` = Σ Re λ / Σ |λ| (the paper's, in [−1, 1]). ``W_U W_E`` [d, d] takes
``2·d²·V`` flops; beyond :data:`COPY_FLOPS` a seeded random subset of tokens stands in for the vocabulary
(``copying_tokens`` says how many).

**Refused** (a one-line :class:`CircuitsUnsupported`, never a wrong number): Post-LN (every block
renormalises the whole stream, so a write reaches a later head through every norm in between) and
multi-head latent attention (keys and values come from one latent shared by every head, through a
norm of its own, with a rotary key shared by the heads). A mixture of experts is fine: MLPs are on
none of these paths.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn as nn

from model.errors import AttentionLabError

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
#: ``d² · V`` multiply-adds of ``W_U W_E`` allowed before the copying scores use a token subset.
COPY_FLOPS = 4e10
#: Seed of that subset.
COPY_SEED = 0
#: Above this many multiply-adds, :func:`composition_scores` refuses (minutes of work).
MAX_COMPOSITION_FLOPS = 3e12


class CircuitsUnsupported(AttentionLabError, ValueError):
    """The model's head-level algebra is not one matrix per head (one line, see the module doc)."""


def unsupported(config) -> str | None:
    """Why the circuits of a model of ``config`` cannot be computed from its weights (None: they can)."""
    if config.norm_position == "post":
        return (
            "Post-LN: every block renormalises the whole stream, so a head's write reaches a later head "
            "only through the scales and gains of every norm in between; the circuits need a Pre-LN "
            "model (or sandwich / output norms)"
        )
    if getattr(config, "mla", False):
        return (
            "multi-head latent attention: keys and values come from one latent shared by every head, "
            "through a norm of its own, with a rotary key shared by the heads, so a head has no W_K and "
            "W_V of its own to compose"
        )
    return None


# ---------------------------------------------------------------------------------------------
# factored matrices
# ---------------------------------------------------------------------------------------------
def _r_factor(A: torch.Tensor) -> torch.Tensor:
    """An ``R`` [..., r, r] with ``Rᵀ R = Aᵀ A`` for ``A`` [..., m, r], so ``‖A M‖ = ‖R M‖`` for every
    ``M`` (R of a thin QR, up to signs): the Cholesky factor of the Gram matrix (an eigendecomposition
    where it is singular), float64 (the Gram matrix in ``A``'s precision). (torch's batched QR on the
    CPU takes ~1 ms a matrix; this, microseconds.)"""
    G = (A.transpose(-1, -2) @ A).double()
    L, info = torch.linalg.cholesky_ex(G)
    R = L.transpose(-1, -2)
    bad = info != 0
    if bool(bad.any()):
        w, U = torch.linalg.eigh(G[bad])
        R[bad] = (U * w.clamp_min(0).sqrt()[..., None, :]).transpose(-1, -2)
    return R


@dataclass
class FactoredMatrix:
    """``M = A @ B`` with ``A`` [..., m, r] and ``B`` [..., r, n], never formed (TransformerLens's
    ``FactoredMatrix``). Leading axes batch (e.g. [L, H] heads)."""

    A: torch.Tensor
    B: torch.Tensor

    @property
    def shape(self) -> tuple[int, ...]:
        return (*self.A.shape[:-1], self.B.shape[-1])

    def dense(self) -> torch.Tensor:
        """The matrix itself [..., m, n] (tests; small sizes)."""
        return self.A @ self.B

    def core(self) -> torch.Tensor:
        """``R_A R_Bᵀ`` [..., r, r]: the same singular values and norm as ``M``."""
        return _r_factor(self.A) @ _r_factor(self.B.transpose(-1, -2)).transpose(-1, -2)  # float64

    def singular_values(self) -> torch.Tensor:
        """The r largest singular values of ``M``, descending [..., r]."""
        return torch.linalg.svdvals(self.core())

    def norm(self) -> torch.Tensor:
        """The Frobenius norm ‖M‖ [...]."""
        return torch.linalg.matrix_norm(self.core())

    def eigenvalues(self) -> torch.Tensor:
        """The r eigenvalues of a square ``M`` that may be non-zero: those of ``B A`` [..., r, r]
        (complex). ``M``'s other eigenvalues are 0."""
        return torch.linalg.eigvals(self.B @ self.A)

    @property
    def T(self) -> FactoredMatrix:
        return FactoredMatrix(self.B.transpose(-1, -2), self.A.transpose(-1, -2))


def numerical_rank(svals: torch.Tensor, size: int) -> torch.Tensor:
    """Singular values above ``s_max · size · ε(float32)``, counted [...] (numpy's matrix_rank rule)."""
    tol = svals[..., :1] * size * torch.finfo(torch.float32).eps
    return (svals > tol).sum(-1)


# ---------------------------------------------------------------------------------------------
# the heads' weights, norms folded
# ---------------------------------------------------------------------------------------------
def _gain(norm: nn.Module, what: str) -> tuple[torch.Tensor | None, bool]:
    """(the norm's learned gain [n] or None for none, whether it centres): LayerNorm, RMSNorm or
    Gemma's ``1 + γ`` RMSNorm."""
    name = type(norm).__name__
    weight = getattr(norm, "weight", None)
    if isinstance(norm, nn.LayerNorm):
        return (weight.detach() if weight is not None else None), True
    if isinstance(norm, nn.RMSNorm):
        return (weight.detach() if weight is not None else None), False
    if name == "OffsetRMSNorm" and weight is not None:
        return 1.0 + weight.detach().double(), False
    raise CircuitsUnsupported(f"{what} is a {name}, a norm the circuits cannot fold")


def _fold_read(W: torch.Tensor, gain: torch.Tensor | None, centre: bool) -> torch.Tensor:
    """Weights ``W`` [..., d, r] that read ``Norm(x)``: ``P diag(γ) W`` (rows scaled, then centred)."""
    if gain is not None:
        W = W * gain.to(W)[:, None]
    if centre:
        W = W - W.mean(dim=-2, keepdim=True)
    return W


def _fold_write(O: torch.Tensor, gain: torch.Tensor | None, centre: bool) -> torch.Tensor:
    """A write ``O`` [..., r, d] that passes a norm: ``O P diag(γ)`` (centred, then scaled)."""
    if centre:
        O = O - O.mean(dim=-1, keepdim=True)
    if gain is not None:
        O = O * gain.to(O)
    return O


def _fold_rows(w: torch.Tensor, gain: torch.Tensor | None, centre: bool) -> torch.Tensor:
    """Rows ``w`` [..., r, d] of weights that read ``Norm(x)`` (``wᵀ = W``): ``(P diag(γ) wᵀ)ᵀ`` = each row
    scaled by γ, then centred."""
    if gain is not None:
        w = w * gain.to(w)
    if centre:
        w = w - w.mean(dim=-1, keepdim=True)
    return w


def rotation(model, layer: int, position: int, dtype=torch.float32) -> torch.Tensor:
    """RoPE of ``layer`` at ``position`` as a matrix ``R`` [d_k, d_k]: ``rope(x) = x R`` (the model's own
    tables and :func:`~model.nn.layers.apply_rope`, partial rotary and scaled tables included)."""
    from model.nn.layers import apply_rope

    pos = model.pos_emb
    cos, sin = pos.cos, pos.sin
    if getattr(model.blocks[layer].attn, "local", False) and getattr(pos, "local_cos", None) is not None:
        cos, sin = pos.local_cos, pos.local_sin
    if not 0 <= position < cos.shape[0]:
        raise ValueError(f"a RoPE offset of {position} is outside the context of {cos.shape[0]} positions")
    k = model.config.d_head
    eye = torch.eye(k, dtype=torch.float64, device=cos.device)[None, None]  # k rows: e_0 .. e_{k-1}
    c = cos[position : position + 1].double().expand(k, -1)
    s = sin[position : position + 1].double().expand(k, -1)
    return apply_rope(eye, c, s)[0, 0].to(dtype)


@dataclass
class HeadWeights:
    """Every head's weights as the circuits use them (norms folded, see the module doc), float, on the
    model's device, stored by rows (one row per dimension of the head, contiguous): ``Q``, ``K``, ``V``
    [L, H, d_k, d] (``K``/``V`` per query head: GQA's shared heads repeated) and ``O`` [L, H, d_k, d];
    ``W_Q = Qᵀ``, ``W_K``, ``W_V`` [L, H, d, d_k] and ``W_O = O`` are the module doc's matrices.
    ``rope_offset``: the relative offset the queries and keys were rotated for (None without RoPE);
    ``notes``: how each part was treated, in words (what the app states on screen)."""

    Q: torch.Tensor
    K: torch.Tensor
    V: torch.Tensor
    O: torch.Tensor
    rope_offset: int | None
    notes: list[str]

    W_Q = property(lambda self: self.Q.transpose(-1, -2), doc="[L, H, d, d_k]")
    W_K = property(lambda self: self.K.transpose(-1, -2), doc="[L, H, d, d_k]")
    W_V = property(lambda self: self.V.transpose(-1, -2), doc="[L, H, d, d_k]")
    W_O = property(lambda self: self.O, doc="[L, H, d_k, d]")

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(L, H, d, d_k)."""
        L, H, k, d = self.Q.shape
        return L, H, d, k

    def qk(self) -> FactoredMatrix:
        """Every head's QK circuit ``W_Q W_Kᵀ`` [L, H, d, d], factored."""
        return FactoredMatrix(self.W_Q, self.K)

    def ov(self) -> FactoredMatrix:
        """Every head's OV circuit ``W_V W_O`` [L, H, d, d], factored."""
        return FactoredMatrix(self.W_V, self.O)


def norm_notes(config) -> list[str]:
    """How the circuits treat the config's norms, biases and positions, in words (no weights needed)."""
    kind = "LayerNorm" if config.norm == "layernorm" else "RMSNorm"
    notes = []
    if config.norm_position in ("pre", "sandwich"):
        centred = ", centring kept" if config.norm == "layernorm" else ""
        notes.append(
            f"{kind} gains folded into the W_Q, W_K, W_V that read them{centred}, per-token scale left out "
            "(TransformerLens's fold_ln)"
        )
    else:
        notes.append("attention reads the stream itself (output norms): nothing to fold into W_Q, W_K, W_V")
    if config.norm_position in ("sandwich", "output"):
        notes.append(f"the {kind} on the attention's output folded into W_O (scale left out)")
    notes.append("biases left out; the final norm's gain folded into W_U")
    if config.positions == "rope":
        notes.append(
            "RoPE: QK circuits and Q/K-composition depend on the query − key offset and are shown at one "
            "(0: the unrotated W_Q W_Kᵀ); OV circuits, V-composition and copying do not"
        )
    elif config.positions in ("learned", "sinusoidal"):
        notes.append("positions are added to the stream: the full circuits are of tokens alone")
    if getattr(config, "qk_rmsnorm", False):
        notes.append("QK-norm gains folded into W_Q, W_K (scale left out)")
    if config.attn_scale == "qk_norm":
        notes.append("cosine attention: a QK circuit up to a positive factor per token")
    if getattr(config, "attn_softcap", None) is not None:
        notes.append("soft-capping bends the scores after the QK circuit")
    return notes


@torch.no_grad()
def head_weights(
    model, *, rope_offset: int = 0, dtype=torch.float32, layers: Sequence[int] | None = None
) -> HeadWeights:
    """Every head's W_Q, W_K, W_V, W_O of ``model`` with the norms folded (:class:`HeadWeights`).

    ``rope_offset`` (RoPE models): queries rotated as at position Δ and keys as at 0, so ``W_Q W_Kᵀ``
    is the QK circuit at relative offset Δ. ``layers``: only those blocks (the result's first axis
    follows their order). A :class:`CircuitsUnsupported` for Post-LN and latent attention."""
    cfg = model.config
    reason = unsupported(cfg)
    if reason:
        raise CircuitsUnsupported(reason)
    H, Hkv, k, d = cfg.n_heads, cfg.kv_heads, cfg.d_head, cfg.d_model
    rope = cfg.positions == "rope" and model.pos_emb is not None and hasattr(model.pos_emb, "cos")
    if not rope:
        rope_offset = 0
    scope = getattr(cfg, "qk_norm_scope", "head")
    n_rep = H // Hkv
    out: dict[str, list[torch.Tensor]] = {"Q": [], "K": [], "V": [], "O": []}
    chosen = range(cfg.n_layers) if layers is None else [int(layer) for layer in layers]
    for layer in chosen:
        block = model.blocks[layer]
        attn = block.attn
        if not all(hasattr(attn, p) for p in ("q_proj", "k_proj", "v_proj", "o_proj")):
            raise CircuitsUnsupported(f"layer {layer}'s attention has no q/k/v/o projections of its own")
        # the projections' rows are the heads' dimensions: [H·d_k, d] read the stream
        q = attn.q_proj.weight.detach().to(dtype)
        kk = attn.k_proj.weight.detach().to(dtype)
        v = attn.v_proj.weight.detach().to(dtype)
        if cfg.norm_position in ("pre", "sandwich"):  # x → x P diag(γ) → W: rows scaled, then centred
            gain, centre = _gain(block.norm1, f"layer {layer}'s attention norm")
            q, kk, v = (_fold_rows(w, gain, centre) for w in (q, kk, v))
        if getattr(cfg, "qk_rmsnorm", False):  # QK-norm after the projection: its gain scales rows
            gq, _ = _gain(attn.q_norm, "the QK-norm")
            gk, _ = _gain(attn.k_norm, "the QK-norm")
            if gq is not None:
                q = q * (gq.to(q) if scope == "all" else gq.to(q).repeat(H))[:, None]
            if gk is not None:
                kk = kk * (gk.to(kk) if scope == "all" else gk.to(kk).repeat(Hkv))[:, None]
        Qr, Kr, Vr = q.view(H, k, d), kk.view(Hkv, k, d), v.view(Hkv, k, d)
        if n_rep > 1:  # GQA: query head h reads key/value head h // n_rep
            Kr, Vr = Kr.repeat_interleave(n_rep, dim=0), Vr.repeat_interleave(n_rep, dim=0)
        o = attn.o_proj.weight.detach().to(dtype).T  # [H·d_k, d]: head h's rows write the stream
        post = block.post_norm1 if cfg.norm_position == "sandwich" else None
        if cfg.norm_position == "output":
            post = block.norm1
        if post is not None:
            gain, centre = _gain(post, f"layer {layer}'s output norm")
            o = _fold_write(o, gain, centre)
        if cfg.norm == "layernorm" and cfg.norm_position in ("pre", "sandwich"):
            o = _fold_write(o, None, True)  # every reader centres: the mean is invisible
        Or = o.reshape(H, k, d)
        if rope:  # rope(x W_Q) = x W_Q R: rows Rᵀ Q
            Qr = rotation(model, layer, rope_offset, dtype).to(Qr.device).T @ Qr
            Kr = rotation(model, layer, 0, dtype).to(Kr.device).T @ Kr
        for key, W in zip("QKVO", (Qr, Kr, Vr, Or)):
            out[key].append(W.contiguous())
    Q, K, V, O = (torch.stack(out[key]) for key in "QKVO")
    return HeadWeights(Q, K, V, O, rope_offset=rope_offset if rope else None, notes=norm_notes(cfg))


# ---------------------------------------------------------------------------------------------
# composition
# ---------------------------------------------------------------------------------------------
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
    L, H, d, k = config.n_layers, config.n_heads, config.d_model, config.d_head
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
                f"{cfg.n_layers} layers × {cfg.n_heads} heads: every pair of heads is {work:.1e} "
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
    for l1 in range(L - 1):
        for l2 in range(l1 + 1, L):
            num = _scores_of(X[l1], Yt[l2], H, k).double()  # [H, 3·H]
            s = num / (ov_norm[l1][:, None] * reader_norm[l2][None])
            scores[:, l1, :, l2, :] = s.view(H, 3, H).permute(1, 0, 2).cpu()
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


# ---------------------------------------------------------------------------------------------
# each head's circuits, copying
# ---------------------------------------------------------------------------------------------
def _unembedding(model) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, bool]:
    """(E [V, d] the embedding as the stream gets it, W_U [d, V], the final norm's gain, whether it
    centres)."""
    cfg = model.config
    E = model.tok_emb.weight.detach().float()
    if getattr(cfg, "embed_scale", False):
        E = E * math.sqrt(cfg.d_model)
    W_U = (model.lm_head.weight if model.lm_head is not None else model.tok_emb.weight).detach().float().T
    gain, centre = (None, False)
    if model.norm_f is not None:
        gain, centre = _gain(model.norm_f, "the final norm")
    return E, W_U, gain, centre


def _unembed(x: torch.Tensor, W_U: torch.Tensor, gain: torch.Tensor | None, centre: bool) -> torch.Tensor:
    """``x P diag(γ_f) W_U``: rows ``x`` [..., d] of the stream → logits [..., V] (scale left out)."""
    return _fold_write(x, gain, centre) @ W_U


@dataclass
class HeadCircuits:
    """Each head's own circuits, [L, H, ...]: singular values ``qk_svals``/``ov_svals`` [L, H, d_k]
    (descending), their Frobenius norms and numerical ranks, and the copying scores (module doc);
    ``copying_tokens``: the tokens the copying was measured over (the vocabulary, or fewer);
    ``eigenvalues`` [L, H, d_k] complex of the full OV circuit."""

    qk_svals: np.ndarray
    ov_svals: np.ndarray
    qk_norm: np.ndarray
    ov_norm: np.ndarray
    qk_rank: np.ndarray
    ov_rank: np.ndarray
    copying: np.ndarray
    copying_signed: np.ndarray
    eigenvalues: np.ndarray
    copying_tokens: int
    vocab: int
    seconds: float = 0.0


def copy_subset(
    vocab: int, d: int, *, budget: float = COPY_FLOPS, seed: int = COPY_SEED
) -> np.ndarray | None:
    """The token ids the copying scores use: None (every token) while ``d² · V`` is within ``budget``,
    else ``budget / d²`` ids drawn without replacement (seeded), ascending."""
    if d * d * vocab <= budget:
        return None
    n = max(256, int(budget // (d * d)))
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(vocab, size=min(n, vocab), replace=False))


@torch.no_grad()
def head_circuits(model, hw: HeadWeights | None = None) -> HeadCircuits:
    """Every head's QK and OV singular values, norms and ranks, and its copying score
    (:class:`HeadCircuits`, module doc)."""
    t0 = time.perf_counter()
    hw = hw if hw is not None else head_weights(model)
    d, k = hw.shape[2:]
    qk_core, ov_core = hw.qk().core(), hw.ov().core()
    qk_s, ov_s = torch.linalg.svdvals(qk_core), torch.linalg.svdvals(ov_core)
    E, W_U, gain, centre = _unembedding(model)
    subset = copy_subset(E.shape[0], d)
    if subset is not None:
        ids = torch.as_tensor(subset, device=E.device)
        E, W_U = E[ids], W_U[:, ids]
    G = _fold_read(W_U.to(hw.W_V) @ E.to(hw.W_V), gain, centre)  # P diag(γ_f) W_U E [d, d]
    M = hw.W_O @ G @ hw.W_V  # [L, H, k, k]: its eigenvalues are the full OV circuit's non-zero ones
    lam = torch.linalg.eigvals(M.double())
    mag = lam.abs()
    total = mag.sum(-1).clamp_min(1e-300)
    copying = (mag * (lam.real > 0)).sum(-1) / total
    signed = lam.real.sum(-1) / total
    return HeadCircuits(
        qk_svals=qk_s.double().cpu().numpy(),
        ov_svals=ov_s.double().cpu().numpy(),
        qk_norm=torch.linalg.matrix_norm(qk_core).double().cpu().numpy(),
        ov_norm=torch.linalg.matrix_norm(ov_core).double().cpu().numpy(),
        qk_rank=numerical_rank(qk_s, max(d, k)).cpu().numpy(),
        ov_rank=numerical_rank(ov_s, max(d, k)).cpu().numpy(),
        copying=copying.cpu().numpy(),
        copying_signed=signed.cpu().numpy(),
        eigenvalues=lam.cpu().numpy(),
        copying_tokens=int(E.shape[0]),
        vocab=int(model.config.vocab_size),
        seconds=time.perf_counter() - t0,
    )


@torch.no_grad()
def full_ov_circuit(model, layer: int, head: int, sources: Sequence[int], hw: HeadWeights | None = None):
    """Rows of the full OV circuit ``W_E W_OV W_U`` for the ``sources`` token ids: [n, V] float32
    numpy, how much attending to each source token raises each logit (direct path, module doc)."""
    hw = hw if hw is not None else head_weights(model)
    E, W_U, gain, centre = _unembedding(model)
    ids = torch.as_tensor(list(sources), dtype=torch.long, device=E.device)
    x = (E[ids].to(hw.W_V) @ hw.W_V[layer, head]) @ hw.W_O[layer, head]  # [n, d]
    return _unembed(x, W_U.to(x), gain, centre).float().cpu().numpy()


@torch.no_grad()
def full_qk_circuit(model, layer: int, head: int, tokens: Sequence[int], hw: HeadWeights | None = None):
    """The full QK circuit ``W_E W_QK W_Eᵀ`` over ``tokens``: [n, n] float32 numpy, row = query token,
    column = key token (before the attention's scale; RoPE at ``hw``'s offset; positions left out)."""
    hw = hw if hw is not None else head_weights(model)
    E, _W_U, _gain_f, _centre = _unembedding(model)
    ids = torch.as_tensor(list(tokens), dtype=torch.long, device=E.device)
    e = E[ids].to(hw.W_Q)
    return ((e @ hw.W_Q[layer, head]) @ (e @ hw.W_K[layer, head]).T).float().cpu().numpy()


@torch.no_grad()
def promoted_tokens(
    model, sources: Sequence[int], layer: int, head: int, *, top: int = 8, hw: HeadWeights | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The ``top`` tokens head (layer, head)'s OV circuit raises most when it attends to each source
    token: (ids [n, top], logit changes [n, top]), from :func:`full_ov_circuit`'s rows."""
    rows = torch.from_numpy(full_ov_circuit(model, layer, head, sources, hw))
    top = min(int(top), rows.shape[1])
    values, ids = rows.topk(top, dim=-1)
    return ids.numpy(), values.numpy()


# ---------------------------------------------------------------------------------------------
# everything at once
# ---------------------------------------------------------------------------------------------
@dataclass
class Circuits:
    """What the Circuits page and ``attention-lab circuits`` show: :class:`Composition`,
    :class:`HeadCircuits`, the notes on how norms, biases and positions were treated, the RoPE offset
    (None without RoPE) and the seconds each part took."""

    composition: Composition
    heads: HeadCircuits
    notes: list[str]
    rope_offset: int | None
    seconds: dict[str, float] = field(default_factory=dict)

    def arrays(self) -> dict[str, np.ndarray]:
        """The numbers as plain arrays (the .npz export; no pickles)."""
        c, h = self.composition, self.heads
        return {
            "composition": c.scores.astype(np.float64),
            "kinds": np.array(KINDS, dtype=str),
            "baseline": np.float64(c.baseline),
            "baseline_p95": np.float64(c.baseline_p95),
            "baseline_rms": np.float64(c.baseline_rms),
            "baseline_samples": np.int64(c.samples),
            "baseline_seed": np.int64(c.seed),
            "qk_singular_values": h.qk_svals,
            "ov_singular_values": h.ov_svals,
            "qk_norm": h.qk_norm,
            "ov_norm": h.ov_norm,
            "qk_rank": h.qk_rank.astype(np.int64),
            "ov_rank": h.ov_rank.astype(np.int64),
            "copying": h.copying.astype(np.float64),
            "copying_signed": h.copying_signed.astype(np.float64),
            "copying_tokens": np.int64(h.copying_tokens),
            "rope_offset": np.int64(-1 if self.rope_offset is None else self.rope_offset),
            "notes": np.array(self.notes, dtype=str),
        }


@torch.no_grad()
def model_circuits(model, *, rope_offset: int = 0) -> Circuits:
    """:class:`Composition` and :class:`HeadCircuits` of ``model`` (one fold of the weights for both)."""
    t0 = time.perf_counter()
    cfg = model.config
    reason = unsupported(cfg)
    if reason:
        raise CircuitsUnsupported(reason)
    work = composition_work(cfg)
    if work > MAX_COMPOSITION_FLOPS:
        raise CircuitsUnsupported(
            f"{cfg.n_layers} layers × {cfg.n_heads} heads: every pair of heads is {work:.1e} "
            f"multiply-adds, more than the {MAX_COMPOSITION_FLOPS:.0e} this computes in minutes"
        )
    hw = head_weights(model, rope_offset=rope_offset)
    t1 = time.perf_counter()
    comp = composition_scores(hw)
    t2 = time.perf_counter()
    heads = head_circuits(model, hw)
    t3 = time.perf_counter()
    return Circuits(
        comp,
        heads,
        hw.notes,
        hw.rope_offset,
        {"weights": t1 - t0, "composition": t2 - t1, "heads": t3 - t2, "total": t3 - t0},
    )


__all__ = [
    "BASELINE_SAMPLES",
    "BASELINE_SEED",
    "KINDS",
    "KIND_WORDS",
    "Circuits",
    "CircuitsUnsupported",
    "Composition",
    "FactoredMatrix",
    "HeadCircuits",
    "HeadWeights",
    "baseline_scores",
    "composition_scores",
    "composition_work",
    "copy_subset",
    "full_ov_circuit",
    "full_qk_circuit",
    "head_circuits",
    "head_weights",
    "model_circuits",
    "norm_notes",
    "numerical_rank",
    "promoted_tokens",
    "rotation",
    "unsupported",
]
