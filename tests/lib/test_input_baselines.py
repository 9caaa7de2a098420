"""attnbook.baselines.LinearClassifier under bad input: each error names its argument (issue 10)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook.baselines import LinearClassifier


@pytest.mark.parametrize(
    "args, key, kind, match",
    [
        ((0, 4, 3), jax.random.key(0), ValueError, "length.*0"),
        ((10, -4, 3), jax.random.key(0), ValueError, "d_in.*-4"),
        ((10, 4, 0), jax.random.key(0), ValueError, "num_classes.*0"),
        ((10, 4.0, 3), jax.random.key(0), TypeError, "d_in.*4.0"),
        ((10, 4, 3), 0, TypeError, "key must be a JAX random key.*int 0"),
        ((10, 4, 3), np.random.default_rng(0), TypeError, "key must be a JAX random key"),
        ((10, 4, 3), jnp.zeros(3), TypeError, "key must be a JAX random key.*float32"),
    ],
)
def test_bad_construction(args, key, kind, match):
    with pytest.raises(kind, match=match):
        LinearClassifier(*args, key=key)


def test_transposed_input_of_the_right_size_is_rejected():
    """Issue 10: x of shape (d_in, T) has T * d_in entries and was flattened into the wrong weights."""
    model = LinearClassifier(10, 4, 3, key=jax.random.key(0))
    x = jnp.asarray(np.random.default_rng(0).random((10, 4)), dtype=jnp.float32)
    assert model(x).shape == (3,)
    for call in (model, eqx.filter_jit(model)):  # shapes are static: the check holds when traced too
        with pytest.raises(ValueError, match=r"x must have shape \(T, d_in\) = \(10, 4\).*got \(4, 10\)"):
            call(x.T)
    with pytest.raises(ValueError, match=r"x must have shape \(T, d_in\).*\(40,\)"):
        model(x.reshape(-1))
    with pytest.raises(ValueError, match=r"x must have shape \(T, d_in\) = \(10, 4\).*got \(5, 8\)"):
        model(x.reshape(5, 8))


def test_wrong_dtype_and_batches():
    model = LinearClassifier(10, 4, 3, key=jax.random.key(0))
    with pytest.raises(TypeError, match="x must be a floating-point array, got dtype int32"):
        model(jnp.ones((10, 4), dtype=jnp.int32))
    batch = jnp.ones((2, 10, 4))
    with pytest.raises(ValueError, match=r"x must have shape \(T, d_in\).*\(2, 10, 4\)"):
        model(batch)  # a batch needs vmap, which works
    assert jax.vmap(model)(batch).shape == (2, 3)
    with pytest.raises(ValueError, match=r"x.*\(4, 10\)"):
        jax.vmap(model)(jnp.swapaxes(batch, 1, 2))
