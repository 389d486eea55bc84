"""A file written here opens in SAELens itself (``SAE.load_from_disk``) and encodes and decodes as ours to
1e-6: a TopK SAE on every head's z (SAELens reads TransformerLens's hook_z [..., H, d_k]) and a ReLU
SAE on the residual stream. Skipped, saying why, where sae-lens is not installed."""

from __future__ import annotations

import pytest
import torch

from model.interp.sae.format import save_sae
from model.interp.sae.sae import SAEConfig, SparseAutoencoder
from model.interp.sae.site import Site

sae_lens = pytest.importorskip("sae_lens", reason="sae-lens is not installed: pip install sae-lens")

H, D_K, D_SAE = 4, 8, 128


def random_sae(site: Site, architecture: str) -> SparseAutoencoder:
    sae = SparseAutoencoder(
        SAEConfig(site, H * D_K, D_SAE, architecture=architecture, k=12, model_name="starter")
    )
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in sae.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.3)
    return sae


@pytest.mark.parametrize("site,architecture", [(Site("z", 1), "topk"), (Site("resid_pre", 1), "standard")])
def test_saelens_opens_our_folder_and_encodes_and_decodes_as_we_do(tmp_path, site, architecture):
    ours = random_sae(site, architecture)
    save_sae(ours, tmp_path / "sae")
    theirs = sae_lens.SAE.load_from_disk(str(tmp_path / "sae"), device="cpu")
    assert theirs.cfg.architecture() == architecture and theirs.cfg.metadata.hook_name == site.hook_name
    for name in ("W_enc", "b_enc", "W_dec", "b_dec"):
        assert torch.equal(getattr(theirs, name).detach(), getattr(ours, name).detach()), name
    x = torch.randn(64, H * D_K, generator=torch.Generator().manual_seed(2))
    given = x.reshape(64, H, D_K) if site.kind == "z" else x  # hook_z as TransformerLens records it
    with torch.no_grad():
        f_theirs = theirs.encode(given)
        x_hat_theirs = theirs.decode(f_theirs).reshape(64, H * D_K)
        f_ours = ours.encode(x)
        x_hat_ours = ours.decode(f_ours)
    assert (f_ours > 0).sum() > 0
    torch.testing.assert_close(f_theirs, f_ours, atol=1e-6, rtol=0)
    torch.testing.assert_close(x_hat_theirs, x_hat_ours, atol=1e-6, rtol=0)
