"""Chapter 6's exercises reject a deliberately wrong answer each (see tests/book/test_exercises.py); the merge of
exercise 6.1 is the library's and gives attention over the concatenated keys; the stored numbers behind 6.3
and the choice of 6.4 agree with the benchmark's files and with XLA's memory analysis."""

import csv
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from attnbook import cost, exercises
from attnbook.attention import merge_softmax_sums, scaled_dot_product_attention
from attnbook.exercises import chapter6
from test_exercises import mistakes_named, wrong_answers_rejected

ROOT = Path(__file__).resolve().parents[2]


def merge_without_rescaling_a(m1, l1, a1, m2, l2, a2):
    """Rescales the sums of exponentials but forgets the weighted sums of values."""
    m = np.maximum(m1, m2)
    shift = np.where(np.isfinite(m), m, 0.0)
    s1, s2 = np.exp(m1 - shift), np.exp(m2 - shift)
    return m, l1 * s1 + l2 * s2, a1 + a2


WRONG = {
    "6.1": merge_without_rescaling_a,
    "6.2": lambda T, heads, bytes_per_number: T * T * heads * bytes_per_number / 1e6,  # MB, not MiB
    "6.3": 0.3,  # the slope fitted over 2048-131072, not the local one between the two largest lengths
    "6.4": "C",  # "the memory grows with d like the time": it does not
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=6)


def test_merge_that_makes_nan_for_empty_chunks_is_rejected():
    def naive(m1, l1, a1, m2, l2, a2):
        m = np.maximum(m1, m2)
        s1, s2 = np.exp(m1 - m), np.exp(m2 - m)  # -inf - (-inf) = NaN when both chunks are empty
        return m, l1 * s1 + l2 * s2, a1 * s1[:, None] + a2 * s2[:, None]

    with np.errstate(invalid="ignore"):  # the NaN is the point
        assert not exercises.result("6.1", naive, lang="en").passed
    assert exercises.result("6.1", lambda **p: list(chapter6.merge(**p)), lang="en").passed  # a list is fine


def test_merge_is_the_library_merge_and_gives_attention_over_all_keys():
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(5, 3)), rng.normal(size=(7, 3)), rng.normal(size=(7, 2))
    first, second = chapter6._summary(q, k[:4], v[:4], np.ones((5, 4), bool)), \
        chapter6._summary(q, k[4:], v[4:], np.ones((5, 3), bool))
    m, l, a = chapter6.merge(*first, *second)
    for ours, library in zip((m, l, a), merge_softmax_sums(tuple(map(jnp.asarray, first)), tuple(map(jnp.asarray, second)))):
        np.testing.assert_allclose(ours, library, rtol=1e-5, atol=1e-6)
    full = scaled_dot_product_attention(jnp.asarray(q, jnp.float32), jnp.asarray(k, jnp.float32),
                                        jnp.asarray(v, jnp.float32))[0]
    np.testing.assert_allclose(a / l[:, None], full, rtol=1e-5, atol=1e-6)


def test_stored_bytes_are_those_of_the_benchmark():
    with open(ROOT / "lib" / "attnbook" / "experiments" / "results" / "attention_cost.csv", newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if (r["method"], r["mode"]) == ("chunked", "forward")]
    stored = {int(r["T"]): int(r["temp_bytes"]) for r in rows if int(r["T"]) in chapter6.CHUNKED_FORWARD_TEMP_BYTES}
    assert stored == chapter6.CHUNKED_FORWARD_TEMP_BYTES
    assert math.isclose(exercises.get("6.3").reference(), 0.716, abs_tol=0.001)


def test_full_attention_memory_hardly_depends_on_d():
    full = lambda q, k, v: scaled_dot_product_attention(q, k, v)[0]
    mib = {d: cost.temporary_bytes(full, *[jax.ShapeDtypeStruct((4096, d), jnp.float32)] * 3) / 2**20 for d in (64, 128)}
    assert 0.9 < mib[128] / mib[64] < 1.1, mib


def merge_with_nan(m1, l1, a1, m2, l2, a2):
    m = np.maximum(m1, m2)
    s1, s2 = np.exp(m1 - m), np.exp(m2 - m)  # -inf - (-inf) = NaN when both chunks are empty
    return m, l1 * s1 + l2 * s2, a1 * s1[:, None] + a2 * s2[:, None]


def merge_inverted(m1, l1, a1, m2, l2, a2):
    m = np.maximum(m1, m2)
    with np.errstate(over="ignore", invalid="ignore"):
        s1 = np.where(np.isfinite(m1), np.exp(m - m1), 0.0)
        s2 = np.where(np.isfinite(m2), np.exp(m - m2), 0.0)
    return m, l1 * s1 + l2 * s2, a1 * s1[:, None] + a2 * s2[:, None]


def test_common_mistakes_are_named():
    with np.errstate(invalid="ignore"):  # the NaN of the first mistake is the point
        mistakes_named({
            "6.1": [merge_with_nan, merge_without_rescaling_a, merge_inverted],
            "6.2": [WRONG["6.2"], lambda T, heads, bytes_per_number: T * T * bytes_per_number / 2**20,
                    lambda T, heads, bytes_per_number: T * T * heads * bytes_per_number / 1024],
            "6.3": [0.3, 42869696 / 26092224],
            "6.4": ["C"],
        }, chapter=6)
