"""attnbook.linear_attention under bad and extreme input: every error names its argument, under jax.jit too;
``T = 0`` gives an empty output; non-finite input reaches exactly the outputs that see it (the package's contract)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import linear_attention as la

T, DK, DV = 6, 4, 3
rng = np.random.default_rng(0)
Q, K, V = (jnp.asarray(rng.normal(size=s), jnp.float32) for s in ((T, DK), (T, DK), (T, DV)))
G, BETA = jnp.asarray(-rng.uniform(0, 0.5, T), jnp.float32), jnp.asarray(rng.uniform(0, 1, T), jnp.float32)
W, U = jnp.full((DV,), 0.5), jnp.zeros((DV,))

CALLS = {
    "linear_attention": lambda q, k, v, g, b, **f: la.linear_attention(q, k, v, **f),
    "retention": lambda q, k, v, g, b, **f: la.retention(q, k, v, 0.9, **f),
    "decayed_linear_attention": lambda q, k, v, g, b, **f: la.decayed_linear_attention(q, k, v, g, **f),
    "ssd": lambda q, k, v, g, b, **f: la.ssd(v, g, k, q, **f),
    "delta_rule": lambda q, k, v, g, b, **f: la.delta_rule(q, k, v, b, **f),
    "gated_delta_rule": lambda q, k, v, g, b, **f: la.gated_delta_rule(q, k, v, b, g, **f),
}


def test_shapes_name_the_argument():
    with pytest.raises(ValueError, match=r"^k must have shape \(T=6, dk=4\), got \(6, 3\)"):
        la.linear_attention(Q, K[:, :3], V)
    with pytest.raises(ValueError, match=r"^v must have shape \(T=6, dv\), got \(5, 3\)"):
        la.retention(Q, K, V[:5], 0.9)
    with pytest.raises(ValueError, match=r"^log_decay must have shape \(T=6,\), got \(5,\)"):
        la.decayed_linear_attention(Q, K, V, G[:5])
    with pytest.raises(ValueError, match=r"^beta must have shape \(T=6,\)"):
        la.delta_rule(Q, K, V, BETA[:, None])
    with pytest.raises(ValueError, match=r"^b must have shape \(T=6, n\)"):
        la.ssd(V, G, K[:4], Q)
    with pytest.raises(ValueError, match=r"^decay must have shape \(d=3,\)"):
        la.rwkv(V, V, jnp.ones(4), U)
    with pytest.raises(TypeError, match=r"^q must be a floating-point array, got dtype int32"):
        la.linear_attention(jnp.ones((T, DK), jnp.int32), K, V)


def test_shapes_are_checked_under_jit():
    with pytest.raises(ValueError, match=r"^k must have shape \(T=6, dk=4\), got \(6, 3\)"):
        jax.jit(lambda q, k, v: la.delta_rule(q, k, v, BETA))(Q, K[:, :3], V)


def test_options_are_checked():
    with pytest.raises(ValueError, match=r"form must be one of \('parallel', 'chunked', 'recurrent'\), got 'scan'"):
        la.retention(Q, K, V, 0.9, form="scan")
    with pytest.raises(ValueError, match="chunk must be a positive integer, got 0"):
        la.ssd(V, G, K, Q, chunk=0)
    with pytest.raises(TypeError, match="chunk must be a positive integer, got float"):
        la.delta_rule(Q, K, V, BETA, chunk=4.0)
    with pytest.raises(ValueError, match=r"gamma must be a decay in \(0, 1\], got 1.5"):
        la.retention(Q, K, V, 1.5)
    with pytest.raises(ValueError, match="gamma must be a finite positive number, got 0"):
        la.retention(Q, K, V, 0)
    with pytest.raises(TypeError, match="normalize must be True or False"):
        la.linear_attention(Q, K, V, normalize=1)
    with pytest.raises(TypeError, match="feature_map must be a function"):
        la.linear_attention(Q, K, V, feature_map="elu")
    with pytest.raises(TypeError, match="log_decay must be an array"):
        la.gated_delta_rule(Q, K, V, BETA, None)
    with pytest.raises(ValueError, match="length must be a non-negative integer"):
        la.rwkv_bias(0.5, 0.0, -1)


def test_layer_arguments():
    key = jax.random.key(0)
    with pytest.raises(ValueError, match="rule must be one of .*got 'mamba'"):
        la.LinearAttention(8, 2, 4, rule="mamba", key=key)
    with pytest.raises(ValueError, match="heads must be a positive integer, got 0"):
        la.LinearAttention(8, 0, 4, key=key)
    with pytest.raises(ValueError, match="conv must be a non-negative integer, got -1"):
        la.LinearAttention(8, 2, 4, conv=-1, key=key)
    with pytest.raises(TypeError, match="key must be a JAX random key"):
        la.LinearAttention(8, 2, 4, key=0)
    layer = la.LinearAttention(8, 2, 4, key=key)
    with pytest.raises(ValueError, match="x must have d_model=8 features"):
        layer(jnp.ones((5, 7)))
    with pytest.raises(ValueError, match="form must be one of"):
        layer(jnp.ones((5, 8)), form="fast")
    with pytest.raises(ValueError, match="bias and process_heads must be None"):
        layer(jnp.ones((5, 8)), jnp.zeros((2, 5, 5)))
    with pytest.raises(ValueError, match="length must be a positive integer, got 0"):
        layer.init_cache(0)
    with pytest.raises(ValueError, match=r"x must have shape \(1, d_model\), got \(2, 8\)"):
        layer.step(jnp.ones((2, 8)), layer.init_cache(4), 0)


@pytest.mark.parametrize("name", CALLS)
def test_empty_sequence(name):
    out = CALLS[name](Q[:0], K[:0], V[:0], G[:0], BETA[:0])
    assert out.shape == (0, DV)
    assert la.rwkv(V[:0], V[:0], W, U).shape == (0, DV)


@pytest.mark.parametrize("form", la.FORMS)
@pytest.mark.parametrize("name", CALLS)
def test_nan_reaches_exactly_the_outputs_that_see_it(name, form):
    """A NaN value at position 3 makes outputs 3.. NaN and leaves 0..2 unchanged (in the parallel form a
    zero of the mask times NaN would otherwise spread it backwards); a NaN query poisons its own row only."""
    f = lambda q, v: CALLS[name](q, K, v, G, BETA, form=form, chunk=4)
    clean = f(Q, V)
    out = f(Q, V.at[3, 1].set(jnp.nan))
    assert np.all(np.isnan(out[3:])) and np.array_equal(out[:3], clean[:3])
    out = f(Q.at[2, 0].set(jnp.inf), V)
    assert np.all(np.isnan(out[2])) and np.array_equal(np.delete(out, 2, 0), np.delete(clean, 2, 0))
    grad = jax.grad(lambda v: jnp.sum(f(Q, v)[:3]))(V.at[4, 0].set(jnp.nan))
    assert np.all(np.isfinite(grad))


@pytest.mark.parametrize("form", la.FORMS)
def test_rwkv_nan_is_per_channel(form):
    out = la.rwkv(V, V.at[2, 1].set(jnp.nan), W, U, form=form, chunk=4)
    assert np.all(np.isnan(out[2:, 1]))
    assert np.all(np.isfinite(out[:2])) and np.all(np.isfinite(out[:, [0, 2]]))
