"""attnbook.aft under bad and extreme input: every error names its argument; edge cases give their stated result.

The contract is the one of the package docstring (``attnbook.__doc__``): wrong types are ``TypeError``, wrong
shapes and values ``ValueError``, token ids are checked under ``jax.jit`` and ``jax.vmap`` too, ``T = 0`` gives an
empty output, ``-inf`` biases are zero weights, and NaN reaches exactly the outputs that see it.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import aft, lm, mha, nn

KEY = jax.random.key(0)


def arrays(seed, *shapes, dtype=jnp.float32):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.normal(size=s), dtype=dtype) for s in shapes]


T, D, HEADS = 5, 4, 2
Q, K, V, W, KH, KERNEL = arrays(0, (T, D), (T, D), (T, D), (T, T), (T, HEADS), (HEADS, 3))

# Each variant as a function of (q, k, v, bias) with the bias of its kind: w for full and local, a kernel for conv.
CALLS = {
    "aft-full": lambda q, k, v, b, causal=False: aft.aft_full(q, k, v, b, causal),
    "aft-local": lambda q, k, v, b, causal=False: aft.aft_local(q, k, v, b, 2, causal),
    "aft-simple": lambda q, k, v, b, causal=False: aft.aft_simple(q, k, v, causal),
    "aft-conv": lambda q, k, v, b, causal=False: aft.aft_conv(q, k, v, b, causal),
}


def inputs(name, length=T, d=D):
    """Valid (q, k, v, bias) for a variant."""
    q, k, v, w, kh, kernel = arrays(length, (length, d), (length, d), (length, d), (length, length),
                                    (length, HEADS), (HEADS, 3))
    return (q, kh, v, kernel) if name == "aft-conv" else (q, k, v, w)


# ---------------------------------------------------------------------------------------------
# Shapes and dtypes of the four functions


@pytest.mark.parametrize("name", aft.VARIANTS)
def test_shapes_name_the_argument(name):
    f = CALLS[name]
    q, k, v, b = inputs(name)
    with pytest.raises(ValueError, match=r"q must have shape \(T, d\), got an array of shape \(4,\)"):
        f(q[0], k, v, b)
    with pytest.raises(ValueError, match=r"^k must have shape .*got \(4, "):
        f(q, k[:4], v, b)
    with pytest.raises(ValueError, match=r"^v must have shape \(T=5, d=4\), got \(5, 3\)"):
        f(q, k, v[:, :3], b)
    with pytest.raises(ValueError, match=r"^v must have shape"):
        f(q, k, v[None], b)
    if name in ("aft-full", "aft-local"):
        with pytest.raises(ValueError, match=r"^w must have shape \(T=5, T=5\), got \(4, 5\)"):
            f(q, k, v, b[:4])
        with pytest.raises(ValueError, match=r"^w must have shape \(T=5, T=5\), got \(5, 4\)"):
            f(q, k, v, b[:, :4])


@pytest.mark.parametrize("name", aft.VARIANTS)
def test_dtypes_and_types_name_the_argument(name):
    f = CALLS[name]
    q, k, v, b = inputs(name)
    with pytest.raises(TypeError, match="^q must be a floating-point array, got dtype int32"):
        f(q.astype(jnp.int32), k, v, b)
    with pytest.raises(TypeError, match="^k must be a floating-point array"):
        f(q, k > 0, v, b)
    with pytest.raises(TypeError, match="^v must be an array"):
        f(q, k, "values", b)
    with pytest.raises(TypeError, match="^causal must be True or False, got str 'yes'"):
        f(q, k, v, b, "yes")
    with pytest.raises(TypeError, match="^causal must be True or False, got int 1"):
        f(q, k, v, b, 1)
    if name != "aft-simple":
        label = "kernel" if name == "aft-conv" else "w"
        with pytest.raises(TypeError, match=f"^{label} must be a floating-point array"):
            f(q, k, v, b > 0)


def test_numpy_and_mixed_precision_inputs_are_accepted():
    out = aft.aft_full(np.asarray(Q), np.asarray(K), np.asarray(V), np.asarray(W), True)  # chapter 5 passes NumPy
    np.testing.assert_allclose(out, aft.aft_full(Q, K, V, W, True), atol=1e-6)
    assert aft.aft_full(Q.astype(jnp.float16), K, V, W).dtype == jnp.float32  # computed in the wider dtype


def test_window_is_a_positive_int():
    for window in (0, -1):
        with pytest.raises(ValueError, match=f"^window must be a positive integer, got {window}"):
            aft.aft_local(Q, K, V, W, window)
    for window in (2.0, True, jnp.asarray(2), None):
        with pytest.raises(TypeError, match="^window must be a positive integer"):
            aft.aft_local(Q, K, V, W, window)
    np.testing.assert_allclose(aft.aft_local(Q, K, V, W, np.int64(2)), aft.aft_local(Q, K, V, W, 2))


def test_conv_heads_and_kernel():
    with pytest.raises(ValueError, match=r"^kernel must have shape \(heads=2, s\), got \(3, 3\)"):
        aft.aft_conv(Q, KH, V, arrays(1, (3, 3))[0])
    # A key of the wrong shape: the message names k too, not only the kernel whose size disagrees with it.
    with pytest.raises(ValueError, match=r"^kernel must have shape \(heads=3, s\), got \(2, 3\); k has shape \(5, 3\), so heads=3"):
        aft.aft_conv(Q, arrays(1, (T, 3))[0], V, KERNEL)
    with pytest.raises(ValueError, match="^d must be divisible by heads: q has d=4 channels, kernel has heads=3"):
        aft.aft_conv(Q, arrays(1, (T, 3))[0], V, arrays(1, (3, 3))[0])
    with pytest.raises(ValueError, match="^kernel must have at least one head"):
        aft.aft_conv(Q, KH[:, :0], V, KERNEL[:0])
    with pytest.raises(ValueError, match="^kernel must have at least one head and one offset"):
        aft.aft_conv(Q, KH, V, KERNEL[:, :0], causal=True)
    with pytest.raises(ValueError, match="^kernel must have an odd size s when causal=False.*s=2"):
        aft.aft_conv(Q, KH, V, KERNEL[:, :2])
    assert aft.aft_conv(Q, KH, V, KERNEL[:, :2], causal=True).shape == (T, D)


def test_conv_bias_matrix_arguments():
    with pytest.raises(ValueError, match="^length must be a non-negative integer, got -1"):
        aft.conv_bias_matrix(KERNEL, -1)
    with pytest.raises(TypeError, match="^length must be a non-negative integer"):
        aft.conv_bias_matrix(KERNEL, 4.0)
    with pytest.raises(ValueError, match=r"^kernel must have shape \(heads, s\)"):
        aft.conv_bias_matrix(KERNEL[0], 4)
    with pytest.raises(ValueError, match="^kernel must have an odd size s when causal=False, got s=2"):
        aft.conv_bias_matrix(KERNEL[:, :2], 4)
    with pytest.raises(TypeError, match="^causal must be True or False"):
        aft.conv_bias_matrix(KERNEL, 4, causal="no")
    assert aft.conv_bias_matrix(KERNEL, 0).shape == (HEADS, 0, 0)


# ---------------------------------------------------------------------------------------------
# Defined edge cases


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("name", aft.VARIANTS)
def test_empty_sequence(name, causal):
    q, k, v, b = inputs(name, length=0)
    out = CALLS[name](q, k, v, b, causal)
    assert out.shape == (0, D) and out.dtype == jnp.float32
    out = jax.jit(lambda *a: CALLS[name](*a, causal))(q, k, v, b)
    assert out.shape == (0, D)


@pytest.mark.parametrize("causal", [False, True])
def test_minus_inf_bias_is_a_zero_weight(causal):
    w = W.at[:, 1].set(-jnp.inf)  # key 1 is left out of every output
    expected = aft.aft_full(Q, K.at[1].set(-1e4), V.at[1].set(123.0), W, causal)
    np.testing.assert_allclose(aft.aft_full(Q, K, V.at[1].set(123.0), w, causal), expected, atol=1e-6)
    # A row whose every visible weight is 0 gives 0, with zero finite gradients, not NaN.
    dead = W.at[3].set(-jnp.inf)
    out = aft.aft_full(Q, K, V, dead, causal)
    assert np.all(np.asarray(out[3]) == 0.0) and np.isfinite(np.asarray(out)).all()
    grads = jax.grad(lambda q, k, v, w: jnp.sum(aft.aft_full(q, k, v, w, causal) ** 2), argnums=(0, 1, 2, 3))(
        Q, K, V, dead)
    assert all(np.isfinite(np.asarray(g)).all() for g in grads)
    # The same in the banded variants: a kernel of -inf leaves a causal row 0 with no key at all.
    dead_kernel = jnp.full((HEADS, 1), -jnp.inf)
    out = aft.aft_conv(Q, KH, V, dead_kernel, causal=True)  # row 0 sees only itself, with weight 0
    assert np.all(np.asarray(out[0]) == 0.0) and np.isfinite(np.asarray(out)).all()
    out = aft.aft_local(Q, K, V, jnp.full((T, T), -jnp.inf), 1, causal=True)
    assert np.all(np.asarray(out[0]) == 0.0) and np.isfinite(np.asarray(out)).all()


@pytest.mark.parametrize("causal", [False, True])
def test_minus_inf_keys_are_zero_weights(causal):
    k = K.at[:, 2].set(-jnp.inf)  # channel 2 has no weight anywhere: it is 0
    for name in ("aft-full", "aft-local", "aft-simple"):
        out = np.asarray(CALLS[name](Q, k, V, W, causal))
        assert np.isfinite(out).all() and np.all(out[:, 2] == 0.0), name
    out = np.asarray(aft.aft_conv(Q, KH.at[:, 1].set(-jnp.inf), V, KERNEL, causal))
    assert np.isfinite(out).all() and np.all(out[:, 2:] == 0.0)


@pytest.mark.parametrize("bad", [jnp.nan, jnp.inf, -jnp.inf])
@pytest.mark.parametrize("name", aft.VARIANTS)
def test_non_finite_future_does_not_reach_the_past(name, bad):
    """Causal: NaN or inf in positions 3.. of any input changes no output and no gradient of rows 0..2."""
    f = lambda q, k, v, b: CALLS[name](q, k, v, b, True)
    args = inputs(name)
    base = np.asarray(f(*args))
    grad = lambda *a: jax.grad(lambda *a: jnp.sum(f(*a)[:3]), argnums=(0, 1, 2, 3))(*a)
    base_grads = grad(*args)
    for i in range(4 if name != "aft-simple" else 3):
        changed = list(args)
        if i == 3 and name != "aft-conv":
            changed[3] = args[3].at[:, 3:].set(bad)  # w[t, t'] for t' > 2: future columns
        elif i == 3:
            continue  # the kernel has no positions
        else:
            changed[i] = args[i].at[3:].set(bad)
        np.testing.assert_array_equal(np.asarray(f(*changed))[:3], base[:3])
        for g, g0 in zip(grad(*changed), base_grads):  # every gradient, that of the changed entries included
            np.testing.assert_allclose(np.asarray(g), np.asarray(g0), atol=1e-6)


@pytest.mark.parametrize("name", aft.VARIANTS)
def test_nan_reaches_exactly_the_outputs_that_see_it(name):
    q, k, v, b = inputs(name)
    causal_out = np.asarray(CALLS[name](q, k, v.at[2, 1].set(jnp.nan), b, True))
    assert np.isnan(causal_out[2:, 1]).all()  # channel 1 of every row that sums over position 2
    assert np.isfinite(np.delete(causal_out[2:], 1, axis=1)).all() and np.isfinite(causal_out[:2]).all()
    out = np.asarray(CALLS[name](q.at[1, 0].set(jnp.nan), k, v, b))  # a NaN query: its own output only
    assert np.isnan(out[1, 0]) and np.isfinite(np.delete(out.ravel(), 1 * D + 0)).all()
    grads = jax.grad(lambda q: jnp.sum(CALLS[name](q, k, v, b)[2:]))(q.at[1, 0].set(jnp.nan))
    assert np.isfinite(np.asarray(grads)).all()  # ... and not the gradients of the other rows


def test_nan_bias_outside_the_band_is_not_read():
    w = W.at[0, 4].set(jnp.nan).at[4, 0].set(jnp.inf)  # |t - t'| = 4 >= window 2
    np.testing.assert_array_equal(aft.aft_local(Q, K, V, w, 2), aft.aft_local(Q, K, V, W, 2))
    row = np.asarray(aft.aft_local(Q, K, V, W.at[2, 3].set(jnp.nan), 2))  # inside: all of row 2
    assert np.isnan(row[2]).all() and np.isfinite(np.delete(row, 2, axis=0)).all()


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
@pytest.mark.parametrize("name", aft.VARIANTS)
def test_low_precision(name, dtype):
    q, k, v, b = (x.astype(dtype) for x in inputs(name))
    big = (q, 30.0 * k, v, 30.0 * b)  # exponents far beyond float16's range: shifted, no overflow
    for causal in (False, True):
        out = CALLS[name](*big, causal)
        assert out.dtype == dtype and np.isfinite(np.asarray(out, dtype=np.float32)).all()
        reference = CALLS[name](*(x.astype(jnp.float32) for x in big), causal)
        np.testing.assert_allclose(np.asarray(out, dtype=np.float32), reference, atol=0.05, rtol=0.05)


# ---------------------------------------------------------------------------------------------
# Layers and the next-token model


def test_layer_constructors():
    with pytest.raises(TypeError, match="^key must be a JAX random key"):
        aft.AFTFull(8, 10, key=0)
    with pytest.raises(TypeError, match="^key must be a JAX random key"):
        lm.NextTokenModel("aft-simple", vocab_size=5, num_classes=3, max_len=8, key=42)
    with pytest.raises(TypeError, match="^key must be a JAX random key"):
        nn.Dense(3, 4, key=np.uint32(7))
    with pytest.raises(ValueError, match="^d_model must be a positive integer, got 0"):
        aft.AFTSimple(0, key=KEY)
    with pytest.raises(TypeError, match="^max_len must be a positive integer"):
        aft.AFTFull(8, 10.0, key=KEY)
    with pytest.raises(ValueError, match="^window must be a positive integer"):
        aft.AFTLocal(8, 10, 0, key=KEY)
    with pytest.raises(ValueError, match="^d_model must be divisible by heads, got d_model=8, heads=3"):
        aft.AFTConv(8, 3, 5, key=KEY)
    with pytest.raises(ValueError, match="^heads must be a positive integer"):
        mha.MultiHeadSelfAttention(8, 0, key=KEY)
    with pytest.raises(TypeError, match="^causal must be True or False"):
        aft.AFTSimple(8, causal="yes", key=KEY)
    with pytest.raises(TypeError, match="^kind must be a string"):
        lm.make_mixer(3, 8, max_len=10, key=KEY)
    with pytest.raises(ValueError, match="^kind must be one of"):
        lm.make_mixer("aft-fancy", 8, max_len=10, key=KEY)
    with pytest.raises(TypeError, match="^kinds must be a sequence of names"):
        lm.MixerChoice("aft-full", 8, 10, key=KEY)
    with pytest.raises(ValueError, match="^kinds must name at least one mixer"):
        lm.MixerChoice((), 8, 10, key=KEY)
    with pytest.raises(ValueError, match="^ff_ratio must be a positive integer"):
        nn.Block(aft.AFTSimple(8, key=KEY), 8, ff_ratio=0, key=KEY)


LAYERS = {
    "attention": lambda: mha.MultiHeadSelfAttention(8, 2, key=KEY),
    "aft-full": lambda: aft.AFTFull(8, 6, key=KEY),
    "aft-local": lambda: aft.AFTLocal(8, 6, 3, key=KEY),
    "aft-simple": lambda: aft.AFTSimple(8, key=KEY),
    "aft-conv": lambda: aft.AFTConv(8, 2, 3, key=KEY),
    "block": lambda: nn.Block(aft.AFTSimple(8, key=KEY), 8, activation="gelu", key=KEY),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_inputs(name):
    layer = LAYERS[name]()
    x = arrays(1, (5, 8))[0]
    assert layer(x).shape == (5, 8)
    assert layer(x[:0]).shape == (0, 8)  # T = 0: an empty output
    with pytest.raises(ValueError, match=r"^x must have shape \(T, d_model\), got an array of shape \(8,\)"):
        layer(x[0])
    with pytest.raises(ValueError, match="^x must have d_model=8 features in its last axis, got shape \\(5, 7\\)"):
        layer(x[:, :7])
    with pytest.raises(TypeError, match="^x must be a floating-point array, got dtype int32"):
        layer(x.astype(jnp.int32))
    if name in ("aft-full", "aft-local"):
        too_long = r"^x must have at most max_len=6 positions \(first axis\), got shape \(7, 8\)"
        with pytest.raises(ValueError, match=too_long):
            layer(arrays(1, (7, 8))[0])
        with pytest.raises(ValueError, match="^length must be at most max_len=6, got 7"):
            layer.bias(7)
        with pytest.raises(ValueError, match="^length must be a non-negative integer, got -1"):
            layer.bias(-1)


def test_dense_inputs():
    dense = nn.Dense(3, 4, key=KEY)
    assert dense(jnp.ones((2, 5, 3))).shape == (2, 5, 4) and dense(jnp.ones(3)).shape == (4,)
    with pytest.raises(ValueError, match="^x must have d_in=3 features in its last axis, got shape \\(3, 4\\)"):
        dense(jnp.ones((3, 4)))  # transposed: not accepted even where a product would fit


def test_layer_full_long_sequences_match_the_function():
    # Beyond ROW_BLOCK positions the layer forms w block by block (forward and backward): same result as w in full.
    length = aft.ROW_BLOCK + 9
    layer = aft.AFTFull(8, length, bias_dim=4, key=KEY)
    x = arrays(2, (length, 8))[0]
    q, k, v = layer.qkv(x)
    expected = layer.out(aft.aft_full(q, k, v, layer.bias(length), causal=True))
    np.testing.assert_allclose(layer(x), expected, atol=1e-5)
    loss = lambda m: jnp.sum(m(x) ** 2)
    by_blocks = jax.grad(lambda u: loss(eqx.tree_at(lambda m: m.u, layer, u)))(layer.u)
    in_full = jax.grad(lambda u: jnp.sum(layer.out(aft.aft_full(q, k, v, u[:length] @ layer.v[:length].T, True)) ** 2))(
        layer.u)
    np.testing.assert_allclose(by_blocks, in_full, rtol=1e-4, atol=1e-5)


MODEL = lm.NextTokenModel(("aft-simple", "aft-full"), vocab_size=5, num_classes=3, max_len=8, d_model=8, key=KEY)


def test_tokens_shape_type_and_range():
    tokens = jnp.asarray([0, 4, 2], dtype=jnp.int32)
    assert MODEL(tokens).shape == (3, 3)
    assert MODEL(tokens[:0]).shape == (0, 3)
    with pytest.raises(ValueError, match=r"^tokens must be integers in \[0, 5\), got -1 at index 1"):
        MODEL(tokens.at[1].set(-1))  # not read as the last token
    with pytest.raises(ValueError, match=r"^tokens must be integers in \[0, 5\), got 5 at index 2"):
        MODEL(tokens.at[2].set(5))
    with pytest.raises(TypeError, match="^tokens must be an integer array, got dtype float32"):
        MODEL(jnp.asarray([0.0, 2.7]))  # not truncated to 2
    with pytest.raises(ValueError, match=r"^tokens must have shape \(T,\), got an array of shape \(1, 3\)"):
        MODEL(tokens[None])
    with pytest.raises(ValueError, match=r"^tokens must have at most max_len=8 positions"):
        MODEL(jnp.zeros(9, dtype=jnp.int32))


def test_tokens_checked_under_jit_and_vmap():
    bad = jnp.asarray([[0, 1, 2], [3, -1, 4]], dtype=jnp.int32)
    for f in (eqx.filter_jit(lambda t: MODEL(t[1])), jax.jit(lambda t: MODEL(t[1])), jax.jit(jax.vmap(MODEL)),
              eqx.filter_jit(lambda t: jax.vmap(MODEL.using("aft-full"))(t))):
        with pytest.raises(RuntimeError, match=r"tokens must be integers in \[0, 5\)"):
            jax.block_until_ready(f(bad))
    assert jax.jit(jax.vmap(MODEL))(bad.at[1, 1].set(0)).shape == (2, 3, 3)
