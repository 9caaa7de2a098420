"""attnbook.attention against jax.nn.dot_product_attention and a loop written from the formula."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import masking
from attnbook.attention import scaled_dot_product_attention

jax.config.update("jax_enable_x64", False)


def random_qkv(seed, tq=5, tk=7, d=4, dv=4):
    # jax.nn.dot_product_attention needs dv == d; the loop reference also checks dv != d below.
    rng = np.random.default_rng(seed)
    q, k, v = (jnp.asarray(rng.normal(size=s), dtype=jnp.float32) for s in [(tq, d), (tk, d), (tk, dv)])
    return q, k, v


def naive_attention(q, k, v, mask=None, bias=None):
    """Row by row, in float64: weights[i, j] = exp(s_ij) / sum_{allowed j'} exp(s_ij')."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    tq, d = q.shape
    tk = k.shape[0]
    weights = np.zeros((tq, tk))
    for i in range(tq):
        allowed = [j for j in range(tk) if mask is None or mask[i, j]]
        scores = {j: float(q[i] @ k[j]) / math.sqrt(d) + (0.0 if bias is None else float(bias[i, j])) for j in allowed}
        if not scores:
            continue  # a fully masked row: zero weights
        top = max(scores.values())
        total = sum(math.exp(s - top) for s in scores.values())
        for j, s in scores.items():
            weights[i, j] = math.exp(s - top) / total
    return weights @ v, weights


def reference_jax(q, k, v, mask=None, bias=None):
    """jax.nn.dot_product_attention expects (batch, T, heads, d); bias/mask (batch, heads, Tq, Tk)."""
    expand = lambda a: None if a is None else a[None, None]
    out = jax.nn.dot_product_attention(
        q[None, :, None], k[None, :, None], v[None, :, None], bias=expand(bias), mask=expand(mask)
    )
    return out[0, :, 0]


def test_matches_references_without_mask():
    q, k, v = random_qkv(0)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (5, 4) and weights.shape == (5, 7)
    ref_out, ref_weights = naive_attention(q, k, v)
    np.testing.assert_allclose(out, ref_out, atol=1e-5)
    np.testing.assert_allclose(weights, ref_weights, atol=1e-6)
    np.testing.assert_allclose(out, reference_jax(q, k, v), atol=1e-5)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_matches_references_with_random_mask_and_bias(seed):
    q, k, v = random_qkv(seed)
    rng = np.random.default_rng(seed + 10)
    mask = rng.random((5, 7)) < 0.6
    mask[:, 0] = True  # jax.nn.dot_product_attention's answer for an empty row is not ours
    bias = jnp.asarray(rng.normal(size=(5, 7)), dtype=jnp.float32)
    out, weights = scaled_dot_product_attention(q, k, v, mask=jnp.asarray(mask), bias=bias)
    ref_out, ref_weights = naive_attention(q, k, v, mask, bias)
    np.testing.assert_allclose(weights, ref_weights, atol=1e-6)
    np.testing.assert_allclose(out, ref_out, atol=1e-5)
    np.testing.assert_allclose(out, reference_jax(q, k, v, jnp.asarray(mask), bias), atol=1e-5)
    assert np.all(np.asarray(weights)[~mask] == 0.0)


def test_value_size_may_differ_from_key_size():
    q, k, v = random_qkv(9, dv=3)
    out, weights = scaled_dot_product_attention(q, k, v)
    assert out.shape == (5, 3)
    np.testing.assert_allclose(out, naive_attention(q, k, v)[0], atol=1e-5)


def test_causal_mask_matches_references():
    q, k, v = random_qkv(4, tq=6, tk=6)
    mask = masking.causal_mask(6)
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    ref_out, ref_weights = naive_attention(q, k, v, np.asarray(mask))
    np.testing.assert_allclose(out, ref_out, atol=1e-5)
    np.testing.assert_allclose(out, reference_jax(q, k, v, mask), atol=1e-5)
    assert np.all(np.triu(np.asarray(weights), k=1) == 0.0)


def test_causal_mask_blocks_gradient_from_the_future():
    """d out[i] / d x[j] must be exactly zero for every future token j > i."""
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.normal(size=(6, 4)), dtype=jnp.float32)
    w_q, w_k, w_v = (jnp.asarray(rng.normal(size=(4, 4)), dtype=jnp.float32) for _ in range(3))

    def layer(x):
        return scaled_dot_product_attention(x @ w_q, x @ w_k, x @ w_v, mask=masking.causal_mask(6))[0]

    jac = np.asarray(jax.jacobian(layer)(x))  # (T_out, d_out, T_in, d_in)
    leaks = np.abs(jac).sum(axis=(1, 3))  # (T_out, T_in)
    assert np.all(leaks[np.triu_indices(6, k=1)] == 0.0)
    assert np.all(leaks[np.tril_indices(6)] > 0.0)  # the past does flow


def test_fully_masked_row_is_zero_with_finite_gradients():
    q, k, v = random_qkv(6, tq=3, tk=4)
    mask = jnp.asarray([[True, True, False, False], [False, False, False, False], [True, True, True, True]])
    out, weights = scaled_dot_product_attention(q, k, v, mask=mask)
    assert np.all(np.asarray(out[1]) == 0.0) and np.all(np.asarray(weights[1]) == 0.0)
    assert np.isfinite(np.asarray(out)).all()
    np.testing.assert_allclose(np.asarray(weights).sum(axis=1), [1.0, 0.0, 1.0], atol=1e-6)

    def loss(q, k, v):
        return jnp.sum(scaled_dot_product_attention(q, k, v, mask=mask)[0] ** 2)

    for grad in jax.grad(loss, argnums=(0, 1, 2))(q, k, v):
        assert np.isfinite(np.asarray(grad)).all()
    all_masked = jnp.zeros((3, 4), dtype=bool)
    grads = jax.grad(lambda q: jnp.sum(scaled_dot_product_attention(q, k, v, mask=all_masked)[0]))(q)
    assert np.all(np.asarray(grads) == 0.0)


def test_large_scores_stay_finite():
    q, k, v = random_qkv(7)
    out, weights = scaled_dot_product_attention(q * 1e4, k, v, mask=jnp.asarray(np.tri(5, 7, dtype=bool)))
    assert np.isfinite(np.asarray(out)).all() and np.isfinite(np.asarray(weights)).all()


def test_works_under_jit_and_vmap():
    q, k, v = random_qkv(8)
    batched = jax.jit(jax.vmap(scaled_dot_product_attention, in_axes=(0, 0, 0, None)))
    out, weights = batched(jnp.stack([q, 2 * q]), jnp.stack([k, k]), jnp.stack([v, v]), masking.causal_mask(7)[:5])
    assert out.shape == (2, 5, 4) and weights.shape == (2, 5, 7)
    np.testing.assert_allclose(out[0], scaled_dot_product_attention(q, k, v, mask=masking.causal_mask(7)[:5])[0], atol=1e-6)


@pytest.mark.parametrize(
    "args, kwargs, error, names",
    [
        ((jnp.ones((5, 4)), jnp.ones((7, 3)), jnp.ones((7, 2))), {}, ValueError, ["k", "(Tk, d=4)", "(7, 3)"]),
        ((jnp.ones((5, 4)), jnp.ones((7, 4)), jnp.ones((6, 2))), {}, ValueError, ["v", "(Tk=7, dv)", "(6, 2)"]),
        ((jnp.ones((4,)), jnp.ones((7, 4)), jnp.ones((7, 2))), {}, ValueError, ["q", "(Tq, d)", "(4,)"]),
        ((jnp.ones((5, 4)), jnp.ones((7, 4)), jnp.ones((7,))), {}, ValueError, ["v", "(Tk=7, dv)", "(7,)"]),
        ((jnp.ones((5, 4)), jnp.ones((7, 4)), jnp.ones((7, 2))), {"mask": jnp.ones((7, 5), bool)}, ValueError,
         ["mask", "(Tq=5, Tk=7)", "(7, 5)"]),
        ((jnp.ones((5, 4)), jnp.ones((7, 4)), jnp.ones((7, 2))), {"mask": jnp.ones((5, 7))}, TypeError,
         ["mask", "boolean", "float32", "bias="]),
        ((jnp.ones((5, 4)), jnp.ones((7, 4)), jnp.ones((7, 2))), {"bias": jnp.ones((5,))}, ValueError,
         ["bias", "(Tq=5, Tk=7)", "(5,)"]),
    ],
)
def test_bad_arguments(args, kwargs, error, names):
    with pytest.raises(error) as info:
        scaled_dot_product_attention(*args, **kwargs)
    for name in names:
        assert name in str(info.value)
