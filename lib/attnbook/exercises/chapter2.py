"""Exercises of chapter 2 (scaled dot-product attention)."""

import jax.numpy as jnp
import numpy as np

from attnbook import data
from attnbook.attention import scaled_dot_product_attention
from attnbook.exercises._core import Exercise, normal, register


def _unscaled_softmax_gradient(d: int = 512, keys: int = 10, queries: int = 50_000, seed: int = 0) -> float:
    """Median over queries of ||diag(a) - a a^T||_F for a = softmax(q . k_j), without the 1/sqrt(d).

    q and k_j have independent N(0, 1) entries. Given q, the scores q . k_j are independent
    N(0, |q|^2), and |q|^2 is chi-square with d degrees of freedom: no d-dimensional vector is drawn.
    """
    rng = np.random.default_rng(seed)
    scores = np.sqrt(rng.chisquare(d, size=(queries, 1))) * rng.standard_normal((queries, keys))
    a = np.exp(scores - scores.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    s2, s3 = (a**2).sum(axis=1), (a**3).sum(axis=1)
    return float(np.median(np.sqrt(np.maximum(s2 - 2 * s3 + s2**2, 0.0))))


def _fifteen_days_all_visible() -> float:
    """Bayes-optimal accuracy of the 15-days process when the model sees all 15 days (estimate)."""
    return data.n_days_bayes_accuracy(15, np.random.default_rng(0), length=15, chains=300).value


def _attention_inputs(rng: np.random.Generator, scale: float = 1.0) -> dict:
    tq, tk = int(rng.integers(1, 6)), int(rng.integers(1, 7))
    d, dv = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    return {"q": normal(rng, tq, d, scale=scale), "k": normal(rng, tk, d, scale=scale), "v": normal(rng, tk, dv)}


_large = np.random.default_rng(3)

register(
    # 2.1 (implement): softmax(q k^T / sqrt(d)) v and the weights, without jax.nn.softmax; the last edge
    # case has scores in the hundreds, where exp overflows unless the row maximum is subtracted first.
    # The pair may come back as a tuple or a list (check compares a list of arrays as the tuple of them).
    Exercise(
        id="2.1",
        kind="function",
        reference=lambda q, k, v: scaled_dot_product_attention(q, k, v),
        inputs=_attention_inputs,
        cases=4,
        edge_cases=(
            {"q": jnp.ones((2, 3), dtype=jnp.float32), "k": jnp.ones((1, 3), dtype=jnp.float32),
             "v": jnp.asarray([[1.0, -2.0]], dtype=jnp.float32)},
            {"q": normal(_large, 2, 4, scale=12.0), "k": normal(_large, 5, 4, scale=12.0),
             "v": normal(_large, 5, 2)},
        ),
    ),
    # 2.2 (predict): without the 1/sqrt(d), the median size of the softmax's gradient (chapter's table,
    # 10 keys) at d = 512. It falls like exp(-c sqrt(d)), not like a power of d: about 15 times below d = 256.
    Exercise(
        id="2.2",
        kind="number",
        reference=_unscaled_softmax_gradient,
        rtol=0.3,
        atol=0.0,
    ),
    # 2.3 (derive): how many of the 75 parameters of SelfAttention(4, 6, 3) can each take any value without
    # changing any output: the key bias b_k (6), since q_i . b_k is the same for every key of row i.
    Exercise(
        id="2.3",
        kind="number",
        reference=lambda: 6,
        rtol=0.0,
        atol=0.0,
    ),
    # 2.4 (explore): the 15-days process with all 15 days visible (length=15): its Bayes-optimal accuracy,
    # an upper bound for the 10-visible-days optimum, whose lower bound the chapter gives (0.371).
    Exercise(
        id="2.4",
        kind="number",
        reference=_fifteen_days_all_visible,
        rtol=0.0,
        atol=0.003,
    ),
)
