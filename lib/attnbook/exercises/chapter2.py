"""Exercises of chapter 2 (scaled dot-product attention)."""

import math

import jax.numpy as jnp
import numpy as np

from attnbook import data
from attnbook.exercises._core import Exercise, Mistake, normal, register


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


def _attention(q, k, v, scale=0.5, axis=1):
    """Attention in float64 NumPy with the scores divided by d ** scale and the softmax over `axis`: 2.1's
    common mistakes (scale 0: no 1/sqrt(d); scale 1: divided by d, 1/sqrt(d) twice; axis 0: over the queries)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    scores = q @ k.T / q.shape[1] ** scale
    e = np.exp(scores - scores.max(axis=axis, keepdims=True))
    weights = e / e.sum(axis=axis, keepdims=True)
    return weights @ v, weights


def _overflowed(inputs, expected, got):
    """Inf or NaN in the answer where the reference is finite, on an input whose scores exceed float32's exp range."""
    scores = np.asarray(inputs["q"]) @ np.asarray(inputs["k"]).T / np.sqrt(np.shape(inputs["q"])[1])
    finite = all(np.all(np.isfinite(np.asarray(part, dtype=np.float64))) for part in got)
    return np.abs(scores).max() > 88 and not finite


def _like_a_power_of_d(value):
    """2.2: between the value at d = 256 halved (a fall like 1/d) and the fit of a power of d through d = 64
    (0.077) and 256 (0.003), about 0.0006 at 512, with room: the true median (about 0.00019) falls much faster."""
    return 0.0004 <= value <= 0.002

register(
    # 2.1 (implement): softmax(q k^T / sqrt(d)) v and the weights, without jax.nn.softmax; the last edge
    # case has scores in the hundreds, where exp overflows unless the row maximum is subtracted first.
    # The pair may come back as a tuple or a list (check compares a list of arrays as the tuple of them).
    Exercise(
        id="2.1",
        kind="function",
        # @eq-attention in float64 NumPy, which tests/book/test_exercises_chapter2.py compares with the library's
        # scaled_dot_product_attention: nothing to compile for each new input shape (the library's function, eagerly,
        # compiles a kernel per operation and shape, seconds of the chapter's run).
        reference=_attention,
        inputs=_attention_inputs,
        cases=4,
        edge_cases=(
            {"q": jnp.ones((2, 3), dtype=jnp.float32), "k": jnp.ones((1, 3), dtype=jnp.float32),
             "v": jnp.asarray([[1.0, -2.0]], dtype=jnp.float32)},
            {"q": normal(_large, 2, 4, scale=12.0), "k": normal(_large, 5, 4, scale=12.0),
             "v": normal(_large, 5, 2)},
        ),
        mistakes=(
            Mistake("exp overflowed float32 (NaN or inf from scores in the hundreds): subtract each row's maximum "
                    "score before exp; the softmax does not change.",
                    "exp が float32 であふれました（数百のスコアから NaN か inf）。exp の前に各行のスコアの最大値を"
                    "引きます。softmax の値は変わりません。",
                    matches=_overflowed),
            Mistake("the 1/√d is missing: divide the scores q·k by √d before the softmax.",
                    "1/√d がありません。softmax の前にスコア q·k を √d で割ります。",
                    answer=lambda q, k, v: _attention(q, k, v, scale=0.0)),
            Mistake("the scores are divided by d, 1/√d applied twice: divide them by √d once.",
                    "スコアを d で割っています（1/√d を 2 回掛けています）。√d で 1 回だけ割ります。",
                    answer=lambda q, k, v: _attention(q, k, v, scale=1.0)),
            Mistake("the softmax runs over the wrong axis: each query's weights over the keys (axis 1, along a row) "
                    "must sum to 1, not each key's over the queries.",
                    "softmax の軸が違います。和が 1 になるのは各クエリのキーにわたる重み（軸 1、行方向）です。"
                    "各キーのクエリにわたる重みではありません。",
                    answer=lambda q, k, v: _attention(q, k, v, axis=0)),
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
        mistakes=(
            Mistake("that is a fall like a power of d; from d = 64 to 256 it falls faster than any power, like "
                    "exp(-c√d): measure it.",
                    "d のべき乗のような減り方です。d = 64 から 256 までの減り方はどのべき乗よりも速く、"
                    "exp(-c√d) のようです。測ってみてください。",
                    matches=_like_a_power_of_d),
            Mistake("NaN: in some rows exp overflowed (scores of size √512 times |k|); subtract each row's maximum "
                    "score before exp.",
                    "NaN です。いくつかの行で exp があふれています（スコアの大きさは √512 × |k| 程度）。"
                    "exp の前に各行のスコアの最大値を引きます。",
                    matches=lambda value: math.isnan(value)),
        ),
    ),
    # 2.3 (derive): how many of the 75 parameters of SelfAttention(4, 6, 3) can each take any value without
    # changing any output: the key bias b_k (6), since q_i . b_k is the same for every key of row i.
    Exercise(
        id="2.3",
        kind="number",
        reference=lambda: 6,
        rtol=0.0,
        atol=0.0,
        mistakes=(
            Mistake("b_q is not free: the score q_i·k_j contains b_q·k_j, which differs from key to key; only a term "
                    "that is the same for every key of a row cancels in the softmax.",
                    "b_q は自由ではありません。スコア q_i·k_j には b_q·k_j が含まれ、キーごとに違います。"
                    "softmax で打ち消されるのは、行のどのキーでも同じ項だけです。",
                    answer=12),
            Mistake("some are free: adding the same number to every score of a row does not change its softmax; "
                    "look for parameters that only do that.",
                    "自由なパラメータはあります。行のすべてのスコアに同じ数を足しても softmax は変わりません。"
                    "それだけをするパラメータを探してください。",
                    answer=0),
            Mistake("b_v is not free: the weights of a row sum to 1, so b_v is added to every output.",
                    "b_v は自由ではありません。行の重みの和は 1 なので、b_v はすべての出力に足されます。",
                    answer=3),
        ),
    ),
    # 2.4 (explore): the 15-days process with all 15 days visible (length=15): its Bayes-optimal accuracy,
    # an upper bound for the 10-visible-days optimum, whose lower bound the chapter gives (0.371).
    Exercise(
        id="2.4",
        kind="number",
        reference=_fifteen_days_all_visible,
        rtol=0.0,
        atol=0.003,
        mistakes=(
            Mistake("that is the chapter's lower bound with 10 visible days; with all 15 days visible, compute the "
                    "optimum again (length=15).",
                    "それは見える日が 10 日のときの章の下限です。15 日すべてが見えるときの最適値を計算し直してください"
                    "（length=15）。",
                    answer=0.371),
        ),
    ),
)
