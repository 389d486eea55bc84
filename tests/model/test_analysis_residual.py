"""Residual norms, sublayer writes and the logit lens."""

import numpy as np
import pytest
import torch

from model.config import GPTConfig
from model.interp.analysis.residual import lens_logits, logit_lens, residual_norms, stream_points, write_stats
from model.interp.trace import run_with_trace
from model.nn.gpt import init_model


def make(norm_position="pre", **kw):
    cfg = GPTConfig(
        vocab_size=30, context_length=16, n_layers=3, d_model=24, n_heads=3, norm_position=norm_position, **kw
    )
    model = init_model(cfg, seed=0).eval()
    idx = torch.randint(0, 30, (1, 11), generator=torch.Generator().manual_seed(0))
    return model, run_with_trace(model, idx)


def test_norms_and_writes_follow_the_pre_ln_sums():
    _, tr = make()
    rn = residual_norms(tr)
    assert rn.names == ["embed", "L0.mid", "L0.post", "L1.mid", "L1.post", "L2.mid", "L2.post"]
    assert rn.norms.shape == (7, 11) and rn.mean.shape == (7,)
    assert residual_norms(tr, mids=False).names == ["embed", "L0.post", "L1.post", "L2.post"]
    ws = write_stats(tr)
    _, x = stream_points(tr)
    pre, mid = x[2], x[3]  # L1's input (= L0.post) and L1.mid
    attn = tr["attn_out", 1][0].double().numpy()
    np.testing.assert_allclose(mid, pre + attn, atol=1e-5)
    np.testing.assert_allclose(ws.attn_norm[1], np.linalg.norm(attn, axis=-1), rtol=1e-5)
    cos = (attn * pre).sum(-1) / np.linalg.norm(attn, axis=-1) / np.linalg.norm(pre, axis=-1)
    np.testing.assert_allclose(ws.attn_cos[1], cos, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(ws.mlp_ratio[1], ws.mlp_norm[1] / rn.norms[3], rtol=1e-5)
    assert np.all(np.abs(ws.attn_cos) <= 1 + 1e-9)


def test_post_ln_stream_is_renormalised():
    _, tr = make("post")
    rn = residual_norms(tr)
    # every checkpoint after the embedding is a LayerNorm output with γ = 1: norm √d (less a little
    # at L0.mid, where ε = 1e-5 is not negligible against the tiny embedding's variance)
    np.testing.assert_allclose(rn.norms[1:], np.sqrt(24), rtol=2e-2)
    np.testing.assert_allclose(rn.norms[2:], np.sqrt(24), rtol=1e-4)
    assert rn.norms[0].max() < 1.0


@pytest.mark.parametrize("norm_position,tie", [("pre", False), ("pre", True), ("post", False)])
def test_last_layer_lens_is_the_model_output(norm_position, tie):
    model, tr = make(norm_position, tie_embeddings=tie)
    lens = logit_lens(model, tr, keep_logits=True, k=3)
    assert lens.names == ["embed", "L0.post", "L1.post", "L2.post"]
    # the same final norm and unembedding as the forward pass, batched over every point: equal to the
    # model's logits up to float32 rounding (a batched matmul may round the last bit differently)
    np.testing.assert_allclose(lens.logits[-1], tr.logits[0].numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lens.kl_to_final[-1], 0.0, atol=1e-12)
    assert lens.kl_to_final[:-1].max() > 0
    assert lens.top_ids.shape == (4, 11, 3)
    np.testing.assert_array_equal(lens.top1[-1], tr.logits[0].argmax(-1).numpy())
    p = torch.softmax(tr.logits[0].double(), -1)
    tok = tr.tokens[0]
    np.testing.assert_allclose(lens.target_prob[-1, :-1], p[torch.arange(10), tok[1:]].numpy(), rtol=1e-6)
    assert np.isnan(lens.target_prob[:, -1]).all()
    # an earlier checkpoint goes through the same final norm and unembedding
    mid = tr["resid_post", 0]
    expect = lens_logits(model, mid)[0]
    np.testing.assert_allclose(
        lens.top_probs[1, :, 0], torch.softmax(expect.double(), -1).max(-1).values, rtol=1e-6
    )
