"""Averages over heads/layers and token focus."""

import numpy as np
import pytest

from model.interp.analysis.aggregate import (
    mean_over_all,
    mean_over_heads,
    mean_over_heads_set,
    mean_over_layers,
    token_focus,
)


@pytest.fixture
def w():
    rng = np.random.default_rng(0)
    x = rng.random((3, 2, 5, 5)) * np.tril(np.ones((5, 5)))
    return x / x.sum(-1, keepdims=True)


def test_means_have_the_right_axes_and_stay_distributions(w):
    assert mean_over_heads(w).shape == (3, 5, 5)
    np.testing.assert_allclose(mean_over_heads(w)[1], (w[1, 0] + w[1, 1]) / 2)
    np.testing.assert_allclose(mean_over_layers(w)[0], (w[0, 0] + w[1, 0] + w[2, 0]) / 3)
    np.testing.assert_allclose(mean_over_all(w).sum(-1), 1.0)
    np.testing.assert_allclose(mean_over_heads_set(w, [(0, 1), (2, 0)]), (w[0, 1] + w[2, 0]) / 2)
    with pytest.raises(ValueError, match="outside"):
        mean_over_heads_set(w, [(3, 0)])
    with pytest.raises(ValueError, match="at least one"):
        mean_over_heads_set(w, [])
    with pytest.raises(ValueError, match=r"\[L, H, T, T\]"):
        mean_over_heads(w[0])


def test_token_focus_is_a_row_and_a_column(w):
    f = token_focus(w, 2)
    np.testing.assert_array_equal(f.looks_at, w[:, :, 2, :])
    np.testing.assert_array_equal(f.looked_at_by, w[:, :, :, 2])
    assert f.looks_at_mean[3:].sum() == 0  # causal: token 2 cannot look ahead
    assert f.looked_at_by_mean[:2].sum() == 0  # nor be read by earlier tokens
    assert token_focus(w, -1).token == 4
    with pytest.raises(ValueError, match="outside"):
        token_focus(w, 5)
