"""attnbook.attention.flash_attention against jax.nn.dot_product_attention and scaled_dot_product_attention.

Outputs and gradients (through the custom VJP, which recomputes every tile from the stored log-sum-exp)
must agree with both references, causal or not, with masks and fully masked rows, for lengths that the
block sizes do not divide, in float32, float64 and bfloat16; the stored log-sum-exp is the rows'
``logsumexp``, with its gradient; causal attention visits exactly the tiles that meet the lower triangle;
and the temporary memory of the gradient stays far below full attention's. Bad input: test_input_attention.
"""

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import attention, cost
from attnbook.attention import scaled_dot_product_attention
from attnbook.attention import flash_attention

jax.config.update("jax_enable_x64", False)


def random_qkv(seed, tq=37, tk=53, d=8, dv=8, dtype=jnp.float32):  # jax.nn needs dv = d
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(rng.normal(size=s), dtype=dtype) for s in [(tq, d), (tk, d), (tk, dv)])


def full_mask(tq, tk, mask, causal):
    if causal:
        lower = jnp.tril(jnp.ones((tq, tk), dtype=bool))  # j <= i, aligned at the top left
        mask = lower if mask is None else mask & lower
    return mask


def loss(f):
    """A scalar whose gradient weighs every output entry differently."""
    def scalar(q, k, v):
        out = f(q, k, v)
        return jnp.sum(jnp.sin(3.0 * out) * jnp.arange(out.size, dtype=out.dtype).reshape(out.shape) / 100)

    return scalar


@functools.partial(jax.jit, static_argnames=("query_block", "key_block", "causal"))
def outputs_and_grads(q, k, v, mask, *, query_block, key_block, causal):
    """flash_attention, the library's full attention and jax.nn's, with their gradients, in one program."""
    tq, tk = q.shape[0], k.shape[0]
    reference = full_mask(tq, tk, mask, causal)
    ours = lambda q, k, v: flash_attention(q, k, v, query_block=query_block, key_block=key_block, mask=mask,
                                           causal=causal)
    library = lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=reference)[0]
    jax_mask = None if reference is None else reference[None, None]  # (B, N, T, S)
    jax_nn = lambda q, k, v: jax.nn.dot_product_attention(q[None, :, None], k[None, :, None], v[None, :, None],
                                                          mask=jax_mask, implementation="xla")[0, :, 0]
    fs = (ours, library, jax_nn)
    return [f(q, k, v) for f in fs], [jax.grad(loss(f), argnums=(0, 1, 2))(q, k, v) for f in fs]


def assert_same(q, k, v, *, query_block, key_block, mask=None, causal=False, atol=1e-5, with_jax_nn=True):
    outs, grads = outputs_and_grads(q, k, v, mask, query_block=query_block, key_block=key_block, causal=causal)
    references = [1, 2] if with_jax_nn else [1]
    for r in references:
        np.testing.assert_allclose(outs[0], outs[r], atol=atol, rtol=2e-6)
        for name, g, ref in zip("qkv", grads[0], grads[r]):
            assert np.isfinite(np.asarray(g)).all(), name
            np.testing.assert_allclose(g, ref, atol=atol, rtol=2e-6, err_msg=f"gradient with respect to {name}")


# ---------------------------------------------------------------------------------------------
# Equal to attention, forward and backward


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("query_block, key_block", [(8, 16), (1, 1), (5, 7), (37, 53), (64, 100), (16, 9)])
def test_matches_attention(causal, query_block, key_block):
    q, k, v = random_qkv(0)  # 37 queries, 53 keys: few block sizes divide them
    assert_same(q, k, v, query_block=query_block, key_block=key_block, causal=causal)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("query_block, key_block", [(8, 16), (3, 11)])
def test_matches_attention_with_a_mask_and_fully_masked_rows(causal, query_block, key_block):
    q, k, v = random_qkv(1)
    mask = np.random.default_rng(11).random((37, 53)) < 0.3
    mask[[0, 5, 20]] = False  # queries that see no key
    # jax.nn gives a fully masked row the mean of the values (uniform weights), the library zeros: compare with
    # the library there, and with both on the rows that see something.
    assert_same(q, k, v, query_block=query_block, key_block=key_block, mask=jnp.asarray(mask), causal=causal,
                with_jax_nn=False)
    out = flash_attention(q, k, v, query_block=query_block, key_block=key_block, mask=jnp.asarray(mask),
                          causal=causal)
    assert np.all(np.asarray(out)[[0, 5, 20]] == 0)
    seen = full_mask(37, 53, jnp.asarray(mask), causal)
    jax_nn = jax.nn.dot_product_attention(q[None, :, None], k[None, :, None], v[None, :, None],
                                          mask=seen[None, None], implementation="xla")[0, :, 0]
    rows = np.asarray(jnp.any(seen, axis=1))
    np.testing.assert_allclose(np.asarray(out)[rows], np.asarray(jax_nn)[rows], atol=1e-5)


def test_self_attention_lengths_that_are_not_multiples_of_the_blocks():
    q, k, v = random_qkv(2, tq=100, tk=100, d=16, dv=16)
    for causal in (False, True):
        assert_same(q, k, v, query_block=32, key_block=24, causal=causal)


def test_more_keys_than_queries_and_more_queries_than_keys_causal():
    for tq, tk in [(20, 45), (45, 20)]:
        q, k, v = random_qkv(3, tq=tq, tk=tk)
        assert_same(q, k, v, query_block=8, key_block=8, causal=True)


def test_float64():
    with jax.enable_x64(True):
        q, k, v = random_qkv(4, dtype=jnp.float64)
        mask = jnp.asarray(np.random.default_rng(5).random((37, 53)) < 0.5)
        for causal in (False, True):
            outs, grads = outputs_and_grads(q, k, v, mask, query_block=8, key_block=16, causal=causal)
            assert outs[0].dtype == jnp.float64
            np.testing.assert_allclose(outs[0], outs[1], atol=1e-13, rtol=0)
            for g, ref in zip(grads[0], grads[1]):
                assert g.dtype == jnp.float64
                np.testing.assert_allclose(g, ref, atol=1e-13, rtol=0)


def test_bfloat16_is_computed_in_float32():
    q, k, v = random_qkv(6, dtype=jnp.bfloat16)
    out = flash_attention(q, k, v, query_block=8, key_block=16, causal=True)
    assert out.dtype == jnp.bfloat16
    exact = scaled_dot_product_attention(*(a.astype(jnp.float32) for a in (q, k, v)),
                                         mask=full_mask(37, 53, None, True))[0]
    # float32 inside, one rounding to bfloat16 at the end: within half a bfloat16 step of the float32 result
    np.testing.assert_allclose(np.asarray(out, np.float32), exact, atol=0, rtol=2.0**-8)
    grads = jax.grad(lambda q, k, v: jnp.sum(flash_attention(q, k, v, query_block=8, key_block=16).astype(
        jnp.float32) ** 2), argnums=(0, 1, 2))(q, k, v)
    assert all(g.dtype == jnp.bfloat16 and np.isfinite(np.asarray(g, np.float32)).all() for g in grads)


# ---------------------------------------------------------------------------------------------
# What is stored: the log-sum-exp


def test_log_sum_exp_is_the_rows_logsumexp_and_differentiable():
    q, k, v = random_qkv(7)
    mask = np.random.default_rng(8).random((37, 53)) < 0.4
    mask[3] = False
    mask = jnp.asarray(mask)
    scores = (q / math.sqrt(8)) @ k.T
    expected = jax.nn.logsumexp(jnp.where(mask, scores, -jnp.inf), axis=1)  # -inf for the empty row 3
    out, lse = flash_attention(q, k, v, query_block=8, key_block=16, mask=mask, return_lse=True)
    assert lse.shape == (37,) and lse.dtype == jnp.float32
    np.testing.assert_allclose(lse, expected, atol=1e-6)
    assert lse[3] == -jnp.inf
    # d lse_i / d s_ij = p_ij: its gradient is that of the reference logsumexp (the empty row contributes 0)
    def total(f):
        return lambda q, k: jnp.sum(jnp.where(jnp.isfinite(f(q, k)), f(q, k), 0.0) * jnp.arange(37.0))
    ours = total(lambda q, k: flash_attention(q, k, v, query_block=8, key_block=16, mask=mask, return_lse=True)[1])
    reference = total(lambda q, k: jax.nn.logsumexp(jnp.where(mask, (q / math.sqrt(8)) @ k.T, -jnp.inf), axis=1))
    for g, ref in zip(jax.grad(ours, argnums=(0, 1))(q, k), jax.grad(reference, argnums=(0, 1))(q, k)):
        np.testing.assert_allclose(g, ref, atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Causal block skipping


@pytest.mark.parametrize("tq, tk, query_block, key_block", [(100, 100, 16, 16), (100, 100, 7, 24), (37, 53, 8, 5),
                                                            (53, 37, 5, 8), (4096, 4096, 512, 512)])
def test_causal_attention_visits_exactly_the_tiles_that_meet_the_triangle(tq, tk, query_block, key_block):
    n_q, n_k = math.ceil(tq / query_block), math.ceil(tk / key_block)
    # A tile (i, j) holds an allowed pair when its first key is at or before its last query.
    needed = {(i, j) for i in range(n_q) for j in range(n_k) if j * key_block <= i * query_block + query_block - 1}
    forward, backward = attention.flash_tiles(tq, tk, query_block, key_block, causal=True)
    assert forward.shape == backward.shape == (n_q, n_k)
    assert set(zip(*map(list, np.nonzero(forward)))) == needed and set(zip(*map(list, np.nonzero(backward)))) == needed
    assert all(attention.flash_tiles(tq, tk, query_block, key_block)[0].flatten())  # not causal: every tile
    if (tq, query_block) == (4096, 512):
        assert len(needed) == 36 and n_q * n_k == 64  # 8 x 8 tiles, 36 on or below the diagonal


def test_flash_tiles_rejects_bad_sizes():
    with pytest.raises(ValueError, match="query_block"):
        attention.flash_tiles(8, 8, 0, 4)
    with pytest.raises(TypeError, match="tk"):
        attention.flash_tiles(8, 8.0, 4, 4)
    with pytest.raises(TypeError, match="causal"):
        attention.flash_tiles(8, 8, 4, 4, causal="yes")


# ---------------------------------------------------------------------------------------------
# Memory


def test_gradient_memory_is_far_below_full_attention():
    spec = jax.ShapeDtypeStruct((2048, 64), jnp.float32)

    def gradient(f):
        return lambda q, k, v: jax.grad(lambda q, k, v: jnp.sum(f(q, k, v) ** 2), argnums=(0, 1, 2))(q, k, v)

    ours = cost.temporary_bytes(gradient(lambda q, k, v: flash_attention(q, k, v, query_block=256, key_block=256)),
                                spec, spec, spec)
    full = cost.temporary_bytes(gradient(lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]), spec, spec, spec)
    scores = 2048 * 2048 * 4
    assert full >= scores  # at least the T x T weights
    assert ours < scores / 4 and ours < full / 20, (ours, full)  # 2.0 MiB against 48 MiB
