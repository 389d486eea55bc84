"""Features of attention: sparse autoencoders on a site of a layer.

:mod:`.site` names where an SAE reads (``z``, ``attn_out``, ``resid_pre``, ``mlp_out``) and reads it;
:mod:`.sae` is the autoencoder itself; :mod:`.stream` streams a site's activations from a corpus, only
as deep as the site; :mod:`.train` trains one (TopK or ReLU + L1, resumable); :mod:`.format` writes and
reads SAELens's folder (``cfg.json`` + ``sae_weights.safetensors``), refusing a hostile one before
allocating; :mod:`.evaluate` measures one as SAELens does (variance explained, L0, dead and dense
features, loss recovered); :mod:`.dashboard` and :mod:`.readout` read a feature over a corpus and from
its weights (top examples, histogram, promoted tokens, heads that write it, the source tokens they
read); :mod:`.prompt` gives the features of a typed prompt and their exact parts of a logit.
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
