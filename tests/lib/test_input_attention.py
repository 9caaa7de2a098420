"""attnbook.attention under bad and extreme input: the contract of attnbook's docstring.

Every bad argument raises the documented type with a message naming the argument (and the expected
and received value); the defined edge cases (T = 0, fully masked rows, -inf biases, NaN/inf padding,
float16/bfloat16) give their stated results. Random versions of these are in test_properties_attention.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import masking
from attnbook.attention import (SelfAttention, attention_scores, chunked_attention, flash_attention,
                                masked_softmax, scaled_dot_product_attention)

jax.config.update("jax_enable_x64", False)

CHUNKS = {"query_chunk": 2, "key_chunk": 3}


def qkv(tq=3, tk=5, d=4, dv=2, seed=0, dtype=jnp.float32):
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.normal(size=s), dtype=dtype) for s in [(tq, d), (tk, d), (tk, dv)])


def sdpa(*args, **kwargs):
    return scaled_dot_product_attention(*args, **kwargs)[0]


def chunked(q, k, v, mask=None, **kwargs):
    return chunked_attention(q, k, v, mask=mask, **{**CHUNKS, **kwargs})


def flash(q, k, v, mask=None, **kwargs):
    return flash_attention(q, k, v, mask=mask, **{"query_block": 2, "key_block": 3, **kwargs})


ATTENTIONS = {"scaled_dot_product_attention": sdpa, "chunked_attention": chunked, "flash_attention": flash}


# ---------------------------------------------------------------------------------------------
# Errors: type and message


@pytest.mark.parametrize("name", list(ATTENTIONS))
@pytest.mark.parametrize(
    "change, error, words",
    [
        (lambda q, k, v: (q[0], k, v), ValueError, ["q must have shape (Tq, d)", "(4,)"]),
        (lambda q, k, v: (q, k[:, :3], v), ValueError, ["k must have shape (Tk, d=4)", "(5, 3)"]),
        (lambda q, k, v: (q, k, v[:4]), ValueError, ["v must have shape (Tk=5, dv)", "(4, 2)"]),
        (lambda q, k, v: (q, k, v[:, 0]), ValueError, ["v must have shape", "(5,)"]),
        (lambda q, k, v: (q.astype(jnp.int32), k, v), TypeError, ["q must be a floating-point array", "int32"]),
        (lambda q, k, v: (q, k, v > 0), TypeError, ["v must be a floating-point array", "bool"]),
        (lambda q, k, v: ("q", k, v), TypeError, ["q must be an array", "str"]),
    ],
)
def test_bad_arrays(name, change, error, words):
    with pytest.raises(error) as info:
        ATTENTIONS[name](*change(*qkv()))
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("name", list(ATTENTIONS))
def test_bad_masks(name):
    q, k, v = qkv()
    f = ATTENTIONS[name]
    with pytest.raises(TypeError, match=r"mask must be a boolean array.*float32.*bias="):
        f(q, k, v, mask=jnp.zeros((3, 5)))  # an additive mask
    with pytest.raises(TypeError, match=r"mask must be a boolean array.*int32"):
        f(q, k, v, mask=jnp.ones((3, 5), dtype=jnp.int32))
    with pytest.raises(ValueError, match=r"mask must have shape \(Tq=3, Tk=5\), got \(5, 3\)"):
        f(q, k, v, mask=jnp.ones((5, 3), dtype=bool))
    with pytest.raises(ValueError, match=r"mask must have shape \(Tq=3, Tk=5\), got an array of shape \(1, 3, 5\)"):
        f(q, k, v, mask=jnp.ones((1, 3, 5), dtype=bool))


def test_bad_bias():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"bias must have shape \(Tq=3, Tk=5\), got an array of shape \(5,\)"):
        scaled_dot_product_attention(q, k, v, bias=jnp.zeros((5,)))
    with pytest.raises(TypeError, match=r"bias must be a floating-point array, got dtype bool"):
        scaled_dot_product_attention(q, k, v, bias=jnp.ones((3, 5), dtype=bool))


def test_masked_softmax_bad_arguments():
    scores = jnp.zeros((2, 3, 5))
    with pytest.raises(TypeError, match=r"mask must be a boolean array.*float32.*bias="):
        masked_softmax(scores, jnp.where(jnp.ones((2, 3, 5), bool), 0.0, -jnp.inf))
    with pytest.raises(ValueError, match=r"mask must have shape \(\*rows=\(2, 3\), Tk=5\), got \(3, 5\)"):
        masked_softmax(scores, jnp.ones((3, 5), dtype=bool))  # no broadcasting: say which rows
    with pytest.raises(ValueError, match=r"bias must have shape"):
        masked_softmax(scores, bias=jnp.zeros((2, 5)))
    with pytest.raises(TypeError, match=r"scores must be a floating-point array"):
        masked_softmax(jnp.zeros((2, 5), dtype=jnp.int32))
    with pytest.raises(ValueError, match=r"scores must have shape \(\*rows, Tk\), got an array of shape \(\)"):
        masked_softmax(jnp.zeros(()))


def test_attention_scores_bad_arguments():
    q, k, _ = qkv()
    with pytest.raises(ValueError, match=r"k must have shape \(Tk, d=4\), got \(5, 2\)"):
        attention_scores(q, k[:, :2])
    with pytest.raises(TypeError, match=r"q must be a floating-point array"):
        attention_scores(q.astype(jnp.int8), k)


@pytest.mark.parametrize("argument", ["query_chunk", "key_chunk", "query_block", "key_block"])
@pytest.mark.parametrize("value, error, received", [(0, ValueError, "got 0"), (-1, ValueError, "got -1"),
                                                    (2.0, TypeError, "got float 2.0"), (None, TypeError, "None"),
                                                    (np.float32(2), TypeError, "float32")])
def test_bad_chunk_sizes(argument, value, error, received):
    q, k, v = qkv()
    f = chunked if "chunk" in argument else flash
    with pytest.raises(error, match=f"{argument} must be a positive integer") as info:
        f(q, k, v, **{argument: value})
    assert received in str(info.value)


def test_bad_causal_flag():
    q, k, v = qkv()
    with pytest.raises(TypeError, match="causal must be True or False, got 1"):
        chunked_attention(q, k, v, causal=1, **CHUNKS)
    with pytest.raises(TypeError, match="causal must be True or False, got int 1"):
        flash(q, k, v, causal=1)
    with pytest.raises(TypeError, match="return_lse must be True or False, got str 'yes'"):
        flash(q, k, v, return_lse="yes")
    with pytest.raises(TypeError, match="causal must be True or False"):
        SelfAttention(4, 3, 2, causal="yes", key=jax.random.key(0))


def test_self_attention_bad_arguments():
    with pytest.raises(TypeError, match=r"key must be a JAX random key .* got int 0"):
        SelfAttention(4, 3, 2, key=0)
    for name, sizes in [("d_in", (0, 3, 2)), ("d_attn", (4, -3, 2)), ("d_out", (4, 3, 0))]:
        with pytest.raises(ValueError, match=rf"{name} must be a positive integer"):
            SelfAttention(*sizes, key=jax.random.key(0))
    with pytest.raises(TypeError, match=r"d_in must be a positive integer, got float 4.0"):
        SelfAttention(4.0, 3, 2, key=jax.random.key(0))
    layer = SelfAttention(4, 3, 2, key=jax.random.key(0))
    x = jnp.ones((6, 4))
    with pytest.raises(ValueError, match=r"x must have d_in=4 features, got shape \(6, 7\)"):
        layer(jnp.ones((6, 7)))
    with pytest.raises(ValueError, match=r"x must have shape \(T, d_in\), got an array of shape \(4,\)"):
        layer(jnp.ones((4,)))
    with pytest.raises(TypeError, match=r"x must be a floating-point array"):
        layer(jnp.ones((6, 4), dtype=jnp.int32))
    with pytest.raises(ValueError, match=r"mask must have shape \(T=6, T=6\), got \(6, 5\)"):
        layer(x, jnp.ones((6, 5), dtype=bool))
    with pytest.raises(TypeError, match=r"mask must be a boolean array.*bias="):
        layer(x, jnp.zeros((6, 6)))


def test_shape_checks_hold_under_jit_and_vmap():
    # Shapes are static under jit/vmap: the same errors, raised while tracing.
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"k must have shape \(Tk, d=4\), got \(5, 3\)"):
        jax.jit(sdpa)(q, k[:, :3], v)
    with pytest.raises(ValueError, match=r"v must have shape \(Tk=5, dv\)"):
        jax.jit(lambda q, k, v: chunked(q, k, v))(q, k, v[:4])
    with pytest.raises(TypeError, match=r"mask must be a boolean array.*bias="):
        jax.jit(sdpa)(q, k, v, jnp.zeros((3, 5)))
    batched = jax.vmap(sdpa, in_axes=(0, None, None))
    with pytest.raises(ValueError, match=r"k must have shape \(Tk, d=4\), got \(5, 3\)"):
        batched(jnp.stack([q, q]), k[:, :3], v)
    layer = SelfAttention(4, 3, 2, key=jax.random.key(0))
    with pytest.raises(ValueError, match=r"x must have d_in=4"):
        jax.jit(lambda x: layer(x)[0])(jnp.ones((6, 7)))


# ---------------------------------------------------------------------------------------------
# Defined edge cases


def test_empty_sequences():
    q, k, v = qkv()
    for f in ATTENTIONS.values():
        assert f(q[:0], k, v).shape == (0, 2)  # no queries
        out = f(q, k[:0], v[:0])  # no keys: a zero row per query
        assert out.shape == (3, 2) and np.all(np.asarray(out) == 0)
        assert f(q[:0], k[:0], v[:0]).shape == (0, 2)
    out, weights = scaled_dot_product_attention(q, k[:0], v[:0])
    assert weights.shape == (3, 0)
    assert scaled_dot_product_attention(q[:0], k, v)[1].shape == (0, 5)
    assert masked_softmax(jnp.zeros((3, 0))).shape == (3, 0)
    assert attention_scores(q[:0], k).shape == (0, 5)
    layer = SelfAttention(4, 3, 2, key=jax.random.key(0))
    out, weights = layer(jnp.zeros((0, 4)))
    assert out.shape == (0, 2) and weights.shape == (0, 0)
    for f in (chunked, flash):
        grads = jax.grad(lambda q: jnp.sum(f(q, k[:0], v[:0])))(q)
        assert np.all(np.asarray(grads) == 0)


@pytest.mark.parametrize("query_chunk, key_chunk", [(1, 1), (2, 3), (3, 5), (100, 7), (7, 100)])
def test_chunk_sizes_need_not_divide_and_are_clipped(query_chunk, key_chunk):
    q, k, v = qkv(tq=5, tk=7)
    out = chunked_attention(q, k, v, query_chunk=query_chunk, key_chunk=key_chunk, causal=True)
    np.testing.assert_allclose(out, sdpa(q, k, v, mask=jnp.tril(jnp.ones((5, 7), bool))), atol=1e-6)


def test_minus_inf_bias_is_a_mask():
    q, k, v = qkv()
    mask = np.random.default_rng(1).random((3, 5)) < 0.5
    mask[1] = False  # a fully masked row
    bias = jnp.where(jnp.asarray(mask), 0.0, -jnp.inf)
    for a, b in zip(scaled_dot_product_attention(q, k, v, bias=bias),
                    scaled_dot_product_attention(q, k, v, mask=jnp.asarray(mask))):
        np.testing.assert_array_equal(a, b)  # exactly
    out, weights = scaled_dot_product_attention(q, k, v, bias=bias)
    assert np.all(np.asarray(out[1]) == 0) and np.all(np.asarray(weights[1]) == 0)
    grads = jax.grad(lambda q, k, v, b: jnp.sum(scaled_dot_product_attention(q, k, v, bias=b)[0] ** 2),
                     argnums=(0, 1, 2, 3))(q, k, v, bias)
    assert all(np.isfinite(np.asarray(g)).all() for g in grads)
    scores = jnp.zeros((3, 5))
    np.testing.assert_array_equal(masked_softmax(scores, bias=bias), masked_softmax(scores, jnp.asarray(mask)))
    g = jax.grad(lambda s, b: jnp.sum(masked_softmax(s, bias=b) ** 2), argnums=(0, 1))(scores, bias)
    assert all(np.isfinite(np.asarray(x)).all() for x in g)


def test_padding_contents_change_nothing():
    # Three real tokens of five, causal; the two padding tokens hold NaN and inf everywhere.
    q, k, v = qkv(tq=5, tk=5)
    mask = masking.padding_mask(np.array([3]), 5)[0] & masking.causal_mask(5)
    dirty = [a.at[3:].set(value) for a, value in zip((q, k, v), (jnp.nan, jnp.inf, -jnp.nan))]
    bias = jnp.zeros((5, 5)).at[:, 3:].set(jnp.nan).at[3:].set(jnp.nan)  # bias of hidden pairs: anything
    for name, f in ATTENTIONS.items():
        clean_loss = lambda q, k, v: jnp.sum(jnp.sin(f(q, k, v, mask=mask)))
        np.testing.assert_array_equal(f(*dirty, mask=mask), f(q, k, v, mask=mask), err_msg=name)
        for g, ref in zip(jax.grad(clean_loss, argnums=(0, 1, 2))(*dirty), jax.grad(clean_loss, argnums=(0, 1, 2))(q, k, v)):
            np.testing.assert_array_equal(g, ref, err_msg=name)
    out = lambda b: scaled_dot_product_attention(*dirty, mask=mask, bias=b)[0]
    np.testing.assert_array_equal(out(bias), out(jnp.zeros((5, 5))))
    grad_bias = jax.grad(lambda b: jnp.sum(out(b)))(bias)
    assert np.isfinite(np.asarray(grad_bias)).all() and np.all(np.asarray(grad_bias)[~np.asarray(mask)] == 0)


def test_self_attention_padding_contents_change_nothing():
    layer = SelfAttention(4, 3, 2, key=jax.random.key(0))
    x = jnp.asarray(np.random.default_rng(2).normal(size=(5, 4)), dtype=jnp.float32)
    pad = masking.padding_mask(np.array([3]), 5)[0]
    dirty = x.at[3:].set(jnp.nan)
    np.testing.assert_array_equal(layer(dirty, pad)[0], layer(x, pad)[0])
    grad = lambda x: jax.grad(lambda layer: jnp.sum(layer(x, pad)[0] ** 2))(layer)
    for a, b in zip(jax.tree.leaves(grad(dirty)), jax.tree.leaves(grad(x))):
        np.testing.assert_array_equal(a, b)


def test_visible_nan_reaches_only_the_queries_that_see_it():
    q, k, v = qkv(tq=6, tk=6)
    causal = masking.causal_mask(6)
    for name, f in [("sdpa", lambda q, k, v: sdpa(q, k, v, mask=causal)),
                    ("chunked", lambda q, k, v: chunked(q, k, v, causal=True)),
                    ("flash", lambda q, k, v: flash(q, k, v, causal=True))]:
        for dirty in [(q, k.at[3, 0].set(jnp.nan), v), (q, k, v.at[3, 1].set(jnp.nan))]:
            nan_rows = np.isnan(np.asarray(f(*dirty))).any(axis=1)
            np.testing.assert_array_equal(nan_rows, np.arange(6) >= 3, err_msg=name)
        out = np.asarray(f(q, k, v.at[3, 1].set(jnp.inf)))  # +inf with positive weights: +inf
        assert np.all(out[3:, 1] == np.inf) and np.isfinite(out[:3]).all() and np.isfinite(out[:, 0]).all(), name


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_low_precision_does_not_overflow(dtype):
    # |q| = |k| = 35, d = 64: q . k = 78400 overflows float16 (65504) unless q is scaled first.
    q = jnp.full((4, 64), 35.0, dtype)
    v = jnp.asarray(np.random.default_rng(3).normal(size=(4, 3)), dtype=dtype)
    expected = np.asarray(v, dtype=np.float32).mean(axis=0)  # equal scores: the mean of the values
    for name, f in ATTENTIONS.items():
        out = f(q, q, v)
        assert out.dtype == dtype, name
        np.testing.assert_allclose(np.asarray(out, dtype=np.float32), np.broadcast_to(expected, (4, 3)),
                                   atol=1e-2, err_msg=name)
    weights = scaled_dot_product_attention(q, q, v)[1]
    assert weights.dtype == dtype and np.isfinite(np.asarray(weights, dtype=np.float32)).all()
    assert attention_scores(q, q).dtype == dtype and np.isfinite(np.asarray(attention_scores(q, q), np.float32)).all()
    big = jnp.asarray([[11.0, 0.0, -70000.0]], dtype=jnp.float32).astype(dtype)  # exp(11.1) overflows float16
    weights = np.asarray(masked_softmax(big, jnp.asarray([[True, True, False]])), dtype=np.float32)
    np.testing.assert_allclose(weights, [[1 / (1 + np.exp(-11.0)), 1 / (1 + np.exp(11.0)), 0.0]], atol=2e-3)


def test_lists_are_arrays():
    # The annotations accept nested lists (as NumPy would read them); the functions compute with them.
    q, k, v, mask = [[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]], [[1.0], [2.0]], [[True, False]]
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert float(out[0, 0]) == 1.0 and weights.tolist() == [[1.0, 0.0]]
    assert chunked_attention(q, k, v, mask=mask, query_chunk=1, key_chunk=1).tolist() == [[1.0]]
    assert flash_attention(q, k, v, mask=mask, query_block=1, key_block=1).tolist() == [[1.0]]
    assert masked_softmax([[0.0, 1.0]], [[True, False]]).tolist() == [[1.0, 0.0]]
    assert SelfAttention(2, 2, 1, key=jax.random.key(0))([[1.0, 0.0], [0.0, 1.0]], [[True, False], [True, True]])[0].shape == (2, 1)


@pytest.mark.parametrize("name", list(ATTENTIONS))
@pytest.mark.parametrize("size", [1e15, 1e30])
def test_scores_that_would_overflow_give_the_argmax(name, size):
    """q and k of 1e30: unscaled, the scores overflow float32 (inf - inf = NaN). The exact softmax of such scores
    is the row's argmax, one-hot: that is what comes out, eagerly and under jit, never NaN."""
    q, k, v = qkv()
    attend = ATTENTIONS[name]
    best = np.argmax(np.asarray(q, np.float64) @ np.asarray(k, np.float64).T, axis=1)  # a float64 reference
    for f in (attend, eqx.filter_jit(attend)):
        np.testing.assert_allclose(f(q * size, k * size, v), np.asarray(v)[best], rtol=1e-6)
    # What no query may see is left out of the scaling: a huge hidden key changes nothing.
    mask = jnp.ones((3, 5), bool).at[:, 4].set(False)
    np.testing.assert_array_equal(attend(q, k.at[4].set(1e30), v, mask), attend(q, k, v, mask))
