"""Gradient flow at initialisation: the Xiong et al. ordering of Pre-LN and Post-LN."""

import numpy as np
import pytest

from model.config import GPTConfig
from model.interp.analysis.gradflow import (
    NORM_VARIANTS,
    at_init_summary,
    grad_flow_at_init,
    grad_flow_variants,
    random_batch,
    shows_xiong,
    tilt_words,
    xiong_config,
)

CFG = GPTConfig(vocab_size=64, context_length=32, n_layers=6, d_model=32, n_heads=4)


@pytest.fixture(scope="module")
def flows():
    return grad_flow_variants(CFG, seed=0, seq_len=32)


@pytest.mark.parametrize("norm", ["layernorm", "rmsnorm"])
def test_post_ln_has_larger_gradients_near_the_output(flows, norm):
    pre, post = flows[("pre", norm)], flows[("post", norm)]
    assert pre.block.shape == (6,)
    # near the output Post-LN's gradient is about √L times Pre-LN's (measured 2.3-3.5 over seeds)
    assert post.block[-1] > 1.8 * pre.block[-1]
    # ... and the gap opens toward the output: Post-LN tilts up relative to Pre-LN
    assert post.top_to_bottom > 1.2 * pre.top_to_bottom
    assert post.block[-1] / pre.block[-1] > post.block[0] / pre.block[0]


def test_parts_add_up_and_runs_repeat(flows):
    f = flows[("pre", "layernorm")]
    np.testing.assert_allclose(f.block**2, f.attn**2 + f.mlp**2 + f.norms**2, rtol=1e-9)
    assert f.embed > 0 and f.head > 0 and f.loss == pytest.approx(np.log(64), rel=0.3)
    again = grad_flow_at_init(CFG, seed=0, seq_len=32)
    np.testing.assert_array_equal(again.block, f.block)
    other = grad_flow_at_init(CFG, seed=0, batch=random_batch(64, 8, 32, seed=1))
    assert not np.array_equal(other.block, f.block)


def test_model_init_and_bad_init_name():
    f = grad_flow_at_init(CFG.replace(n_layers=2), init="model", seq_len=8, batch_size=2)
    assert np.all(f.block > 0)
    with pytest.raises(ValueError, match="init"):
        grad_flow_at_init(CFG, init="kaiming")


def test_default_experiment_shows_xiong_direction():
    # the lab's own defaults: Post-LN's gradient rises toward the output, Pre-LN's does not, and
    # near the output Post-LN's is several times Pre-LN's (measured 1.22-1.92, 0.69-0.83, ≥ 3.2×)
    for seed in range(4):
        flows = grad_flow_variants(xiong_config(), variants=NORM_VARIANTS[:2], seed=seed)
        pre, post = flows[("pre", "layernorm")], flows[("post", "layernorm")]
        assert post.top_to_bottom > 1.15 and pre.top_to_bottom < 0.9, seed
        assert post.block[-1] > 2.5 * pre.block[-1] and shows_xiong(pre, post)
        assert tilt_words(post.top_to_bottom) == "rises toward the output"


def test_summary_words_follow_the_numbers():
    assert [tilt_words(r) for r in (1.7, 1.05, 0.95, 0.74)] == [
        "rises toward the output",
        "stays about level",
        "stays about level",
        "falls toward the output",
    ]
    flows = grad_flow_variants(xiong_config(n_layers=2, d_model=16, n_heads=2), seed=0, seq_len=8)
    pre, post = flows[("pre", "layernorm")], flows[("post", "layernorm")]
    text = at_init_summary(pre, post)
    words = f"{post.top_to_bottom:.2f}× the first block's gradient (it {tilt_words(post.top_to_bottom)})"
    assert words in text
    assert f"Pre-LN's {pre.top_to_bottom:.2f}× (it {tilt_words(pre.top_to_bottom)})" in text
    assert f"{post.block[-1] / pre.block[-1]:.1f}× Pre-LN's" in text
    with pytest.raises(ValueError, match=r"n_heads|d_model"):
        xiong_config(d_model=30, n_heads=4)
