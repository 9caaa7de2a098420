"""The one decoding protocol: every layer that decodes one token at a time (multi-head self-attention, also with
shared key/value heads; AFT-simple; latent attention) offers ``init_cache(length)`` and ``step(x, cache, t)``, and
stepping through a sequence gives the causal layer's output row by row."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import transformer
from attnbook.aft import AFTFull, AFTSimple
from attnbook.latent import MultiHeadLatentAttention
from attnbook.mha import MultiHeadSelfAttention

KEY = jax.random.key(0)
LAYERS = {
    "mha": lambda causal=True: MultiHeadSelfAttention(16, 4, causal=causal, key=KEY),
    "gqa": lambda causal=True: MultiHeadSelfAttention(16, 4, kv_heads=2, causal=causal, key=KEY),
    "mqa": lambda causal=True: MultiHeadSelfAttention(16, 4, kv_heads=1, causal=causal, key=KEY),
    "aft-simple": lambda causal=True: AFTSimple(16, causal=causal, key=KEY),
    "mla": lambda causal=True: MultiHeadLatentAttention(16, 4, 4, 6, 2, causal=causal, key=KEY),
}


@pytest.mark.parametrize("name", LAYERS)
def test_stepping_gives_the_causal_layer_row_by_row(name):
    layer = LAYERS[name]()
    x = jax.random.normal(jax.random.key(1), (7, 16))
    cache, rows = layer.init_cache(7), []
    step = jax.jit(lambda x, cache, t: layer.step(x, cache, t))
    for t in range(7):
        y, cache = step(x[t:t + 1], cache, t)
        rows.append(y)
    np.testing.assert_allclose(jnp.concatenate(rows), layer(x), rtol=1e-5, atol=1e-5)
    assert transformer.can_step(layer)


@pytest.mark.parametrize("name", LAYERS)
def test_a_layer_that_is_not_causal_does_not_step(name):
    layer = LAYERS[name](causal=False)
    assert not transformer.can_step(layer)
    with pytest.raises(ValueError, match="needs a causal layer"):
        layer.step(jnp.zeros((1, 16)), layer.init_cache(3), 0)


def test_a_mixer_without_the_protocol_cannot_be_decoded_with_a_cache():
    assert not transformer.can_step(AFTFull(16, 8, causal=True, key=KEY))
    model = transformer.EncoderDecoder(11, d_model=16, depth=1, heads=4, mixer="aft-full", key=KEY)
    with pytest.raises(ValueError, match="cached decoding supports the mixers"):
        transformer.init_cache(model, 4)
