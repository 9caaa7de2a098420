"""attnbook.latent under bad input: every error names its argument."""

import jax
import jax.numpy as jnp
import pytest

from attnbook import positional
from attnbook.latent import MultiHeadLatentAttention, parameter_count


@pytest.mark.parametrize(
    "kwargs, kind, match",
    [
        ({"rope_dim": 3}, ValueError, "rope_dim must be even.*3"),
        ({"rope_dim": -2}, ValueError, "rope_dim must be a non-negative integer, got -2"),
        ({"rank": 0}, ValueError, "rank must be a positive integer, got 0"),
        ({"rank": True}, TypeError, "rank must be a positive integer, got bool"),
        ({"rank": 4.0}, TypeError, "rank.*float"),
        ({"heads": 0}, ValueError, "heads.*0"),
        ({"key_dim": 2.5}, TypeError, "key_dim"),
        ({"value_dim": 0}, ValueError, "value_dim"),
        ({"causal": 1}, TypeError, "causal"),
        ({"key": 0}, TypeError, "key must be a JAX random key"),
    ],
)
def test_bad_construction(kwargs, kind, match):
    args = {"d_model": 16, "heads": 4, "key_dim": 6, "rank": 8, "rope_dim": 4, "key": jax.random.key(0), **kwargs}
    with pytest.raises(kind, match=match):
        MultiHeadLatentAttention(**args)


def test_bad_calls():
    layer = MultiHeadLatentAttention(16, 4, 6, 8, 4, key=jax.random.key(0))
    with pytest.raises(ValueError, match="x must have d_model=16 features"):
        layer(jnp.ones((5, 15)))
    with pytest.raises(ValueError, match="x must have"):
        layer(jnp.ones((5,)))
    with pytest.raises(ValueError, match="process_heads must be None"):
        layer(jnp.ones((5, 16)), process_heads=positional.rope_heads)
    with pytest.raises(ValueError, match="length must be a positive integer"):
        layer.init_cache(0)
    with pytest.raises(TypeError, match="layer must be a MultiHeadLatentAttention"):
        parameter_count(object())
    bidirectional = MultiHeadLatentAttention(16, 4, 6, 8, 4, causal=False, key=jax.random.key(0))
    with pytest.raises(ValueError, match="needs a causal layer"):
        bidirectional.step(jnp.ones((1, 16)), bidirectional.init_cache(3), 0)
