"""masking.sliding_window_mask (chapter 9): a naive loop, the causal limit, and bad input."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import attention, masking


def naive_window(length, window):
    mask = np.zeros((length, length), dtype=bool)
    for i in range(length):
        for j in range(length):
            mask[i, j] = j <= i and i - j < window  # causal, and keys older than `window` dropped
    return mask


@pytest.mark.parametrize("length", [0, 1, 2, 7, 16, 33])
@pytest.mark.parametrize("window", [1, 2, 3, 8, 16, 40])
def test_matches_a_naive_loop(length, window):
    got = masking.sliding_window_mask(length, window)
    assert got.dtype == jnp.bool_ and got.shape == (length, length)
    np.testing.assert_array_equal(np.asarray(got), naive_window(length, window))


@pytest.mark.parametrize("length", [0, 1, 5, 32])
def test_a_window_as_long_as_the_sequence_is_causal(length):
    for window in (max(length, 1), length + 1, 1000):
        np.testing.assert_array_equal(np.asarray(masking.sliding_window_mask(length, window)),
                                      np.asarray(masking.causal_mask(length)))


def test_each_query_sees_at_most_window_keys():
    mask = np.asarray(masking.sliding_window_mask(50, 6))
    np.testing.assert_array_equal(mask.sum(axis=1), np.minimum(np.arange(50) + 1, 6))


def test_window_one_attends_to_the_token_itself():
    q, k, v = (jax.random.normal(kk, (9, 4)) for kk in jax.random.split(jax.random.key(0), 3))
    out, weights = attention.scaled_dot_product_attention(q, k, v, masking.sliding_window_mask(9, 1))
    np.testing.assert_allclose(np.asarray(weights), np.eye(9), atol=0)
    np.testing.assert_allclose(np.asarray(out), np.asarray(v), rtol=1e-6)


@pytest.mark.parametrize(
    "args, kind, match",
    [((5, 0), ValueError, "window.*0"), ((5, -2), ValueError, "window.*-2"), ((5, 2.0), TypeError, "window.*2.0"),
     ((5, True), TypeError, "window"), ((-1, 3), ValueError, "length.*-1"), ((4.0, 3), TypeError, "length")],
)
def test_bad_input(args, kind, match):
    with pytest.raises(kind, match=match):
        masking.sliding_window_mask(*args)
