"""Pooled overviews (model.pooling): the largest weight of each block, the block size that fits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model.interp.pooling import MAX_CANVAS_PIXELS, MAX_CELL, block_size, pool_absmax, pool_max, pool_visible


def _reference_pool(w: np.ndarray, b: int) -> np.ndarray:
    T = w.shape[-1]
    S = math.ceil(T / b)
    pad = np.zeros((*w.shape[:-2], S * b, S * b), dtype=np.float32)
    pad[..., :T, :T] = w
    return pad.reshape(*w.shape[:-2], S, b, S, b).max(axis=(-3, -1))


@settings(max_examples=40, deadline=None)
@given(T=st.integers(1, 40), b=st.integers(1, 7), seed=st.integers(0, 1000))
def test_pool_max_is_the_largest_weight_of_each_block(T, b, seed):
    rng = np.random.default_rng(seed)
    w = rng.random((2, 3, T, T), dtype=np.float32)
    got = pool_max(w, b)
    assert got.shape == (2, 3, math.ceil(T / b), math.ceil(T / b)) and got.dtype == np.float32
    np.testing.assert_array_equal(got, _reference_pool(w, b))
    mask = np.tril(np.ones((T, T), bool))
    vis = pool_visible(mask, b)
    # a pooled pixel is visible exactly when its block holds a visible pair: on or below the diagonal
    S = math.ceil(T / b)
    for i in range(S):
        for j in range(S):
            assert vis[i, j] == (j * b <= min(T - 1, i * b + b - 1))


@pytest.mark.parametrize("T,n", [(128, 16), (256, 144), (1024, 144), (1024, 16), (4096, 1)])
def test_block_size_keeps_the_canvas_bounded_and_is_1_when_it_can(T, n):
    b = block_size(T, n)
    S = math.ceil(T / b)
    assert S <= MAX_CELL and n * S * S <= MAX_CANVAS_PIXELS
    if b > 1:  # the smallest block that fits: one less would not
        S1 = math.ceil(T / (b - 1))
        assert S1 > MAX_CELL or n * S1 * S1 > MAX_CANVAS_PIXELS


def test_pool_max_of_float16_weights_equals_float32():
    w = np.random.default_rng(3).random((3, 2, 23, 23)).astype(np.float16)
    got = pool_max(w, 4)
    assert got.dtype == np.float32 and got.shape == (3, 2, 6, 6)
    np.testing.assert_array_equal(got, _reference_pool(w.astype(np.float32), 4))


@settings(max_examples=30, deadline=None)
@given(T=st.integers(1, 30), b=st.integers(1, 6), seed=st.integers(0, 1000))
def test_pool_absmax_keeps_the_sign_of_the_largest_difference(T, b, seed):
    d = np.random.default_rng(seed).normal(size=(2, T, T)).astype(np.float32)
    got = pool_absmax(d, b)
    S = math.ceil(T / b)
    assert got.shape == (2, S, S) and got.dtype == np.float32
    for n in range(2):
        for i in range(S):
            for j in range(S):
                block = d[n, i * b : (i + 1) * b, j * b : (j + 1) * b]
                assert abs(got[n, i, j]) == np.abs(block).max()  # the largest magnitude ...
                assert got[n, i, j] in block  # ... with its own sign, never the zero padding
