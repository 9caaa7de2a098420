"""Exercises of chapter 3 (masking)."""

import numpy as np

from attnbook.data import MARKOV_TRANSITION
from attnbook.exercises._core import Exercise, Mistake, register
from attnbook.masking import causal_mask


def _left_padded_causal_mask(lengths, T):
    """Sequence b fills the last lengths[b] of T positions; True where j <= i and both are real tokens.

    Written in NumPy (the library's ``padding_mask`` compiles its value check for every new shape,
    a second or two per check); tests/book/test_exercises_chapter3.py checks it against
    ``padding_mask(lengths, T)[:, ::-1, ::-1] & causal_mask(T)``.
    """
    i = np.arange(T)
    real = i[None, :] >= T - np.asarray(lengths)[:, None]  # (B, T): the last lengths[b] positions
    return real[:, :, None] & real[:, None, :] & (i[None, :] <= i[:, None])


def _lengths(rng):
    T = int(rng.integers(2, 7))
    return {"lengths": rng.integers(0, T + 1, size=int(rng.integers(1, 4))), "T": T}


class AttentionStack:
    """A stack of single-head self-attention layers, ``(T, d) -> (T, d)``, each with its own mask.

    The models of exercise 3.4, written in NumPy (float64) so that they run in microseconds and can
    only be called, not differentiated: a black box to test for causality. Every mask used here
    lets each query see itself, so no row is fully masked. The ``repr`` names the masks, so that a
    failing case says which model it was.

    The query and key weights are drawn small (``QK_SCALE``), so that no softmax saturates: with
    weights of scale 1, one random model in twenty had a dependence that moved the output by less
    than 1e-6 when an input row moved by 1 (a key weighted e^-30, say), and correct perturbation
    tests failed. At this scale
    every dependence the masks allow moves some output by more than ``MIN_CHANGE`` (the smallest
    found over 3000 random models is 7e-3; tests/book/test_exercises_chapter3.py checks the check's cases).
    """

    QK_SCALE = 0.3
    MIN_CHANGE = 1e-3

    def __init__(self, name, masks, rng, d=3):
        self.name, self.masks = name, masks
        self.weights = [[self.QK_SCALE * rng.normal(size=(d, d)), self.QK_SCALE * rng.normal(size=(d, d)),
                         rng.normal(size=(d, d))] for _ in masks]

    def __call__(self, x):
        x = np.asarray(x, dtype=np.float64)
        for (w_q, w_k, w_v), mask in zip(self.weights, self.masks):
            scores = (x @ w_q) @ (x @ w_k).T / np.sqrt(x.shape[1])
            scores = np.where(mask, scores, -np.inf)  # exp(-inf) = 0: a hidden key enters no sum
            weights = np.exp(scores - scores.max(axis=1, keepdims=True))
            x = (weights / weights.sum(axis=1, keepdims=True)) @ (x @ w_v)
        return x

    def dependence(self):
        """[i, j]: output row i depends on input row j. One layer: on the keys it sees and on itself
        (its query); a stack: the boolean product of its layers' dependences."""
        T = self.masks[0].shape[0]
        total = np.eye(T, dtype=bool)
        for mask in self.masks:
            total = ((mask | np.eye(T, dtype=bool)).astype(int) @ total.astype(int)) > 0
        return total

    def __repr__(self):
        return f"<{self.name}>"


def _window(T):
    i = np.arange(T)
    return (i[None, :] <= i[:, None]) & (i[None, :] >= i[:, None] - 1)  # key j in {i - 1, i}


_MODELS = {
    "causal": lambda T: ["1 layer, causal mask", [np.tri(T, dtype=bool)]],
    "reversed": lambda T: ["1 layer, the sources' reversed mask", [np.tri(T, dtype=bool).T]],
    "windows": lambda T: ["2 layers, each with the window mask j in {i-1, i}", [_window(T), _window(T)]],
    "none": lambda T: ["1 layer, no mask", [np.ones((T, T), dtype=bool)]],
}


def _model_and_input(kind, T, seed):
    rng = np.random.default_rng(seed)
    name, masks = _MODELS[kind](T)
    return {"f": AttentionStack(name, masks, rng), "x": rng.normal(size=(T, 3))}


def _dependence(f, x):
    """The reference of 3.4, read from the masks (tests/book/test_exercises_chapter3.py checks it against
    the Jacobian of a JAX copy of the model)."""
    return f.dependence()


def _sun_after_sun(tau=0.5):
    """P(☀ after ☀) when sampling at temperature tau from logits log P (row ☀ of the Markov chain)."""
    p = MARKOV_TRANSITION[2] ** (1 / tau)
    return float(p[2] / p.sum())


def _tri(T, k):
    """True where key j <= i + k (k = 0: the causal mask)."""
    return np.tri(T, k=k, dtype=bool)


def _padded_masks(lengths, T, left=True, keys=True, causal=True):
    """3.2's mask and its common mistakes: the padding on the right, the padded keys left visible, no causal part.
    (Under the causal mask a padding query on the left sees only padded keys: masking the keys masks its row.)"""
    i = np.arange(T)
    lengths = np.asarray(lengths)[:, None]
    real = i[None, :] >= T - lengths if left else i[None, :] < lengths
    mask = real[:, :, None] & (real[:, None, :] if keys else True)
    return mask & (i[None, :] <= i[:, None]) if causal else mask


def _sun_after_sun_tau_power(tau=0.5):
    """P ** tau instead of P ** (1 / tau): the logits multiplied by tau."""
    p = MARKOV_TRANSITION[2] ** tau
    return float(p[2] / p.sum())


register(
    # 3.1 (implement): the causal mask, True where query i may attend to key j <= i.
    Exercise(
        id="3.1",
        kind="function",
        reference=lambda T: causal_mask(T),
        inputs=lambda rng: {"T": int(rng.integers(2, 7))},
        edge_cases=({"T": 1},),
        mistakes=(
            Mistake("a token must see itself: your mask hides the diagonal (j < i), where the causal mask has j <= i.",
                    "トークンは自分自身を見られなければなりません。対角成分が False です（j < i）。因果マスクは j <= i です。",
                    answer=lambda T: _tri(T, -1)),
            Mistake("your mask is transposed: row i is the query, and it may attend to the keys j <= i, the past, "
                    "not to j >= i.",
                    "マスクが転置されています。行 i がクエリで、見てよいのは過去のキー j <= i です。j >= i ではありません。",
                    answer=lambda T: _tri(T, 0).T),
            Mistake("off by one: query i also sees key i + 1, one token of the future (j <= i + 1 instead of j <= i).",
                    "1 つずれています。クエリ i が未来のキー i + 1 まで見ています（j <= i ではなく j <= i + 1）。",
                    answer=lambda T: _tri(T, 1)),
        ),
    ),
    # 3.2 (implement): the causal mask of a left-padded batch, as the sampler of the chapter feeds
    # the model: real tokens at the end, the padding first, (B, T, T).
    Exercise(
        id="3.2",
        kind="function",
        reference=_left_padded_causal_mask,
        inputs=_lengths,
        edge_cases=({"lengths": np.array([1]), "T": 1}, {"lengths": np.array([0, 3, 2]), "T": 3}),
        mistakes=(
            Mistake("the padding is on the left: the n real tokens are the last n of the T positions, not the first n.",
                    "パディングは左側です。n 個の実トークンは T 個の位置の先頭ではなく、末尾の n 個です。",
                    answer=lambda lengths, T: _padded_masks(lengths, T, left=False)),
            Mistake("a real token must not attend to the padding before it: mask the padded keys (columns), not "
                    "only the padded queries (rows).",
                    "実トークンは、その前にあるパディングを見てはいけません。パディングのクエリ（行）だけでなく、"
                    "パディングのキー（列）もマスクします。",
                    answer=lambda lengths, T: _padded_masks(lengths, T, keys=False)),
            Mistake("the causal part is missing: combine the padding with j <= i.",
                    "因果マスクの部分がありません。パディングのマスクと j <= i を組み合わせます。",
                    answer=lambda lengths, T: _padded_masks(lengths, T, causal=False)),
            Mistake("your masks are transposed: entry [b, i, j] is query i and key j, and query i sees the keys j <= i.",
                    "マスクが転置されています。要素 [b, i, j] はクエリ i とキー j で、クエリ i が見るのはキー j <= i です。",
                    answer=lambda lengths, T: np.swapaxes(_left_padded_causal_mask(lengths, T), 1, 2)),
        ),
    ),
    # 3.3 (predict, choice): the -1e9 fill in bfloat16, on a fully masked row: float32's range, so
    # -1e9 stays finite and the row gets uniform weights (float16 overflows to -inf: NaN).
    Exercise(
        id="3.3",
        kind="choice",
        reference=lambda: "uniform",
        choices=("nan", "uniform", "zero"),
        mistakes=(
            Mistake("bfloat16 is 16 bits like float16, but it keeps float32's 8 exponent bits: -1e9 does not overflow "
                    "to -inf there, so no inf - inf and no NaN.",
                    "bfloat16 は float16 と同じ 16 ビットですが、指数部は float32 と同じ 8 ビットです。"
                    "-1e9 は -inf にならないので、inf - inf も NaN も生じません。",
                    answer="nan"),
            Mistake("zero weights are the library's convention for a fully masked row, which takes an explicit test; "
                    "a plain softmax of a row of equal finite scores does not give them.",
                    "重みがゼロになるのは、全部マスクされた行を明示的に扱うライブラリの約束です。"
                    "等しい有限のスコアの行をそのまま softmax しても、そうはなりません。",
                    answer="zero"),
        ),
    ),
    # 3.4 (implement): the perturbation test of causality: which input rows each output row of a
    # black-box model (NumPy attention layers) depends on, (T, T) bool; the reference reads it from
    # the masks, and the tests check that against the Jacobian.
    Exercise(
        id="3.4",
        kind="function",
        reference=_dependence,
        inputs=lambda rng: _model_and_input(str(rng.choice(list(_MODELS))), int(rng.integers(2, 7)),
                                            int(rng.integers(1000))),
        edge_cases=tuple(_model_and_input(kind, T, seed) for kind, T, seed in
                         [("causal", 1, 0), ("reversed", 4, 1), ("windows", 5, 2)]),
        mistakes=(
            Mistake("your matrix is transposed: entry [i, j] says whether output row i changes when input row j does.",
                    "行列が転置されています。要素 [i, j] は、入力の行 j を変えたときに出力の行 i が変わるかどうかです。",
                    answer=lambda f, x: f.dependence().T),
            Mistake("a row depends on itself too: output row i changes with input row i, its own query.",
                    "行は自分自身にも依存します。出力の行 i は、自分のクエリである入力の行 i でも変わります。",
                    answer=lambda f, x: f.dependence() & ~np.eye(len(x), dtype=bool)),
            Mistake("no output row changed at all: your nudge is too small for your tolerance (moved by 1, a row "
                    "changes the rows that depend on it by more than 1e-3).",
                    "どの出力行も変化していません。入力を動かす量が許容誤差に比べて小さすぎます"
                    "（行を 1 動かすと、それに依存する行は 1e-3 より大きく変わります）。",
                    answer=lambda f, x: np.zeros((len(x), len(x)), dtype=bool)),
        ),
    ),
    # 3.5 (predict, number): P(☀ -> ☀) at temperature 0.5 for a model that learned the chain
    # exactly: P[☀, ☀]^2 / sum_v P[☀, v]^2 = 0.25 / 0.38.
    Exercise(
        id="3.5",
        kind="number",
        reference=_sun_after_sun,
        rtol=0,
        atol=1e-3,
        mistakes=(
            Mistake("you raised the probabilities to the power τ; dividing the logits by τ raises them to the power 1/τ.",
                    "確率を τ 乗しています。ロジットを τ で割ると、確率は 1/τ 乗になります。",
                    answer=_sun_after_sun_tau_power),
            Mistake("that is P(☀ | ☀) at temperature 1, the chain itself; at τ = 0.5 the logits are divided by τ first.",
                    "それは温度 1 での P(☀ | ☀)、つまり連鎖そのものです。τ = 0.5 では先にロジットを τ で割ります。",
                    answer=0.5),
        ),
    ),
)
