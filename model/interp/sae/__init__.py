"""Features of attention: sparse autoencoders on a site of a layer.

:mod:`.site` names where an SAE reads (``z``, ``attn_out``, ``resid_pre``, ``mlp_out``) and reads it;
:mod:`.sae` is the autoencoder itself.
"""

from model.interp.sae.sae import ARCHITECTURES, SAEConfig, SparseAutoencoder
from model.interp.sae.site import SITE_KINDS, Site, SiteError, site_activations

__all__ = [
    "ARCHITECTURES",
    "SITE_KINDS",
    "SAEConfig",
    "Site",
    "SiteError",
    "SparseAutoencoder",
    "site_activations",
]
