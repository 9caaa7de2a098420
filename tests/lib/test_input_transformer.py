"""Bad input to attnbook.transformer (chapter 7): every public function names the argument, the expected and the
received value, also under jax.jit where values are checked."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import transformer

KEY = jax.random.key(0)
MODEL = transformer.EncoderDecoder(11, d_model=16, depth=1, heads=2, key=KEY)
SRC = jnp.asarray([1, 2, 3, 4], dtype=jnp.int32)
TGT = jnp.asarray([10, 4, 3], dtype=jnp.int32)


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: MODEL(SRC.astype(jnp.float32), TGT), TypeError, "source must be an integer array, got dtype float32"),
        (lambda: MODEL(SRC[None], TGT), ValueError, r"source must have shape \(S,\), got an array of shape \(1, 4\)"),
        (lambda: MODEL(SRC, TGT.at[1].set(-1)), ValueError, r"target_in must be integers in \[0, 11\), got -1 at index 1"),
        (lambda: MODEL(SRC.at[0].set(11), TGT), ValueError, r"source must be integers in \[0, 11\), got 11 at index 0"),
        (lambda: MODEL.decode(TGT, jnp.zeros((4, 8))), ValueError, r"memory must have shape \(S, d_model=16\)"),
        (lambda: MODEL.decode(TGT, jnp.zeros(4)), ValueError, r"memory must have shape \(S, d_model\)"),
        (lambda: MODEL.cross_weights(SRC, TGT.astype(jnp.float32)), TypeError, "target_in must be an integer array"),
        (lambda: MODEL.encoder.apply(jnp.zeros((3, 8))), ValueError, "x must have d_model=16 features"),
        (lambda: MODEL.encoder(SRC.astype(jnp.float32)), TypeError, "tokens must be an integer array"),
        (lambda: transformer.sequence_loss(MODEL, SRC[None], TGT[None], TGT[None, :2]), ValueError,
         r"targets must have shape \(N=1, T=3\), got \(1, 2\)"),
        (lambda: transformer.sequence_loss(MODEL, SRC[None], TGT[None], TGT[None].at[0, 0].set(11)), ValueError,
         r"labels must be class labels: integers in \[0, 11\), got 11"),
        (lambda: transformer.sequence_loss("model", SRC[None], TGT[None], TGT[None]), TypeError,
         "model must be an EncoderDecoder, got str"),
        (lambda: transformer.greedy_decode(MODEL, SRC.astype(jnp.float32), 3, 10), TypeError, "source must be an integer array"),
        (lambda: transformer.greedy_decode(MODEL, SRC, 0, 10), ValueError, "length must be a positive integer, got 0"),
        (lambda: transformer.greedy_decode(MODEL, SRC, 2.5, 10), TypeError, "length must be a positive integer"),
        (lambda: transformer.greedy_decode_cached(MODEL, SRC.at[2].set(12), 3, 10), ValueError,
         r"source must be integers in \[0, 11\), got 12 at index 2"),
        (lambda: transformer.greedy_decode_cached(MODEL, SRC, 3, 11), ValueError, "start must be a token id below vocab_size=11"),
        (lambda: transformer.init_cache(MODEL, -1), ValueError, "length must be a positive integer, got -1"),
        (lambda: transformer.init_cache(object(), 3), TypeError, "model must be an EncoderDecoder"),
        (lambda: transformer.cache_bytes(MODEL, 0, 4), ValueError, "length must be a positive integer"),
        (lambda: transformer.cache_bytes(MODEL, 3, 0), ValueError, "source_length must be a positive integer, got 0"),
        (lambda: transformer.cache_bytes("model", 3, 4), TypeError, "model must be an EncoderDecoder, got str"),
        (lambda: transformer.exact_match(MODEL, SRC[None], TGT), ValueError, r"targets must have shape \(N=1, T\)"),
        (lambda: transformer.exact_match(MODEL, SRC[None].at[0, 0].set(-3), TGT[None]), ValueError,
         r"sources must be integers in \[0, 11\), got -3"),
        (lambda: transformer.reversal_data(0, 3, np.random.default_rng(0)), ValueError, "num must be a positive integer"),
        (lambda: transformer.reversal_data(5, 3, 0), TypeError, "rng must be a NumPy random Generator"),
        (lambda: transformer.make_block(16, heads=0, key=KEY), ValueError, "heads must be a positive integer, got 0"),
        (lambda: transformer.make_block(16, mixer="rnn", key=KEY), ValueError, "kind must be one of"),
        (lambda: transformer.make_block(16, key=0), TypeError, "key must be a JAX random key"),
        (lambda: transformer.EncoderDecoder(0, key=KEY), ValueError, "vocab_size must be a positive integer"),
    ],
)
def test_bad_input(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_token_values_are_checked_under_jit():
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"source must be integers in \[0, 11\)"):
        eqx.filter_jit(lambda s: MODEL(s, TGT))(SRC.at[0].set(11))
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"labels must be class labels: integers in \[0, 11\)"):
        eqx.filter_jit(transformer.sequence_loss)(MODEL, SRC[None], TGT[None], TGT[None].at[0, 1].set(-1))
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"source must be integers in \[0, 11\)"):
        jax.vmap(lambda s: transformer.greedy_decode_cached(MODEL, s, 3, 10)[0])(SRC[None].at[0, 0].set(11))
