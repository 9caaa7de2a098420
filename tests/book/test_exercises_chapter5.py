"""Chapter 5's exercises reject a deliberately wrong answer each (see tests/book/test_exercises.py), and their
references agree with direct evaluations of the paper's equations."""

import math

import jax
import jax.numpy as jnp
import numpy as np

from attnbook import aft, exercises
from test_exercises import mistakes_named, wrong_answers_rejected


def simple_softmax_over_channels(q, k, v, causal):
    """AFT-simple with the softmax over the wrong axis (channels instead of time)."""
    weights = jnp.exp(k) / jnp.exp(k).sum(axis=1, keepdims=True)
    if causal:
        return jax.nn.sigmoid(q) * jnp.cumsum(weights * v, axis=0)
    return jax.nn.sigmoid(q) * (weights * v).sum(axis=0)


def conv_bias_transposed(kernel, T, causal):
    """The kernel indexed by t' - t where the causal layout uses t - t': the band lands above the diagonal."""
    heads, size = kernel.shape
    offset = np.arange(T)[None, :] - np.arange(T)[:, None]  # t' - t: the mistake
    index = offset if causal else size // 2 + offset
    inside = (index >= 0) & (index < size)
    return jnp.where(inside, kernel[:, np.clip(index, 0, size - 1)], 0.0)


def full_separate_maxima(q, k, v, w, causal):
    """Shift by the largest key of each channel plus the largest bias of each row: underflows to 0 / 0."""
    T = q.shape[0]
    visible = jnp.tril(jnp.ones((T, T), bool)) if causal else jnp.ones((T, T), bool)
    z = k[None] + w[:, :, None]
    shift = k.max(axis=0)[None, None] + jnp.where(visible, w, -jnp.inf).max(axis=1)[:, None, None]
    e = jnp.where(visible[:, :, None], jnp.exp(z - shift), 0.0)
    return jax.nn.sigmoid(q) * (e * v[None]).sum(axis=1) / e.sum(axis=1)


WRONG = {
    "5.1": simple_softmax_over_channels,
    "5.2": conv_bias_transposed,
    "5.3": full_separate_maxima,
    "5.4": 2.74 * 3072 / math.log(2),  # divided by ln 2 where nats = bits x ln 2
    "5.5": "A",  # "smoothing only wastes probability on unseen values"
}


def test_wrong_answers_are_rejected():
    wrong_answers_rejected(WRONG, chapter=5)


def test_naive_and_whole_row_shifts_are_rejected_too():
    def naive(q, k, v, w, causal):
        T = q.shape[0]
        visible = jnp.tril(jnp.ones((T, T), bool)) if causal else jnp.ones((T, T), bool)
        e = jnp.where(visible[:, :, None], jnp.exp(k[None] + w[:, :, None]), 0.0)
        return jax.nn.sigmoid(q) * (e * v[None]).sum(axis=1) / e.sum(axis=1)

    def whole_row(q, k, v, w, causal):
        T = q.shape[0]
        visible = jnp.tril(jnp.ones((T, T), bool)) if causal else jnp.ones((T, T), bool)
        z = k[None] + w[:, :, None]
        e = jnp.where(visible[:, :, None], jnp.exp(z - z.max(axis=1, keepdims=True)), 0.0)
        return jax.nn.sigmoid(q) * (e * v[None]).sum(axis=1) / e.sum(axis=1)

    for answer in (naive, whole_row):
        assert not exercises.result("5.3", answer, lang="en").passed


def test_simple_and_conv_references_match_the_equations():
    rng = np.random.default_rng(0)
    for _ in range(3):
        args = exercises.get("5.1").inputs(rng)
        q, k, v = (np.asarray(args[n], np.float64) for n in "qkv")
        e = np.exp(k)
        if args["causal"]:
            average = np.cumsum(e * v, axis=0) / np.cumsum(e, axis=0)
        else:
            average = (e * v).sum(axis=0) / e.sum(axis=0)
        expected = average / (1 + np.exp(-q))
        np.testing.assert_allclose(exercises.get("5.1").reference(**args), expected, rtol=1e-5, atol=1e-6)
    kernel = jnp.asarray([[1.0, 2.0, 3.0]])
    causal = np.asarray(exercises.get("5.2").reference(kernel, 4, True))[0]
    np.testing.assert_array_equal(causal, [[1, 0, 0, 0], [2, 1, 0, 0], [3, 2, 1, 0], [0, 3, 2, 1]])
    centred = np.asarray(exercises.get("5.2").reference(kernel, 4, False))[0]
    np.testing.assert_array_equal(centred, [[2, 3, 0, 0], [1, 2, 3, 0], [0, 1, 2, 3], [0, 0, 1, 2]])


def test_stable_edge_cases_really_break_the_cheap_shifts():
    """The two fixed cases of 5.3 are the two mistakes the chapter warns about, and aft_full is exact on them."""
    for case in exercises.get("5.3").edge_cases:
        ours = np.asarray(aft.aft_full(**case))
        assert np.all(np.isfinite(ours))
    late, negative = exercises.get("5.3").edge_cases
    assert not np.all(np.isfinite(full_separate_maxima(**negative)))


def test_the_unsmoothed_per_position_baseline_is_infinite():
    """5.5's answer, from the chapter's data and split: some test pixels take a value never seen at their position."""
    from sklearn.datasets import load_digits

    pixels = load_digits().images.reshape(-1, 64).astype(np.int32)
    order = np.random.default_rng(5).permutation(len(pixels))
    test_pixels, train_pixels = pixels[order[:400]], pixels[order[400:]]
    counts = np.stack([np.bincount(train_pixels[:, i], minlength=17) for i in range(64)])
    probability = (counts / counts.sum(axis=1, keepdims=True))[np.arange(64), test_pixels]
    assert (probability == 0).sum() == 7  # of 25600 test pixels, as the notebook prints
    assert exercises.get("5.5").reference() == "C"
    smoothed = (counts + 1) / (counts + 1).sum(axis=1, keepdims=True)
    assert round(float(-np.log2(smoothed[np.arange(64), test_pixels]).mean()), 2) == 2.44


def simple_without_sigmoid(q, k, v, causal):
    e = jnp.exp(k - k.max(axis=0))
    if causal:
        return jnp.cumsum(e * v, axis=0) / jnp.cumsum(e, axis=0)
    return jnp.broadcast_to((e * v).sum(axis=0) / e.sum(axis=0), q.shape)


def simple_never_causal(q, k, v, causal):
    weights = jax.nn.softmax(k, axis=0)
    return jax.nn.sigmoid(q) * (weights * v).sum(axis=0)


def conv_bias_flipped(kernel, T, causal):
    return aft.conv_bias_matrix(kernel[:, ::-1], T, causal=causal)


NAMED = {
    "5.1": [simple_softmax_over_channels, simple_without_sigmoid, simple_never_causal],
    "5.2": [conv_bias_transposed, conv_bias_flipped],
    "5.3": [full_separate_maxima,
            lambda q, k, v, w, causal: aft.aft_full(q, k, v, w.T, causal=causal),
            lambda q, k, v, w, causal: aft.aft_full(q, k, v, w, causal=False)],
    "5.4": [WRONG["5.4"], 2.74 * 3072, 2.74 * math.log(2)],
    "5.5": ["A"],
}


def test_common_mistakes_are_named():
    mistakes_named(NAMED, chapter=5)
