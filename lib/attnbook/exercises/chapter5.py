"""Exercises of chapter 5 (the Attention Free Transformer)."""

import math

import jax.numpy as jnp
import numpy as np

from attnbook import aft
from attnbook.exercises._core import Exercise, Mistake, normal, register


def _qkv(rng, T, d):
    return {name: normal(rng, T, d) for name in ("q", "k", "v")}


# Random inputs have the shapes of the chapter's small example (T = 8, d = 4, AFT-conv: 2 heads and a kernel
# of 5), for which the notebook has compiled the library's functions already: the checks stay fast.

def _simple_inputs(rng):
    return {**_qkv(rng, 8, 4), "causal": bool(rng.integers(2))}


def _conv_bias_inputs(rng):
    return {"kernel": normal(rng, 2, 5), "T": 8, "causal": bool(rng.integers(2))}


def _huge(rng, *shape):
    """Entries near -1000, 0 or +1000, as in the chapter: exp overflows float32 above about 88, float64 above 709."""
    return jnp.asarray(rng.choice([-1000.0, 0.0, 1000.0], size=shape) + rng.normal(size=shape), dtype=jnp.float32)


def _stable_inputs(rng):
    T, d = 8, 4
    return {"q": normal(rng, T, d), "k": _huge(rng, T, d), "v": normal(rng, T, d), "w": _huge(rng, T, T),
            "causal": bool(rng.integers(2))}


def _late_giant():
    """Causal, T = 3: the last key is 1000 larger than the others. Shifting every row by the maximum over
    the whole sequence leaves rows 0 and 1 with terms near exp(-1000), which is 0: 0 / 0."""
    k = jnp.asarray([[0.0, 1.0], [0.5, -1.0], [1000.0, 1000.0]], dtype=jnp.float32)
    v = jnp.asarray([[1.0, -1.0], [2.0, 0.5], [-3.0, 3.0]], dtype=jnp.float32)
    return {"q": jnp.zeros((3, 2), jnp.float32), "k": k, "v": v, "w": jnp.zeros((3, 3), jnp.float32), "causal": True}


def _giant_meets_negative_bias():
    """Not causal, T = 2: the largest key (1000) meets a bias of -1000 in row 0, whose largest exponent is
    then 0. Shifting by max K + max w = 1000 underflows both terms of row 0: 0 / 0."""
    k = jnp.asarray([[1000.0], [0.0]], dtype=jnp.float32)
    v = jnp.asarray([[1.0], [-1.0]], dtype=jnp.float32)
    w = jnp.asarray([[-1000.0, 0.0], [0.0, 0.0]], dtype=jnp.float32)
    return {"q": jnp.zeros((2, 1), jnp.float32), "k": k, "v": v, "w": w, "causal": False}


def _simple(q, k, v, causal, axis=0, gate=True, running=None):
    """AFT-simple in float64 NumPy, or one of its common mistakes: the softmax over the channels (axis=1), no
    sigmoid(Q) (gate=False), or the running average where it should not be or the reverse (running)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    running = causal if running is None else running
    e = np.exp(k - k.max(axis=axis, keepdims=True))
    if axis == 1:
        weights = e / e.sum(axis=1, keepdims=True)
        average = np.cumsum(weights * v, axis=0) if running else (weights * v).sum(axis=0, keepdims=True)
    elif running:
        average = np.cumsum(e * v, axis=0) / np.cumsum(e, axis=0)
    else:
        average = (e * v).sum(axis=0, keepdims=True) / e.sum(axis=0, keepdims=True)
    gated = average / (1 + np.exp(-q)) if gate else average
    return np.broadcast_to(gated, q.shape)


def _not_finite(inputs, expected, got):
    """Inf or NaN in the answer where the reference is finite: an exponential overflowed, or a 0 / 0."""
    got = np.asarray(got, dtype=np.float64)
    return got.shape == np.shape(expected) and not np.isfinite(got).all() and np.isfinite(np.asarray(expected)).all()


# The paper's best CIFAR-10 test score (Zhai et al. 2021, Table 2: AFT-local-256, 24 blocks), in bits/dim.
CIFAR10_BITS_PER_DIM = 2.74
CIFAR10_VALUES_PER_IMAGE = 32 * 32 * 3

register(
    # 5.1 (implement): AFT-simple from Eq. 5, the softmax over time per channel, causal (a running
    # average) or not (one average for every t).
    Exercise(
        id="5.1",
        kind="function",
        reference=lambda q, k, v, causal: aft.aft_simple(q, k, v, causal=causal),
        inputs=_simple_inputs,
        cases=4,
        edge_cases=tuple({**_qkv(np.random.default_rng(51), 1, 3), "causal": c} for c in (False, True)),
        mistakes=(
            Mistake("the softmax runs over the channels: AFT-simple's softmax of K runs over time, the T positions "
                    "(axis 0), separately for each channel.",
                    "softmax がチャネルの軸にわたっています。AFT-simple の K の softmax は、チャネルごとに時間、"
                    "つまり T 個の位置にわたります（軸 0）。",
                    answer=lambda q, k, v, causal: _simple(q, k, v, causal, axis=1)),
            Mistake("sigmoid(Q) is missing: the average of the values is multiplied by sigmoid(Q_t), element by element.",
                    "sigmoid(Q) がありません。値の平均に要素ごとに sigmoid(Q_t) を掛けます。",
                    answer=lambda q, k, v, causal: _simple(q, k, v, causal, gate=False)),
            Mistake("causal is ignored: with causal=True output t averages over t' <= t only (a running average), "
                    "not over every position.",
                    "causal が無視されています。causal=True なら出力 t は t' <= t だけの平均（累積平均）で、"
                    "すべての位置の平均ではありません。",
                    answer=lambda q, k, v, causal: _simple(q, k, v, causal, running=False)),
        ),
    ),
    # 5.2 (derive): the (heads, T, T) banded Toeplitz bias that makes AFT-full equal AFT-conv, from the
    # kernel layout of aft_conv (causal: kernel[i, t - t']; otherwise centred, odd s); 0 outside.
    Exercise(
        id="5.2",
        kind="function",
        reference=lambda kernel, T, causal: aft.conv_bias_matrix(kernel, T, causal=causal),
        inputs=_conv_bias_inputs,
        cases=4,
        edge_cases=(
            {"kernel": jnp.asarray([[1.0, 2.0, 3.0]], jnp.float32), "T": 1, "causal": True},
            {"kernel": jnp.asarray([[1.0, 2.0, 3.0]], jnp.float32), "T": 4, "causal": True},
            {"kernel": jnp.asarray([[1.0, 2.0, 3.0]], jnp.float32), "T": 4, "causal": False},
        ),
        mistakes=(
            Mistake("the causal band is above the diagonal: output t sees t' <= t, so w[i, t, t'] = kernel[i, t - t'] "
                    "below it, not kernel[i, t' - t].",
                    "因果的な帯が対角より上にあります。出力 t が見るのは t' <= t なので、対角の下で "
                    "w[i, t, t'] = kernel[i, t - t'] です。kernel[i, t' - t] ではありません。",
                    answer=lambda kernel, T, causal: (np.swapaxes(np.asarray(aft.conv_bias_matrix(kernel, T, causal=causal)), 1, 2)
                                                      if causal else aft.conv_bias_matrix(kernel, T, causal=causal))),
            Mistake("the kernel runs the wrong way along the band: kernel[i, 0] belongs to the offset t - t' = 0 "
                    "(causal) or to the leftmost key of the window (not causal).",
                    "帯に沿ったカーネルの向きが逆です。kernel[i, 0] が対応するのは、causal ならずれ t - t' = 0、"
                    "そうでなければ窓の最も左のキーです。",
                    answer=lambda kernel, T, causal: aft.conv_bias_matrix(jnp.asarray(kernel)[:, ::-1], T, causal=causal)),
        ),
    ),
    # 5.3 (implement): AFT-full, vectorised, stable for keys and biases near +-1000 (each row and
    # channel shifted by its own largest visible exponent, Eq. aft-shift).
    Exercise(
        id="5.3",
        kind="function",
        reference=lambda q, k, v, w, causal: aft.aft_full(q, k, v, w, causal=causal),
        inputs=_stable_inputs,
        cases=4,
        edge_cases=(_late_giant(), _giant_meets_negative_bias()),
        atol=1e-4,
        mistakes=(
            Mistake("float32 overflowed or underflowed to 0/0 (inf or NaN where the answer is finite): shift each "
                    "output t and channel c by its own largest visible exponent, the maximum over t' of "
                    "K[t', c] + w[t, t'], not by a maximum over the whole sequence or by max K + max w.",
                    "float32 があふれたか、アンダーフローして 0/0 になりました（正解が有限のところで inf か NaN）。"
                    "出力 t とチャネル c ごとに、見える指数の最大値、つまり t' にわたる K[t', c] + w[t, t'] の最大値で"
                    "ずらします。系列全体の最大値や max K + max w ではずらしません。",
                    matches=_not_finite),
            Mistake("w is transposed: w[t, t'] is the bias of key t' for output t.",
                    "w が転置されています。w[t, t'] は出力 t に対するキー t' のバイアスです。",
                    answer=lambda q, k, v, w, causal: aft.aft_full(q, k, v, jnp.asarray(w).T, causal=causal)),
            Mistake("causal is ignored: with causal=True output t sums over t' <= t only.",
                    "causal が無視されています。causal=True なら出力 t は t' <= t だけの和です。",
                    answer=lambda q, k, v, w, causal: aft.aft_full(q, k, v, w, causal=False)),
        ),
    ),
    # 5.4 (derive): the paper's 2.74 bits/dim on CIFAR-10 as a negative log-likelihood in nats per
    # image (3072 values): bits/dim x 3072 x ln 2.
    Exercise(
        id="5.4",
        kind="number",
        reference=lambda: CIFAR10_BITS_PER_DIM * CIFAR10_VALUES_PER_IMAGE * math.log(2),
        rtol=1e-3,
        atol=0.0,
        mistakes=(
            Mistake("you divided by ln 2, which turns nats into bits; bits into nats is a multiplication by ln 2.",
                    "ln 2 で割っています。それはナットをビットにする変換です。ビットをナットにするには ln 2 を掛けます。",
                    answer=lambda: CIFAR10_BITS_PER_DIM * CIFAR10_VALUES_PER_IMAGE / math.log(2)),
            Mistake("those are still bits per image: 1 bit is ln 2 nats.",
                    "それはまだ画像あたりのビット数です。1 ビットは ln 2 ナットです。",
                    answer=lambda: CIFAR10_BITS_PER_DIM * CIFAR10_VALUES_PER_IMAGE),
            Mistake("those are nats per dimension: an image has 32 × 32 × 3 values.",
                    "それは次元あたりのナット数です。画像 1 枚には 32 × 32 × 3 個の値があります。",
                    answer=lambda: CIFAR10_BITS_PER_DIM * math.log(2)),
        ),
    ),
    # 5.5 (explore): the per-position baseline of the digits experiment without its add-one smoothing:
    # (A) a little below 2.44, (B) a little above, (C) infinite. Some (position, value) pairs of the test
    # images never occur in the training images: probability 0, -log2 0 = inf (checked in the tests).
    Exercise(
        id="5.5",
        kind="choice",
        reference=lambda: "C",
        choices=("A", "B", "C"),
        mistakes=(
            Mistake("smoothing does more than waste probability: it also gives some to values that no training image "
                    "shows at that position. Look for such values in the test images.",
                    "スムージングは確率を無駄にするだけではありません。その位置でどの訓練画像にも現れない値にも確率を"
                    "与えます。そういう値がテスト画像にないか探してください。",
                    matches=lambda choice: str(choice).strip().upper() in ("A", "B")),
        ),
    ),
)
