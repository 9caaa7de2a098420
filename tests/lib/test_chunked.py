"""attnbook.attention.chunked_attention against scaled_dot_product_attention; attnbook.cost.

Outputs and gradients must agree to 1e-5 for every mask, chunk size and length (chunk sizes that
do not divide the lengths included); fully masked rows give zeros with finite gradients; and the
temporary memory, from XLA's compiled memory analysis, must stay far below full attention's,
forward and backward.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import cost
from attnbook.attention import chunked_attention, scaled_dot_product_attention

jax.config.update("jax_enable_x64", False)


def random_qkv(seed, tq=37, tk=53, d=8, dv=5, scale=1.0):
    rng = np.random.default_rng(seed)
    return tuple(jnp.asarray(scale * rng.normal(size=s), dtype=jnp.float32)
                 for s in [(tq, d), (tk, d), (tk, dv)])


def reference_mask(tq, tk, mask=None, causal=False):
    """The mask scaled_dot_product_attention needs for chunked_attention's (mask, causal)."""
    if causal:
        allowed = jnp.tril(jnp.ones((tq, tk), dtype=bool))  # j <= i
        mask = allowed if mask is None else mask & allowed
    return mask


def loss(f):
    """A scalar whose gradient involves every output entry differently."""
    def scalar(q, k, v):
        out = f(q, k, v)
        return jnp.sum(jnp.sin(3.0 * out) * jnp.arange(out.size).reshape(out.shape) / 100)

    return scalar


@functools.partial(jax.jit, static_argnames=("query_chunk", "key_chunk", "causal"))
def both(q, k, v, mask, *, query_chunk, key_chunk, causal):
    """Outputs and gradients of chunked and full attention, in one compiled program per case
    (compiled op by op, the gradients of the chunk loop took most of this file's time)."""
    ref_mask = reference_mask(q.shape[0], k.shape[0], mask, causal)
    chunked = lambda q, k, v: chunked_attention(q, k, v, query_chunk=query_chunk, key_chunk=key_chunk,
                                                mask=mask, causal=causal)
    full = lambda q, k, v: scaled_dot_product_attention(q, k, v, mask=ref_mask)[0]
    grads = [jax.grad(loss(f), argnums=(0, 1, 2))(q, k, v) for f in (chunked, full)]
    return chunked(q, k, v), full(q, k, v), grads


def assert_same(q, k, v, *, query_chunk, key_chunk, mask=None, causal=False, atol=1e-5, rtol=1e-7):
    out, ref, (grads, ref_grads) = both(q, k, v, mask, query_chunk=query_chunk, key_chunk=key_chunk, causal=causal)
    np.testing.assert_allclose(out, ref, atol=atol, rtol=rtol)
    for name, g, r in zip("qkv", grads, ref_grads):
        assert np.isfinite(np.asarray(g)).all(), name
        np.testing.assert_allclose(g, r, atol=atol, rtol=rtol, err_msg=f"gradient with respect to {name}")


# ---------------------------------------------------------------------------------------------
# Equal to full attention


@pytest.mark.parametrize("query_chunk,key_chunk", [(8, 16), (1, 1), (5, 7), (37, 53), (64, 100), (16, 53)])
def test_matches_full_attention_without_mask(query_chunk, key_chunk):
    q, k, v = random_qkv(0)  # 37 queries, 53 keys: few chunk sizes divide them
    assert_same(q, k, v, query_chunk=query_chunk, key_chunk=key_chunk)


@pytest.mark.parametrize("query_chunk,key_chunk", [(8, 16), (3, 11), (64, 64)])
def test_matches_full_attention_with_mask(query_chunk, key_chunk):
    q, k, v = random_qkv(1)
    mask = jnp.asarray(np.random.default_rng(11).random((37, 53)) < 0.3)
    assert_same(q, k, v, query_chunk=query_chunk, key_chunk=key_chunk, mask=mask)


@pytest.mark.parametrize("query_chunk,key_chunk", [(8, 8), (4, 12), (1, 40), (40, 1), (13, 7)])
def test_matches_full_attention_causal(query_chunk, key_chunk):
    q, k, v = random_qkv(2, tq=40, tk=40)
    assert_same(q, k, v, query_chunk=query_chunk, key_chunk=key_chunk, causal=True)
    mask = jnp.asarray(np.random.default_rng(12).random((40, 40)) < 0.5)
    assert_same(q, k, v, query_chunk=query_chunk, key_chunk=key_chunk, causal=True, mask=mask)


def test_causal_with_more_keys_than_queries():
    q, k, v = random_qkv(3, tq=9, tk=21)  # query i sees keys j <= i, as jax.nn's is_causal does
    assert_same(q, k, v, query_chunk=4, key_chunk=5, causal=True)


def test_large_scores_do_not_overflow():
    # Scores of a few hundred overflow exp() unless every chunk is shifted by its running maximum.
    # Such scores carry float32 rounding errors of ~1e-4 in absolute terms, and the nearly one-hot
    # softmax passes them on: compare with a tolerance relative to the largest entry.
    (q, k), v = random_qkv(4, scale=12.0)[:2], random_qkv(4)[2]
    chunked = lambda q, k, v: chunked_attention(q, k, v, query_chunk=8, key_chunk=8)
    full = lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]
    pairs = [(chunked(q, k, v), full(q, k, v))] + list(zip(jax.grad(loss(chunked), argnums=(0, 1, 2))(q, k, v),
                                                          jax.grad(loss(full), argnums=(0, 1, 2))(q, k, v)))
    for a, b in pairs:
        assert np.isfinite(np.asarray(a)).all()
        np.testing.assert_allclose(a, b, atol=1e-3 * float(jnp.max(jnp.abs(b))))


def test_value_size_may_differ_and_single_tokens():
    q, k, v = random_qkv(5, tq=1, tk=1, d=3, dv=6)
    assert_same(q, k, v, query_chunk=4, key_chunk=4)
    q, k, v = random_qkv(6, tq=1, tk=30, d=3, dv=2)
    assert_same(q, k, v, query_chunk=1, key_chunk=7)


def test_batches_and_heads_by_vmap():
    rng = np.random.default_rng(7)
    q, k, v = (jnp.asarray(rng.normal(size=(2, 3, 20, 4)), dtype=jnp.float32) for _ in range(3))
    chunked = jax.vmap(jax.vmap(lambda q, k, v: chunked_attention(q, k, v, query_chunk=6, key_chunk=8)))
    full = jax.vmap(jax.vmap(lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]))
    np.testing.assert_allclose(chunked(q, k, v), full(q, k, v), atol=1e-5)


# ---------------------------------------------------------------------------------------------
# Fully masked rows


@pytest.mark.parametrize("query_chunk,key_chunk", [(4, 4), (3, 53), (37, 5)])
def test_fully_masked_rows_give_zeros_and_finite_gradients(query_chunk, key_chunk):
    q, k, v = random_qkv(8)
    mask = np.random.default_rng(13).random((37, 53)) < 0.4
    mask[[0, 5, 36]] = False  # three queries see nothing
    mask[7, :] = False
    mask[7, 50] = True  # one query sees only a key in the last (padded) chunk
    mask = jnp.asarray(mask)
    out = chunked_attention(q, k, v, query_chunk=query_chunk, key_chunk=key_chunk, mask=mask)
    assert np.all(np.asarray(out)[[0, 5, 36]] == 0.0)
    assert np.isfinite(np.asarray(out)).all()
    assert_same(q, k, v, query_chunk=query_chunk, key_chunk=key_chunk, mask=mask)
    # And with huge scores: the empty rows must stay exactly 0, never NaN.
    q, k, v = random_qkv(9, scale=30.0)
    out = chunked_attention(q, k, v, query_chunk=query_chunk, key_chunk=key_chunk, mask=mask)
    assert np.all(np.asarray(out)[[0, 5, 36]] == 0.0) and np.isfinite(np.asarray(out)).all()
    grads = jax.grad(lambda q, k, v: jnp.sum(chunked_attention(
        q, k, v, query_chunk=query_chunk, key_chunk=key_chunk, mask=mask) ** 2), argnums=(0, 1, 2))(q, k, v)
    assert all(np.isfinite(np.asarray(g)).all() for g in grads)
    assert np.all(np.asarray(grads[0])[[0, 5, 36]] == 0.0)


def test_everything_masked():
    q, k, v = random_qkv(10, tq=6, tk=9)
    mask = jnp.zeros((6, 9), dtype=bool)
    out = chunked_attention(q, k, v, query_chunk=4, key_chunk=4, mask=mask)
    assert np.all(np.asarray(out) == 0.0)
    grads = jax.grad(lambda q: jnp.sum(chunked_attention(q, k, v, query_chunk=4, key_chunk=4, mask=mask)))(q)
    assert np.all(np.asarray(grads) == 0.0)


# ---------------------------------------------------------------------------------------------
# Bad arguments: the message names the argument, what was expected and what was received


def message(excinfo):
    return str(excinfo.value)


@pytest.mark.parametrize("name", ["query_chunk", "key_chunk"])
@pytest.mark.parametrize("value, error", [(0, ValueError), (-3, ValueError), (2.5, TypeError), (True, TypeError)])
def test_bad_chunk_sizes(name, value, error):
    q, k, v = random_qkv(0, tq=4, tk=4)
    sizes = {"query_chunk": 2, "key_chunk": 2, name: value}
    with pytest.raises(error) as e:
        chunked_attention(q, k, v, **sizes)
    assert name in message(e) and "positive integer" in message(e) and repr(value) in message(e)


def test_bad_shapes_and_masks():
    q, k, v = random_qkv(0, tq=4, tk=6, d=3, dv=2)
    chunks = {"query_chunk": 2, "key_chunk": 2}
    with pytest.raises(ValueError) as e:
        chunked_attention(q[0], k, v, **chunks)
    assert "q" in message(e) and "(Tq, d)" in message(e) and "(3,)" in message(e)
    with pytest.raises(ValueError) as e:
        chunked_attention(q, k[:, :2], v, **chunks)
    assert "k must have shape (Tk, d=3)" in message(e) and "(6, 2)" in message(e)
    with pytest.raises(ValueError) as e:
        chunked_attention(q, k, v[:5], **chunks)
    assert "v must have shape (Tk=6, dv)" in message(e) and "(5, 2)" in message(e)
    with pytest.raises(ValueError) as e:
        chunked_attention(q, k, v, mask=jnp.ones((6, 4), dtype=bool), **chunks)
    assert "mask" in message(e) and "(Tq=4, Tk=6)" in message(e) and "(6, 4)" in message(e)
    with pytest.raises(TypeError) as e:
        chunked_attention(q, k, v, mask=jnp.zeros((4, 6)), **chunks)
    assert "mask" in message(e) and "boolean" in message(e) and "float32" in message(e)


# ---------------------------------------------------------------------------------------------
# Memory, from XLA's compiled memory analysis (nothing is run, so T = 16384 costs only a compile)

T_LARGE = 16384
CHUNKS = {"query_chunk": 1024, "key_chunk": 1024}


def specs(length, d=64):
    return [jax.ShapeDtypeStruct((length, d), jnp.float32)] * 3


def full_attention(q, k, v):
    return scaled_dot_product_attention(q, k, v)[0]


def chunked(q, k, v):
    return chunked_attention(q, k, v, **CHUNKS)


def forward_backward(f):
    return lambda q, k, v: jax.grad(lambda q, k, v: jnp.sum(f(q, k, v) ** 2), argnums=(0, 1, 2))(q, k, v)


def test_analysis_sees_the_score_matrix():
    # With every buffer visible, full attention must show at least one T x T float32 matrix:
    # otherwise the comparisons below would compare with a figure that hides it.
    seen = cost.temporary_bytes(full_attention, *specs(T_LARGE))
    assert seen >= T_LARGE**2 * 4


def test_forward_memory_is_20_times_smaller():
    full = cost.temporary_bytes(full_attention, *specs(T_LARGE))
    small = cost.temporary_bytes(chunked, *specs(T_LARGE))
    assert full / small >= 20, (full, small)


def test_forward_backward_memory_stays_small():
    full = cost.temporary_bytes(forward_backward(full_attention), *specs(T_LARGE))
    small = cost.temporary_bytes(forward_backward(chunked), *specs(T_LARGE))
    assert full / small >= 20, (full, small)
    # Linear, not quadratic: 4 times longer sequences need less than 5 times the memory.
    quarter = cost.temporary_bytes(forward_backward(chunked), *specs(T_LARGE // 4))
    assert small / quarter < 5, (small, quarter)


def test_checkpoint_is_what_keeps_the_backward_pass_small(monkeypatch):
    # Without jax.checkpoint, reverse-mode stores every chunk's weights: the T x T matrix again.
    with_checkpoint = cost.temporary_bytes(forward_backward(chunked), *specs(8192))
    monkeypatch.setattr(jax, "checkpoint", lambda f, **options: f)
    jax.clear_caches()  # otherwise the jit cache returns the checkpointed trace
    try:
        without = cost.temporary_bytes(forward_backward(chunked), *specs(8192))
    finally:
        monkeypatch.undo()
        jax.clear_caches()
    assert without >= 8192**2 * 4 > 10 * with_checkpoint, (without, with_checkpoint)


# ---------------------------------------------------------------------------------------------
# attnbook.cost


def test_cost_helpers():
    f = lambda x: jnp.sum(jnp.outer(x, x) ** 2)  # a 512 x 512 temporary, unless fused away
    x = jnp.arange(512, dtype=jnp.float32)
    assert isinstance(cost.temporary_bytes(f, x), int)
    assert cost.temporary_bytes(f, jax.ShapeDtypeStruct((512,), jnp.float32)) == cost.temporary_bytes(f, x)
    seconds = cost.median_seconds(jax.jit(f), x, repeats=3)
    assert 0 < seconds < 1
    with pytest.raises(ValueError, match="repeats"):
        cost.median_seconds(jax.jit(f), x, repeats=0)


# ---------------------------------------------------------------------------------------------
# FLOPs and bytes in hardware terms


def test_attention_flops_counts_the_products_and_matches_xla():
    t, d = 512, 64
    assert cost.attention_flops(t, t, d) == 4 * t * t * d
    assert cost.attention_flops(t, t, d, backward=True) == 12 * t * t * d
    assert cost.attention_flops(3, 5, 2, 7) == 2 * 3 * 5 * (2 + 7)
    # causal, top-left aligned: row i sees min(i + 1, tk) keys
    for tq, tk in [(6, 6), (4, 9), (9, 4)]:
        pairs = sum(min(i + 1, tk) for i in range(tq))
        assert cost.attention_flops(tq, tk, 8, causal=True) == 2 * pairs * 16
    # XLA's own count of the program: the products plus a few operations per score for the softmax
    spec = jax.ShapeDtypeStruct((t, d), jnp.float32)
    xla = cost.compiled(lambda q, k, v: scaled_dot_product_attention(q, k, v)[0], spec, spec, spec,
                        all_buffers=True).cost_analysis()["flops"]
    ours = cost.attention_flops(t, t, d)
    assert ours <= xla <= ours * (1 + 6 / (2 * 2 * d)), (ours, xla)  # at most 6 more FLOPs per score


def test_attention_bytes_model():
    t, d = 4096, 64
    io = 4 * t * d * 4
    assert cost.attention_bytes(t, t, d) == io + 2 * t * t * 4
    assert cost.attention_bytes(t, t, d, query_block=t) == io  # one block: everything read once
    assert cost.attention_bytes(t, t, d, query_block=1024) == io + 3 * t * 2 * d * 4
    assert cost.attention_bytes(t, t, d, itemsize=2) * 2 == cost.attention_bytes(t, t, d)
    # arithmetic intensity: about d / 2 for full attention, about B / 2 for blocks of B queries
    full = cost.attention_flops(t, t, d) / cost.attention_bytes(t, t, d)
    blocked = cost.attention_flops(t, t, d) / cost.attention_bytes(t, t, d, query_block=1024)
    assert 30 < full < 32 and 400 < blocked < 512, (full, blocked)
