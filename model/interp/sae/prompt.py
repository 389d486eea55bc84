"""Features on one prompt: which are active at each position, and what they add to a next-token logit.

:func:`prompt_features` encodes the site's activation ``x`` [T, d_in] of a prompt, ``f = SAE(x)``
[T, F], and lists at each position the features with ``f_i > 0``, strongest first.

:func:`feature_logit_attribution` splits the site's *direct* contribution to the logit of ``token``
at ``position`` into the features'. With ``x = Σ_i f_i W_dec,i + b_dec + ε`` (``ε = x − x̂``, the
SAE's error term) and ``u`` the site's direction to that logit::

    x · u = Σ_i f_i (W_dec,i · u)  +  b_dec · u  +  ε · u                       (exact: linear in x)

``u`` is the direct path, as direct logit attribution takes it
(:mod:`model.interp.analysis.attribution`): the logit is ``u_t · Norm_f(stream)``, ``u_t`` the
token's row of ``W_U``, and the final norm's scale is **frozen** from this run (σ or the rms of the
stream leaving the last block at ``position``), which makes it linear:
``w = frozen_norm(Norm_f)(u_t)`` [d]. Then

* ``resid_pre`` of layer ``l``: ``u = w``. The stream entering block ``l`` reaches the last block's
  output unchanged, beside every later write: this is its direct part only (what later blocks read
  from it and write again is counted where they write, not here: the path through them is not
  linear);
* ``attn_out`` and ``mlp_out``: ``u = w``, or through the block's own norm of that sublayer's output
  when it has one (Gemma 2/3's sandwich, OLMo 2's output norm), frozen too;
* ``z``: through ``W_O`` as well, ``u = W_Oᵀ w_attn`` [H·d_v] (``x · u = (W_O x) · w_attn``).

So ``site`` (``x · u``) equals the direct logit attribution's sum of the site's parts: for ``z`` the
layer's heads, for ``attn_out`` its heads plus the output bias, for ``mlp_out`` the MLP, for
``resid_pre`` of layer ``l`` the embedding and every part of layers before ``l``. Post-LN models are
refused (no single final norm).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from model.interp.analysis.attribution import _attributable, frozen_norm
from model.interp.analysis.patch_runs import as_ids, cache_activations
from model.interp.sae.readout import _sublayer_norm, check_fits, site_write
from model.interp.sae.sae import SparseAutoencoder
from model.interp.sae.site import flatten, site_activations


@dataclass
class PromptFeatures:
    """The active features of a prompt's positions: ``ids`` [T]; ``features[t]`` / ``values[t]`` the
    indices and activations of the features with ``f_i > 0`` at position ``t``, strongest first;
    ``x_norm`` [T] ``‖x‖`` and ``error_norm`` [T] ``‖x − x̂‖`` of each position."""

    ids: np.ndarray
    features: list[np.ndarray]
    values: list[np.ndarray]
    x_norm: np.ndarray
    error_norm: np.ndarray

    def active(self, t: int) -> list[tuple[int, float]]:
        """(feature, activation) of position ``t``, strongest first."""
        return [(int(i), float(v)) for i, v in zip(self.features[t], self.values[t], strict=True)]


@torch.no_grad()
def prompt_features(model, sae: SparseAutoencoder, ids) -> PromptFeatures:
    """The features active at each position of the prompt ``ids`` ([T] or [1, T]), one pass as deep as
    the site (module docstring)."""
    check_fits(model, sae)
    idx = as_ids(model, ids)
    x = site_activations(model, sae.config.site, idx)[0].to(sae.W_enc)  # [T, d_in]
    f = sae.encode(x)
    err = x - sae.decode(f)
    features, values = [], []
    for row in f.cpu():
        on = row.nonzero(as_tuple=True)[0]
        order = row[on].argsort(descending=True, stable=True)
        features.append(on[order].numpy())
        values.append(row[on][order].numpy())
    return PromptFeatures(
        ids=idx[0].cpu().numpy(),
        features=features,
        values=values,
        x_norm=x.norm(dim=-1).cpu().numpy(),
        error_norm=err.norm(dim=-1).cpu().numpy(),
    )


@dataclass
class FeatureLogitAttribution:
    """The site's direct contribution to ``logit[position, token]`` split by feature (module
    docstring): ``features`` [n] the active ones, largest ``|contribution|`` first, their
    ``activations`` and ``contributions`` ``f_i (W_dec,i · u)`` [n]; ``bias`` ``b_dec · u``; ``error``
    ``ε · u``; ``site`` ``x · u``; ``logit`` the model's logit;
    ``scale`` the frozen σ or rms of the final norm. ``total`` equals ``site`` to float rounding."""

    position: int
    token: int
    features: np.ndarray
    activations: np.ndarray
    contributions: np.ndarray
    bias: float
    error: float
    site: float
    logit: float
    scale: float

    @property
    def total(self) -> float:
        return float(self.contributions.sum() + self.bias + self.error)


@torch.no_grad()
def feature_logit_attribution(
    model, sae: SparseAutoencoder, ids, position: int = -1, token: int | None = None
) -> FeatureLogitAttribution:
    """:class:`FeatureLogitAttribution` of the logit of ``token`` (None: the model's top prediction)
    at ``position`` (negative counts from the end) of the prompt ``ids`` ([T] or [1, T]); one forward
    pass. A ValueError for a Post-LN model or a position outside the prompt."""
    check_fits(model, sae)
    site = sae.config.site
    idx = as_ids(model, ids)
    t = _attributable(model, idx.shape[1], position)
    L = model.config.core.n_layers
    last = f"blocks.{L - 1}.resid_post"
    post = _sublayer_norm(model, site)
    post_in = f"blocks.{site.layer}.{'mlp' if site.kind == 'mlp_out' else 'attn'}.out"
    names = [site.hook_point, last] + ([post_in] if post is not None else [])
    cache, logits = cache_activations(model, idx, names)
    row = logits[0, t].double()
    token = int(row.argmax()) if token is None else int(token)
    W_U = model.lm_head.weight if model.lm_head is not None else model.tok_emb.weight  # [V, d]
    w, _, scale = frozen_norm(model.norm_f, cache[last][0, t].double(), W_U[token].double())
    if post is not None:  # the sublayer's own norm, frozen at its input here
        w, _, _ = frozen_norm(post, cache[post_in][0, t].double(), w)
    x = flatten(site, cache[site.hook_point])[0, t].double()  # [d_in]
    W_dec = sae.W_dec.double()
    # the direction of the site to the logit, as the site's write is read: u = ∂(write · w)/∂x
    u = site_write(model, site, torch.eye(x.shape[0], dtype=torch.float64, device=w.device)) @ w
    f = sae.encode(x.to(sae.W_enc)).double()
    on = f.nonzero(as_tuple=True)[0]
    contributions = f[on] * (W_dec[on] @ u)
    order = contributions.abs().argsort(descending=True, stable=True)
    x_hat = f @ W_dec + sae.b_dec.double()
    return FeatureLogitAttribution(
        position=t,
        token=token,
        features=on[order].cpu().numpy(),
        activations=f[on][order].cpu().numpy(),
        contributions=contributions[order].cpu().numpy(),
        bias=float(sae.b_dec.double() @ u),
        error=float((x - x_hat) @ u),
        site=float(x @ u),
        logit=float(row[token]),
        scale=scale,
    )


__all__ = ["FeatureLogitAttribution", "PromptFeatures", "feature_logit_attribution", "prompt_features"]
