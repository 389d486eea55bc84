"""Features on one prompt (model.interp.sae.prompt): the active features of each position, and the
site's direct contribution to a logit split into features, the SAE's bias and its error term, which
add up to it exactly and equal direct logit attribution's parts of that site."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from model import api
from model.config import GPTConfig
from model.interp.analysis.attribution import direct_logit_attribution
from model.interp.sae import Site, SiteError, site_activations
from model.interp.sae.prompt import feature_logit_attribution, prompt_features
from model.nn.gpt import GPT
from tests.model.sae_hand import hand_sae

STARTER = Path(__file__).resolve().parents[2] / "assets" / "starter"
TEXT = "qwertyuiopqwertyuiopqwe"


@pytest.fixture(scope="module")
def lm():
    return api.open_model(STARTER)


def test_each_position_lists_its_active_features_strongest_first(lm):
    sae = hand_sae(k=6)
    ids = lm.tokenizer.encode(TEXT)
    got = prompt_features(lm.model, sae, ids)
    with torch.no_grad():
        x = site_activations(lm.model, sae.config.site, torch.tensor([ids]))[0]
        f = sae.encode(x)
    assert len(got.features) == len(ids)
    for t in range(len(ids)):
        on = torch.nonzero(f[t] > 0).flatten()
        assert sorted(got.features[t].tolist()) == sorted(on.tolist()) and len(on) <= 6
        assert list(got.values[t]) == sorted(got.values[t], reverse=True)
        assert all(f[t, i] == v for i, v in got.active(t))
    np.testing.assert_allclose(got.error_norm, (x - sae(x)).norm(dim=-1).detach().numpy(), rtol=1e-5)
    from_text = api.prompt_features(lm, sae, TEXT)  # the API's door takes text
    assert [a.tolist() for a in from_text.features] == [a.tolist() for a in got.features]


def _site_parts(dla, site: Site) -> float:
    """Direct logit attribution's parts that are the site's write."""
    l = site.layer
    if site.kind == "z":
        return float(dla.heads[l].sum())
    if site.kind == "attn_out":
        return float(dla.heads[l].sum() + dla.attn_bias[l])
    if site.kind == "mlp_out":
        return float(dla.mlp[l])
    return float(dla.embed + dla.heads[:l].sum() + dla.attn_bias[:l].sum() + dla.mlp[:l].sum())


@pytest.mark.parametrize("kind, layer", [("z", 1), ("attn_out", 1), ("mlp_out", 0), ("resid_pre", 1)])
@pytest.mark.parametrize("position", [-1, 12])
def test_features_bias_and_error_add_up_to_the_sites_direct_part_of_a_logit(lm, kind, layer, position):
    sae = hand_sae(Site(kind, layer), k=12)
    ids = lm.tokenizer.encode(TEXT)
    token = lm.tokenizer.encode("t")[0]
    got = feature_logit_attribution(lm.model, sae, ids, position, token)
    assert got.total == pytest.approx(got.site, rel=1e-4, abs=1e-6)  # features + b_dec + error
    dla = direct_logit_attribution(lm.model, ids, token=token, position=position)
    assert got.site == pytest.approx(_site_parts(dla, Site(kind, layer)), rel=1e-4, abs=1e-5)
    assert got.logit == pytest.approx(dla.logit, rel=1e-6) and got.scale == pytest.approx(dla.scale)
    assert 0 < len(got.features) <= 12
    assert list(np.abs(got.contributions)) == sorted(np.abs(got.contributions), reverse=True)
    assert got.error != 0 and got.bias != 0  # a hand-built SAE reconstructs badly: the error term counts


@pytest.mark.parametrize("norm_position", ["sandwich", "output"])
@pytest.mark.parametrize("kind", ["z", "attn_out", "mlp_out", "resid_pre"])
def test_a_norm_after_the_sublayer_is_frozen_on_the_way_too(norm_position, kind):
    """Gemma 2/3's and OLMo 2's norm of each sublayer's output lies between the site and the stream."""
    cfg = GPTConfig(vocab_size=37, context_length=24, n_layers=2, d_model=32, n_heads=4, n_kv_heads=2,
                    norm="rmsnorm", norm_position=norm_position, tie_embeddings=True)  # fmt: skip
    torch.manual_seed(0)
    model = GPT(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.3)
    site = Site(kind, 1)
    sae = hand_sae(site, d_in=site.d_in(cfg), k=10)
    ids = torch.randint(0, 37, (12,), generator=torch.Generator().manual_seed(3)).tolist()
    got = feature_logit_attribution(model, sae, ids, -1, 5)
    assert got.total == pytest.approx(got.site, rel=1e-4, abs=1e-6)
    dla = direct_logit_attribution(model, ids, token=5, position=-1)
    assert got.site == pytest.approx(_site_parts(dla, site), rel=1e-4, abs=1e-5)


def test_an_sae_of_another_width_or_layer_is_refused_in_one_line(lm):
    wide = hand_sae(Site("resid_pre", 1), d_in=64)  # the starter's stream is 128 wide
    with pytest.raises(
        SiteError, match=r"^the SAE reads 64 values a token, but this model's residual stream"
    ):
        prompt_features(lm.model, wide, [0, 1, 2])
    with pytest.raises(SiteError, match=r"^layer 5: the model has layers 0 to 1$"):
        feature_logit_attribution(lm.model, hand_sae(Site("z", 5)), [0, 1, 2])
