"""attnbook.masking against masks built element by element."""

import numpy as np
import pytest

from attnbook import masking


def test_causal_mask_is_lower_triangle():
    mask = np.asarray(masking.causal_mask(5))
    assert mask.dtype == bool and mask.shape == (5, 5)
    for i in range(5):
        for j in range(5):
            assert mask[i, j] == (j <= i), (i, j)


def test_padding_mask():
    lengths = np.array([1, 3, 4])
    mask = np.asarray(masking.padding_mask(lengths, 4))
    assert mask.shape == (3, 4, 4) and mask.dtype == bool
    for b, n in enumerate(lengths):
        for i in range(4):
            for j in range(4):
                assert mask[b, i, j] == (i < n and j < n)


def test_empty_and_fully_padded():
    assert masking.causal_mask(0).shape == (0, 0)
    mask = np.asarray(masking.padding_mask(np.array([0, 2]), 3))
    assert not mask[0].any() and mask[1].sum() == 4
    assert masking.padding_mask(np.zeros((0,), dtype=np.int32), 3).shape == (0, 3, 3)


@pytest.mark.parametrize(
    "call, error, names",
    [
        (lambda: masking.causal_mask(-1), ValueError, ["length", "-1"]),
        (lambda: masking.causal_mask(3.0), TypeError, ["length", "3.0"]),
        (lambda: masking.padding_mask(np.array([2, 5]), 4), ValueError, ["lengths", "max_length=4", "5", "index 1"]),
        (lambda: masking.padding_mask(np.array([-1, 2]), 4), ValueError, ["lengths", "-1", "index 0"]),
        (lambda: masking.padding_mask(np.array([[2]]), 4), ValueError, ["lengths", "(batch,)", "(1, 1)"]),
        (lambda: masking.padding_mask(np.array([1.5]), 4), TypeError, ["lengths", "integer"]),
        (lambda: masking.padding_mask(np.array([2]), -1), ValueError, ["max_length", "-1"]),
    ],
)
def test_bad_arguments(call, error, names):
    with pytest.raises(error) as info:
        call()
    for name in names:
        assert name in str(info.value)


def test_masked_self_attention_is_the_layer_under_its_mask():
    import jax
    import jax.numpy as jnp

    from attnbook.attention import SelfAttention
    MaskedSelfAttention = masking.MaskedSelfAttention

    layer = SelfAttention(4, 6, 3, causal=False, key=jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (7, 4))
    mask = masking.causal_mask(7).T  # any boolean mask, here the sources' reversed one
    every = MaskedSelfAttention(layer, mask)
    assert jnp.array_equal(every(x), layer(x, mask)[0])
    assert jnp.array_equal(MaskedSelfAttention(layer, mask, read=-1)(x), layer(x, mask)[0][6])
    with pytest.raises(TypeError, match="causal=False"):
        MaskedSelfAttention(SelfAttention(4, 6, 3, key=jax.random.key(0)), mask)
    with pytest.raises(TypeError, match="square boolean"):
        MaskedSelfAttention(layer, mask.astype(jnp.float32))
    with pytest.raises(ValueError, match="read must be"):
        MaskedSelfAttention(layer, mask, read=7)
