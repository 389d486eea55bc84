"""The textbook's three-token example, to 3 decimals, and edits of it."""

import numpy as np
import pytest

from model.interp.analysis.worked_example import attention_example


def test_textbook_numbers():
    ex = attention_example()
    np.testing.assert_array_equal(ex.raw, [1, 0, 1])
    np.testing.assert_allclose(ex.scaled, [0.707, 0.0, 0.707], atol=5e-4)
    np.testing.assert_allclose(ex.exp, [2.028, 1.0, 2.028], atol=5e-4)
    assert ex.exp_sum == pytest.approx(5.056, abs=5e-4)
    np.testing.assert_allclose(ex.weights, [0.401, 0.198, 0.401], atol=5e-4)
    np.testing.assert_allclose(ex.output, [1.604, 0.797], atol=5e-4)
    np.testing.assert_allclose(ex.contributions.sum(0), ex.output)


def test_edits_recompute_every_stage():
    # a query aligned with key 2 only, and a causal view hiding key 3
    ex = attention_example(q=(0, 4), visible=[True, True, False])
    np.testing.assert_array_equal(ex.raw, [0, 4, 4])
    assert np.isneginf(ex.masked[2]) and ex.weights[2] == 0 and ex.exp[2] == 0
    e = np.exp(4 / np.sqrt(2))
    np.testing.assert_allclose(ex.weights[:2], [1 / (1 + e), e / (1 + e)])
    np.testing.assert_allclose(ex.output, ex.weights[1] * np.array([0, 2]) + ex.weights[0] * np.array([1, 0]))
    unscaled = attention_example(scale=1.0)
    assert unscaled.weights[1] < attention_example().weights[1]  # sharper without 1/√d_k
    with pytest.raises(ValueError, match="width"):
        attention_example(q=(1, 0, 0))
    with pytest.raises(ValueError, match="one value per key"):
        attention_example(values=[(1, 0)])
