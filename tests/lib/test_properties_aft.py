"""Property-based tests of attnbook.aft (Hypothesis): random lengths, widths, windows, kernels, causal or not.

The references are loops written from the paper's equations as chapter 5 states them (Zhai et al., 2021):
Eq. 2 with weights exp(K + w), Eq. 4 (w kept where |t - t'| < s, 0 elsewhere), Eq. 5, and Eq. 6 literally
(conv1d with exp(w) - 1 plus the global sum). Shapes are small so that the whole module stays within seconds:
every new shape compiles the functions once.
"""

import math

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.test_util import check_grads

from attnbook import aft

FAST = settings(max_examples=6, deadline=None, derandomize=True)
lengths = st.integers(1, 5)


def draw_arrays(seed, *shapes, scale=1.0):
    rng = np.random.default_rng(seed)
    return [jnp.asarray(scale * rng.normal(size=s), dtype=jnp.float32) for s in shapes]


# ---------------------------------------------------------------------------------------------
# The equations, as loops in float64


def eq2(q, k, v, w, causal):
    """Y[t, c] = sigmoid(Q[t, c]) sum_t' exp(K[t', c] + w[t, t']) V[t', c] / sum_t' exp(K[t', c] + w[t, t'])."""
    q, k, v, w = (np.asarray(a, dtype=np.float64) for a in (q, k, v, w))
    length, d = q.shape
    y = np.zeros((length, d))
    for t in range(length):
        for c in range(d):
            seen = range(t + 1) if causal else range(length)
            top = max(k[s, c] + w[t, s] for s in seen)  # a common factor of numerator and denominator
            num = sum(math.exp(k[s, c] + w[t, s] - top) * v[s, c] for s in seen)
            den = sum(math.exp(k[s, c] + w[t, s] - top) for s in seen)
            y[t, c] = num / den / (1.0 + math.exp(-q[t, c]))
    return y


def eq4(q, k, v, w, window, causal):
    """Eq. 2 with w[t, t'] where |t - t'| < s and 0 elsewhere."""
    w = np.asarray(w, dtype=np.float64)
    band = np.abs(np.arange(len(w))[:, None] - np.arange(len(w))[None, :]) < window
    return eq2(q, k, v, np.where(band, w, 0.0), causal)


def eq5(q, k, v, causal):
    """sigmoid(Q_t) * sum_t' softmax(K)_t' * V_t', the softmax over time per channel (t' <= t if causal)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    y = np.zeros(q.shape)
    for t in range(len(q)):
        seen = k[: t + 1] if causal else k
        a = np.exp(seen - seen.max(axis=0))
        y[t] = (a / a.sum(axis=0) * v[: len(seen)]).sum(axis=0) / (1.0 + np.exp(-q[t]))
    return y


def eq6(q, k, v, kernel, causal):
    """Literally: numerator conv1d(exp(K^i) V^i, exp(w^i) - 1) + sum_t' exp(K^i_t') V^i_t', per head i."""
    q, k, v, kernel = (np.asarray(a, dtype=np.float64) for a in (q, k, v, kernel))
    length, d = q.shape
    heads, size = kernel.shape
    width = d // heads
    y = np.zeros((length, d))
    for t in range(length):
        seen = range(t + 1) if causal else range(length)
        for i in range(heads):
            for c in range(i * width, (i + 1) * width):
                num = sum(math.exp(k[s, i]) * v[s, c] for s in seen)
                den = sum(math.exp(k[s, i]) for s in seen)
                for s in seen:
                    j = t - s if causal else s - t + size // 2
                    if 0 <= j < size:
                        num += (math.exp(kernel[i, j]) - 1.0) * math.exp(k[s, i]) * v[s, c]
                        den += (math.exp(kernel[i, j]) - 1.0) * math.exp(k[s, i])
                y[t, c] = num / den / (1.0 + math.exp(-q[t, c]))
    return y


def banded_w(kernel, head, length, causal):
    """Head ``head``'s (T, T) bias from the kernel's documented layout (0 outside the window)."""
    size = kernel.shape[1]
    w = np.zeros((length, length))
    for t in range(length):
        for s in range(length):
            j = t - s if causal else s - t + size // 2
            if 0 <= j < size and (s <= t or not causal):
                w[t, s] = float(kernel[head, j])
    return w


# ---------------------------------------------------------------------------------------------
# Against the equations


@FAST
@given(length=lengths, d=st.integers(1, 3), window=st.integers(1, 7), causal=st.booleans(), seed=st.integers(0, 99),
       scale=st.sampled_from([1.0, 40.0]))
def test_full_local_simple_against_equations(length, d, window, causal, seed, scale):
    q, v = draw_arrays(seed, (length, d), (length, d))
    k, w = draw_arrays(seed + 1, (length, d), (length, length), scale=scale)  # scale 40: exponents beyond float32's exp
    np.testing.assert_allclose(aft.aft_full(q, k, v, w, causal), eq2(q, k, v, w, causal), atol=2e-4, rtol=2e-4)
    np.testing.assert_allclose(aft.aft_local(q, k, v, w, window, causal), eq4(q, k, v, w, window, causal),
                               atol=2e-4, rtol=2e-4)
    np.testing.assert_allclose(aft.aft_simple(q, k, v, causal), eq5(q, k, v, causal), atol=2e-4, rtol=2e-4)


@FAST
@given(length=lengths, heads=st.integers(1, 2), width=st.integers(1, 2), half=st.integers(0, 3), causal=st.booleans(),
       seed=st.integers(0, 99))
def test_conv_against_equation_6(length, heads, width, half, causal, seed):
    size = 2 * half + 1 if not causal else half + 1
    q, k, v, kernel = draw_arrays(seed, (length, heads * width), (length, heads), (length, heads * width),
                                  (heads, size))
    np.testing.assert_allclose(aft.aft_conv(q, k, v, kernel, causal), eq6(q, k, v, kernel, causal),
                               atol=1e-4, rtol=1e-4)


# ---------------------------------------------------------------------------------------------
# Equivalences between the variants


@FAST
@given(length=lengths, d=st.integers(1, 3), extra=st.integers(0, 3), heads=st.integers(1, 2), size=st.integers(1, 4),
       causal=st.booleans(), seed=st.integers(0, 99))
def test_equivalences(length, d, extra, heads, size, causal, seed):
    q, k, v, w = draw_arrays(seed, (length, d), (length, d), (length, d), (length, length))
    full = aft.aft_full(q, k, v, w, causal)
    # AFT-local with s >= T is AFT-full; AFT-simple is AFT-full with w = 0.
    np.testing.assert_allclose(aft.aft_local(q, k, v, w, length + extra, causal), full, atol=1e-5)
    np.testing.assert_allclose(aft.aft_simple(q, k, v, causal), aft.aft_full(q, k, v, jnp.zeros_like(w), causal),
                               atol=1e-5)
    # AFT-conv is AFT-full per head, with the head's key in each of its channels and the banded w.
    size = size if causal else 2 * (size // 2) + 1
    qh, vh, kh, kernel = draw_arrays(seed + 1, (length, heads * d), (length, heads * d), (length, heads), (heads, size))
    conv = np.asarray(aft.aft_conv(qh, kh, vh, kernel, causal))
    for i in range(heads):
        cols = slice(i * d, (i + 1) * d)
        w_i = jnp.asarray(banded_w(np.asarray(kernel), i, length, causal), dtype=jnp.float32)
        np.testing.assert_allclose(aft.conv_bias_matrix(kernel, length, causal)[i], w_i, atol=0)
        keys = jnp.repeat(kh[:, i : i + 1], d, axis=1)
        np.testing.assert_allclose(conv[:, cols], aft.aft_full(qh[:, cols], keys, vh[:, cols], w_i, causal), atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Causality under non-finite input


@FAST
@given(length=st.integers(2, 5), data=st.data(), bad=st.sampled_from([np.nan, np.inf, -np.inf]),
       name=st.sampled_from(aft.VARIANTS), seed=st.integers(0, 99))
def test_nan_in_future_rows_does_not_reach_earlier_rows(length, data, bad, name, seed):
    cut = data.draw(st.integers(0, length - 2), label="last row kept")  # rows > cut hold `bad`
    which = data.draw(st.sampled_from(["q", "k", "v", "w"]), label="input")
    heads, d = 2, 2
    q, k, v, w = draw_arrays(seed, (length, d), (length, heads if name == "aft-conv" else d), (length, d),
                             (length, length))
    kernel = draw_arrays(seed, (heads, 3))[0]
    f = {
        "aft-full": lambda q, k, v, w: aft.aft_full(q, k, v, w, True),
        "aft-local": lambda q, k, v, w: aft.aft_local(q, k, v, w, 2, True),
        "aft-simple": lambda q, k, v, w: aft.aft_simple(q, k, v, True),
        "aft-conv": lambda q, k, v, w: aft.aft_conv(q, k, v, kernel, True),
    }[name]
    args = {"q": q, "k": k, "v": v, "w": w}
    poisoned = dict(args)
    poisoned[which] = w.at[:, cut + 1 :].set(bad) if which == "w" else args[which].at[cut + 1 :].set(bad)
    order = lambda a: [a[name] for name in "qkvw"]
    np.testing.assert_array_equal(np.asarray(f(*order(poisoned)))[: cut + 1], np.asarray(f(*order(args)))[: cut + 1])
    loss = lambda q, k, v, w: jnp.sum(jnp.sin(f(q, k, v, w)[: cut + 1]))
    grads, clean = (jax.grad(loss, argnums=(0, 1, 2, 3))(*order(a)) for a in (poisoned, args))
    for g, g0 in zip(grads, clean):
        np.testing.assert_allclose(np.asarray(g), np.asarray(g0), atol=1e-6, err_msg=f"{name}, {which} = {bad}")


# ---------------------------------------------------------------------------------------------
# Gradients: forward and reverse mode against finite differences


@settings(max_examples=3, deadline=None, derandomize=True)
@given(length=st.integers(1, 4), causal=st.booleans(), seed=st.integers(0, 99))
def test_check_grads(length, causal, seed):
    d, heads = 2, 2
    q, k, v, w, kh = draw_arrays(seed, (length, d), (length, d), (length, d), (length, length), (length, heads))
    kernel = draw_arrays(seed + 1, (heads, 3))[0]
    tolerance = dict(order=1, modes=("fwd", "rev"), atol=2e-2, rtol=2e-2, eps=1e-2)
    check_grads(lambda q, k, v, w: aft.aft_full(q, k, v, w, causal), (q, k, v, w), **tolerance)
    check_grads(lambda q, k, v, w: aft.aft_local(q, k, v, w, 2, causal), (q, k, v, w), **tolerance)
    check_grads(lambda q, k, v: aft.aft_simple(q, k, v, causal), (q, k, v), **tolerance)
    check_grads(lambda q, k, v, kernel: aft.aft_conv(q, k, v, kernel, causal), (q, kh, v, kernel), **tolerance)
