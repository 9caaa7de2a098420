"""Chapter 12's exercises reject a deliberately wrong answer each and name their common mistakes (see
tests/book/test_exercises.py); the answer of 12.3 is computed again with the library's rules."""

import numpy as np

from attnbook import linear_attention as la
from attnbook.exercises import chapter12
from test_exercises import mistakes_named, wrong_answers_rejected


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


WRONG = {"12.1": mask_not_causal, "12.2": crossover_keys_only, "12.3": "correct"}

NAMED = {
    "12.1": [mask_with_own_decay, mask_not_causal],
    "12.2": [crossover_keys_only, crossover_equal_allowed],
    "12.3": ["correct", "add"],
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=12)


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=12)


def test_the_reference_mask_is_the_library_s():
    g = -np.random.default_rng(0).uniform(0.0, 1.0, 7)
    np.testing.assert_allclose(chapter12.decay_mask(g), la.decay_mask(g), rtol=1e-6)


def test_the_answer_of_12_3_is_the_library_s():
    """Orthogonal unit keys (the rows of a random rotation), one-hot values: linear attention without a feature map
    (adding) and the delta rule with beta = 1 (correcting) give the same outputs, and both read every pair right."""
    d, values = 16, 32
    keys, _ = np.linalg.qr(np.random.default_rng(3).normal(size=(d, d)))
    answer = np.random.default_rng(4).integers(0, values, d)
    writes = np.eye(values)[answer]
    # write the 16 pairs, then read every key with beta = 0 (the reads change nothing)
    k = np.concatenate([keys, keys])
    v = np.concatenate([writes, np.zeros_like(writes)])
    beta = np.concatenate([np.ones(d), np.zeros(d)])
    added = np.asarray(la.linear_attention(k, k, v, feature_map=None, normalize=False, form="recurrent"))[d:]
    corrected = np.asarray(la.delta_rule(k, k, v, beta, form="recurrent"))[d:]
    np.testing.assert_allclose(added, corrected, atol=1e-5)
    assert (added.argmax(axis=1) == answer).all() and (corrected.argmax(axis=1) == answer).all()
    assert chapter12.ORTHOGONAL_KEYS == "equal"
