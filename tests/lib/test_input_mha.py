"""attnbook.mha.MultiHeadAttention under bad and extreme input (issue 10).

Errors name their argument; padding (keys, values and queries that no query sees) may hold NaN or
inf without changing any output or gradient; a future key in a causal mask changes no earlier output.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import masking
from attnbook.mha import MultiHeadAttention, parameter_count


def make_layer(seed=0, **kwargs):
    """A 7 -> 7 layer with 3 heads of size 4 and every weight and bias random (biases start at zero)."""
    layer = MultiHeadAttention(**{"d_model": 7, "num_heads": 3, "key_dim": 4, **kwargs}, key=jax.random.key(seed))
    rng = np.random.default_rng(seed)
    leaves, treedef = jax.tree.flatten(layer)
    return jax.tree.unflatten(treedef, [jnp.asarray(rng.normal(scale=0.5, size=a.shape), jnp.float32) for a in leaves])


def tokens(seed, t=5, d=7):
    return jnp.asarray(np.random.default_rng(100 + seed).normal(size=(t, d)), dtype=jnp.float32)


@pytest.mark.parametrize(
    "kwargs, kind, match",
    [
        ({"key": 0}, TypeError, "key must be a JAX random key.*int 0"),
        ({"key": np.random.default_rng(0)}, TypeError, "key must be a JAX random key.*Generator"),
        ({"key": jnp.zeros(2)}, TypeError, "key must be a JAX random key.*float32"),
        ({"key": jax.random.split(jax.random.key(0), 2)}, TypeError, r"key must be a JAX random key.*\(2,\)"),
        ({"num_heads": 0}, ValueError, "num_heads.*0"),
        ({"num_heads": 2.5}, TypeError, "num_heads.*2.5"),
        ({"num_heads": True}, TypeError, "num_heads"),
        ({"key_dim": "8"}, TypeError, "key_dim"),
        ({"d_model": -7}, ValueError, "d_model.*-7"),
        ({"value_dim": 0}, ValueError, "value_dim.*0"),
        ({"d_out": 1.0}, TypeError, "d_out.*1.0"),
        ({"key_bias_positions": 0}, ValueError, "key_bias_positions.*0"),
    ],
)
def test_bad_construction(kwargs, kind, match):
    args = {"d_model": 7, "num_heads": 3, "key_dim": 8, "key": jax.random.key(0), **kwargs}
    with pytest.raises(kind, match=match):
        MultiHeadAttention(**args)


x5 = tokens(0)


@pytest.mark.parametrize(
    "args, kind, match",
    [
        ((x5.astype(jnp.int32), x5, x5), TypeError, "query must be a floating-point array, got dtype int32"),
        ((x5, x5 > 0, x5), TypeError, "key must be a floating-point array, got dtype bool"),
        ((x5, x5, np.ones((5, 7), np.int64)), TypeError, "value must be a floating-point array"),
        ((x5, x5, x5, jnp.ones((5, 5))), TypeError, "mask must be a boolean array.*float32"),
        ((x5, x5, x5, jnp.ones((5, 5), jnp.int32)), TypeError, "mask must be a boolean array.*int32"),
        ((x5[0], x5, x5), ValueError, r"query must have shape \(Tq, d_query\), got an array of shape \(7,\)"),
        ((x5[:, :6], x5, x5), ValueError, r"query must have d_model=7 features.*\(5, 6\)"),
        ((x5, x5.T, x5), ValueError, r"key must have d_model=7 features.*\(7, 5\)"),
        ((x5, x5, x5[:4]), ValueError, r"value must have one row per key, shape \(Tk, d_model\) = \(5, 7\), got \(4, 7\)"),
        ((x5, x5, x5, jnp.ones((5, 4), bool)), ValueError, r"mask must have shape \(\*heads, Tq=5, Tk=5\), got \(5, 4\)"),
        ((x5, x5, x5, jnp.ones((2, 5, 5), bool)), ValueError, r"mask must have shape \(Tq, Tk\) = \(5, 5\) or \(heads, Tq, Tk\) = \(3, 5, 5\), got \(2, 5, 5\)"),
        ((x5, x5, x5, jnp.ones((1, 3, 5, 5), bool)), ValueError, r"mask must have shape \(Tq, Tk\).*got \(1, 3, 5, 5\)"),
        ((x5, x5, x5, jnp.ones(5, bool)), ValueError, r"mask must have shape \(\*heads, Tq=5, Tk=5\), got an array of shape \(5,\)"),
        (("q", x5, x5), TypeError, "query must be an array"),
    ],
)
def test_bad_call(args, kind, match):
    layer = make_layer()
    with pytest.raises(kind, match=match):
        layer(*args)
    with pytest.raises(kind, match=match):  # the same when traced: shapes and dtypes are static
        eqx.filter_jit(layer)(*args)


def test_key_length_must_match_key_bias_positions():
    layer = make_layer(key_bias_positions=5)
    with pytest.raises(ValueError, match=r"key length must equal key_bias_positions=5.*\(6, 7\)"):
        layer(x5, tokens(1, t=6), tokens(1, t=6))


def test_parameter_count_of_something_else():
    with pytest.raises(TypeError, match="layer must be a MultiHeadAttention, got dict"):
        parameter_count({"w": jnp.ones(3)})


def test_empty_sequences():
    layer = make_layer()
    out, weights = layer(x5[:0], x5, x5)  # Tq = 0: empty outputs of the right shapes
    assert out.shape == (0, 7) and weights.shape == (3, 0, 5)
    out, weights = layer(x5, x5[:0], x5[:0])  # Tk = 0: every query sees nothing, so a zero row
    assert weights.shape == (3, 5, 0)
    np.testing.assert_array_equal(out, np.zeros((5, 7)))


def grads(layer, query, key, value, mask, rows=slice(None)):
    """Gradients of a loss over the output rows `rows`, for the layer's parameters and the three inputs."""
    def loss(layer, query, key, value):
        return jnp.sum(jnp.sin(layer(query, key, value, mask)[0][rows]))
    return jax.tree.leaves(jax.grad(loss, argnums=(0, 1, 2, 3))(layer, query, key, value))


@pytest.mark.parametrize("junk", [np.nan, np.inf, -np.inf, 1e30])
@pytest.mark.parametrize("per_head", [False, True])
def test_padding_contents_change_nothing(junk, per_head):
    """Issue 10: NaN/inf in keys and values no query may see made every output or gradient NaN."""
    layer = make_layer(1)
    query, kv = tokens(2), tokens(3)
    mask = masking.padding_mask(np.array([3]), 5)[0] & masking.causal_mask(5)  # tokens 3, 4 are padding
    if per_head:  # head 1 also ignores key 0; query 2 sees nothing in head 2
        mask = jnp.stack([mask, mask.at[:, 0].set(False), mask.at[2].set(False)])
    padded_kv = kv.at[3:].set(junk)
    padded_query = query.at[3:].set(junk)  # padding queries see nothing, so they may hold anything too
    clean = layer(query, kv, kv, mask)
    dirty = layer(padded_query, padded_kv, padded_kv, mask)
    for a, b in zip(clean, dirty):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(grads(layer, query, kv, kv, mask), grads(layer, padded_query, padded_kv, padded_kv, mask)):
        np.testing.assert_array_equal(a, b)  # every gradient, the parameters' included


def test_padding_under_jit_and_vmap():
    layer = make_layer(2)
    batch = jnp.stack([tokens(4), tokens(5)]).at[0, 2:].set(jnp.nan).at[1, 4:].set(jnp.inf)
    masks = masking.padding_mask(np.array([2, 4]), 5)
    out, weights = eqx.filter_jit(jax.vmap(lambda x, m: layer(x, x, x, m)))(batch, masks)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(weights))
    np.testing.assert_array_equal(out[0, 2:], 0.0)  # padding queries: zero rows
    np.testing.assert_allclose(out[0, :2], layer(batch[0, :2], batch[0, :2], batch[0, :2])[0], atol=1e-6)
    g = eqx.filter_jit(eqx.filter_grad(lambda m: jnp.sum(jax.vmap(lambda x, k: m(x, x, x, k)[0])(batch, masks))))(layer)
    assert all(np.all(np.isfinite(leaf)) for leaf in jax.tree.leaves(g))


def test_future_key_changes_no_earlier_output():
    """Causal: a NaN in key/value 2 (visible to queries 2..4) leaves rows 0 and 1 exactly as they were."""
    layer = make_layer(3)
    x = tokens(6)
    causal = masking.causal_mask(5)
    poisoned = x.at[2].set(jnp.nan)
    out, weights = layer(x, poisoned, poisoned, causal)
    clean_out, clean_weights = layer(x, x, x, causal)
    np.testing.assert_array_equal(out[:2], clean_out[:2])
    np.testing.assert_array_equal(weights[:, :2], clean_weights[:, :2])
    assert np.all(np.isnan(out[2:]))  # visible NaN: it reaches the queries that see it, visibly
    # The gradient of the early rows with respect to the early queries does not see it either.
    g_query = jax.grad(lambda q: jnp.sum(layer(q, poisoned, poisoned, causal)[0][:2]))(x)
    g_clean = jax.grad(lambda q: jnp.sum(layer(q, x, x, causal)[0][:2]))(x)
    np.testing.assert_array_equal(g_query[:2], g_clean[:2])


def test_fully_masked_rows_in_low_precision_inputs():
    layer = make_layer(4)
    mask = jnp.zeros((5, 5), bool).at[:, :2].set(True).at[4].set(False)
    for dtype in (jnp.float16, jnp.bfloat16):  # promoted to the float32 weights
        x = tokens(7).astype(dtype)
        out, weights = layer(x, x, x, mask)
        assert np.all(np.isfinite(out))
        np.testing.assert_array_equal(out[4], 0.0)
        np.testing.assert_allclose(out, layer(x.astype(jnp.float32), x.astype(jnp.float32), x.astype(jnp.float32), mask)[0])


def test_scores_that_would_overflow_give_the_argmax():
    """Inputs of 1e30 give projected queries and keys whose scores overflow float32 unscaled: one-hot weights, no NaN."""
    layer, x = make_layer(0), tokens(0)
    for f in (layer, eqx.filter_jit(layer)):
        out, weights = f(x * 1e30, x * 1e30, x)
        assert np.all(np.isfinite(out)) and np.all(np.isfinite(weights))
        np.testing.assert_allclose(np.max(weights, axis=-1), 1.0)
        np.testing.assert_allclose(np.sum(weights, axis=-1), 1.0)
