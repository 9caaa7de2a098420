"""attnbook.mha's ``kv_heads`` (chapter 10) under bad input: every error names its argument."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook.mha import MultiHeadAttention, MultiHeadSelfAttention


@pytest.mark.parametrize(
    "kv_heads, kind, match",
    [
        (0, ValueError, "kv_heads must be a positive integer, got 0"),
        (-2, ValueError, "kv_heads must be a positive integer, got -2"),
        (True, TypeError, "kv_heads must be a positive integer, got bool"),
        (1.0, TypeError, "kv_heads must be a positive integer, got float 1.0"),
        (2.5, TypeError, "kv_heads.*2.5"),
        ("2", TypeError, "kv_heads"),
        (jnp.asarray(2), TypeError, "kv_heads"),
        (4, ValueError, r"num_heads must be divisible by kv_heads .*num_heads=6, kv_heads=4"),
        (12, ValueError, r"num_heads must be divisible by kv_heads .*num_heads=6, kv_heads=12"),
    ],
)
def test_bad_kv_heads(kv_heads, kind, match):
    with pytest.raises(kind, match=match):
        MultiHeadAttention(12, 6, 2, kv_heads=kv_heads, key=jax.random.key(0))
    self_match = match.replace("num_heads", "heads")
    with pytest.raises(kind, match=self_match):
        MultiHeadSelfAttention(12, 6, kv_heads=kv_heads, key=jax.random.key(0))


def test_good_kv_heads_numpy_integer():
    assert MultiHeadAttention(12, 6, 2, kv_heads=np.int64(3), key=jax.random.key(0)).kv_heads == 3


def test_attend_rejects_keys_with_the_wrong_number_of_heads_also_under_jit():
    layer = MultiHeadAttention(12, 6, 2, kv_heads=2, key=jax.random.key(0))
    x = jnp.ones((5, 12))
    q, k, v = layer.project(x, x, x)
    assert k.shape == (5, 2, 2)
    wrong = jnp.ones((5, 3, 2))  # three key/value heads: neither this layer's 2 nor its 6 query heads
    for attend in (layer.attend, eqx.filter_jit(layer.attend)):
        with pytest.raises(ValueError, match=r"k and v must have kv_heads=2 heads .*got shapes \(5, 3, 2\)"):
            attend(q, wrong, wrong)
        np.testing.assert_array_equal(attend(q, k, v)[0], attend(q, jnp.repeat(k, 3, 1), jnp.repeat(v, 3, 1))[0])
