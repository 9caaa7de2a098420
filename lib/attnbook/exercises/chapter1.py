"""Exercises of chapter 1 (positional encoding)."""

import math

import jax.numpy as jnp
import numpy as np

from attnbook import positional
from attnbook.exercises._core import Exercise, Mistake, normal, register


def _alibi_self_weight(length: int = 1000, heads: int = 4) -> float:
    """Weight of the last query on itself in ALiBi's steepest head, when every score is equal.

    Under the causal mask the last query sees every key, so its weights are the softmax of its row
    of the bias alone (the weights of ``scaled_dot_product_attention`` with equal queries and keys).
    """
    row = np.asarray(positional.alibi_bias(length, heads)[0, -1], dtype=np.float64)  # head 0: steepest
    weights = np.exp(row - row.max())
    return float(weights[-1] / weights.sum())


def _sinusoid(length, d_model, base=10000.0, shift=0, column_index=False, swapped=False, halves=False):
    """1.1 in float64 NumPy, or one of its common mistakes: the sources' exponent 2(i + 1)/d (shift=1), the column
    index 2i in place of i (column_index: exponent 4i/d), the sequence length as base, sin and cos swapped, or the
    sines in the first half and the cosines in the second (halves)."""
    i = np.arange(d_model // 2) + shift
    exponent = (4 * i if column_index else 2 * i) / d_model
    angles = np.arange(length)[:, None] / base ** exponent
    first, second = (np.cos(angles), np.sin(angles)) if swapped else (np.sin(angles), np.cos(angles))
    pe = np.empty((length, d_model))
    if halves:
        pe[:, : d_model // 2], pe[:, d_model // 2:] = first, second
    else:
        pe[:, 0::2], pe[:, 1::2] = first, second
    return pe


def _rope_variant(x, sign=1.0, halves=False):
    """1.3's common mistakes: the rotation the other way (sign=-1), or features i and i + d/2 paired (GPT-NeoX)."""
    x = np.asarray(x, dtype=np.float64)
    length, d = x.shape
    angles = sign * np.arange(length)[:, None] * positional.frequencies(d)[None, :]
    if halves:
        first, second = x[:, : d // 2], x[:, d // 2:]
        return np.concatenate([first * np.cos(angles) - second * np.sin(angles),
                               first * np.sin(angles) + second * np.cos(angles)], axis=1)
    even, odd = x[:, 0::2], x[:, 1::2]
    return np.stack([even * np.cos(angles) - odd * np.sin(angles),
                     even * np.sin(angles) + odd * np.cos(angles)], axis=-1).reshape(length, d)


register(
    # 1.1 (implement): the sinusoidal encoding, PE[p, 2i] = sin(p w_i), PE[p, 2i+1] = cos(p w_i),
    # w_i = 10000 ** (-2i / d_model), without positional.sinusoidal_encoding.
    Exercise(
        id="1.1",
        kind="function",
        reference=lambda length, d_model: positional.sinusoidal_encoding(length, d_model),
        inputs=lambda rng: {"length": int(rng.integers(2, 9)), "d_model": int(2 * rng.integers(1, 4))},
        edge_cases=({"length": 1, "d_model": 2}, {"length": 4, "d_model": 6}),
        mistakes=(
            Mistake("the exponent starts at 2/d (the sources' formula): pair i = 0 must have ω_0 = 1, the exponent "
                    "-2i/d.",
                    "指数が 2/d から始まっています（元記事の式）。ペア i = 0 は ω_0 = 1 で、指数は -2i/d です。",
                    answer=lambda length, d_model: _sinusoid(length, d_model, shift=1)),
            Mistake("the exponent uses the column index 2i where the formula has the pair index i: ω_i = "
                    "10000^(-2i/d) for the columns 2i and 2i + 1.",
                    "指数にペアの番号 i ではなく列の番号 2i を使っています。列 2i と 2i + 1 の角周波数は "
                    "ω_i = 10000^(-2i/d) です。",
                    answer=lambda length, d_model: _sinusoid(length, d_model, column_index=True)),
            Mistake("the base is the sequence length (the sources' error): it is 10000.",
                    "底が系列長になっています（元記事の誤り）。底は 10000 です。",
                    answer=lambda length, d_model: _sinusoid(length, d_model, base=float(length))),
            Mistake("sin and cos are swapped: the even columns 2i hold sin, the odd columns 2i + 1 cos.",
                    "sin と cos が入れ替わっています。偶数列 2i が sin、奇数列 2i + 1 が cos です。",
                    answer=lambda length, d_model: _sinusoid(length, d_model, swapped=True)),
            Mistake("the sines fill the first half and the cosines the second; the formula interleaves them, column 2i "
                    "sin and column 2i + 1 cos.",
                    "sin を前半、cos を後半に並べています。式では交互に並び、列 2i が sin、列 2i + 1 が cos です。",
                    answer=lambda length, d_model: _sinusoid(length, d_model, halves=True)),
        ),
    ),
    # 1.2 (derive): the matrix W with PE[p] @ W = PE[p + offset] for every p (rows are tokens), which as a
    # query projection makes the query of position p score highest against the key of position p + offset.
    Exercise(
        id="1.2",
        kind="function",
        reference=lambda offset, d_model: positional.relative_rotation(offset, d_model),
        inputs=lambda rng: {"offset": int(rng.integers(-5, 6)), "d_model": int(2 * rng.integers(1, 4))},
        edge_cases=({"offset": 0, "d_model": 2}, {"offset": 1, "d_model": 2}, {"offset": -3, "d_model": 4}),
        mistakes=(
            Mistake("your W shifts by -offset: it is the transpose of the answer. The row (sin a, cos a) times W must "
                    "be (sin(a + offset w), cos(a + offset w)): work out both entries from the addition formulas.",
                    "W が -offset だけずらしています（正解の転置です）。行 (sin a, cos a) に W を掛けた結果が "
                    "(sin(a + offset w), cos(a + offset w)) になるように、加法定理から 2 つの成分を求めてください。",
                    answer=lambda offset, d_model: positional.relative_rotation(-offset, d_model)),
        ),
    ),
    # 1.3 (implement): RoPE on a (T, d) array, adjacent pairs (2i, 2i+1) of row p rotated by p * w_i.
    Exercise(
        id="1.3",
        kind="function",
        reference=lambda x: positional.rope(x),
        inputs=lambda rng: {"x": normal(rng, int(rng.integers(2, 9)), int(2 * rng.integers(1, 4)))},
        edge_cases=({"x": jnp.ones((1, 4), dtype=jnp.float32)},
                    {"x": jnp.asarray([[1.0, 0.0, 1.0, 0.0]] * 3, dtype=jnp.float32)}),
        mistakes=(
            Mistake("features i and i + d/2 are paired (the GPT-NeoX and Llama convention); this exercise pairs "
                    "adjacent features (2i, 2i + 1), as the RoPE paper does.",
                    "特徴量 i と i + d/2 を組にしています（GPT-NeoX や Llama の流儀）。この演習では RoPE の論文と同じく、"
                    "隣り合う特徴量 (2i, 2i + 1) を組にします。",
                    answer=lambda x: _rope_variant(x, halves=True)),
            Mistake("the rotation goes the other way: (x_2i, x_2i+1) becomes (x_2i cos θ - x_2i+1 sin θ, "
                    "x_2i sin θ + x_2i+1 cos θ) with θ = p ω_i.",
                    "回転の向きが逆です。θ = p ω_i として、(x_2i, x_2i+1) は "
                    "(x_2i cos θ - x_2i+1 sin θ, x_2i sin θ + x_2i+1 cos θ) になります。",
                    answer=lambda x: _rope_variant(x, sign=-1.0)),
        ),
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
        mistakes=(
            Mistake("the weight does not shrink like 1/T: ALiBi's penalty grows with the distance, so the far keys "
                    "get almost nothing whatever T is.",
                    "重みは 1/T のようには縮みません。ALiBi の罰則は距離とともに大きくなるので、T によらず遠いキーには"
                    "ほとんど重みが割り当てられません。",
                    matches=lambda value: any(math.isclose(value, guess, rel_tol=0.1)
                                              for guess in (1 / 1000, 0.225 * 16 / 1000))),
            Mistake("that is the weight at T = 16, read from the figure; compute it at T = 1000.",
                    "それは図から読んだ T = 16 での重みです。T = 1000 で計算してください。",
                    answer=0.225, rtol=1e-3),
        ),
    ),
)
