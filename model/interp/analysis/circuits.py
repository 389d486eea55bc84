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

Where it lives: the heads' folded weights and :class:`FactoredMatrix` in ``circuit_weights``, the
composition scores and their chance level in ``composition``, each head's circuits and copying in
``full_circuits``; this module puts them together (:func:`model_circuits`) and names them all.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import torch

from model.interp.analysis.circuit_weights import (
    CircuitsUnsupported,
    FactoredMatrix,
    HeadWeights,
    head_weights,
    norm_notes,
    numerical_rank,
    rotation,
    unsupported,
)
from model.interp.analysis.composition import (
    _BASELINES,  # noqa: F401 (the cached chance levels: a benchmark clears them)
    BASELINE_SAMPLES,
    BASELINE_SEED,
    BF16_MIN_WORK,
    KIND_WORDS,
    KINDS,
    MAX_COMPOSITION_FLOPS,
    Composition,
    baseline_scores,
    composition_scores,
    composition_work,
    fast_dtype,
)
from model.interp.analysis.full_circuits import (
    COPY_FLOPS,
    COPY_SEED,
    HeadCircuits,
    copy_subset,
    full_ov_circuit,
    full_qk_circuit,
    head_circuits,
    promoted_tokens,
)


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
            f"{cfg.core.n_layers} layers × {cfg.attention.n_heads} heads: every pair of heads is {work:.1e} "
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
    "BF16_MIN_WORK",
    "COPY_FLOPS",
    "COPY_SEED",
    "KINDS",
    "KIND_WORDS",
    "MAX_COMPOSITION_FLOPS",
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
    "fast_dtype",
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
