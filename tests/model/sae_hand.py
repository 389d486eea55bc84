"""A sparse autoencoder built by hand, so that tests of reading features assert known properties.

On a ``z`` of 4 heads (the starter's layer 1: 4 heads × 32 values, head-major): feature 0's decoder
row lies in head 3's slice only, feature 1's is split between head 0 (a quarter of its norm²) and
head 2 (three quarters), every other row is random over all heads; each row is a unit vector and the
encoder is the decoder's transpose, biases drawn small and nonzero (so every bias term of a sum is
exercised).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from model.interp.sae import SAEConfig, Site, SparseAutoencoder

N_HEADS, D_V = 4, 32

#: The starter's layer-1 z.
STARTER_Z = Site("z", 1)


def hand_sae(site: Site = STARTER_Z, d_in: int = N_HEADS * D_V, d_sae: int = 64, k: int = 8, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    W = torch.randn(d_sae, d_in, generator=g)
    if site.kind == "z":  # of a model of 4 heads
        d_v = d_in // N_HEADS
        W[0] = 0.0
        W[0, 3 * d_v : 4 * d_v] = torch.randn(d_v, generator=g)
        W[1] = 0.0
        W[1, 0:d_v] = 0.5 * _unit(torch.randn(d_v, generator=g))
        W[1, 2 * d_v : 3 * d_v] = 0.75**0.5 * _unit(torch.randn(d_v, generator=g))
    W = W / W.norm(dim=1, keepdim=True)
    sae = SparseAutoencoder(SAEConfig(site, d_in, d_sae, architecture="topk", k=k))
    with torch.no_grad():
        sae.W_dec.copy_(W)
        sae.W_enc.copy_(W.T)
        sae.b_enc.copy_(0.01 * torch.randn(d_sae, generator=g))
        sae.b_dec.copy_(0.01 * torch.randn(d_in, generator=g))
    return sae


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm()


def write_saelens_folder(sae: SparseAutoencoder, folder: Path) -> Path:
    """``sae`` as SAELens 6 writes one: ``cfg.json`` (its fields) and ``sae_weights.safetensors``."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    c = sae.config
    cfg = {
        "architecture": c.architecture,
        "d_in": c.d_in,
        "d_sae": c.d_sae,
        "k": c.k,
        "dtype": "float32",
        "device": "cpu",
        "apply_b_dec_to_input": c.apply_b_dec_to_input,
        "normalize_activations": "none",
        "metadata": {"model_name": "starter", "hook_name": c.site.hook_name, "hook_head_index": None},
    }
    (folder / "cfg.json").write_text(json.dumps(cfg), encoding="utf-8")
    tensors = {
        name: getattr(sae, name).detach().contiguous() for name in ("W_enc", "b_enc", "W_dec", "b_dec")
    }
    save_file(tensors, str(folder / "sae_weights.safetensors"))
    return folder
