"""Every head's weights as the circuits read them (``model.interp.analysis.circuits`` has the
conventions): ``W_Q, W_K, W_V`` [d, d_k] and ``W_O`` [d_k, d] per head with the norms' gains folded in
(TransformerLens's ``fold_ln``), RoPE's rotation at a chosen query − key offset, and the factored
``d × d`` circuits ``W_QK = W_Q W_Kᵀ``, ``W_OV = W_V W_O`` (:class:`FactoredMatrix`, never formed).
Post-LN and latent attention are refused (:class:`CircuitsUnsupported`, one line)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn as nn

from model.errors import AttentionLabError


class CircuitsUnsupported(AttentionLabError, ValueError):
    """The model's head-level algebra is not one matrix per head (one line, see the module doc)."""


def unsupported(config) -> str | None:
    """Why the circuits of a model of ``config`` cannot be computed from its weights (None: they can)."""
    if config.normalization.norm_position == "post":
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
    kind = "LayerNorm" if config.normalization.norm == "layernorm" else "RMSNorm"
    notes = []
    if config.normalization.norm_position in ("pre", "sandwich"):
        centred = ", centring kept" if config.normalization.norm == "layernorm" else ""
        notes.append(
            f"{kind} gains folded into the W_Q, W_K, W_V that read them{centred}, per-token scale left out "
            "(TransformerLens's fold_ln)"
        )
    else:
        notes.append("attention reads the stream itself (output norms): nothing to fold into W_Q, W_K, W_V")
    if config.normalization.norm_position in ("sandwich", "output"):
        notes.append(f"the {kind} on the attention's output folded into W_O (scale left out)")
    notes.append("biases left out; the final norm's gain folded into W_U")
    if config.positional.positions == "rope":
        notes.append(
            "RoPE: QK circuits and Q/K-composition depend on the query − key offset and are shown at one "
            "(0: the unrotated W_Q W_Kᵀ); OV circuits, V-composition and copying do not"
        )
    elif config.positional.positions in ("learned", "sinusoidal"):
        notes.append("positions are added to the stream: the full circuits are of tokens alone")
    if config.attention.qk_rmsnorm:
        notes.append("QK-norm gains folded into W_Q, W_K (scale left out)")
    if config.attention.attn_scale == "qk_norm":
        notes.append("cosine attention: a QK circuit up to a positive factor per token")
    if config.attention.attn_softcap is not None:
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
    H, Hkv, k, d = cfg.attention.n_heads, cfg.kv_heads, cfg.d_head, cfg.core.d_model
    rope = cfg.positional.positions == "rope" and model.pos_emb is not None and hasattr(model.pos_emb, "cos")
    if not rope:
        rope_offset = 0
    scope = cfg.attention.qk_norm_scope
    n_rep = H // Hkv
    out: dict[str, list[torch.Tensor]] = {"Q": [], "K": [], "V": [], "O": []}
    chosen = range(cfg.core.n_layers) if layers is None else [int(layer) for layer in layers]
    for layer in chosen:
        block = model.blocks[layer]
        attn = block.attn
        if not all(hasattr(attn, p) for p in ("q_proj", "k_proj", "v_proj", "o_proj")):
            raise CircuitsUnsupported(f"layer {layer}'s attention has no q/k/v/o projections of its own")
        # the projections' rows are the heads' dimensions: [H·d_k, d] read the stream
        q = attn.q_proj.weight.detach().to(dtype)
        kk = attn.k_proj.weight.detach().to(dtype)
        v = attn.v_proj.weight.detach().to(dtype)
        if cfg.normalization.norm_position in (
            "pre",
            "sandwich",
        ):  # x → x P diag(γ) → W: rows scaled, then centred
            gain, centre = _gain(block.norm1, f"layer {layer}'s attention norm")
            q, kk, v = (_fold_rows(w, gain, centre) for w in (q, kk, v))
        if cfg.attention.qk_rmsnorm:  # QK-norm after the projection: its gain scales rows
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
        post = block.post_norm1 if cfg.normalization.norm_position == "sandwich" else None
        if cfg.normalization.norm_position == "output":
            post = block.norm1
        if post is not None:
            gain, centre = _gain(post, f"layer {layer}'s output norm")
            o = _fold_write(o, gain, centre)
        if cfg.normalization.norm == "layernorm" and cfg.normalization.norm_position in ("pre", "sandwich"):
            o = _fold_write(o, None, True)  # every reader centres: the mean is invisible
        Or = o.reshape(H, k, d)
        if rope:  # rope(x W_Q) = x W_Q R: rows Rᵀ Q
            Qr = rotation(model, layer, rope_offset, dtype).to(Qr.device).T @ Qr
            Kr = rotation(model, layer, 0, dtype).to(Kr.device).T @ Kr
        for key, W in zip("QKVO", (Qr, Kr, Vr, Or)):
            out[key].append(W.contiguous())
    Q, K, V, O = (torch.stack(out[key]) for key in "QKVO")
    return HeadWeights(Q, K, V, O, rope_offset=rope_offset if rope else None, notes=norm_notes(cfg))


__all__ = [
    "CircuitsUnsupported",
    "FactoredMatrix",
    "HeadWeights",
    "head_weights",
    "norm_notes",
    "numerical_rank",
    "rotation",
    "unsupported",
]
