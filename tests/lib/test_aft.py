"""attnbook.aft against loops written from the paper's equations (Zhai et al., 2021, Eq. 2, 4, 5, 6)."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import aft, lm, nn
from attnbook.attention import scaled_dot_product_attention
from attnbook.masking import causal_mask

jax.config.update("jax_enable_x64", False)

sigmoid = lambda x: 1.0 / (1.0 + math.exp(-x))


# ---------------------------------------------------------------------------------------------
# References: plain Python loops over t, t' and channels, in float64


def weighted_average(terms):
    """sum exp(z) v / sum exp(z) over a list of (z, v), shifting by the largest z (float64)."""
    top = max(z for z, _ in terms)
    weights = [math.exp(z - top) for z, _ in terms]
    return sum(a * v for a, (_, v) in zip(weights, terms)) / sum(weights)


def loop_full(q, k, v, w, causal=False):
    """Eq. 2: Y[t, c] = sigmoid(Q[t, c]) sum_t' exp(K[t', c] + w[t, t']) V[t', c] / sum_t' exp(...)."""
    q, k, v, w = (np.asarray(a, dtype=np.float64) for a in (q, k, v, w))
    length, d = q.shape
    y = np.zeros((length, d))
    for t in range(length):
        visible = range(t + 1) if causal else range(length)
        for c in range(d):
            y[t, c] = sigmoid(q[t, c]) * weighted_average([(k[s, c] + w[t, s], v[s, c]) for s in visible])
    return y


def loop_local(q, k, v, w, window, causal=False):
    """Eq. 4: w[t, t'] where |t - t'| < s, 0 otherwise, then Eq. 2."""
    length = len(q)
    local = [[w[t][s] if abs(t - s) < window else 0.0 for s in range(length)] for t in range(length)]
    return loop_full(q, k, v, local, causal)


def loop_simple(q, k, v, causal=False):
    """Eq. 5: Y[t, c] = sigmoid(Q[t, c]) sum_t' exp(K[t', c]) V[t', c] / sum_t' exp(K[t', c])."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    length, d = q.shape
    y = np.zeros((length, d))
    for t in range(length):
        visible = range(t + 1) if causal else range(length)
        for c in range(d):
            y[t, c] = sigmoid(q[t, c]) * weighted_average([(k[s, c], v[s, c]) for s in visible])
    return y


def conv_offset_bias(kernel, head, t, s, causal):
    """The bias of head `head` between output t and key s, from the kernel's documented layout."""
    size = len(kernel[head])
    j = (t - s) if causal else (s - t + size // 2)
    return kernel[head][j] if 0 <= j < size else None  # None: outside the window


def loop_conv(q, k, v, kernel, causal=False):
    """Eq. 6 literally, per head i, in float64 (moderate values only: no shift):

    numerator = conv1d(exp(K^i) V^i, exp(w^i) - 1) + sum_t' exp(K^i_t') V^i_t', and the same without V.
    """
    q, k, v, kernel = (np.asarray(a, dtype=np.float64) for a in (q, k, v, kernel))
    length, d = q.shape
    heads = k.shape[1]
    width = d // heads
    y = np.zeros((length, d))
    for t in range(length):
        visible = range(t + 1) if causal else range(length)
        for i in range(heads):
            for c in range(i * width, (i + 1) * width):
                num = sum(math.exp(k[s, i]) * v[s, c] for s in visible)  # the global sum
                den = sum(math.exp(k[s, i]) for s in visible)
                for s in visible:  # the convolution with exp(w) - 1 over the window
                    b = conv_offset_bias(kernel, i, t, s, causal)
                    if b is not None:
                        num += (math.exp(b) - 1.0) * math.exp(k[s, i]) * v[s, c]
                        den += (math.exp(b) - 1.0) * math.exp(k[s, i])
                y[t, c] = sigmoid(q[t, c]) * num / den
    return y


def loop_conv_direct(q, k, v, kernel, causal=False):
    """AFT-conv as AFT-full with the per-head Toeplitz bias, by loops (any magnitude: shifted)."""
    q, k, v, kernel = (np.asarray(a, dtype=np.float64) for a in (q, k, v, kernel))
    length, d = q.shape
    heads = k.shape[1]
    width = d // heads
    y = np.zeros((length, d))
    for t in range(length):
        visible = range(t + 1) if causal else range(length)
        for i in range(heads):
            bias = {s: conv_offset_bias(kernel, i, t, s, causal) or 0.0 for s in visible}
            for c in range(i * width, (i + 1) * width):
                y[t, c] = sigmoid(q[t, c]) * weighted_average([(k[s, i] + bias[s], v[s, c]) for s in visible])
    return y


def arrays(seed, *shapes, scale=1.0):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(scale * rng.normal(size=s), dtype=jnp.float32) for s in shapes]


# ---------------------------------------------------------------------------------------------
# Each variant against its loop


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seed,length,d", [(0, 7, 3), (1, 1, 2), (2, 12, 5)])
def test_full_matches_loop(causal, seed, length, d):
    q, k, v, w = arrays(seed, (length, d), (length, d), (length, d), (length, length))
    np.testing.assert_allclose(aft.aft_full(q, k, v, w, causal), loop_full(q, k, v, w, causal), atol=2e-6)


def test_full_row_blocks_match_loop(monkeypatch):
    monkeypatch.setattr(aft, "ROW_BLOCK", 4)  # 10 rows: blocks of 4, 4 and a remainder of 2
    q, k, v, w = arrays(3, (10, 3), (10, 3), (10, 3), (10, 10))
    for causal in (False, True):
        np.testing.assert_allclose(aft.aft_full(q, k, v, w, causal), loop_full(q, k, v, w, causal), atol=2e-6)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [1, 2, 3, 6, 11, 50])
def test_local_matches_loop(causal, window):
    q, k, v, w = arrays(window, (11, 4), (11, 4), (11, 4), (11, 11))
    np.testing.assert_allclose(aft.aft_local(q, k, v, w, window, causal), loop_local(q, k, v, w, window, causal),
                               atol=2e-6)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length", [1, 2, 9])
def test_simple_matches_loop(causal, length):
    q, k, v = arrays(length, (length, 4), (length, 4), (length, 4))
    np.testing.assert_allclose(aft.aft_simple(q, k, v, causal), loop_simple(q, k, v, causal), atol=2e-6)


@pytest.mark.parametrize("causal,size", [(False, 1), (False, 3), (False, 5), (False, 21), (True, 1), (True, 2),
                                         (True, 4), (True, 13)])
@pytest.mark.parametrize("heads,d", [(1, 3), (2, 4), (3, 6)])
def test_conv_matches_equation_6(causal, size, heads, d):
    length = 9
    q, k, v, kernel = arrays(size + heads, (length, d), (length, heads), (length, d), (heads, size))
    out = aft.aft_conv(q, k, v, kernel, causal)
    np.testing.assert_allclose(out, loop_conv(q, k, v, kernel, causal), atol=2e-6)
    np.testing.assert_allclose(out, loop_conv_direct(q, k, v, kernel, causal), atol=2e-6)


def test_conv_kernel_layout():
    # Causal: kernel[:, j] is offset t - t' = j. Non-causal: kernel[:, j] is t' - t = j - s // 2.
    w = np.asarray(aft.conv_bias_matrix(jnp.asarray([[1.0, 2.0, 3.0]]), 4, causal=True))[0]
    np.testing.assert_array_equal(w, [[1, 0, 0, 0], [2, 1, 0, 0], [3, 2, 1, 0], [0, 3, 2, 1]])
    w = np.asarray(aft.conv_bias_matrix(jnp.asarray([[1.0, 2.0, 3.0]]), 4, causal=False))[0]
    np.testing.assert_array_equal(w, [[2, 3, 0, 0], [1, 2, 3, 0], [0, 1, 2, 3], [0, 0, 1, 2]])


# ---------------------------------------------------------------------------------------------
# Equivalences between the variants


@pytest.mark.parametrize("causal", [False, True])
def test_equivalences(causal):
    length, d, heads = 10, 6, 3
    q, k, v, w, kh, kernel = arrays(5, (length, d), (length, d), (length, d), (length, length), (length, heads),
                                     (heads, 5))
    full = aft.aft_full(q, k, v, w, causal)
    for window in (length, length + 3, 100):  # a window that covers the sequence is AFT-full
        np.testing.assert_allclose(aft.aft_local(q, k, v, w, window, causal), full, atol=1e-6)
    # AFT-simple is AFT-full with w = 0 (the paper's s = 0: no bias anywhere).
    np.testing.assert_allclose(aft.aft_simple(q, k, v, causal), aft.aft_full(q, k, v, jnp.zeros_like(w), causal),
                               atol=1e-6)
    # AFT-local is AFT-full with the bias zeroed outside the band.
    band = np.abs(np.arange(length)[:, None] - np.arange(length)[None, :]) < 3
    np.testing.assert_allclose(aft.aft_local(q, k, v, w, 3, causal), aft.aft_full(q, k, v, jnp.where(band, w, 0), causal),
                               atol=1e-6)
    # AFT-conv is AFT-full, head by head, with the banded Toeplitz bias built from its kernel.
    conv = aft.aft_conv(q, kh, v, kernel, causal)
    biases = aft.conv_bias_matrix(kernel, length, causal)
    width = d // heads
    for i in range(heads):
        cols = slice(i * width, (i + 1) * width)
        keys = jnp.repeat(kh[:, i : i + 1], width, axis=1)
        np.testing.assert_allclose(conv[:, cols], aft.aft_full(q[:, cols], keys, v[:, cols], biases[i], causal),
                                   atol=1e-6)


def test_implicit_attention_rows_sum_to_one():
    # Channel c of AFT-full is attention with weights softmax_t'(K[:, c] + w[t]) and a sigmoid gate.
    q, k, v, w = arrays(6, (8, 4), (8, 4), (8, 4), (8, 8))
    out = aft.aft_full(q, k, v, w, causal=True)
    for c in range(4):
        scores = jnp.where(causal_mask(8), k[None, :, c] + w, -jnp.inf)
        a = jax.nn.softmax(scores, axis=1)
        np.testing.assert_allclose(a.sum(axis=1), 1.0, atol=1e-6)
        np.testing.assert_allclose(jax.nn.sigmoid(q[:, c]) * (a @ v[:, c]), out[:, c], atol=1e-6)


# ---------------------------------------------------------------------------------------------
# Causality: no output depends on a later input


def causal_calls(length=9, d=4, heads=2):
    q, k, v, w, kh, kernel = arrays(7, (length, d), (length, d), (length, d), (length, length), (length, heads),
                                    (heads, 4))
    calls = {
        "aft-full": (lambda q, k, v: aft.aft_full(q, k, v, w, causal=True), (q, k, v)),
        "aft-local": (lambda q, k, v: aft.aft_local(q, k, v, w, 3, causal=True), (q, k, v)),
        "aft-simple": (lambda q, k, v: aft.aft_simple(q, k, v, causal=True), (q, k, v)),
        "aft-conv": (lambda q, k, v: aft.aft_conv(q, k, v, kernel, causal=True), (q, kh, v)),
    }
    return calls


@pytest.mark.parametrize("name", aft.VARIANTS)
def test_no_leak_jacobian(name):
    f, inputs = causal_calls()[name]
    length = inputs[0].shape[0]
    future = np.triu(np.ones((length, length), dtype=bool), k=1)  # [t, t'] with t' > t
    for argnum in range(3):
        jac = np.asarray(jax.jacobian(f, argnums=argnum)(*inputs))  # (T, d, T, d_in)
        dependence = np.abs(jac).sum(axis=(1, 3))
        assert np.all(dependence[future] == 0.0), f"{name}: output depends on a later input {argnum}"
        if argnum != 1:  # (with one visible key, output 0 does not depend on it: one weight is always 1)
            assert np.all(np.diag(dependence) > 0.0)


@pytest.mark.parametrize("name", aft.VARIANTS)
def test_no_leak_perturbation(name):
    f, inputs = causal_calls()[name]
    base = np.asarray(f(*inputs))
    for cut in (0, 4, 8):
        changed = [x.at[cut + 1 :].add(100.0 * jnp.sign(x[cut + 1 :]) + 3.0) for x in inputs]
        np.testing.assert_array_equal(np.asarray(f(*changed))[: cut + 1], base[: cut + 1])


@pytest.mark.parametrize("kind", ("attention",) + aft.VARIANTS)
def test_next_token_model_is_causal(kind):
    model = lm.NextTokenModel(kind, vocab_size=5, num_classes=4, max_len=12, d_model=8, key=jax.random.key(0),
                               window=3, heads=2)
    tokens = jnp.asarray([1, 3, 0, 2, 4, 4, 1, 0, 2, 3], dtype=jnp.int32)
    base = np.asarray(model(tokens))
    changed = np.asarray(model(tokens.at[6:].set(jnp.asarray([0, 1, 2, 0]))))
    np.testing.assert_array_equal(changed[:6], base[:6])
    assert np.abs(changed[6:] - base[6:]).max() > 0


# ---------------------------------------------------------------------------------------------
# Numerical stability: keys and biases of size 1000, against float64 references


def big(seed, *shapes):
    """Entries of size up to 1000 with random signs, so the exponents span thousands."""
    rng = np.random.default_rng(seed)
    return [jnp.asarray(rng.choice([-1000.0, -300.0, 0.0, 500.0, 1000.0], size=s) + rng.normal(size=s),
                        dtype=jnp.float32) for s in shapes]


def close_to_float64(out, ref):
    """Finite, and equal to the float64 result up to float32 rounding of exponents of size ~2000."""
    out = np.asarray(out)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, ref, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stability_full_local_simple(causal, seed):
    length, d = 12, 3
    (q, v), (k, w) = arrays(seed, (length, d), (length, d)), big(seed, (length, d), (length, length))
    close_to_float64(aft.aft_full(q, k, v, w, causal), loop_full(q, k, v, w, causal))
    for window in (1, 3, 20):
        close_to_float64(aft.aft_local(q, k, v, w, window, causal), loop_local(q, k, v, w, window, causal))
    close_to_float64(aft.aft_simple(q, k, v, causal), loop_simple(q, k, v, causal))
    # Large keys with small biases, and small keys with large biases.
    (small_k, small_w) = arrays(seed + 10, (length, d), (length, length))
    close_to_float64(aft.aft_full(q, k, v, small_w, causal), loop_full(q, k, v, small_w, causal))
    close_to_float64(aft.aft_full(q, small_k, v, w, causal), loop_full(q, small_k, v, w, causal))


@pytest.mark.parametrize("causal,size", [(False, 3), (False, 7), (True, 1), (True, 4)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_stability_conv(causal, size, seed):
    length, d, heads = 12, 4, 2
    (q, v), (k, kernel) = arrays(seed, (length, d), (length, d)), big(seed, (length, heads), (heads, size))
    close_to_float64(aft.aft_conv(q, k, v, kernel, causal), loop_conv_direct(q, k, v, kernel, causal))
    # Very negative biases alone: the literal Eq. 6 would cancel its global sum to rounding error here.
    negative = -1000.0 * jnp.ones((heads, size))
    close_to_float64(aft.aft_conv(q, arrays(seed, (length, heads))[0], v, negative, causal),
                     loop_conv_direct(q, arrays(seed, (length, heads))[0], v, negative, causal))


def test_naive_formula_overflows():
    # The point of the shifts: the formula evaluated as written gives NaN at these sizes.
    (q, v), (k, w) = arrays(0, (6, 2), (6, 2)), big(0, (6, 2), (6, 6))
    e = jnp.exp(k[None] + w[:, :, None])
    naive = jax.nn.sigmoid(q) * (e * v[None]).sum(1) / e.sum(1)
    assert not np.isfinite(np.asarray(naive)).all()
    assert np.isfinite(np.asarray(aft.aft_full(q, k, v, w))).all()


@pytest.mark.parametrize("name", aft.VARIANTS)
def test_gradients_finite_with_large_inputs(name):
    length, d, heads = 8, 4, 2
    (q, v), (k, w, kh, kernel) = arrays(1, (length, d), (length, d)), big(1, (length, d), (length, length),
                                                                         (length, heads), (heads, 3))
    f = {
        "aft-full": lambda q, k, v: aft.aft_full(q, k, v, w, causal=True),
        "aft-local": lambda q, k, v: aft.aft_local(q, k, v, w, 2, causal=True),
        "aft-simple": lambda q, k, v: aft.aft_simple(q, k, v, causal=True),
        "aft-conv": lambda q, k, v: aft.aft_conv(q, k, v, kernel, causal=False),
    }[name]
    keys = kh if name == "aft-conv" else k
    grads = jax.grad(lambda *a: jnp.sum(f(*a) ** 2), argnums=(0, 1, 2))(q, keys, v)
    assert all(np.isfinite(np.asarray(g)).all() for g in grads)


# ---------------------------------------------------------------------------------------------
# Memory: XLA's compiled memory analysis, not wall time


def temp_bytes(f, *shapes):
    specs = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    return jax.jit(f).lower(*specs).compile().memory_analysis().temp_size_in_bytes


@pytest.mark.parametrize("causal", [False, True])
def test_memory_grows_linearly(causal):
    d, heads = 32, 4
    grow = {}
    for name, f, shapes in [
        ("simple", lambda q, k, v: aft.aft_simple(q, k, v, causal), lambda t: [(t, d)] * 3),
        ("conv", lambda q, k, v, ker: aft.aft_conv(q, k, v, ker, causal),
         lambda t: [(t, d), (t, heads), (t, d), (heads, 7)]),
        ("local", lambda q, k, v, w: aft.aft_local(q, k, v, w, 8, causal), lambda t: [(t, d)] * 3 + [(t, t)]),
        ("attention", lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=causal_mask(q.shape[0]))[0],
         lambda t: [(t, d)] * 3),
    ]:
        small, large = temp_bytes(f, *shapes(512)), temp_bytes(f, *shapes(2048))
        grow[name] = large / small  # 4 x longer sequences
    assert grow["simple"] < 4.5 and grow["conv"] < 4.5 and grow["local"] < 4.5
    assert grow["attention"] > 12  # the T x T weights


# ---------------------------------------------------------------------------------------------
# Bad arguments


def message(excinfo):
    return str(excinfo.value)


def test_bad_arguments():
    q, k, v, w = arrays(0, (5, 4), (5, 4), (5, 4), (5, 5))
    with pytest.raises(ValueError) as e:
        aft.aft_full(q, k[:4], v, w)
    assert "k" in message(e) and "(T=5, d=4)" in message(e) and "(4, 4)" in message(e)
    with pytest.raises(ValueError) as e:
        aft.aft_full(q, k, v[:, :3], w)
    assert "v" in message(e) and "(5, 3)" in message(e)
    with pytest.raises(ValueError) as e:
        aft.aft_full(q, k, v, w[:4])
    assert "w" in message(e) and "(T=5, T=5)" in message(e) and "(4, 5)" in message(e)
    with pytest.raises(ValueError) as e:
        aft.aft_full(q[0], k, v, w)
    assert "q" in message(e) and "(T, d)" in message(e)
    with pytest.raises(ValueError) as e:
        aft.aft_local(q, k, v, w[:, :3], 2)
    assert "w" in message(e)
    for window, error in ((0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError)):
        with pytest.raises(error) as e:
            aft.aft_local(q, k, v, w, window)
        assert "window" in message(e) and "positive integer" in message(e)
    with pytest.raises(ValueError) as e:
        aft.aft_simple(q, k[:, :2], v)
    assert "k" in message(e)

    kh, kernel = arrays(1, (5, 2), (2, 3))
    with pytest.raises(ValueError) as e:
        aft.aft_conv(q, k, v, kernel)  # k has d=4 columns, so kernel's 2 heads disagree with it
    assert "kernel" in message(e) and "(heads=4, s)" in message(e) and "(2, 3)" in message(e)
    with pytest.raises(ValueError) as e:
        aft.aft_conv(q, kh[:4], v, kernel)
    assert "k" in message(e) and "(4, 2)" in message(e)
    with pytest.raises(ValueError) as e:
        aft.aft_conv(q[:, :3], arrays(2, (5, 2))[0], v[:, :3], kernel)
    assert "divisible" in message(e) and "d=3" in message(e) and "heads=2" in message(e)
    with pytest.raises(ValueError) as e:
        aft.aft_conv(q, kh, v, kernel[:, :2], causal=False)
    assert "odd" in message(e) and "s=2" in message(e)
    aft.aft_conv(q, kh, v, kernel[:, :2], causal=True)  # an even size is fine when causal
    with pytest.raises(ValueError) as e:
        aft.aft_conv(q, kh, v, kernel[0])
    assert "kernel" in message(e) and "(heads=2, s)" in message(e)
    with pytest.raises(ValueError) as e:
        aft.aft_conv(q, kh, v[:4], kernel)
    assert "v" in message(e)


def test_layer_arguments():
    with pytest.raises(ValueError, match="divisible"):
        aft.AFTConv(10, 4, 3, key=jax.random.key(0))
    with pytest.raises(ValueError, match="odd"):
        aft.AFTConv(8, 4, 4, causal=False, key=jax.random.key(0))
    with pytest.raises(ValueError, match="kind"):
        lm.make_mixer("aft-fancy", 8, max_len=10, key=jax.random.key(0))
    layer = aft.AFTFull(8, 6, key=jax.random.key(0))
    with pytest.raises(ValueError, match="max_len=6"):
        layer(jnp.ones((7, 8)))


# ---------------------------------------------------------------------------------------------
# Layers and models


def test_layer_parameter_counts():
    d, max_len, bias_dim = 8, 10, 4
    projections = 4 * (d * d + d)
    assert nn.count_parameters(aft.AFTFull(d, max_len, bias_dim=bias_dim, key=jax.random.key(0))) == \
        projections + 2 * max_len * bias_dim
    assert nn.count_parameters(aft.AFTSimple(d, key=jax.random.key(0))) == projections
    conv = aft.AFTConv(d, 2, 5, key=jax.random.key(0))
    assert nn.count_parameters(conv) == 3 * (d * d + d) + (d * 2 + 2) + 2 * 5 + 2 + 2
    assert np.all(np.asarray(conv.kernel()) == 0.0)  # gain and shift start at 0


def test_layers_match_functions():
    x = arrays(3, (7, 8))[0]
    full = aft.AFTFull(8, 10, key=jax.random.key(1))
    q, k, v = full.qkv(x)
    expected = jax.vmap(full.out)(aft.aft_full(q, k, v, full.u[:7] @ full.v[:7].T, causal=True))
    np.testing.assert_allclose(full(x), expected, atol=1e-6)
    local = aft.AFTLocal(8, 10, 2, key=jax.random.key(1))
    expected = jax.vmap(local.out)(aft.aft_local(q, k, v, local.bias(7), 2, causal=True))
    np.testing.assert_allclose(local(x), expected, atol=1e-6)


def test_mixer_choice_trains_only_the_chosen_layer():
    kinds = ("attention",) + aft.VARIANTS
    model = lm.NextTokenModel(kinds, vocab_size=5, num_classes=5, max_len=8, d_model=8, key=jax.random.key(0),
                               heads=2, window=3)
    tokens = jnp.asarray([0, 1, 2, 3, 4, 0], dtype=jnp.int32)
    # Compiled: the five chosen models share one program (the choice is an array), each single model has its
    # own. Run eagerly, every operation of the gradient was compiled on its own: this test took 25.5 s of CPU
    # from an empty compilation cache, 13.7 s so (pytest's start included, load 8-9).
    forward = eqx.filter_jit(lambda m: m(tokens))
    gradient = eqx.filter_jit(eqx.filter_grad(lambda m: jnp.sum(m(tokens) ** 2)))
    for i, kind in enumerate(kinds):
        chosen = model.using(kind)
        single = lm.NextTokenModel(kind, vocab_size=5, num_classes=5, max_len=8, d_model=8, key=jax.random.key(0),
                                    heads=2, window=3)
        single = eqx.tree_at(lambda m: m.blocks[0].mixer, single, model.blocks[0].mixer.mixers[i])
        np.testing.assert_allclose(forward(chosen), forward(single), atol=1e-6)
        assert chosen.parameters() == nn.count_parameters(single)
        grads = gradient(chosen)
        for j, mixer_grads in enumerate(grads.blocks[0].mixer.mixers):
            norms = [float(jnp.abs(g).sum()) for g in jax.tree_util.tree_leaves(mixer_grads)]
            assert (sum(norms) > 0) == (i == j)
    with pytest.raises(ValueError, match="kind"):
        model.using("aft-fancy")


# ---------------------------------------------------------------------------------------------
# The reference forms that chapter 5 prints its checks with


def test_aft_full_float64_is_the_loop_of_eq_2():
    rng = np.random.default_rng(11)
    q, k, v = (rng.normal(size=(5, 3)) for _ in range(3))
    w = rng.normal(size=(5, 5))
    for causal in (False, True):
        expected = np.array([[sigmoid(q[row, c]) * weighted_average(
            [(k[col, c] + w[row, col], v[col, c]) for col in range(5) if col <= row or not causal])
            for c in range(3)] for row in range(5)])
        np.testing.assert_allclose(aft.aft_full_float64(q, k, v, w, causal), expected, rtol=1e-12)
        np.testing.assert_allclose(aft.aft_full(*(a.astype(np.float32) for a in (q, k, v, w)), causal),
                                   expected, atol=1e-5)
    with pytest.raises(ValueError, match="shape"):
        aft.aft_full_float64(q, k, v, w[:4, :4])


def test_conv_as_full_and_the_reductions_agree():
    rng = np.random.default_rng(12)
    T, d, heads = 7, 4, 2
    q, k, v = (rng.normal(size=(T, d)).astype(np.float32) for _ in range(3))
    w = rng.normal(size=(T, T)).astype(np.float32)
    k_heads = rng.normal(size=(T, heads)).astype(np.float32)
    kernel = rng.normal(size=(heads, 5)).astype(np.float32)
    for causal in (False, True):
        exact = aft.conv_as_full(q, k_heads, v, kernel, causal, full=aft.aft_full_float64)
        np.testing.assert_allclose(aft.aft_conv(q, k_heads, v, kernel, causal), exact, atol=1e-5)
        for left, right in aft.reductions(q, k, v, w, k_heads, kernel, causal):
            np.testing.assert_allclose(left, right, atol=1e-6)
    with pytest.raises(ValueError, match="multiple"):
        aft.conv_as_full(q[:, :3], k_heads, v[:, :3], kernel)


def test_unstable_averages_fail_where_the_chapter_says():
    rng = np.random.default_rng(13)
    T, d = 4, 2
    k, v = rng.normal(size=(T, d)).astype(np.float32), rng.normal(size=(T, d)).astype(np.float32)
    w = rng.normal(size=(T, T)).astype(np.float32)
    visible = np.tri(T, dtype=bool)
    exact = aft.aft_full_float64(np.full((T, d), 1e4), k, v, w, causal=True)
    for average in aft.unstable_averages(k, v, w, visible):  # small exponents: all three are right
        np.testing.assert_allclose(average, exact, atol=1e-5)
    k[-1] += 1000.0  # a later key far above the rest: the whole-row shift loses the earlier rows
    _, _, whole_row = aft.unstable_averages(k, v, w, visible)
    assert not np.isfinite(np.asarray(whole_row)[0]).all()


def test_eq6_literal_cancels_only_for_a_very_negative_kernel():
    rng = np.random.default_rng(14)
    T, d, heads = 8, 4, 2
    q, v = rng.normal(size=(T, d)).astype(np.float32), rng.normal(size=(T, d)).astype(np.float32)
    k_heads = rng.normal(size=(T, heads)).astype(np.float32)
    kernel = rng.normal(size=(heads, 5)).astype(np.float32)
    np.testing.assert_allclose(aft.aft_conv_eq6_literal(q, k_heads, v, kernel),
                               aft.aft_conv(q, k_heads, v, kernel, causal=True), atol=1e-5)
    negative = np.full((heads, 5), -20.0, dtype=np.float32)
    exact = aft.conv_as_full(q, k_heads, v, negative, True, full=aft.aft_full_float64)
    assert not np.isclose(aft.aft_conv_eq6_literal(q, k_heads, v, negative)[:5], exact[:5], atol=1e-5).all()


def test_next_token_data_and_mixer_input():
    images = np.arange(12).reshape(3, 4)
    inputs, targets = lm.next_token_data(images, start=99)
    np.testing.assert_array_equal(inputs, [[99, 0, 1, 2], [99, 4, 5, 6], [99, 8, 9, 10]])
    np.testing.assert_array_equal(targets, images)
    with pytest.raises(ValueError, match="shape"):
        lm.next_token_data(np.arange(4), start=0)
    model = lm.NextTokenModel("aft-full", vocab_size=12, num_classes=12, max_len=8, d_model=8, key=jax.random.key(0))
    tokens = jnp.asarray([1, 2, 3])
    block = model.blocks[0]
    x = model.embed[tokens] + model.position[:3]
    np.testing.assert_allclose(lm.mixer_input(model, tokens), jax.vmap(block.norms[0])(x), rtol=1e-6)
    mixed = block.mixer(lm.mixer_input(model, tokens))  # the block is its input plus the mixer on it, plus the MLP
    np.testing.assert_allclose(block._sublayer(block.norms[0], block.mixer, x), x + mixed, atol=1e-6)
