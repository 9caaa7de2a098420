"""attnbook.data under bad and extreme input: every error names the argument; edge cases give their stated result.

The generators are NumPy code (no ``jit``): every check runs eagerly, before any number is drawn.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnbook import data

rng = np.random.default_rng(0)
TABLE = data.one_four_eight_table(np.random.default_rng(1))


# ------------------------------------------------------------------------------------ random generators


@pytest.mark.parametrize(
    "call",
    [
        lambda seed: data.markov(5, seed),
        lambda seed: data.one_four_eight_table(seed),
        lambda seed: data.one_four_eight(5, seed, TABLE),
        lambda seed: data.n_days(5, seed),
        lambda seed: data.dotmod(5, seed),
        lambda seed: data.n_days_bayes_accuracy(10, seed, chains=4, steps=20),
    ],
)
@pytest.mark.parametrize("seed", [42, None, np.random.RandomState(0)])
def test_rng_must_be_a_numpy_generator(call, seed):
    with pytest.raises(TypeError, match=r"rng must be a NumPy random Generator.*default_rng"):
        call(seed)


# ------------------------------------------------------------------------------------ sizes


@pytest.mark.parametrize(
    "call, name, error",
    [
        (lambda: data.markov(0, rng), "n", ValueError),
        (lambda: data.markov(2.5, rng), "n", TypeError),
        (lambda: data.markov(True, rng), "n", TypeError),
        (lambda: data.markov(5, rng, length=-1), "length", ValueError),
        (lambda: data.markov_bayes_accuracy(length=0), "length", ValueError),
        (lambda: data.one_four_eight(-3, rng, TABLE), "n", ValueError),
        (lambda: data.n_days(5, rng, memory=0), "memory", ValueError),
        (lambda: data.n_days(5, rng, burn_in=0), "burn_in", ValueError),
        (lambda: data.n_days(5, rng, length="10"), "length", TypeError),
        (lambda: data.dotmod(5, rng, memory=-2), "memory", ValueError),
        (lambda: data.dotmod(5, rng, length=0), "length", ValueError),
        (lambda: data.dotmod(5, rng, burn_in=-1), "burn_in", ValueError),
        (lambda: data.dotmod_bayes_accuracy(memory=-1), "memory", ValueError),
        (lambda: data.dotmod_bayes_accuracy(length=0), "length", ValueError),
        (lambda: data.dotmod_bayes_accuracy(memory=11, length=10), "length", ValueError),
        (lambda: data.n_days_bayes_accuracy(0, rng), "memory", ValueError),
        (lambda: data.n_days_bayes_accuracy(10, rng, length=0), "length", ValueError),
        (lambda: data.n_days_bayes_accuracy(10, rng, burn_in=-5), "burn_in", ValueError),
        (lambda: data.n_days_bayes_accuracy(10, rng, steps=0), "steps", ValueError),
        (lambda: data.features(np.zeros((2, 3), int), max_length=0), "max_length", ValueError),
    ],
)
def test_sizes(call, name, error):
    with pytest.raises(error, match=rf"^{name} must be"):
        call()


def test_n_days_bayes_accuracy_needs_a_window_per_chain_and_a_standard_error():
    # Fewer steps than the span of one window left no window: the mean of nothing was NaN.
    with pytest.raises(ValueError, match=r"steps must be at least max\(memory, length\) \+ 1 = 16.*got 15"):
        data.n_days_bayes_accuracy(15, rng, chains=4, steps=15)
    # One chain has no standard error; with hidden days half of the chains fit the lookup table.
    with pytest.raises(ValueError, match="chains must be at least 2.*got 1"):
        data.n_days_bayes_accuracy(10, rng, chains=1, steps=20)
    with pytest.raises(ValueError, match="chains must be at least 3.*lookup table.*got 2"):
        data.n_days_bayes_accuracy(15, rng, chains=2, steps=20)
    # The lookup table has 3**length cells per weather: refused before it is allocated.
    with pytest.raises(ValueError, match="length must be at most 14.*got 20"):
        data.n_days_bayes_accuracy(25, rng, length=20, chains=4, steps=30)
    # The smallest valid sizes give finite numbers.
    for memory, chains in [(10, 2), (15, 3)]:
        estimate = data.n_days_bayes_accuracy(memory, np.random.default_rng(2), chains=chains, steps=16)
        assert np.isfinite(estimate.value) and np.isfinite(estimate.stderr)


# ------------------------------------------------------------------------------------ probabilities


@pytest.mark.parametrize(
    "call, match, error",
    [
        (lambda: data.markov(5, rng, initial=[0.5, 0.5]), r"initial must have shape \(3,\), got .*\(2,\)", ValueError),
        (lambda: data.markov(5, rng, initial=[np.nan, 0.5, 0.5]), "initial must be finite probabilities, got nan at index 0",
         ValueError),
        (lambda: data.markov(5, rng, initial=[1.2, -0.1, -0.1]), "initial must be non-negative.*-0.1 at index 1", ValueError),
        (lambda: data.markov(5, rng, initial=[0.5, 0.4, 0.3]), "initial must sum to 1", ValueError),
        (lambda: data.markov(5, rng, initial=["a", "b", "c"]), "initial must be an array of real probabilities", TypeError),
        (lambda: data.markov(5, rng, initial=np.array([True, False, False])), "initial must be an array of real", TypeError),
        (lambda: data.markov(5, rng, transition=np.eye(3)[:2]), r"transition must have shape \(3, 3\), got \(2, 3\)",
         ValueError),
        (lambda: data.markov(5, rng, transition=np.full((3, 3), np.inf)), "transition must be finite", ValueError),
        (lambda: data.markov_bayes_accuracy(transition=np.eye(3) * 2), "transition must sum to 1", ValueError),
        (lambda: data.one_four_eight(5, rng, TABLE[0]), r"table must have shape \(3, 3, 3, 3\)", ValueError),
        (lambda: data.one_four_eight(5, rng, np.full((3, 3, 3, 3), 0.5)), "table must sum to 1", ValueError),
        (lambda: data.one_four_eight_bayes_accuracy(-TABLE), "table must be non-negative", ValueError),
    ],
)
def test_probability_arguments(call, match, error):
    with pytest.raises(error, match=match):
        call()


def test_integer_probabilities_are_probabilities():
    deterministic = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]])  # rain -> cloud -> sun -> rain
    x, y = data.markov(4, np.random.default_rng(3), length=5, initial=[1, 0, 0], transition=deterministic)
    np.testing.assert_array_equal(x, [[0, 1, 2, 0, 1]] * 4)
    assert data.markov_bayes_accuracy(initial=[1, 0, 0], transition=deterministic).value == 1.0


@pytest.mark.parametrize(
    "fresh_days, error, match",
    [
        (4, TypeError, r"fresh_days must be a tuple of days such as \(1, 4, 8\), got int 4"),
        ("148", TypeError, "fresh_days must be a tuple"),
        ((1, 4.5), TypeError, "fresh_days must hold integer days"),
        ((2, 4), ValueError, r"fresh_days must include day 1.*\(2, 4\)"),
        ((1, 11), ValueError, r"fresh_days must include day 1 and lie in 1..10, got \(1, 11\)"),
        ((1, 0), ValueError, "fresh_days must include day 1 and lie in 1..10"),
    ],
)
def test_fresh_days(fresh_days, error, match):
    with pytest.raises(error, match=match):
        data.one_four_eight(5, rng, TABLE, fresh_days)
    with pytest.raises(error, match=match):
        data.one_four_eight_bayes_accuracy(TABLE, fresh_days)


# ------------------------------------------------------------------------------------ dotmod


@pytest.mark.parametrize("noise", [0.6, -0.01, float("nan"), float("inf")])
def test_dotmod_noise_beyond_one_half_would_give_a_negative_probability(noise):
    window = np.zeros((2, 10), int)
    with pytest.raises(ValueError, match=r"noise must be a number in \[0, 0.5\]"):
        data.dotmod_probs(window, noise=noise)


@settings(max_examples=40, deadline=None)
@given(
    noise=st.floats(0.0, 0.5),
    days=st.lists(st.lists(st.integers(0, 2), min_size=6, max_size=6), min_size=1, max_size=4),
    first_value=st.sampled_from([0, 1]),
)
def test_dotmod_probs_is_a_law_for_every_valid_noise(noise, days, first_value):
    probs = data.dotmod_probs(np.array(days), first_value, noise)
    assert probs.shape == (len(days), 3)
    assert np.all(probs >= 0) and np.allclose(probs.sum(axis=1), 1.0)
    assert np.all((probs == noise).sum(axis=1) >= 2)  # the two weathers the rule does not pick


@pytest.mark.parametrize(
    "window, error, match",
    [
        (np.array([[0, 1, 3]]), ValueError, r"window must be integers in \[0, 3\), got 3 at index \(0, 2\)"),
        (np.array([[0, -1, 2]]), ValueError, r"window must be integers in \[0, 3\), got -1"),
        (np.zeros((2, 3)), TypeError, "window must be an integer array, got dtype float64"),
        (np.zeros(3, int), ValueError, r"window must have shape \(n, memory\), got .*\(3,\)"),
        (np.zeros((2, 0), int), ValueError, "window must hold at least one day"),
    ],
)
def test_dotmod_probs_window(window, error, match):
    with pytest.raises(error, match=match):
        data.dotmod_probs(window)


@pytest.mark.parametrize("first_value, error", [(2, ValueError), (-1, ValueError), (1.0, TypeError), (True, TypeError)])
def test_dotmod_first_value(first_value, error):
    with pytest.raises(error, match="first_value must be"):
        data.dotmod(5, rng, first_value=first_value)
    with pytest.raises(error, match="first_value must be"):
        data.dotmod_probs(np.zeros((1, 3), int), first_value=first_value)


# ------------------------------------------------------------------------------------ features


@pytest.mark.parametrize(
    "tokens, error, match",
    [
        (np.array([[2, 0, -1]]), ValueError, r"tokens must be integers in \[0, 3\), got -1 at index \(0, 2\)"),
        (np.array([0, 3]), ValueError, r"tokens must be integers in \[0, 3\), got 3 at index 1"),
        (np.array([0.0, 1.0]), TypeError, "tokens must be an integer array, got dtype float64"),
        (np.array([True, False]), TypeError, "tokens must be an integer array, got dtype bool"),
        (np.array(1), ValueError, r"tokens must have shape \(\*batch, T\), got an array of shape \(\)"),
        ("012", TypeError, "tokens must be an array"),
        (np.zeros((2, 30), int), ValueError, "tokens must have at most max_length=20 days, got 30"),
    ],
)
def test_features_bad_tokens(tokens, error, match):
    with pytest.raises(error, match=match):
        data.features(tokens)


def test_features_edge_cases():
    # -1 was read as the last weather: it is now an error (above); lists and unsigned ints are fine.
    np.testing.assert_array_equal(data.features([[2, 0]]), data.features(np.array([[2, 0]], np.uint8)))
    # No days: an empty output of the right shape.
    assert data.features(np.zeros((3, 0), int)).shape == (3, 0, 4)
    # Exactly max_length days is allowed; the last position is 1.
    assert data.features(np.zeros(20, int))[-1, 3] == 1.0


def test_generators_draw_the_same_numbers_as_before_the_checks():
    """The checks draw nothing: the first sequences of the default Markov chain from seed 0 are unchanged."""
    x, y = data.markov(3, np.random.default_rng(0))
    np.testing.assert_array_equal(x, [[1, 0, 1, 2, 2, 0, 0, 0, 1, 2], [0, 1, 2, 2, 0, 1, 1, 1, 1, 1],
                                      [0, 2, 2, 0, 1, 1, 0, 1, 2, 2]])
    np.testing.assert_array_equal(y, [2, 1, 0])
