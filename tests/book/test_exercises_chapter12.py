"""Chapter 12's exercises reject a deliberately wrong answer each and name their common mistakes (see
tests/book/test_exercises.py); the stored answer of 12.3 is read again from the experiment's results."""

import csv
from pathlib import Path

import numpy as np

from attnbook import linear_attention as la
from attnbook.exercises import chapter12
from test_exercises import mistakes_named, wrong_answers_rejected

RESULTS = Path(__file__).resolve().parents[2] / "lib" / "attnbook" / "experiments" / "results"


def mask_with_own_decay(log_decay):
    g = np.asarray(log_decay, dtype=float)
    return np.tril(np.exp(np.cumsum(g)[:, None] - np.cumsum(g)[None, :] + g[None, :]))


def mask_not_causal(log_decay):
    prefix = np.cumsum(np.asarray(log_decay, dtype=float))
    return np.exp(prefix[:, None] - prefix[None, :])


def crossover_keys_only(heads, key_dim, value_dim):
    return value_dim + 1


def crossover_equal_allowed(heads, key_dim, value_dim):
    return int(np.ceil(key_dim * value_dim / (key_dim + value_dim)))


WRONG = {"12.1": mask_not_causal, "12.2": crossover_keys_only, "12.3": "linear"}

NAMED = {
    "12.1": [mask_with_own_decay, mask_not_causal],
    "12.2": [crossover_keys_only, crossover_equal_allowed],
    "12.3": ["linear"],
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=12)


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=12)


def test_the_reference_mask_is_the_library_s():
    g = -np.random.default_rng(0).uniform(0.0, 1.0, 7)
    np.testing.assert_allclose(chapter12.decay_mask(g), la.decay_mask(g), rtol=1e-6)


def test_the_stored_answer_of_12_3_is_the_results():
    with (RESULTS / "linear_recall.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    drop = {}
    for model in ("linear", "ssd", "delta"):
        acc = {h: np.mean([float(r["accuracy"]) for r in rows if (r["model"], r["pairs"], r["heads"]) == (model, "8", h)])
               for h in ("2", "8")}
        drop[model] = acc["2"] - acc["8"]
    assert max(drop, key=drop.get) == chapter12.LOST_MOST
