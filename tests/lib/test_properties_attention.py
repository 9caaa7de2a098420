"""Property-based tests of attnbook.attention (Hypothesis): random shapes, masks and dtypes.

Each example draws lengths (T = 1 and Tq != Tk included), a boolean mask with fully masked query
rows and padding keys that no query sees (holding NaN or inf), a dtype (float32, float16, bfloat16)
and chunk sizes that need not divide the lengths, and checks

- scaled_dot_product_attention and chunked_attention against a loop written from the formula
  (float64) and against jax.nn.dot_product_attention (rows that see a key; a fully masked row must
  be the contract's zero row, where jax.nn returns the mean of the values);
- that the padding contents change nothing, and that a bias of -inf is exactly mask=False;
- gradients with jax.test_util.check_grads (float64, in a jax.enable_x64 context), fully masked rows included.

Small shapes and few examples keep the whole module within about 25 seconds.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.test_util import check_grads

from attnbook.attention import chunked_attention, masked_softmax, scaled_dot_product_attention

jax.config.update("jax_enable_x64", False)

DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}
# Tolerances (absolute and relative) for outputs of unit scale: the inputs are exact in their dtype,
# so the error is the float32 computation plus one rounding of the output to the dtype.
ATOL = {"float32": 1e-5, "float16": 3e-3, "bfloat16": 2e-2}


@st.composite
def problems(draw, dtypes=tuple(DTYPES)):
    """``(q, k, v, mask, padding, causal, query_chunk, key_chunk, dtype name)``; padding keys hold NaN/inf."""
    tq, tk = draw(st.sampled_from([1, 3, 5])), draw(st.sampled_from([1, 4, 6]))
    d = 2
    dtype = draw(st.sampled_from(dtypes))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    q, k, v = (rng.normal(size=(n, d)) for n in (tq, tk, tk))
    mask = rng.random((tq, tk)) < draw(st.sampled_from([0.3, 0.7, 1.0]))
    if draw(st.booleans()):
        mask[draw(st.integers(0, tq - 1))] = False  # a query that sees nothing
    padding = np.zeros(tk, dtype=bool)
    if draw(st.booleans()):
        padding[draw(st.integers(0, tk - 1)):] = True  # trailing keys that no query sees
        mask[:, padding] = False
        fill = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
        k[padding], v[padding] = fill, -fill if fill == fill else fill
    causal = draw(st.booleans())
    chunks = draw(st.sampled_from([1, 2, 4, 8])), draw(st.sampled_from([1, 3, 4, 8]))
    to = lambda a: jnp.asarray(a, dtype=DTYPES[dtype])
    return to(q), to(k), to(v), jnp.asarray(mask), jnp.asarray(padding), causal, *chunks, dtype


def with_causal(mask, causal):
    tq, tk = mask.shape
    return mask & jnp.tril(jnp.ones((tq, tk), dtype=bool)) if causal else mask


def naive_attention(q, k, v, mask):
    """Row by row in float64, from the formula: out_i = sum_j softmax_j(q_i . k_j / sqrt(d)) v_j over allowed j."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    mask = np.asarray(mask)
    out = np.zeros((q.shape[0], v.shape[1]))
    for i in range(q.shape[0]):
        allowed = [j for j in range(k.shape[0]) if mask[i, j]]
        if not allowed:
            continue  # the contract's zero row
        scores = [float(q[i] @ k[j]) / math.sqrt(q.shape[1]) for j in allowed]
        top = max(scores)
        weights = [math.exp(s - top) for s in scores]
        out[i] = sum(w * v[j] for w, j in zip(weights, allowed)) / sum(weights)
    return out


def jax_nn_attention(q, k, v, mask):
    """jax.nn.dot_product_attention takes (B, T, N, H) and a (B, N, Tq, Tk) boolean mask.

    Computed in float32 from the same inputs (its float16 products ask for float32 accumulation,
    which XLA's CPU backend does not compile inside jit).
    """
    q, k, v = (a.astype(jnp.float32)[None, :, None] for a in (q, k, v))
    return jax.nn.dot_product_attention(q, k, v, mask=mask[None, None])[0, :, 0]


def clean(a, padding):
    """The same array with zeros in the padding rows: what the padding contents must not change."""
    return jnp.where(padding[:, None], jnp.zeros((), a.dtype), a)


def as64(a):
    return np.asarray(a, dtype=np.float64)


@functools.partial(jax.jit, static_argnames=("causal", "query_chunk", "key_chunk"))
def run(q, k, v, mask, bias, *, causal, query_chunk, key_chunk):
    """Everything one example checks, in one compiled program (compiling op by op would dominate).

    Returns the outputs and weights of scaled_dot_product_attention (with ``mask``, and with the
    mask written as ``bias = -inf``), chunked_attention's output, jax.nn's output, and the
    gradients of a scalar of each function's output with respect to ``q, k, v``.
    """
    full_mask = with_causal(mask, causal)
    sdpa = lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=full_mask, bias=bias)
    chunked = lambda q, k, v: chunked_attention(q, k, v, mask=mask, causal=causal,
                                                query_chunk=query_chunk, key_chunk=key_chunk)
    out, weights = sdpa(q, k, v)
    by_bias = scaled_dot_product_attention(q, k, v, bias=jnp.where(full_mask, bias, -jnp.inf))
    loss = lambda f: lambda q, k, v: jnp.sum(jnp.sin(f(q, k, v).astype(jnp.float32)))
    grads = [jax.grad(loss(f), argnums=(0, 1, 2))(q, k, v) for f in (lambda q, k, v: sdpa(q, k, v)[0], chunked)]
    return {"out": out, "weights": weights, "chunked": chunked(q, k, v), "by_bias": by_bias,
            "jax_nn": jax_nn_attention(q, *hide(k, v, full_mask), full_mask), "grads": grads}


def hide(k, v, mask):
    """Zeros for the keys and values no query sees: jax.nn spreads their NaN to every row (0 * NaN)."""
    seen = jnp.any(mask, axis=0)[:, None]
    return jnp.where(seen, k, 0), jnp.where(seen, v, 0)


@settings(max_examples=10, deadline=None)
@given(problems())
def test_attention_matches_the_loop_and_jax_nn(problem):
    q, k, v, mask, padding, causal, query_chunk, key_chunk, dtype = problem
    full_mask = with_causal(mask, causal)
    sees = np.asarray(full_mask).any(axis=1)
    bias = jnp.zeros(mask.shape, dtype=q.dtype)
    options = {"causal": causal, "query_chunk": query_chunk, "key_chunk": key_chunk}
    k_clean, v_clean = clean(k, padding), clean(v, padding)
    got, ref = run(q, k, v, mask, bias, **options), run(q, k_clean, v_clean, mask, bias, **options)
    # The padding contents (NaN, inf) change no output and no gradient, exactly.
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        assert np.isfinite(as64(a)).all()
        np.testing.assert_array_equal(a, b)
    # A bias of -inf is exactly mask=False, fully masked rows included.
    for a, b in zip(got["by_bias"], (got["out"], got["weights"])):
        np.testing.assert_array_equal(a, b)
    expected = naive_attention(q, k_clean, v_clean, full_mask)
    for name in ("out", "chunked"):
        assert got[name].dtype == DTYPES[dtype], name
        np.testing.assert_allclose(as64(got[name]), expected, atol=ATOL[dtype], rtol=ATOL[dtype], err_msg=name)
        assert np.all(as64(got[name])[~sees] == 0), name  # fully masked rows: exactly zero
    weights = as64(got["weights"])
    assert np.all(weights[~np.asarray(full_mask)] == 0)
    np.testing.assert_allclose(weights.sum(axis=1), sees.astype(float), atol=ATOL[dtype] * 10)
    np.testing.assert_allclose(as64(got["out"])[sees], as64(got["jax_nn"])[sees],
                               atol=ATOL[dtype], rtol=ATOL[dtype])
    if dtype == "float32":  # the two implementations agree on gradients too
        for g, r in zip(*got["grads"]):
            np.testing.assert_allclose(g, r, atol=1e-5, rtol=1e-5)


@settings(max_examples=3, deadline=None)
@given(problems(dtypes=("float32",)))
def test_gradients(problem):
    q, k, v, mask, padding, causal, query_chunk, key_chunk, _ = problem
    full_mask = with_causal(mask, causal)
    full_mask = full_mask.at[0].set(False)  # always one fully masked row
    with jax.enable_x64(True):
        q, k, v = (jnp.asarray(np.nan_to_num(np.asarray(a, dtype=np.float64), posinf=0.0, neginf=0.0))
                   for a in (q, k, v))
        tolerances = {"order": 1, "modes": ("rev",), "atol": 1e-5, "rtol": 1e-5}
        check_grads(jax.jit(lambda s: masked_softmax(s, full_mask)), (q @ k.T,), **tolerances)
        check_grads(jax.jit(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=full_mask)[0]), (q, k, v),
                    **tolerances)
        check_grads(jax.jit(lambda q, k, v: chunked_attention(q, k, v, mask=full_mask, query_chunk=query_chunk,
                                                              key_chunk=key_chunk)), (q, k, v), **tolerances)
