"""Direct logit attribution: how much each head and each MLP writes straight into one logit.

In a Pre-LN model the stream leaving the last block is a sum of writes (position ``p``, width ``d``)::

    x = e + Σ_l ( Σ_h W_O[h] z_{l,h} + b_O,l + mlp_l )            [d]

with ``e`` the token embedding plus added positions (``blocks.0.resid_pre``), ``z_{l,h}`` [d_k] head
``h``'s output (``blocks.l.attn.z``), ``W_O[h]`` [d, d_k] its slice of ``o_proj``, ``b_O,l`` the output
bias (if any) and ``mlp_l`` [d] the MLP's write (``blocks.l.mlp.out``). The logit of token ``t`` is
``u_t · Norm_f(x)`` with ``u_t`` [d] its row of the unembedding (tied or not; no output bias here).

The final norm is not linear, so its scale is **frozen from the clean run**, which makes it linear in
the writes:

* LayerNorm: ``Norm_f(x) = γ ⊙ (x − mean(x)) / σ + β`` with ``σ = √(var(x) + ε)`` of this run, so a
  write ``c`` contributes ``u_t · (γ ⊙ (c − mean(c)) / σ)`` and ``β`` adds ``u_t · β``;
* RMSNorm: ``Norm_f(x) = γ ⊙ x / r`` with ``r = √(mean(x²) + ε)`` of this run: ``u_t · (γ ⊙ c / r)``.

The parts (embedding, every head, every output bias, every MLP, the norm's β) add up to the model's
logit exactly (to float32 rounding). For a difference of two tokens ``u = u_a − u_b``. A part's
contribution is *direct* only: what a head writes that later layers read and transform is counted
where it finally lands, not at the head.

Gemma's RMSNorm scales by ``1 + γ`` (``norm_offset``); its gain is read as the norm computes it.

Norms after the sublayers (Gemma 2/3's ``sandwich``, OLMo 2's ``output``) normalise each sublayer's
whole output before it joins the stream: ``x += Norm'(Σ_h W_O[h] z_h + b_O)``. With that norm's scale
frozen too (the rms of this layer's attention output at ``p``), head ``h`` writes
``γ' ⊙ W_O[h] z_h / r'``, so the parts still add up exactly. A final soft-cap (Gemma 2's
``c·tanh(z/c)``) bends the logit: the parts add up to ``z``, the logit before the cap, and
``capped`` holds the model's value.

Post-LN models have no single final norm (each block renormalises the whole stream, so no write
reaches the logits through one frozen scale): :func:`direct_logit_attribution` refuses them with a
ValueError.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.patching import as_ids, cache_activations
from model.nn.layers import OffsetRMSNorm


@dataclass
class LogitAttribution:
    """Direct contributions to one logit (or a difference of two) at ``position``.

    ``embed``: token embedding + added positions; ``heads`` [L, H]; ``attn_bias`` [L] (``o_proj``'s
    bias, and a sublayer norm's β, 0 without); ``mlp`` [L]; ``norm_bias``: the final LayerNorm's ``β``
    term (0 for RMSNorm or without β); ``logit``: the model's own value (before a final soft-cap);
    ``scale``: the frozen σ (LayerNorm) or rms (RMSNorm). ``token`` and ``other`` (None unless a
    difference): the token ids. ``total`` = the sum of every part, which equals ``logit`` to float32
    rounding. ``softcap`` and ``capped``: the final soft-cap ``c`` and the model's capped value
    (``c·tanh(z_a/c) − c·tanh(z_b/c)`` for a difference), None without a cap. ``sublayer_norms``: the
    blocks normalise each sublayer's output (sandwich or output norms), frozen too.
    """

    embed: float
    heads: np.ndarray
    attn_bias: np.ndarray
    mlp: np.ndarray
    norm_bias: float
    logit: float
    scale: float
    position: int
    token: int
    other: int | None = None
    softcap: float | None = None
    capped: float | None = None
    sublayer_norms: bool = False

    @property
    def total(self) -> float:
        return float(self.embed + self.heads.sum() + self.attn_bias.sum() + self.mlp.sum() + self.norm_bias)

    def parts(self) -> list[tuple[str, float]]:
        """(name, contribution) in stream order: ``embed``, ``L0H0`` .. ``L0H{H-1}``, ``L0 attn bias``
        (only with a bias), ``L0 MLP``, ..., ``norm bias`` (only with β)."""
        out = [("embed", float(self.embed))]
        L, H = self.heads.shape
        for layer in range(L):
            out += [(f"L{layer}H{h}", float(self.heads[layer, h])) for h in range(H)]
            if self.attn_bias[layer] != 0:
                out.append((f"L{layer} attn bias", float(self.attn_bias[layer])))
            out.append((f"L{layer} MLP", float(self.mlp[layer])))
        if self.norm_bias != 0:
            out.append(("norm bias", float(self.norm_bias)))
        return out


def frozen_norm(norm, x: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, float, float]:
    """``norm`` with its scale frozen at its input ``x`` [d], seen from a direction ``u`` [d] after it:
    ``(w, shift, scale)`` with ``u · Norm(c) = c · w + shift`` for the writes ``c`` that sum to ``x``.

    LayerNorm: ``w = (γ⊙u − mean(γ⊙u)) / σ``, ``shift = β·u``; RMSNorm: ``w = g⊙u / r`` with ``g = γ``
    (``1 + γ`` for Gemma's offset norm), ``shift = 0``. Float64 in and out; ``scale`` is σ or r.
    """
    eps = norm.eps if norm.eps is not None else torch.finfo(torch.float32).eps
    weight = getattr(norm, "weight", None)
    gamma = weight.double() if weight is not None else torch.ones_like(x)
    if isinstance(norm, torch.nn.LayerNorm):
        scale = torch.sqrt(x.var(unbiased=False) + eps)
        w = gamma * u
        beta = norm.bias
        return (w - w.mean()) / scale, float(beta.double() @ u) if beta is not None else 0.0, float(scale)
    if isinstance(norm, OffsetRMSNorm):
        gamma = 1.0 + gamma
    scale = torch.sqrt((x * x).mean() + eps)
    return gamma * u / scale, 0.0, float(scale)


def _sublayer_norms(model, block) -> tuple[torch.nn.Module | None, torch.nn.Module | None]:
    """The norms a block applies to its attention's and its MLP's output before they join the stream
    (Gemma 2/3: ``post_norm1/2``; OLMo 2: ``norm1/2``), or (None, None) in a Pre-LN block."""
    position = model.config.normalization.norm_position
    if position == "sandwich":
        return block.post_norm1, block.post_norm2
    if position == "output":
        return block.norm1, block.norm2
    return None, None


def _attributable(model, T: int, position: int) -> int:
    """``position`` of a prompt of ``T`` tokens as an index in [0, T); a ValueError naming why when
    the model (Post-LN) or the position cannot be attributed."""
    if model.norm_f is None:
        raise ValueError(
            "direct logit attribution needs a Pre-LN model: a Post-LN model has no single final norm "
            "(every block renormalises the whole stream), so the heads' writes do not reach the logits "
            "through one frozen scale"
        )
    if not -T <= position < T:
        raise ValueError(f"position {position} is outside a prompt of {T} tokens")
    return position % T


@torch.no_grad()
def direct_logit_attribution(
    model, prompt, *, token: int | None = None, other: int | None = None, position: int = -1, tokenizer=None
) -> LogitAttribution:
    """:class:`LogitAttribution` of ``logit[position, token]`` (``− logit[position, other]`` if given).

    ``prompt``: text (with ``tokenizer``) or ids [T] / [1, T]; ``token`` None = the model's top
    prediction at ``position``. Runs one forward in evaluation mode (the fused path: only ``attn.z``,
    ``mlp.out`` and the stream are hooked, and the attention's output under a norm after it).
    Post-LN models are a ValueError (no single final norm).
    """
    cfg = model.config
    idx = as_ids(model, prompt, tokenizer)
    position = _attributable(model, idx.shape[1], position)
    L, H, d_v = cfg.core.n_layers, cfg.attention.n_heads, cfg.v_dim
    post_normed = cfg.normalization.norm_position in ("sandwich", "output")
    parts = ("attn.z", "attn.out", "mlp.out") if post_normed else ("attn.z", "mlp.out")
    names = ["blocks.0.resid_pre", f"blocks.{L - 1}.resid_post"]
    names += [f"blocks.{l}.{p}" for l in range(L) for p in parts]
    cache, logits = cache_activations(model, idx, names)
    row = logits[0, position].double()
    token = int(row.argmax()) if token is None else int(token)
    W_U = (model.lm_head.weight if model.lm_head is not None else model.tok_emb.weight).double()  # [V, d]
    u = W_U[token] - (W_U[int(other)] if other is not None else 0.0)  # [d]
    logit = float(row[token] - (row[int(other)] if other is not None else 0.0))

    def at(name):
        return cache[name][0].double()

    x = at(f"blocks.{L - 1}.resid_post")[position]  # [d], the final norm's input
    w, norm_bias, scale = frozen_norm(model.norm_f, x, u)
    capped, cap = None, cfg.core.final_softcap
    if cap is not None:  # the parts add up to the logit before c·tanh(z/c): z itself, from the norm
        z = W_U @ model.norm_f(x.to(W_U.dtype)[None].float()).double()[0]  # [V]
        capped, logit = logit, float(z[token] - (z[int(other)] if other is not None else 0.0))

    embed = float(at("blocks.0.resid_pre")[position] @ w)
    heads = np.zeros((L, H))
    attn_bias = np.zeros(L)
    mlp = np.zeros(L)
    for layer, block in enumerate(model.blocks):
        attn_norm, mlp_norm = _sublayer_norms(model, block)
        w_attn, shift = w, 0.0
        if attn_norm is not None:  # the head's write passes this layer's frozen norm first
            w_attn, shift, _ = frozen_norm(attn_norm, at(f"blocks.{layer}.attn.out")[position], w)
        z = at(f"blocks.{layer}.attn.z")[:, position]  # [H, d_v]
        W_O = block.attn.o_proj.weight.double().view(-1, H, d_v)  # [d, H, d_v]
        heads[layer] = torch.einsum("hk,dhk,d->h", z, W_O, w_attn).cpu().numpy()
        attn_bias[layer] = shift
        if block.attn.o_proj.bias is not None:
            attn_bias[layer] += float(block.attn.o_proj.bias.double() @ w_attn)
        out = at(f"blocks.{layer}.mlp.out")[position]
        if mlp_norm is not None:
            w_mlp, shift, _ = frozen_norm(mlp_norm, out, w)
            mlp[layer] = float(out @ w_mlp) + shift
        else:
            mlp[layer] = float(out @ w)
    return LogitAttribution(
        embed=embed,
        heads=heads,
        attn_bias=attn_bias,
        mlp=mlp,
        norm_bias=norm_bias,
        logit=logit,
        scale=scale,
        position=position,
        token=token,
        other=None if other is None else int(other),
        softcap=cap,
        capped=capped,
        sublayer_norms=post_normed,
    )


__all__ = ["LogitAttribution", "direct_logit_attribution", "frozen_norm"]
