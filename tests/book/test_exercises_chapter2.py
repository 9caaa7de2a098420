"""Chapter 2's exercises reject a deliberately wrong answer each (see tests/book/test_exercises.py)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from attnbook import exercises
from attnbook.attention import SelfAttention
from attnbook.exercises import chapter2
from test_exercises import mistakes_named, wrong_answers_rejected


def attention_over_d(q, k, v):
    """Scores divided by d instead of sqrt(d)."""
    weights = jax.nn.softmax(q @ k.T / q.shape[1], axis=1)
    return weights @ v, weights


WRONG = {
    "2.1": attention_over_d,
    "2.2": 0.0015,  # half of the value at d = 256, as if the gradient fell like a power of d
    "2.3": 12,  # both biases of the scores: b_q matters, only b_k does not
    "2.4": 0.371,  # the chapter's lower bound with 10 visible days
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=2)


def test_naive_softmax_fails_on_large_scores():
    """2.1's edge case with large scores rejects exp without the row maximum (NaN from inf / inf)."""
    def naive(q, k, v):
        e = jnp.exp(q @ k.T / jnp.sqrt(q.shape[1]))
        weights = e / e.sum(axis=1, keepdims=True)
        return weights @ v, weights

    found = exercises.result("2.1", naive, lang="en")
    assert not found.passed and "wrong on input 2 of" in found.message


def test_attention_pair_as_tuple_or_list():
    """2.1 accepts the pair as a list and in float64 NumPy; the pair swapped or a lone array is wrong."""
    def by_numpy(q, k, v):
        q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
        scores = q @ k.T / np.sqrt(q.shape[1])
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        weights = e / e.sum(axis=1, keepdims=True)
        return weights @ v, weights

    assert exercises.result("2.1", by_numpy, lang="en").passed
    assert exercises.result("2.1", lambda q, k, v: list(by_numpy(q, k, v)), lang="en").passed
    assert not exercises.result("2.1", lambda q, k, v: by_numpy(q, k, v)[::-1], lang="en").passed
    assert not exercises.result("2.1", lambda q, k, v: by_numpy(q, k, v)[0], lang="en").passed
    assert not exercises.result("2.1", lambda q, k, v: (*by_numpy(q, k, v), None), lang="en").passed


def test_unscaled_gradient_reference_matches_the_chapters_experiment():
    """2.2's shortcut (|q| from a chi distribution) agrees with drawing q and k, at d = 64."""
    rng = np.random.default_rng(1)
    q, k = rng.standard_normal((20_000, 1, 64)), rng.standard_normal((20_000, 10, 64))
    a = np.asarray(jax.nn.softmax(np.einsum("nqd,nkd->nk", q, k), axis=-1), dtype=np.float64)
    s2, s3 = (a**2).sum(axis=-1), (a**3).sum(axis=-1)
    direct = np.median(np.sqrt(s2 - 2 * s3 + s2**2))
    assert np.isclose(chapter2._unscaled_softmax_gradient(d=64, queries=20_000), direct, rtol=0.05)


def test_only_the_key_bias_is_free():
    """2.3: changing b_k changes no output; changing any single other parameter array does."""
    model = SelfAttention(4, 6, 3, key=jax.random.key(0))
    x = jnp.asarray(np.random.default_rng(0).normal(size=(7, 4)), dtype=jnp.float32)
    out = model(x)[0]
    for name in ("w_q", "b_q", "w_k", "b_k", "w_v", "b_v"):
        array = getattr(model, name)
        changed = eqx.tree_at(lambda m: getattr(m, name), model, array + 3.0 * jnp.ones_like(array))
        same = bool(jnp.allclose(changed(x)[0], out, atol=1e-5))
        assert same == (name == "b_k"), name
    assert exercises.get("2.3").reference() == model.b_k.size


def naive_softmax(q, k, v):
    """exp of the scores without the row maximum: inf / inf = NaN on the check's scores in the hundreds."""
    e = jnp.exp(q @ k.T / jnp.sqrt(q.shape[1]))
    weights = e / e.sum(axis=1, keepdims=True)
    return weights @ v, weights


def unscaled(q, k, v):
    weights = jax.nn.softmax(q @ k.T, axis=1)
    return weights @ v, weights


def softmax_over_queries(q, k, v):
    weights = jax.nn.softmax(q @ k.T / jnp.sqrt(q.shape[1]), axis=0)
    return weights @ v, weights


NAMED = {
    "2.1": [naive_softmax, unscaled, attention_over_d, softmax_over_queries],
    "2.2": [0.0015, float("nan")],
    "2.3": [12, 0, 3],
    "2.4": [0.371],
}


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=2)


def test_attention_reference_agrees_with_the_library():
    """2.1's reference is @eq-attention in float64 NumPy (nothing compiled per input shape): on the check's inputs,
    the edge case with scores in the hundreds included, the library's float32 scaled_dot_product_attention agrees
    with it within the check's tolerance, as must every correct float32 answer."""
    from attnbook.attention import scaled_dot_product_attention
    from attnbook.exercises._core import get

    exercise = get("2.1")
    rng = np.random.default_rng(0)
    cases = [exercise.inputs(rng) for _ in range(20)] + list(exercise.edge_cases)
    for inputs in cases:
        for reference, library in zip(exercise.reference(**inputs), scaled_dot_product_attention(**inputs)):
            assert np.allclose(library, reference, rtol=exercise.rtol, atol=exercise.atol)
