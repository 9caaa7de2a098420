"""Chapter 8's exercises reject a deliberately wrong answer each (see tests/book/test_exercises.py); the stored
answers (8.4, 8.5) are read again from the benchmark's results."""

import csv
from pathlib import Path

import jax.numpy as jnp
import numpy as np

from attnbook import exercises, positional
from attnbook.exercises import chapter8
from test_exercises import mistakes_named, wrong_answers_rejected

RESULTS = Path(__file__).resolve().parents[2] / "lib" / "attnbook" / "experiments" / "results"


def alibi_slopes_from_one(T, heads):
    # slopes 2^(-8h/H) for h = 0..H-1: the first head gets slope 1 instead of 2^(-8/H)
    slopes = 2.0 ** (-8.0 * np.arange(heads) / heads)
    offset = np.arange(T)[None, :] - np.arange(T)[:, None]
    return jnp.asarray(np.where(offset <= 0, slopes[:, None, None] * offset, -np.inf), dtype=jnp.float32)


def t5_bucket_rounded(distance):
    # rounds the logarithmic part instead of truncating it, as the T5 code does
    n = np.asarray(distance)
    far = 16 + np.round(np.log(np.maximum(n, 1) / 16) / np.log(8) * 16).astype(int)
    return np.where(n < 16, n, np.minimum(far, 31))


def untrained_fraction_of_offsets(T, L):
    # counts offsets 0..T-1 rather than (query, key) pairs: far offsets occur in fewer pairs
    buckets = chapter8.t5_bucket(np.arange(T))
    return float(np.mean(buckets > chapter8.t5_bucket(np.arange(L)).max()))


WRONG = {
    "8.1": alibi_slopes_from_one,
    "8.2": t5_bucket_rounded,
    "8.3": untrained_fraction_of_offsets,
    "8.4": "nope",
    "8.5": 0,  # np.argmax over all positions: position 0 (context incomplete) is already above ln 8
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=8)


def test_untrained_fraction_in_closed_form():
    # At L = 32 the trained buckets are 0..21; bucket 21 holds offsets 31..34, so offsets >= 35 are untrained:
    # (T - 35)(T - 34)/2 of the T(T + 1)/2 pairs.
    assert chapter8.t5_bucket(np.array([30, 31, 34, 35])).tolist() == [20, 21, 21, 22]
    for T in [64, 128, 256]:
        assert np.isclose(chapter8.untrained_fraction(T, 32), (T - 35) * (T - 34) / (T * (T + 1)))


def test_stored_answers_match_the_benchmark_results():
    with open(RESULTS / "positions_extrapolation.csv", encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["eval_length"] == "128"]
    beyond = {e: [float(r["loss_beyond_L"]) for r in rows if r["encoding"] == e] for e in ("t5", "nope")}
    lower = "t5" if np.mean(beyond["t5"]) < np.mean(beyond["nope"]) else "nope"
    assert exercises.get("8.4").reference() == lower
    with open(RESULTS / "positions_per_position.csv", encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["encoding"] == "sinusoidal" and r["eval_length"] == "256"]
    seeds = sorted({r["seed"] for r in rows})
    curve = np.mean([[float(r["loss"]) for r in rows if r["seed"] == s] for s in seeds], axis=0)
    first = 32 + int(np.argmax(curve[32:] > np.log(8)))
    assert curve[first] > np.log(8) and exercises.get("8.5").reference() == first


def alibi_sign_flipped(T, heads):
    slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
    offset = np.arange(T)[:, None] - np.arange(T)[None, :]  # i - j: positive for the past
    return jnp.asarray(np.where(offset >= 0, slopes[:, None, None] * offset, -np.inf), dtype=jnp.float32)


def alibi_without_mask(T, heads):
    slopes = 2.0 ** (-8.0 * np.arange(1, heads + 1) / heads)
    offset = np.arange(T)[None, :] - np.arange(T)[:, None]
    return jnp.asarray(slopes[:, None, None] * np.minimum(offset, 0), dtype=jnp.float32)


def t5_bucket_uncapped(distance):
    n = np.asarray(distance)
    far = 16 + (np.log(np.maximum(n, 1) / 16) / np.log(8) * 16).astype(int)
    return np.where(n < 16, n, far)


def t5_bucket_bidirectional(distance):  # the bidirectional code: 16 buckets per direction, 8 exact
    return np.asarray(positional.relative_position_bucket(-np.asarray(distance), bidirectional=True))


def untrained_by_distance(T, L):
    i, j = np.tril_indices(T)
    return float(np.mean(i - j >= L))


def untrained_over_all_pairs(T, L):
    return chapter8.untrained_fraction(T, L) * (T + 1) / (2 * T)


NAMED = {
    "8.1": [alibi_slopes_from_one, alibi_sign_flipped, alibi_without_mask],
    "8.2": [t5_bucket_rounded, t5_bucket_uncapped, t5_bucket_bidirectional],
    "8.3": [untrained_fraction_of_offsets, untrained_by_distance, untrained_over_all_pairs],
    "8.4": ["nope"],
    "8.5": [0],
}


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=8)
