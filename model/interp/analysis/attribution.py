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

Post-LN models have no single final norm (each block renormalises the whole stream, so no write
reaches the logits through one frozen scale): :func:`direct_logit_attribution` refuses them with a
ValueError.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.patching import as_ids, cache_activations


@dataclass
class LogitAttribution:
    """Direct contributions to one logit (or a difference of two) at ``position``.

    ``embed``: token embedding + added positions; ``heads`` [L, H]; ``attn_bias`` [L] (``o_proj``'s
    bias, 0 without one); ``mlp`` [L]; ``norm_bias``: the final LayerNorm's ``β`` term (0 for RMSNorm
    or without β); ``logit``: the model's own value; ``scale``: the frozen σ (LayerNorm) or rms
    (RMSNorm). ``token`` and ``other`` (None unless a difference): the token ids. ``total`` = the sum
    of every part, which equals ``logit`` to float32 rounding.
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


@torch.no_grad()
def direct_logit_attribution(
    model, prompt, *, token: int | None = None, other: int | None = None, position: int = -1, tokenizer=None
) -> LogitAttribution:
    """:class:`LogitAttribution` of ``logit[position, token]`` (``− logit[position, other]`` if given).

    ``prompt``: text (with ``tokenizer``) or ids [T] / [1, T]; ``token`` None = the model's top
    prediction at ``position``. Runs one forward in evaluation mode (the fused path: only ``attn.z``,
    ``mlp.out`` and the stream are hooked). Post-LN models are a ValueError (no single final norm).
    """
    cfg = model.config
    if model.norm_f is None:
        raise ValueError(
            "direct logit attribution needs a Pre-LN model: a Post-LN model has no single final norm "
            "(every block renormalises the whole stream), so the heads' writes do not reach the logits "
            "through one frozen scale"
        )
    if cfg.norm_position in ("sandwich", "output"):
        raise ValueError(
            f"direct logit attribution needs a Pre-LN model: with norm_position={cfg.norm_position!r} "
            "each sublayer's output is normalised as a whole before it joins the stream, so it does not "
            "split into one part per head"
        )
    if cfg.final_softcap is not None:
        raise ValueError(
            "direct logit attribution needs logits linear in the stream: "
            f"final_softcap={cfg.final_softcap:g} bends them through c·tanh(z/c), so the parts would not "
            "add up to the logit"
        )
    idx = as_ids(model, prompt, tokenizer)
    T = idx.shape[1]
    if not -T <= position < T:
        raise ValueError(f"position {position} is outside a prompt of {T} tokens")
    position %= T
    L, H, d_v = cfg.n_layers, cfg.n_heads, cfg.v_dim
    names = ["blocks.0.resid_pre", f"blocks.{L - 1}.resid_post"]
    names += [f"blocks.{l}.{p}" for l in range(L) for p in ("attn.z", "mlp.out")]
    cache, logits = cache_activations(model, idx, names)
    row = logits[0, position].double()
    token = int(row.argmax()) if token is None else int(token)
    W_U = (model.lm_head.weight if model.lm_head is not None else model.tok_emb.weight).double()  # [V, d]
    u = W_U[token] - (W_U[int(other)] if other is not None else 0.0)  # [d]
    logit = float(row[token] - (row[int(other)] if other is not None else 0.0))

    norm = model.norm_f
    x = cache[f"blocks.{L - 1}.resid_post"][0, position].double()  # [d], the final norm's input
    eps = norm.eps if norm.eps is not None else torch.finfo(x.dtype).eps
    gamma = norm.weight.double() if norm.weight is not None else torch.ones_like(x)
    if isinstance(norm, torch.nn.LayerNorm):
        scale = torch.sqrt(x.var(unbiased=False) + eps)
        w = gamma * u
        w = (w - w.mean()) / scale  # c · w = u · (γ ⊙ (c − mean(c)) / σ)
        beta = norm.bias
        norm_bias = float(beta.double() @ u) if beta is not None else 0.0
    else:  # RMSNorm
        scale = torch.sqrt((x * x).mean() + eps)
        w = gamma * u / scale
        norm_bias = 0.0

    def at(name):
        return cache[name][0].double()

    embed = float(at("blocks.0.resid_pre")[position] @ w)
    heads = np.zeros((L, H))
    attn_bias = np.zeros(L)
    mlp = np.zeros(L)
    for layer, block in enumerate(model.blocks):
        z = at(f"blocks.{layer}.attn.z")[:, position]  # [H, d_v]
        W_O = block.attn.o_proj.weight.double().view(-1, H, d_v)  # [d, H, d_v]
        heads[layer] = torch.einsum("hk,dhk,d->h", z, W_O, w).cpu().numpy()
        if block.attn.o_proj.bias is not None:
            attn_bias[layer] = float(block.attn.o_proj.bias.double() @ w)
        mlp[layer] = float(at(f"blocks.{layer}.mlp.out")[position] @ w)
    return LogitAttribution(
        embed=embed,
        heads=heads,
        attn_bias=attn_bias,
        mlp=mlp,
        norm_bias=norm_bias,
        logit=logit,
        scale=float(scale),
        position=position,
        token=token,
        other=None if other is None else int(other),
    )


__all__ = ["LogitAttribution", "direct_logit_attribution"]
