"""attnbook.mha.MultiHeadAttention against equinox.nn.MultiheadAttention, a per-head loop and einsum."""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attnbook import masking
from attnbook.mha import MultiHeadAttention, parameter_count

D_MODEL, HEADS, KEY_DIM = 7, 3, 8


def randomised(layer, seed):
    """The same layer with every weight and bias drawn at random (the initial biases are zero)."""
    rng = np.random.default_rng(seed)
    leaves, treedef = jax.tree.flatten(layer)
    return jax.tree.unflatten(treedef, [jnp.asarray(rng.normal(scale=0.5, size=a.shape), dtype=jnp.float32)
                                        for a in leaves])


def make_layer(seed=0, **kwargs):
    kwargs = {"d_model": D_MODEL, "num_heads": HEADS, "key_dim": KEY_DIM, **kwargs}
    return randomised(MultiHeadAttention(**kwargs, key=jax.random.key(seed)), seed)


def inputs(seed, tq=5, tk=5, d=D_MODEL):
    rng = np.random.default_rng(100 + seed)
    q = jnp.asarray(rng.random((tq, d)), dtype=jnp.float32)
    kv = jnp.asarray(rng.random((tk, d)), dtype=jnp.float32)
    return q, kv


def to_equinox(layer):
    """equinox.nn.MultiheadAttention with the same weights: Equinox keeps one Linear per projection,
    weight (out, in), and splits the out axis head-major into (heads, size)."""
    d, h, k = layer.w_q.shape
    v, o = layer.w_v.shape[2], layer.w_o.shape[2]
    ref = eqx.nn.MultiheadAttention(h, d, output_size=o, qk_size=k, vo_size=v, use_query_bias=True,
                                    use_key_bias=True, use_value_bias=True, use_output_bias=True,
                                    key=jax.random.key(0))
    flat_in = lambda w: w.reshape(d, -1).T  # (d, h, k) -> (h*k, d)
    return eqx.tree_at(
        lambda m: (m.query_proj.weight, m.query_proj.bias, m.key_proj.weight, m.key_proj.bias,
                   m.value_proj.weight, m.value_proj.bias, m.output_proj.weight, m.output_proj.bias),
        ref,
        (flat_in(layer.w_q), layer.b_q.reshape(-1), flat_in(layer.w_k), layer.b_k.reshape(-1),
         flat_in(layer.w_v), layer.b_v.reshape(-1), layer.w_o.reshape(h * v, o).T, layer.b_o),
    )


def per_head_loop(layer, query, key, value, mask=None):
    """Head by head, row by row, in float64 (the computation source 004 writes out by hand)."""
    p = {n: np.asarray(getattr(layer, n), dtype=np.float64) for n in ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")}
    query, key, value = (np.asarray(a, dtype=np.float64) for a in (query, key, value))
    heads, key_dim = p["w_q"].shape[1], p["w_q"].shape[2]
    tq, tk = query.shape[0], key.shape[0]
    mask = None if mask is None else np.broadcast_to(np.asarray(mask), (heads, tq, tk))
    out = np.zeros((tq, p["w_o"].shape[2]))
    weights = np.zeros((heads, tq, tk))
    for h in range(heads):
        b_k = p["b_k"][h] if p["b_k"].ndim == 3 else p["b_k"][h][None, :]  # per position or shared
        q = query @ p["w_q"][:, h, :] + p["b_q"][h]
        k = key @ p["w_k"][:, h, :] + b_k
        v = value @ p["w_v"][:, h, :] + p["b_v"][h]
        for i in range(tq):
            allowed = [j for j in range(tk) if mask is None or mask[h, i, j]]
            if not allowed:
                continue
            scores = np.array([q[i] @ k[j] / math.sqrt(key_dim) for j in allowed])
            e = np.exp(scores - scores.max())
            weights[h, i, allowed] = e / e.sum()
        out += weights[h] @ v @ p["w_o"][h]
    out += p["b_o"]
    if mask is not None:
        out[~mask.any(axis=(0, 2))] = 0.0
    return out, weights


def einsum_form(layer, query, key, value):
    """The textbook einsum form, heads first, without masks."""
    q = jnp.einsum("td,dhk->htk", query, layer.w_q) + layer.b_q[:, None]
    k = jnp.einsum("sd,dhk->hsk", key, layer.w_k) + layer.b_k[:, None]
    v = jnp.einsum("sd,dhv->hsv", value, layer.w_v) + layer.b_v[:, None]
    weights = jax.nn.softmax(jnp.einsum("htk,hsk->hts", q, k) / math.sqrt(q.shape[-1]), axis=-1)
    return jnp.einsum("hts,hsv,hvo->to", weights, v, layer.w_o) + layer.b_o, weights


def test_keras_shapes_and_751_parameters():
    layer = MultiHeadAttention(7, 3, 8, key=jax.random.key(0))
    shapes = {n: getattr(layer, n).shape for n in ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")}
    assert shapes == {"w_q": (7, 3, 8), "b_q": (3, 8), "w_k": (7, 3, 8), "b_k": (3, 8),
                      "w_v": (7, 3, 8), "b_v": (3, 8), "w_o": (3, 8, 7), "b_o": (7,)}
    assert parameter_count(layer) == 751  # the number Keras' summary shows in source 004
    assert (layer.d_model, layer.num_heads, layer.key_dim, layer.value_dim, layer.d_out) == (7, 3, 8, 8, 7)
    assert layer.key_bias_positions is None
    assert not np.any(np.asarray(layer.b_q)) and not np.any(np.asarray(layer.b_o))  # biases start at zero
    other = MultiHeadAttention(7, 2, 4, value_dim=5, d_out=3, key=jax.random.key(0))
    assert other.w_v.shape == (7, 2, 5) and other.w_o.shape == (2, 5, 3) and other.b_o.shape == (3,)
    assert parameter_count(other) == 2 * 8 * 2 * 4 + 8 * 2 * 5 + (2 * 5 + 1) * 3


def test_key_bias_shape_and_count():
    layer = MultiHeadAttention(7, 8, 7, key_bias_positions=5, key=jax.random.key(0))
    assert layer.b_k.shape == (8, 5, 7) and layer.key_bias_positions == 5
    standard = MultiHeadAttention(7, 8, 7, key=jax.random.key(0))
    assert parameter_count(layer) - parameter_count(standard) == 4 * 8 * 7


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_equinox_loop_and_einsum_without_mask(seed):
    layer = make_layer(seed)
    query, kv = inputs(seed, tq=4, tk=6)
    out, weights = layer(query, kv, kv)
    assert out.shape == (4, 7) and weights.shape == (3, 4, 6)
    ref = to_equinox(layer)(query, kv, kv)
    np.testing.assert_allclose(out, ref, atol=1e-5)
    loop_out, loop_weights = per_head_loop(layer, query, kv, kv)
    np.testing.assert_allclose(out, loop_out, atol=1e-5)
    np.testing.assert_allclose(weights, loop_weights, atol=1e-6)
    ein_out, ein_weights = einsum_form(layer, query, kv, kv)
    np.testing.assert_allclose(out, ein_out, atol=1e-5)
    np.testing.assert_allclose(weights, ein_weights, atol=1e-6)


def test_default_sizes_match_equinox():
    layer = make_layer(3, value_dim=5, d_out=4)
    query, kv = inputs(3)
    np.testing.assert_allclose(layer(query, kv, kv)[0], to_equinox(layer)(query, kv, kv), atol=1e-5)


def test_per_head_loop_matches_with_separate_key_and_value():
    layer = make_layer(4)
    query, key = inputs(4, tq=3, tk=5)
    _, value = inputs(5, tq=3, tk=5)
    out, weights = layer(query, key, value)
    loop_out, loop_weights = per_head_loop(layer, query, key, value)
    np.testing.assert_allclose(out, loop_out, atol=1e-5)
    np.testing.assert_allclose(weights, loop_weights, atol=1e-6)
    np.testing.assert_allclose(out, to_equinox(layer)(query, key, value), atol=1e-5)


def test_causal_mask_every_head():
    layer = make_layer(5)
    x, _ = inputs(5)
    mask = masking.causal_mask(5)
    out, weights = layer(x, x, x, mask)
    np.testing.assert_allclose(out, to_equinox(layer)(x, x, x, mask), atol=1e-5)
    loop_out, loop_weights = per_head_loop(layer, x, x, x, mask)
    np.testing.assert_allclose(out, loop_out, atol=1e-5)
    np.testing.assert_allclose(weights, loop_weights, atol=1e-6)
    w = np.asarray(weights)
    for h in range(HEADS):
        assert np.all(w[h][~np.asarray(mask)] == 0.0), h
        np.testing.assert_allclose(w[h].sum(axis=1), 1.0, atol=1e-6)


def test_padding_mask_every_head():
    layer = make_layer(6)
    x, _ = inputs(6)
    length = 3
    mask = masking.padding_mask(np.array([length]), 5)[0]
    out, weights = layer(x, x, x, mask)
    # Real queries agree with Equinox; Equinox spreads a fully masked row uniformly, we return zeros.
    np.testing.assert_allclose(out[:length], to_equinox(layer)(x, x, x, mask)[:length], atol=1e-5)
    loop_out, loop_weights = per_head_loop(layer, x, x, x, mask)
    np.testing.assert_allclose(out, loop_out, atol=1e-5)
    np.testing.assert_allclose(weights, loop_weights, atol=1e-6)
    w = np.asarray(weights)
    assert np.all(w[:, :, length:] == 0.0)  # no head looks at padding
    assert np.all(w[:, length:, :] == 0.0) and np.all(np.asarray(out)[length:] == 0.0)
    # The real tokens' outputs do not depend on what the padding holds.
    x2 = x.at[length:].set(123.0)
    np.testing.assert_allclose(layer(x2, x2, x2, mask)[0][:length], out[:length], atol=1e-5)


def test_per_head_masks():
    layer = make_layer(7)
    x, _ = inputs(7)
    rng = np.random.default_rng(7)
    mask = rng.random((HEADS, 5, 5)) < 0.6
    mask[:, :, 0] = True  # no empty row, so Equinox agrees everywhere
    out, weights = layer(x, x, x, jnp.asarray(mask))
    np.testing.assert_allclose(out, to_equinox(layer)(x, x, x, jnp.asarray(mask)), atol=1e-5)
    loop_out, loop_weights = per_head_loop(layer, x, x, x, mask)
    np.testing.assert_allclose(out, loop_out, atol=1e-5)
    np.testing.assert_allclose(weights, loop_weights, atol=1e-6)


def test_key_bias_variant_against_loop():
    layer = make_layer(8, num_heads=4, key_dim=3, key_bias_positions=6)
    query, kv = inputs(8, tq=4, tk=6)
    out, weights = layer(query, kv, kv)
    loop_out, loop_weights = per_head_loop(layer, query, kv, kv)
    np.testing.assert_allclose(out, loop_out, atol=1e-5)
    np.testing.assert_allclose(weights, loop_weights, atol=1e-6)
    mask = masking.causal_mask(6)[:4]
    out, weights = layer(query, kv, kv, mask)
    loop_out, loop_weights = per_head_loop(layer, query, kv, kv, mask)
    np.testing.assert_allclose(out, loop_out, atol=1e-5)
    np.testing.assert_allclose(weights, loop_weights, atol=1e-6)


def test_key_bias_equal_over_positions_is_the_standard_layer():
    layer = make_layer(9, key_bias_positions=5)
    shared = make_layer(9)
    layer = eqx.tree_at(lambda m: m.b_k, layer, jnp.repeat(shared.b_k[:, None, :], 5, axis=1))
    layer = eqx.tree_at(lambda m: (m.w_q, m.b_q, m.w_k, m.w_v, m.b_v, m.w_o, m.b_o), layer,
                        (shared.w_q, shared.b_q, shared.w_k, shared.w_v, shared.b_v, shared.w_o, shared.b_o))
    x, _ = inputs(9)
    np.testing.assert_allclose(layer(x, x, x)[0], shared(x, x, x)[0], atol=1e-6)


def test_fully_masked_rows_are_zero_with_finite_gradients():
    layer = make_layer(10)
    x, _ = inputs(10)
    mask = np.ones((HEADS, 5, 5), dtype=bool)
    mask[:, 2, :] = False  # query 2 sees nothing in any head
    mask[1, 3, :] = False  # query 3 sees nothing in head 1 only
    mask = jnp.asarray(mask)
    out, weights = layer(x, x, x, mask)
    assert np.all(np.isfinite(out)) and np.all(np.isfinite(weights))
    assert np.all(np.asarray(weights)[:, 2] == 0.0) and np.all(np.asarray(out)[2] == 0.0)
    assert np.all(np.asarray(weights)[1, 3] == 0.0)
    np.testing.assert_allclose(np.asarray(weights)[[0, 2], 3].sum(axis=-1), 1.0, atol=1e-6)
    loop_out, _ = per_head_loop(layer, x, x, x, mask)
    np.testing.assert_allclose(out, loop_out, atol=1e-5)

    def loss(layer, x):
        return jnp.sum(layer(x, x, x, mask)[0] ** 2)

    grads_layer, grads_x = jax.grad(loss, argnums=(0, 1))(layer, x)
    assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads_layer))
    assert np.all(np.isfinite(grads_x))
    every_masked = jnp.zeros((5, 5), dtype=bool)
    out, weights = layer(x, x, x, every_masked)
    assert not np.any(np.asarray(out)) and not np.any(np.asarray(weights))
    grads = jax.grad(lambda layer: jnp.sum(layer(x, x, x, every_masked)[0]))(layer)
    assert all(np.all(np.asarray(g) == 0.0) for g in jax.tree.leaves(grads))


def test_works_under_vmap_and_jit():
    layer = make_layer(11)
    rng = np.random.default_rng(11)
    xs = jnp.asarray(rng.random((4, 5, 7)), dtype=jnp.float32)
    out, weights = eqx.filter_jit(jax.vmap(lambda x: layer(x, x, x)))(xs)
    assert out.shape == (4, 5, 7) and weights.shape == (4, 3, 5, 5)
    np.testing.assert_allclose(out[2], layer(xs[2], xs[2], xs[2])[0], atol=1e-6)


def expect_error(call, *fragments, kind=ValueError):
    with pytest.raises(kind) as info:
        call()
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)


@pytest.mark.parametrize(
    "kwargs, fragments",
    [
        ({"num_heads": 0}, ["num_heads", "0"]),
        ({"num_heads": -2}, ["num_heads", "-2"]),
        ({"key_dim": 0}, ["key_dim", "0"]),
        ({"d_model": 0}, ["d_model", "0"]),
        ({"value_dim": 0}, ["value_dim", "0"]),
        ({"d_out": -1}, ["d_out", "-1"]),
        ({"key_bias_positions": 0}, ["key_bias_positions", "0"]),
    ],
)
def test_bad_sizes(kwargs, fragments):
    args = {"d_model": 7, "num_heads": 3, "key_dim": 8, **kwargs}
    expect_error(lambda: MultiHeadAttention(**args, key=jax.random.key(0)), *fragments)


def test_non_integer_size_is_a_type_error():
    expect_error(lambda: MultiHeadAttention(7, 2.5, 8, key=jax.random.key(0)), "num_heads", "2.5", kind=TypeError)


def test_bad_inputs():
    layer = make_layer(12)
    x, _ = inputs(12)
    wide = jnp.ones((5, 6))
    expect_error(lambda: layer(wide, x, x), "query", "d_model=7", "(5, 6)")
    expect_error(lambda: layer(x, wide, x), "key", "d_model=7", "(5, 6)")
    expect_error(lambda: layer(x, x, wide), "value", "d_model=7", "(5, 6)")
    expect_error(lambda: layer(x, x, x[:4]), "value", "(5, 7)", "(4, 7)")
    expect_error(lambda: layer(x[0], x, x), "query", "(Tq, d_query)", "(7,)")
    expect_error(lambda: layer(x, x, x, jnp.ones((5, 4), dtype=bool)), "mask", "Tk=5", "(5, 4)")
    expect_error(lambda: layer(x, x, x, jnp.ones((2, 5, 5), dtype=bool)), "mask", "(3, 5, 5)", "(2, 5, 5)")
    expect_error(lambda: layer(x, x, x, jnp.ones((5, 5))), "mask", "boolean", "float32", kind=TypeError)


def test_key_length_must_match_key_bias_positions():
    layer = make_layer(13, key_bias_positions=5)
    x, _ = inputs(13, tk=6)
    _, kv = inputs(13, tk=6)
    expect_error(lambda: layer(x, kv, kv), "key_bias_positions=5", "(6, 7)")
    short = kv[:4]
    expect_error(lambda: layer(x, short, short), "key_bias_positions=5", "(4, 7)")


def test_initialisation_is_glorot_and_reproducible():
    a = MultiHeadAttention(7, 3, 8, key=jax.random.key(5))
    b = MultiHeadAttention(7, 3, 8, key=jax.random.key(5))
    c = MultiHeadAttention(7, 3, 8, key=jax.random.key(6))
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))
    assert not np.array_equal(a.w_q, c.w_q)
    assert not np.array_equal(a.w_q, a.w_k)  # each projection gets its own numbers
    limit = math.sqrt(6 / (7 + 3 * 8))
    assert np.abs(np.asarray(a.w_q)).max() <= limit and np.abs(np.asarray(a.w_q)).max() > 0.8 * limit
    assert a.w_q.dtype == jnp.float32
    legacy = MultiHeadAttention(7, 3, 8, key=jax.random.PRNGKey(5))  # raw uint32 keys work too
    assert legacy.w_o.shape == (3, 8, 7)


def test_initialisation_under_vmap():
    layers = eqx.filter_vmap(lambda k: MultiHeadAttention(7, 2, 4, key_bias_positions=5, key=k))(
        jax.random.split(jax.random.key(0), 3))
    assert layers.w_q.shape == (3, 7, 2, 4) and layers.b_k.shape == (3, 2, 5, 4)
    assert not np.array_equal(layers.w_q[0], layers.w_q[1])
    limit = math.sqrt(6 / (7 + 2 * 4))
    assert np.abs(np.asarray(layers.w_q)).max() <= limit
