"""Property-based tests (Hypothesis) of attnbook.mha.MultiHeadAttention (issue 10).

Sizes from a small pool, random boolean masks (shared or per head) with fully masked rows, random weights:

- against ``equinox.nn.MultiheadAttention`` with the same weights, on every query that sees a key in
  every head (Equinox gives a query with no visible key uniform weights; the book gives zeros);
- against a float64 loop over heads and rows written from the definition, on every query;
- with NaN in every key, value and query that no query sees (padding): the same outputs and gradients.
"""

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook.mha import MultiHeadAttention


# Sizes (d_model, heads, key_dim, value_dim, d_out, Tq, Tk), from a small pool: every new shape compiles
# the layer, Equinox's layer and their gradients again, about a second each, and the whole file must run
# in seconds. Between them they cover one and several heads, Tq < Tk, Tq > Tk, a single query or key,
# key_dim != value_dim and d_out != d_model. Masks, weights and inputs are drawn freely.
SHAPES = [(3, 2, 2, 3, 4, 3, 4), (4, 1, 3, 1, 2, 1, 3), (2, 3, 1, 2, 2, 4, 1)]


@st.composite
def cases(draw):
    d_model, heads, key_dim, value_dim, d_out, tq, tk = draw(st.sampled_from(SHAPES))
    sizes = {"d_model": d_model, "num_heads": heads, "key_dim": key_dim, "value_dim": value_dim, "d_out": d_out}
    shape = (heads, tq, tk) if draw(st.booleans()) else (tq, tk)
    bits = draw(st.lists(st.booleans(), min_size=math.prod(shape), max_size=math.prod(shape)))
    mask = np.array(bits, dtype=bool).reshape(shape)
    for row in draw(st.sets(st.integers(0, tq - 1), max_size=tq)):  # fully masked query rows
        mask[..., row, :] = False
    return sizes, tq, tk, mask, draw(st.integers(0, 2**31 - 1))


def layer_and_inputs(sizes, tq, tk, seed):
    """A layer whose weights and biases are all random (new layers have zero biases), and inputs."""
    layer = eqx.filter_eval_shape(lambda: MultiHeadAttention(**sizes, key=jax.random.key(0)))
    rng = np.random.default_rng(seed)
    leaves, treedef = jax.tree.flatten(layer)
    layer = jax.tree.unflatten(treedef, [jnp.asarray(rng.normal(scale=0.5, size=a.shape), jnp.float32) for a in leaves])
    draw = lambda t: jnp.asarray(rng.normal(size=(t, sizes["d_model"])), jnp.float32)
    return layer, draw(tq), draw(tk), draw(tk)


@eqx.filter_jit
def run(layer, query, key, value, mask):
    """The layer's outputs, Equinox's output and the gradients of a loss: one compilation per shape."""
    def loss(layer, query, key, value):
        return jnp.sum(jnp.tanh(layer(query, key, value, mask)[0]))

    grads = jax.grad(loss, argnums=(0, 1, 2, 3))(layer, query, key, value)
    return layer(query, key, value, mask), to_equinox(layer)(query, key, value, mask), grads


def to_equinox(layer):
    d, h, k = layer.w_q.shape
    v, o = layer.w_v.shape[2], layer.w_o.shape[2]
    reference = eqx.filter_eval_shape(
        eqx.nn.MultiheadAttention, h, d, output_size=o, qk_size=k, vo_size=v, use_query_bias=True,
        use_key_bias=True, use_value_bias=True, use_output_bias=True, key=jax.random.key(0))
    flat = lambda w: w.reshape(d, -1).T  # (d, heads, size) -> Linear weight (heads * size, d), head-major
    return eqx.tree_at(
        lambda m: (m.query_proj.weight, m.query_proj.bias, m.key_proj.weight, m.key_proj.bias,
                   m.value_proj.weight, m.value_proj.bias, m.output_proj.weight, m.output_proj.bias),
        reference,
        (flat(layer.w_q), layer.b_q.reshape(-1), flat(layer.w_k), layer.b_k.reshape(-1),
         flat(layer.w_v), layer.b_v.reshape(-1), layer.w_o.reshape(h * v, o).T, layer.b_o))


def loop(layer, query, key, value, mask):
    """Head by head, query by query, in float64: softmax over the visible keys; none visible, zeros."""
    p = {n: np.asarray(getattr(layer, n), np.float64) for n in ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v", "w_o", "b_o")}
    query, key, value = (np.asarray(a, np.float64) for a in (query, key, value))
    heads, key_dim = p["w_q"].shape[1:]
    mask = np.broadcast_to(mask, (heads, len(query), len(key)))
    out, weights = np.zeros((len(query), p["w_o"].shape[2])), np.zeros(mask.shape)
    for h in range(heads):
        q, k = query @ p["w_q"][:, h] + p["b_q"][h], key @ p["w_k"][:, h] + p["b_k"][h]
        v = value @ p["w_v"][:, h] + p["b_v"][h]
        for i in range(len(query)):
            seen = np.flatnonzero(mask[h, i])
            if seen.size:
                e = np.exp(q[i] @ k[seen].T / math.sqrt(key_dim) - np.max(q[i] @ k[seen].T / math.sqrt(key_dim)))
                weights[h, i, seen] = e / e.sum()
        out += weights[h] @ v @ p["w_o"][h]
    out += p["b_o"]
    out[~mask.any(axis=(0, 2))] = 0.0  # a query that sees nothing in any head: a zero row
    return out, weights


@settings(max_examples=20, deadline=None)
@given(cases())
def test_against_equinox_and_the_loop(case):
    sizes, tq, tk, mask, seed = case
    layer, query, key, value = layer_and_inputs(sizes, tq, tk, seed)
    (out, weights), reference, _ = run(layer, query, key, value, jnp.asarray(mask))
    expected_out, expected_weights = loop(layer, query, key, value, mask)
    np.testing.assert_allclose(out, expected_out, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(weights, expected_weights, atol=2e-6)
    np.testing.assert_array_equal(np.asarray(weights)[~np.broadcast_to(mask, weights.shape)], 0.0)  # exactly 0
    every_head = np.broadcast_to(mask, weights.shape).any(axis=2).all(axis=0)  # (Tq,): sees a key in every head
    np.testing.assert_allclose(np.asarray(out)[every_head], np.asarray(reference)[every_head], atol=2e-5, rtol=1e-4)


@settings(max_examples=10, deadline=None)
@given(cases(), st.sampled_from([np.nan, np.inf, -np.inf]))
def test_padding_may_hold_anything(case, junk):
    sizes, tq, tk, mask, seed = case
    layer, query, key, value = layer_and_inputs(sizes, tq, tk, seed)
    full = np.broadcast_to(mask, (sizes["num_heads"], tq, tk))
    unseen_keys, blind_queries = ~full.any(axis=(0, 1)), ~full.any(axis=(0, 2))
    padded = (query.at[blind_queries].set(junk), key.at[unseen_keys].set(junk), value.at[unseen_keys].set(junk))
    (out, weights), _, grads = run(layer, query, key, value, jnp.asarray(mask))
    (padded_out, padded_weights), _, padded_grads = run(layer, *padded, jnp.asarray(mask))
    np.testing.assert_array_equal(out, padded_out)
    np.testing.assert_array_equal(weights, padded_weights)
    for a, b in zip(jax.tree.leaves(grads), jax.tree.leaves(padded_grads)):
        np.testing.assert_array_equal(a, b)  # every gradient, the parameters' included
