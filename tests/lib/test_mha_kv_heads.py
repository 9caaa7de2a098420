"""Chapter 10: attnbook.mha's ``kv_heads`` (grouped-query and multi-query attention) against chapter 4's layer
and a naive per-head loop in which groups of query heads share one key/value head."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import masking, positional
from attnbook.mha import MultiHeadAttention, MultiHeadSelfAttention, parameter_count
from random_inputs import randomised, tokens

NAMES = ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")




def naive_grouped(layer, query, key, value, mask=None, rotate=None):
    """Head by head, row by row, in float64: query head ``h`` reads key/value head ``h // (heads // G)``.

    ``rotate(x)`` (optional) is applied to each head's queries and to each key head (RoPE), as a hook would.
    """
    p = {n: np.asarray(getattr(layer, n), dtype=np.float64) for n in NAMES}
    query, key, value = (np.asarray(a, dtype=np.float64) for a in (query, key, value))
    heads, key_dim = p["w_q"].shape[1], p["w_q"].shape[2]
    groups = p["w_k"].shape[1]
    assert heads % groups == 0
    tq, tk = query.shape[0], key.shape[0]
    out = np.zeros((tq, p["w_o"].shape[2]))
    weights = np.zeros((heads, tq, tk))
    for h in range(heads):
        g = h // (heads // groups)  # the shared key/value head of this query head
        q = query @ p["w_q"][:, h, :] + p["b_q"][h]
        k = key @ p["w_k"][:, g, :] + p["b_k"][g]
        v = value @ p["w_v"][:, g, :] + p["b_v"][g]
        if rotate is not None:
            q, k = rotate(q), rotate(k)
        for i in range(tq):
            allowed = [j for j in range(tk) if mask is None or mask[i, j]]
            scores = np.array([q[i] @ k[j] / math.sqrt(key_dim) for j in allowed])
            e = np.exp(scores - scores.max())
            weights[h, i, allowed] = e / e.sum()
        out += weights[h] @ v @ p["w_o"][h]
    return out + p["b_o"], weights


def rope64(x):
    """RoPE of chapter 1 on a (T, d) array, in float64 (positions 0 .. T-1, base 10000, pairs (2i, 2i+1))."""
    t, d = x.shape
    theta = np.arange(t)[:, None] / 10000.0 ** (np.arange(0, d, 2) / d)
    c, s = np.cos(theta), np.sin(theta)
    out = np.empty_like(x)
    out[:, 0::2] = x[:, 0::2] * c - x[:, 1::2] * s
    out[:, 1::2] = x[:, 0::2] * s + x[:, 1::2] * c
    return out


@pytest.mark.parametrize("kwargs", [{}, {"value_dim": 5, "d_out": 3}, {"key_bias_positions": 6}])
def test_kv_heads_equal_heads_is_chapter_4s_layer_bit_for_bit(kwargs):
    key = jax.random.key(3)
    mha = MultiHeadAttention(7, 3, 8, key=key, **kwargs)
    same = MultiHeadAttention(7, 3, 8, kv_heads=3, key=key, **kwargs)
    assert jax.tree.structure(mha) == jax.tree.structure(same)
    for a, b in zip(jax.tree.leaves(mha), jax.tree.leaves(same)):
        np.testing.assert_array_equal(a, b)  # the same initial weights, drawn from the same key
    assert mha.kv_heads == same.kv_heads == 3
    layer = randomised(mha, 0)
    q, kv = tokens(0, 5, 7), tokens(1, 6, 7)
    mask = masking.causal_mask(6)[:5]
    for args in ((q, kv, kv), (q, kv, kv, mask)):
        out, w = layer(*args)
        out2, w2 = eqx.tree_at(lambda m: m.w_q, layer, layer.w_q)(*args)  # the same layer object, rebuilt
        np.testing.assert_array_equal(out, out2)
        np.testing.assert_array_equal(w, w2)


@pytest.mark.parametrize("init", ["glorot", "fan-in"])
def test_self_attention_kv_heads_equal_heads_is_bit_identical(init):
    key = jax.random.key(5)
    a = MultiHeadSelfAttention(16, 4, init=init, key=key)
    b = MultiHeadSelfAttention(16, 4, init=init, kv_heads=4, key=key)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)
    x = tokens(2, 9, 16)
    np.testing.assert_array_equal(a(x), b(x))
    assert a.kv_heads == 4 and MultiHeadSelfAttention(16, 4, kv_heads=2, init=init, key=key).kv_heads == 2


@pytest.mark.parametrize("heads, groups", [(3, 1), (4, 1), (6, 2), (6, 3), (8, 4), (4, 4)])
@pytest.mark.parametrize("length", [5, 24])  # 24: above mha._SMALL, the matrix-product path
def test_grouped_heads_match_the_naive_loop(heads, groups, length):
    layer = randomised(MultiHeadAttention(7, heads, 8, kv_heads=groups, key=jax.random.key(0)), heads + groups)
    assert layer.w_k.shape == (7, groups, 8) and layer.b_v.shape == (groups, 8)
    x = tokens(heads, length, 7)
    y = tokens(groups, length, 7)
    mask = np.asarray(masking.causal_mask(length))
    for q, kv, m in ((x, y, None), (x, x, mask)):
        out, weights = layer(q, kv, kv, None if m is None else jnp.asarray(m))
        ref, ref_w = naive_grouped(layer, q, kv, kv, m)
        np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)
        np.testing.assert_allclose(weights, ref_w, atol=2e-6)


def test_multi_query_heads_share_one_key_and_value():
    layer = randomised(MultiHeadAttention(7, 4, 8, kv_heads=1, key=jax.random.key(1)), 1)
    q, k, v = layer.project(*(tokens(3, 6, 7),) * 3)
    assert q.shape == (6, 4, 8) and k.shape == (6, 1, 8) and v.shape == (6, 1, 8)


def test_mqa_with_rope_hook_matches_the_naive_loop():
    layer = randomised(MultiHeadAttention(12, 3, 4, kv_heads=1, key=jax.random.key(2)), 7)
    x = tokens(7, 10, 12)
    mask = np.asarray(masking.causal_mask(10))
    out, _ = layer(x, x, x, jnp.asarray(mask), process_heads=positional.rope_heads)
    ref, _ = naive_grouped(layer, x, x, x, mask, rotate=rope64)
    np.testing.assert_allclose(out, ref, rtol=5e-5, atol=5e-5)


@pytest.mark.parametrize("d_model, heads, key_dim, groups, value_dim, d_out",
                         [(7, 3, 8, 3, 8, 7), (7, 3, 8, 1, 8, 7), (16, 8, 2, 2, 5, 3), (32, 4, 8, 2, 8, 32)])
def test_parameter_count_formula(d_model, heads, key_dim, groups, value_dim, d_out):
    layer = MultiHeadAttention(d_model, heads, key_dim, value_dim=value_dim, d_out=d_out, kv_heads=groups,
                               key=jax.random.key(0))
    formula = ((d_model + 1) * (heads + groups) * key_dim + (d_model + 1) * groups * value_dim
               + (heads * value_dim + 1) * d_out)
    assert parameter_count(layer) == formula
    positional_bias = MultiHeadAttention(d_model, heads, key_dim, value_dim=value_dim, d_out=d_out, kv_heads=groups,
                                         key_bias_positions=5, key=jax.random.key(0))
    assert parameter_count(positional_bias) == formula + 4 * groups * key_dim
    if groups == heads:
        assert parameter_count(layer) == parameter_count(
            MultiHeadAttention(d_model, heads, key_dim, value_dim=value_dim, d_out=d_out, key=jax.random.key(0)))


def tied_mha(layer):
    """Chapter 4's layer whose key/value heads are the grouped layer's, each repeated for its group."""
    group = layer.num_heads // layer.kv_heads
    full = MultiHeadAttention(layer.d_model, layer.num_heads, layer.key_dim, value_dim=layer.value_dim,
                              d_out=layer.d_out, key=jax.random.key(0))
    return eqx.tree_at(lambda m: tuple(getattr(m, n) for n in NAMES), full,
                       tuple(jnp.repeat(getattr(layer, n), group, axis=-2) if n in ("w_k", "b_k", "w_v", "b_v")
                             else getattr(layer, n) for n in NAMES))


@pytest.mark.parametrize("length", [5, 24])  # both paths of attend
@pytest.mark.parametrize("heads, groups", [(4, 1), (6, 2), (6, 3)])
def test_grouped_layer_is_mha_with_repeated_heads_under_per_head_masks_biases_and_padding(heads, groups, length):
    """Per-head masks and biases, fully masked rows and NaN in keys no query may see: the grouped layer behaves
    exactly as chapter 4's layer with its key/value heads repeated (outputs, weights and gradients)."""
    layer = randomised(MultiHeadAttention(7, heads, 8, kv_heads=groups, key=jax.random.key(0)), heads * groups)
    full = tied_mha(layer)
    rng = np.random.default_rng(length)
    x = tokens(length, length, 7)
    mask = jnp.asarray(rng.random((heads, length, length)) < 0.6) & masking.causal_mask(length)
    mask = mask.at[:, 2].set(False)  # query 2 sees nothing in any head: a zero output
    bias = jnp.asarray(rng.normal(size=(heads, length, length)), jnp.float32)
    x_nan = x.at[length - 1].set(jnp.nan)  # the last key: no query sees it once it is masked everywhere
    mask = mask.at[:, :, length - 1].set(False)
    for args in ((x, x, x, mask), (x, x, x, mask, bias), (x, x_nan, x_nan, mask, bias)):
        out, w = layer(*args)
        ref, ref_w = full(*args)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(w, ref_w, rtol=1e-5, atol=1e-6)
        assert np.all(np.isfinite(out)) and not np.any(out[2])
    grad = jax.grad(lambda m: jnp.sum(m(x, x_nan, x_nan, mask, bias)[0] ** 2))(layer)
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grad))
