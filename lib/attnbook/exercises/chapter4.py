"""Exercises of chapter 4 (multi-head attention)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from attnbook.exercises._core import Exercise, normal, register
from attnbook.mha import MultiHeadAttention, parameter_count


def _layer(rng, d_model, heads, key_dim, value_dim, d_out):
    """A layer with these sizes, random kernels and random (non-zero) biases: a check that only sees
    zero biases cannot catch a bias added in the wrong place (chapter 4, @sec-sum)."""
    layer = MultiHeadAttention(d_model, heads, key_dim, value_dim=value_dim, d_out=d_out,
                               key=jax.random.key(int(rng.integers(1 << 30))))
    biases = lambda m: [m.b_q, m.b_k, m.b_v, m.b_o]
    return eqx.tree_at(biases, layer, [jnp.asarray(rng.normal(scale=0.5, size=b.shape), dtype=jnp.float32)
                                       for b in biases(layer)])


def _attention_case(rng, d_model, heads, key_dim, value_dim, d_out, t_q, t_kv, mask=None):
    if mask is None:
        mask = rng.random((heads, t_q, t_kv)) < 0.6  # some rows fully masked in some heads, by chance
    return {"layer": _layer(rng, d_model, heads, key_dim, value_dim, d_out),
            "x_q": normal(rng, t_q, d_model), "x_kv": normal(rng, t_kv, d_model), "mask": jnp.asarray(mask)}


# Two sets of sizes: the edge case (one head, one query, one key) and one where every size differs
# from its neighbour in the formulas (value_dim != key_dim, d_out != d_model, Tq != Tk). Random cases
# reuse the second: JAX compiles each operation once per shape, so new sizes in every case would cost
# the reader's function and the reference a second or more of compilation per check.
_TINY = dict(d_model=3, heads=1, key_dim=2, value_dim=2, d_out=3, t_q=1, t_kv=1)
_MIXED = dict(d_model=4, heads=3, key_dim=2, value_dim=5, d_out=3, t_q=2, t_kv=3)


class _Cases:
    """Edge cases built when a check first reads them (they hold layers: no JAX work at import)."""

    def __init__(self, make):
        self._make, self._cases = make, None

    def __iter__(self):
        if self._cases is None:
            self._cases = self._make()
        return iter(self._cases)


def _attention_edge_cases():
    rng = np.random.default_rng(4)
    mixed = np.ones((3, 2, 3), dtype=bool)
    mixed[:, 0] = False  # query 0 sees no key in any head: zero output, no b_o
    mixed[1, 1] = False  # query 1 sees nothing in head 1 only: that head adds nothing, b_o is added
    mixed[2, 1, 0] = False
    return [_attention_case(rng, **_TINY, mask=np.ones((1, 1, 1), dtype=bool)),
            _attention_case(rng, **_TINY, mask=np.zeros((1, 1, 1), dtype=bool)),
            _attention_case(rng, **_MIXED, mask=mixed)]


@eqx.filter_jit
def _attend(layer, x_q, x_kv, mask):
    """The library's layer, compiled once per set of sizes."""
    return layer(x_q, x_kv, x_kv, mask)


def _count(d_model, heads, key_dim, value_dim, d_out, key_bias_positions):
    layer = MultiHeadAttention(d_model, heads, key_dim, value_dim=value_dim, d_out=d_out,
                               key_bias_positions=key_bias_positions, key=jax.random.key(0))
    return parameter_count(layer)


def _random_sizes(rng):
    d_model, heads, key_dim, value_dim, d_out = (int(n) for n in rng.integers(1, 10, size=5))
    positions = None if rng.random() < 0.5 else int(rng.integers(1, 8))
    return {"d_model": d_model, "heads": heads, "key_dim": key_dim, "value_dim": value_dim, "d_out": d_out,
            "key_bias_positions": positions}


def _sizes(d_model, heads, key_dim, value_dim, d_out, key_bias_positions=None):
    return {"d_model": d_model, "heads": heads, "key_dim": key_dim, "value_dim": value_dim, "d_out": d_out,
            "key_bias_positions": key_bias_positions}


register(
    # 4.1 (implement): multi-head attention by hand from the Keras-layout weights, for a query
    # sequence x_q (Tq, d_model), a key/value sequence x_kv (Tk, d_model) and a per-head mask
    # (heads, Tq, Tk); returns the library's (out (Tq, d_out), weights (heads, Tq, Tk)), with the
    # book's convention for queries that see nothing (zero weights; zero output if in every head).
    Exercise(
        id="4.1",
        kind="function",
        reference=_attend,
        inputs=lambda rng: _attention_case(rng, **_MIXED),
        edge_cases=_Cases(_attention_edge_cases),
        cases=4,
    ),
    # 4.2 (derive): the parameter count of a layer with these sizes, with the per-position key bias
    # when key_bias_positions is a number T; 751 for (7, 3, 8, 8, 7, None), as in Keras' summary.
    Exercise(
        id="4.2",
        kind="function",
        reference=_count,
        inputs=_random_sizes,
        edge_cases=(_sizes(7, 3, 8, 8, 7), _sizes(7, 8, 7, 7, 7, 5), _sizes(7, 8, 1, 1, 7, 5), _sizes(2, 1, 1, 1, 2, 1)),
        atol=0,
        rtol=0,
    ),
    # 4.3 (predict, choice): of the ablations on 'add token 2' (key bias, 5 positions), the layer
    # with 1 head of key_dim 7 has fewer parameters (252) than 8 heads of key_dim 1 (287), and the
    # lower loss (0.022 against 0.060 in the chapter's stored table): "B".
    Exercise(
        id="4.3",
        kind="choice",
        reference=lambda: "B",
        choices=("A", "B", "C", "D"),
    ),
    # 4.4 (derive): the lowest expected loss of a position-blind layer on 'replace by token 2' with
    # T tokens of features uniform in [0, 1): Var(x_2 - mean) = (T - 1) / T * 1/12.
    Exercise(
        id="4.4",
        kind="function",
        reference=lambda T: (T - 1) / (12 * T),
        inputs=lambda rng: {"T": int(rng.integers(2, 50))},
        edge_cases=({"T": 2}, {"T": 5}),
        rtol=1e-6,
        atol=0,
    ),
    # 4.5 (explore, number): the key-bias layer trained on 'replace by token 2', evaluated on
    # 'replace by token 4' without retraining: it still outputs token 2, so its expected loss is
    # E[(x_2 - x_4)^2] = 2 sigma^2 = 1/6 (a measured value within 5% passes too).
    Exercise(
        id="4.5",
        kind="number",
        reference=lambda: 2 / 12,
        rtol=0.05,
        atol=0,
    ),
)
