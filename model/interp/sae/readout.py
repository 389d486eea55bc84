"""What a feature writes and what writes it, from the weights and one prompt: a dashboard's other half.

Shapes: ``F = d_sae`` features, ``d`` the stream's width, ``H`` heads of ``d_v`` values (``z``'s
``d_in = H·d_v``, head-major), ``V`` tokens.

* :func:`site_write` — what a vector at the site adds to the residual stream: itself for
  ``resid_pre``, ``attn_out`` and ``mlp_out``; through ``W_O`` for ``z``,
  ``Σ_h W_O,h z_h = W_O z`` (``W_O`` = ``o_proj.weight`` [d, H·d_v]; the output bias is no part of
  ``z``).
* :func:`feature_logits` — the logit lens of a feature's decoder direction, as TransformerLens's
  folded weights and Neuronpedia's "top logits" read it: ``logits_i = W_U P diag(γ_f) write(W_dec,i)``
  [V], ``γ_f`` the final norm's gain, ``P`` its centring (LayerNorm only; RMSNorm does not centre).
  The norm's scale is left out (it belongs to a token, not to the direction), so the values rank
  tokens and compare features of one SAE; a block norming its sublayer's output (Gemma 2/3's
  sandwich, OLMo 2's output norm) adds that norm's gain the same way for ``z``/``attn_out``/``mlp_out``.
  A Post-LN model has no final norm: ``W_U`` alone.
* :func:`head_shares` — for a ``z`` SAE, ``share[i, h] = ‖W_dec[i, h]‖² / ‖W_dec[i]‖²`` [F, H], the
  part of feature ``i``'s decoder direction in head ``h``'s slice: which heads write it (rows sum to
  1; a zero row is all 0).
* :func:`feature_source_attribution` — direct feature attribution through the pattern (Kissane et
  al. 2024, "Interpreting attention layer outputs with sparse autoencoders"). The pre-activation is
  linear in ``z``, and ``z_h[t] = Σ_s A_h[t, s] v_h[s]``, so at query position ``t``::

      pre_i = (z − b_dec) · W_enc[:, i] + b_enc,i
            = Σ_h Σ_s A_h[t, s] (v_h[s] · W_enc[h, i])  +  (b_enc,i − b_dec · W_enc[:, i])
                      └── contribution[h, s] ──┘           └──────── bias ────────┘

  ``W_enc[h, i]`` [d_v] is head ``h``'s slice of the encoder column; ``v_h`` the values head ``h``
  reads (its key/value head under GQA). Without ``apply_b_dec_to_input`` the bias is ``b_enc,i``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.attribution import _sublayer_norms
from model.interp.analysis.circuit_weights import _fold_write, _gain
from model.interp.analysis.full_circuits import _unembedding
from model.interp.analysis.patch_runs import as_ids
from model.interp.sae.sae import SparseAutoencoder
from model.interp.sae.site import Site, SiteError, site_activations

#: Features whose logits [n, V] are computed at once by :func:`feature_logits`.
LOGIT_CHUNK = 256


def check_fits(model, sae: SparseAutoencoder) -> None:
    """Refuse, in one line, an SAE whose site the model lacks or whose width is not the site's there."""
    site = sae.config.site
    site.check(model.config)
    want = site.d_in(model.config)
    if sae.config.d_in != want:
        raise SiteError(
            f"the SAE reads {sae.config.d_in} values a token, but this model's {site.label()} has {want}"
        )


def site_write(model, site: Site, x: torch.Tensor) -> torch.Tensor:
    """What ``x`` [..., d_in] at ``site`` adds to the residual stream, [..., d] (module docstring)."""
    if site.kind == "z":
        W_O = model.blocks[site.layer].attn.o_proj.weight  # [d, H·d_v]
        return x @ W_O.to(x).T
    return x


def _sublayer_norm(model, site: Site):
    """The norm a block applies to the site's output before it joins the stream (sandwich or output
    norms), or None."""
    if site.kind == "resid_pre":
        return None
    attn_norm, mlp_norm = _sublayer_norms(model, model.blocks[site.layer])
    return mlp_norm if site.kind == "mlp_out" else attn_norm


@dataclass
class FeatureLogits:
    """The tokens features promote and suppress through the unembedding (module docstring):
    ``features`` [n]; ``top_ids`` / ``top_values`` [n, k] the largest logits, ``bottom_ids`` /
    ``bottom_values`` [n, k] the smallest (most negative first)."""

    features: np.ndarray
    top_ids: np.ndarray
    top_values: np.ndarray
    bottom_ids: np.ndarray
    bottom_values: np.ndarray

    def tokens(self, tokenizer, which: str = "top") -> list[list[str]]:
        """The promoted (``"top"``) or suppressed (``"bottom"``) tokens' texts, [n][k]."""
        ids = self.top_ids if which == "top" else self.bottom_ids
        return [tokenizer.token_strings([int(t) for t in row]) for row in ids]


@torch.no_grad()
def feature_logits(
    model, sae: SparseAutoencoder, features: int | Sequence[int] | None = None, k: int = 10
) -> FeatureLogits:
    """The ``k`` tokens each feature's decoder direction promotes most and suppresses most through the
    unembedding (module docstring); ``features``: one index, several, or None (every feature),
    computed :data:`LOGIT_CHUNK` at a time so [F, V] is never held."""
    check_fits(model, sae)
    site = sae.config.site
    F = sae.config.d_sae
    chosen = np.arange(F) if features is None else np.atleast_1d(np.asarray(features, dtype=np.int64))
    if len(chosen) and not (0 <= chosen.min() and chosen.max() < F):
        raise IndexError(f"features {chosen.min()}..{chosen.max()}: the SAE has features 0 to {F - 1}")
    _, W_U, gain, centre = _unembedding(model)  # W_U [d, V]
    k = min(k, W_U.shape[1])
    post = _sublayer_norm(model, site)
    none_i, none_v = torch.zeros(0, k, dtype=torch.long), torch.zeros(0, k)
    parts: list[tuple[torch.Tensor, ...]] = [(none_i, none_v, none_i, none_v)]
    for lo in range(0, len(chosen), LOGIT_CHUNK):
        idx = torch.from_numpy(chosen[lo : lo + LOGIT_CHUNK]).to(sae.W_dec.device)
        write = site_write(model, site, sae.W_dec[idx].float().to(W_U.device))  # [n, d]
        if post is not None:
            write = _fold_write(write, *_gain(post, "the sublayer's output norm"))
        logits = _fold_write(write, gain, centre) @ W_U  # [n, V]
        top, bottom = logits.topk(k, dim=-1), logits.topk(k, dim=-1, largest=False)
        parts.append((top.indices.cpu(), top.values.cpu(), bottom.indices.cpu(), bottom.values.cpu()))
    top_ids, top_values, bottom_ids, bottom_values = (torch.cat(p).numpy() for p in zip(*parts, strict=True))
    return FeatureLogits(chosen, top_ids, top_values, bottom_ids, bottom_values)


def head_shares(sae: SparseAutoencoder, config) -> np.ndarray:
    """[F, H] each feature's squared decoder norm by head, each row summing to 1 (module docstring);
    a :class:`SiteError` for an SAE not on ``z``."""
    site = sae.config.site
    if site.kind != "z":
        raise SiteError(f"head shares need an SAE on z (the heads' outputs); this one reads {site.label()}")
    H = config.attention.n_heads
    W = sae.W_dec.detach().double().reshape(sae.config.d_sae, H, -1)  # [F, H, d_v]
    per_head = (W * W).sum(-1)
    norm = per_head.sum(-1, keepdim=True)
    return (per_head / torch.where(norm > 0, norm, 1.0)).float().cpu().numpy()


@dataclass
class SourceAttribution:
    """Feature ``feature``'s pre-activation at ``position`` through the pattern (module docstring):
    ``contributions`` [H, position + 1] float64, one per head and source token; ``bias`` the constant
    term; ``pre_activation`` the SAE's own ``pre_i`` of the model's ``z`` and ``activation`` its
    ``f_i``. ``contributions.sum() + bias == pre_activation`` (float32 rounding)."""

    feature: int
    position: int
    contributions: np.ndarray
    bias: float
    pre_activation: float
    activation: float

    @property
    def per_head(self) -> np.ndarray:
        """[H] each head's part, summed over its source tokens."""
        return self.contributions.sum(axis=1)


@torch.no_grad()
def feature_source_attribution(
    model, sae: SparseAutoencoder, feature: int, ids, position: int
) -> SourceAttribution:
    """Which source tokens the heads attended to, to write ``z`` feature ``feature`` at query
    ``position`` of the prompt ``ids`` ([T] or [1, T]; negative counts from the end): one pass as deep
    as the layer's ``z``, its pattern and values read (module docstring)."""
    site = sae.config.site
    if site.kind != "z":
        raise SiteError(f"source attribution needs an SAE on z; this one reads {site.label()}")
    check_fits(model, sae)
    if not 0 <= feature < sae.config.d_sae:
        raise IndexError(f"feature {feature}: the SAE has features 0 to {sae.config.d_sae - 1}")
    idx = as_ids(model, ids)
    T = idx.shape[1]
    if not -T <= position < T:
        raise ValueError(f"position {position} is outside a prompt of {T} tokens")
    t = position % T
    got: dict[str, torch.Tensor] = {}

    def keep(name):
        def fn(x, hook):
            got[name] = x.detach()[0].double().clone()

        fn.reads_only = True  # type: ignore[attr-defined]  # the marker model.nn.hooks.reader sets
        return fn

    attn = f"blocks.{site.layer}.attn"
    z = site_activations(model, site, idx, hooks=[(f"{attn}.pattern", keep("A")), (f"{attn}.v", keep("v"))])
    A, v = got["A"][:, t, : t + 1], got["v"][:, : t + 1]  # [H, t+1], [H_kv, t+1, d_v]
    H = A.shape[0]
    if v.shape[0] != H:  # GQA: query head h reads key/value head h // (H / H_kv)
        v = v.repeat_interleave(H // v.shape[0], dim=0)
    w = sae.W_enc[:, feature].double().reshape(H, -1).to(v.device)  # [H, d_v]
    contributions = A * torch.einsum("hsk,hk->hs", v, w)
    bias = float(sae.b_enc[feature].double())
    if sae.config.apply_b_dec_to_input:
        bias -= float(sae.b_dec.double() @ sae.W_enc[:, feature].double())
    x = z[0, t].to(sae.W_enc)
    return SourceAttribution(
        feature=int(feature),
        position=t,
        contributions=contributions.cpu().numpy(),
        bias=bias,
        pre_activation=float(sae.pre_activations(x)[feature]),
        activation=float(sae.encode(x)[feature]),
    )


__all__ = [
    "LOGIT_CHUNK",
    "FeatureLogits",
    "SourceAttribution",
    "check_fits",
    "feature_logits",
    "feature_source_attribution",
    "head_shares",
    "site_write",
]
