"""One head's pipeline equals what the model computed, for every scaling rule."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.masks import sliding_window_mask
from model.interp.analysis.pipeline import STAGE_KEYS, head_pipeline, head_pipeline_from_model
from model.interp.analysis.softmax_theory import softmax_rows
from model.interp.trace import run_with_trace
from model.nn.gpt import init_model


@pytest.mark.parametrize("attn_scale", ["sqrt_dk", "none", "learned", "qk_norm"])
def test_stages_chain_into_each_other(attn_scale):
    cfg = GPTConfig(
        vocab_size=20,
        context_length=16,
        n_layers=2,
        d_model=24,
        n_heads=4,
        n_kv_heads=2,
        attn_scale=attn_scale,
        positions="rope",
    )
    model = init_model(cfg, seed=0)
    with torch.no_grad():
        model.blocks[1].attn.q_proj.weight.mul_(20)  # make scores large enough to tell rules apart
        if attn_scale == "learned":
            model.blocks[1].attn.scale.mul_(torch.tensor([1.0, 2.0, 0.5, 3.0]))
    idx = torch.randint(0, 20, (9,), generator=torch.Generator().manual_seed(0))
    p = head_pipeline_from_model(model, idx, layer=1, head=3)
    assert [s.key for s in p] == list(STAGE_KEYS)
    q, k, v = p["q"].value, p["k"].value, p["v"].value
    np.testing.assert_allclose(p["scores_raw"].value, q @ k.T, rtol=1e-4, atol=1e-4)
    raw, scaled = p["scores_raw"].value, p["scores"].value
    if attn_scale == "qk_norm":
        cos = raw / np.outer(np.linalg.norm(q, axis=1), np.linalg.norm(k, axis=1))
        np.testing.assert_allclose(scaled, p.scale * cos, rtol=1e-4, atol=1e-4)
        assert p.scale == pytest.approx(np.sqrt(6), rel=1e-4)
    else:
        expected = {"sqrt_dk": 1 / np.sqrt(6), "none": 1.0, "learned": 3 / np.sqrt(6)}[attn_scale]
        assert p.scale == pytest.approx(expected, rel=1e-4)
        np.testing.assert_allclose(scaled, expected * raw, rtol=1e-4, atol=1e-4)
    masked = p["scores_masked"].value
    assert np.isneginf(masked[0, 1]) and np.isfinite(masked[1, 0])
    np.testing.assert_allclose(p["pattern"].value, softmax_rows(masked.astype(np.float64)), atol=1e-5)
    np.testing.assert_allclose(p["z"].value, p["pattern"].value @ v, atol=1e-5)
    assert p.kv_head == 1 and "shared by 2" in p["k"].title
    assert p["scores_raw"].shape == "[T, T] = [T, d_k] · [d_k, T]"
    assert p["scores_raw"].shape_numeric == "[9, 9] = [9, 6] · [6, 9]"
    assert p["z"].shape_numeric == "[9, 6] = [9, 9] · [9, 6]"


def test_pipeline_with_a_custom_mask_and_missing_kinds():
    cfg = GPTConfig(vocab_size=20, context_length=16, n_layers=1, d_model=16, n_heads=2)
    model = init_model(cfg, seed=0)
    idx = torch.arange(10)
    p = head_pipeline_from_model(model, idx, 0, 0, attn_mask=sliding_window_mask(10, 3))
    hidden = np.isneginf(p["scores_masked"].value)
    assert hidden.sum() == 100 - 27  # rows see 1, 2, then 3 keys each
    assert "73 of 100 hidden" in p["scores_masked"].formula
    tr = run_with_trace(model, idx[None], kinds=("pattern",))
    with pytest.raises(KeyError, match="lacks"):
        head_pipeline(tr, 0, 0)


def test_a_scale_dimension_other_than_d_k_is_named_in_the_formula():
    """Gemma 2/3's query_pre_attn_scalar (attn_scale_dim): S' = S/√256 with d_k = 8, as computed."""
    cfg = GPTConfig(vocab_size=20, context_length=16, n_layers=1, d_model=16, n_heads=2, attn_scale_dim=256.0)
    p = head_pipeline_from_model(init_model(cfg, seed=0), torch.arange(6), 0, 1)
    assert p.scale == pytest.approx(1 / 16, rel=1e-4)
    assert p["scores"].formula.startswith("S' = S / √256 = S / 16") and "not d_k = 8" in p["scores"].formula
