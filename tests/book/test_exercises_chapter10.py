"""Chapter 10's exercises reject a deliberately wrong answer each and name their common mistakes (see
tests/book/test_exercises.py); the stored answer of 10.4 is read again from the benchmark's results."""

import csv
from pathlib import Path

import jax
import numpy as np

from attnbook import kv
from attnbook.exercises import chapter10
from attnbook.mha import MultiHeadAttention
from test_exercises import mistakes_named, wrong_answers_rejected

RESULTS = Path(__file__).resolve().parents[2] / "lib" / "attnbook" / "experiments" / "results"


def cache_keys_only(tokens, layers, kv_heads, d_head, itemsize):
    return tokens * layers * kv_heads * d_head * itemsize


def cache_numbers_not_bytes(tokens, layers, kv_heads, d_head, itemsize):
    return 2 * tokens * layers * kv_heads * d_head


def pool_interleaved(w, kv_heads):
    w = np.asarray(w)
    return w.reshape(w.shape[0], w.shape[1] // kv_heads, kv_heads, w.shape[2]).mean(axis=1)


def pool_first(w, kv_heads):
    w = np.asarray(w)
    return w[:, ::w.shape[1] // kv_heads]


def rank_without_rope(kv_heads, d_head, rope_dim):
    return 2 * kv_heads * d_head


def rank_keys_only(kv_heads, d_head, rope_dim):
    return kv_heads * d_head - rope_dim


WRONG = {"10.1": cache_keys_only, "10.2": pool_first, "10.3": rank_without_rope, "10.4": "scratch"}

NAMED = {
    "10.1": [cache_keys_only, cache_numbers_not_bytes],
    "10.2": [pool_interleaved, pool_first],
    "10.3": [rank_without_rope, rank_keys_only],
    "10.4": ["scratch"],
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=10)


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=10)


def test_pooled_heads_are_the_librarys_pool_kv_heads():
    layer = MultiHeadAttention(16, 4, 3, key=jax.random.key(0))
    for groups in (1, 2, 4):
        np.testing.assert_allclose(chapter10.pool_heads(layer.w_k, groups), kv.pool_kv_heads(layer, groups).w_k,
                                   rtol=1e-6)


def test_latent_rank_gives_the_cache_of_gqa():
    for groups in (1, 2, 4):
        rank = chapter10.latent_rank(groups, 8, 4)
        assert (rank + 4) * 4 == 2 * groups * 8 * 4
    assert [chapter10.latent_rank(g, 8, 4) for g in (1, 2, 4)] == [12, 28, 60]  # bench/latent_quality.py's ranks


def test_stored_answer_matches_the_benchmark_results():
    with open(RESULTS / "kv_heads_uptraining_grid.csv", encoding="utf-8", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["kv_heads"] == "1" and r["step"] == "30"]
    mean = {m: np.mean([float(r["excess"]) for r in rows if r["method"] == m]) for m in ("uptrained", "from_scratch")}
    answer = "uptrained" if mean["uptrained"] < mean["from_scratch"] else "scratch"
    assert chapter10.UPTRAINED_LOWER_AT_30 == answer
