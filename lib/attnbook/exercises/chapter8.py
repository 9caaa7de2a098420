"""Exercises of chapter 8 (positions, measured)."""

import numpy as np

from attnbook import positional
from attnbook.exercises._core import Exercise, register


def t5_bucket(distance):
    """T5's causal bucket (32 buckets, max_distance 128) of each offset n = i - j >= 0."""
    return positional.relative_position_bucket(-np.asarray(distance), bidirectional=False)


def untrained_fraction(T, L):
    """Fraction of the causal (query i, key j <= i) pairs of a T-token sequence whose T5 bucket no pair of
    an L-token sequence reaches (so that training at length L never gave it a gradient)."""
    trained = set(t5_bucket(np.arange(L)).tolist())
    i, j = np.tril_indices(T)
    return float(np.mean([b not in trained for b in t5_bucket(i - j).tolist()]))


def _alibi_inputs(rng):
    return {"T": int(rng.integers(2, 7)), "heads": int(rng.choice([1, 2, 4, 8]))}


def _untrained_inputs(rng):
    L = int(rng.integers(1, 41))
    return {"T": int(rng.integers(L, 8 * L + 1)), "L": L}


register(
    # 8.1 (implement): ALiBi's causal bias m_h (j - i), -inf above the diagonal, slopes 2^(-8(h+1)/H).
    Exercise(
        id="8.1",
        kind="function",
        reference=lambda T, heads: positional.alibi_causal_bias(T, heads),
        inputs=_alibi_inputs,
        edge_cases=({"T": 1, "heads": 1}, {"T": 3, "heads": 4}),
    ),
    # 8.2 (implement): T5's relative bucket of a distance (causal, 32 buckets, max_distance 128).
    Exercise(
        id="8.2",
        kind="function",
        reference=t5_bucket,
        inputs=lambda rng: {"distance": rng.integers(0, 300, size=6)},
        edge_cases=({"distance": np.arange(0, 18)},
                    {"distance": np.array([31, 32, 34, 35, 100, 127, 128, 129, 1000])}),
        rtol=0.0,
        atol=0.0,
    ),
    # 8.3 (derive): the fraction of a T-token sequence's causal pairs in T5 buckets never trained at L.
    Exercise(
        id="8.3",
        kind="function",
        reference=untrained_fraction,
        inputs=_untrained_inputs,
        edge_cases=({"T": 32, "L": 32}, {"T": 256, "L": 32}, {"T": 1, "L": 1}),
    ),
    # 8.4 (predict): at 4L, beyond L, is T5's bias or NoPE lower? (From the stored results, seeds 0-4: T5,
    # 1.48 against 1.54, every seed; tests/test_exercises_chapter8.py reads them again.)
    Exercise(
        id="8.4",
        kind="choice",
        reference=lambda: "t5",
        choices=("t5", "nope"),
    ),
    # 8.5 (explore): the first position >= L where the sinusoidal model's mean stored loss exceeds ln 8.
    Exercise(
        id="8.5",
        kind="number",
        reference=lambda: 42,
        rtol=0.0,
        atol=0.0,
    ),
)
