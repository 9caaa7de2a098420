"""Exercises of chapter 3 (masking)."""

import numpy as np

from attnbook.data import MARKOV_TRANSITION
from attnbook.exercises._core import Exercise, register
from attnbook.masking import causal_mask


def _left_padded_causal_mask(lengths, T):
    """Sequence b fills the last lengths[b] of T positions; True where j <= i and both are real tokens.

    Written in NumPy (the library's ``padding_mask`` compiles its value check for every new shape,
    a second or two per check); tests/test_exercises_chapter3.py checks it against
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
    found over 3000 random models is 7e-3; tests/test_exercises_chapter3.py checks the check's cases).
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
    """The reference of 3.4, read from the masks (tests/test_exercises_chapter3.py checks it against
    the Jacobian of a JAX copy of the model)."""
    return f.dependence()


def _sun_after_sun(tau=0.5):
    """P(☀ after ☀) when sampling at temperature tau from logits log P (row ☀ of the Markov chain)."""
    p = MARKOV_TRANSITION[2] ** (1 / tau)
    return float(p[2] / p.sum())


register(
    # 3.1 (implement): the causal mask, True where query i may attend to key j <= i.
    Exercise(
        id="3.1",
        kind="function",
        reference=lambda T: causal_mask(T),
        inputs=lambda rng: {"T": int(rng.integers(2, 7))},
        edge_cases=({"T": 1},),
    ),
    # 3.2 (implement): the causal mask of a left-padded batch, as the sampler of the chapter feeds
    # the model: real tokens at the end, the padding first, (B, T, T).
    Exercise(
        id="3.2",
        kind="function",
        reference=_left_padded_causal_mask,
        inputs=_lengths,
        edge_cases=({"lengths": np.array([1]), "T": 1}, {"lengths": np.array([0, 3, 2]), "T": 3}),
    ),
    # 3.3 (predict, choice): the -1e9 fill in bfloat16, on a fully masked row: float32's range, so
    # -1e9 stays finite and the row gets uniform weights (float16 overflows to -inf: NaN).
    Exercise(
        id="3.3",
        kind="choice",
        reference=lambda: "uniform",
        choices=("nan", "uniform", "zero"),
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
    ),
    # 3.5 (predict, number): P(☀ -> ☀) at temperature 0.5 for a model that learned the chain
    # exactly: P[☀, ☀]^2 / sum_v P[☀, v]^2 = 0.25 / 0.38.
    Exercise(
        id="3.5",
        kind="number",
        reference=_sun_after_sun,
        rtol=0,
        atol=1e-3,
    ),
)
