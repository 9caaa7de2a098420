"""Exercises of chapter 1 (positional encoding)."""

import jax.numpy as jnp
import numpy as np

from attnbook import positional
from attnbook.exercises._core import Exercise, normal, register


def _alibi_self_weight(length: int = 1000, heads: int = 4) -> float:
    """Weight of the last query on itself in ALiBi's steepest head, when every score is equal.

    Under the causal mask the last query sees every key, so its weights are the softmax of its row
    of the bias alone (the weights of ``scaled_dot_product_attention`` with equal queries and keys).
    """
    row = np.asarray(positional.alibi_bias(length, heads)[0, -1], dtype=np.float64)  # head 0: steepest
    weights = np.exp(row - row.max())
    return float(weights[-1] / weights.sum())


register(
    # 1.1 (implement): the sinusoidal encoding, PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i),
    # w_i = 10000 ** (-2i / d_model), without positional.sinusoidal_encoding.
    Exercise(
        id="1.1",
        kind="function",
        reference=lambda length, d_model: positional.sinusoidal_encoding(length, d_model),
        inputs=lambda rng: {"length": int(rng.integers(2, 9)), "d_model": int(2 * rng.integers(1, 4))},
        edge_cases=({"length": 1, "d_model": 2}, {"length": 4, "d_model": 6}),
    ),
    # 1.2 (derive): the query projection W with PE[p] @ W = PE[p + k] for every p, so that the query of
    # position p scores highest against the key of position p + k: W = R_k^T in the book's row convention.
    Exercise(
        id="1.2",
        kind="function",
        reference=lambda k, d_model: positional.relative_rotation(k, d_model).T,
        inputs=lambda rng: {"k": int(rng.integers(-5, 6)), "d_model": int(2 * rng.integers(1, 4))},
        edge_cases=({"k": 0, "d_model": 2}, {"k": 1, "d_model": 2}, {"k": -3, "d_model": 4}),
    ),
    # 1.3 (implement): RoPE on a (T, d) array, adjacent pairs (2i, 2i+1) of row p rotated by p * w_i.
    Exercise(
        id="1.3",
        kind="function",
        reference=lambda x: positional.rope(x),
        inputs=lambda rng: {"x": normal(rng, int(rng.integers(2, 9)), int(2 * rng.integers(1, 4)))},
        edge_cases=({"x": jnp.ones((1, 4), dtype=jnp.float32)},
                    {"x": jnp.asarray([[1.0, 0.0, 1.0, 0.0]] * 3, dtype=jnp.float32)}),
    ),
    # 1.4 (predict): ALiBi alone (equal scores, causal mask), 4 heads: the weight of the last query on
    # itself in the steepest head (slope 1/4) at length 1000 instead of 16. Geometric series:
    # (1 - e^{-m}) / (1 - e^{-mT}), hardly changed from T = 16 (0.225): a fixed local window.
    Exercise(
        id="1.4",
        kind="number",
        reference=_alibi_self_weight,
        rtol=3e-3,
        atol=0.0,
    ),
)
