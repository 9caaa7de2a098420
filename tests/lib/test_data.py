"""attnbook.data: the weather processes against their definitions, and the Bayes-optimal accuracies."""

import numpy as np
import pytest

from attnbook import data


def empirical_transitions(tokens):
    counts = np.zeros((3, 3))
    np.add.at(counts, (tokens[:, :-1].ravel(), tokens[:, 1:].ravel()), 1)
    return counts / counts.sum(axis=1, keepdims=True)


def test_markov_follows_its_chain():
    x, y = data.markov(200_000, np.random.default_rng(0))
    assert x.shape == (200_000, 10) and y.shape == (200_000,) and x.dtype == np.int32
    full = np.concatenate([x, y[:, None]], axis=1)
    np.testing.assert_allclose(np.bincount(full[:, 0]) / len(full), data.MARKOV_INITIAL, atol=5e-3)
    np.testing.assert_allclose(empirical_transitions(full), data.MARKOV_TRANSITION, atol=5e-3)


def test_markov_bayes_accuracy_is_the_articles_value_and_matches_simulation():
    bayes = data.markov_bayes_accuracy()
    assert bayes.exact and round(bayes.value, 4) == 0.5056
    x, y = data.markov(400_000, np.random.default_rng(1))
    best_guess = data.MARKOV_TRANSITION.argmax(axis=1)[x[:, -1]]
    assert abs(np.mean(best_guess == y) - bayes.value) < 4e-3


@pytest.mark.parametrize("fresh_days", [(1, 4, 8), (1, 5, 9)])
def test_one_four_eight(fresh_days):
    rng = np.random.default_rng(2)
    table = data.one_four_eight_table(rng)
    assert table.shape == (3, 3, 3, 3)
    np.testing.assert_allclose(table.sum(axis=-1), 1.0)
    assert set(np.round(table.ravel() * 10).astype(int)) <= set(range(1, 9))
    x, y = data.one_four_eight(300_000, rng, table, fresh_days)
    # Fresh days are independent of the day before; the others follow the chain.
    for day in range(2, 11):
        prev, cur = x[:, day - 2], x[:, day - 1]
        p_given_rain = np.bincount(cur[prev == 0], minlength=3) / (prev == 0).sum()
        expected = data.MARKOV_INITIAL if day in fresh_days else data.MARKOV_TRANSITION[0]
        np.testing.assert_allclose(p_given_rain, expected, atol=1e-2)
    # Day 11 follows the table of days 1, 4, 8.
    cell = (x[:, 0] == 0) & (x[:, 3] == 2) & (x[:, 7] == 1)
    np.testing.assert_allclose(np.bincount(y[cell], minlength=3) / cell.sum(), table[0, 2, 1], atol=0.03)
    # The exact Bayes accuracy equals the accuracy of the optimal rule on a large sample.
    rule = table.argmax(axis=-1)[x[:, 0], x[:, 3], x[:, 7]]
    assert abs(np.mean(rule == y) - data.one_four_eight_bayes_accuracy(table, fresh_days).value) < 5e-3


@pytest.mark.parametrize("memory", [10, 15])
def test_n_days_next_day_law(memory):
    x, y = data.n_days(30_000, np.random.default_rng(3), memory=memory, length=20)
    counts = np.stack([(x[:, -memory:] == w).sum(axis=1) for w in range(3)], axis=1)
    p = (memory - counts) / (2 * memory)
    # Group windows by the law of their next day and compare with the empirical frequencies.
    predicted = p[np.arange(len(y)), y].mean()  # E[p(target)] = sum_w E[p_w^2]
    assert abs(predicted - np.mean(np.sum(p**2, axis=1))) < 6e-3


def test_n_days_bayes_estimates():
    ten = data.n_days_bayes_accuracy(10, np.random.default_rng(4), chains=400, steps=200)
    fifteen = data.n_days_bayes_accuracy(15, np.random.default_rng(5), chains=400, steps=200)
    assert not ten.exact and not fifteen.exact
    assert 0.38 < ten.value < 0.41 and ten.stderr < 0.003
    assert 0.35 < fifteen.value < ten.value  # hidden days can only hurt
    assert fifteen.lower_bound and "lower bound" in str(fifteen) and not ten.lower_bound


@pytest.mark.parametrize("first_value", [0, 1])
def test_dotmod(first_value):
    x, y = data.dotmod(50_000, np.random.default_rng(6), length=10, first_value=first_value)
    v = x + first_value
    beta = np.array([0, 1, 2, 3, 2, 1, 0, 1, 2, 3])
    rule = ((v * (2 - v)) @ beta) % 3
    assert abs(np.mean(rule == y) - 0.96) < 0.005
    assert data.dotmod_bayes_accuracy().value == 0.96


def test_features():
    f = data.features(np.array([[2, 0, 1]]))
    np.testing.assert_allclose(f[0], [[0, 0, 1, 0.05], [1, 0, 0, 0.10], [0, 1, 0, 0.15]])
    assert f.dtype == np.float32


rng = np.random.default_rng(0)


@pytest.mark.parametrize(
    "call, names",
    [
        (lambda: data.markov(0, rng), ["n", "0"]),
        (lambda: data.markov(5, rng, length=0), ["length", "0"]),
        (lambda: data.markov(5, rng, initial=[0.5, 0.4, 0.3]), ["initial", "sum to 1"]),
        (lambda: data.markov(5, rng, transition=np.eye(3)[:2]), ["transition", "(3, 3)", "(2, 3)"]),
        (lambda: data.n_days(5, rng, memory=0), ["memory", "0"]),
        (lambda: data.n_days(5, rng, length=-1), ["length", "-1"]),
        (lambda: data.dotmod(5, rng, first_value=2), ["first_value", "2"]),
        (lambda: data.one_four_eight(5, rng, np.full((3, 3, 3, 3), 0.5)), ["table", "sum to 1"]),
        (lambda: data.one_four_eight(5, rng, data.one_four_eight_table(rng), (2, 4)), ["fresh_days", "(2, 4)"]),
        (lambda: data.features(np.zeros((2, 30), int)), ["max_length=20", "30"]),
    ],
)
def test_bad_arguments(call, names):
    with pytest.raises(ValueError) as info:
        call()
    for name in names:
        assert name in str(info.value)


def test_n_days_lower_bound_scores_on_chains_that_did_not_choose_the_rule():
    """15-days: the rule is chosen on half A; the reported value is its score on half B alone."""
    seed, chains, steps, memory = 8, 40, 60, 15
    bound = data.n_days_bayes_accuracy(memory, np.random.default_rng(seed), chains=chains, steps=steps)
    # The same chains, from the same seed, through the public generator: its last `steps` days are the scored ones.
    x, y = data.n_days(chains, np.random.default_rng(seed), memory=memory, length=steps - 1, burn_in=100)
    half_b = np.concatenate([x, y[:, None]], axis=1)[chains // 2:]
    scores = []
    for s in range(steps - memory):
        window = half_b[:, s : s + memory]
        seen = np.stack([(window == w).sum(axis=1) for w in range(3)], axis=1)
        law = (memory - seen) / (2 * memory)  # the process's law of the next day, written out
        if bound.method == "least frequent visible weather":
            counts = np.stack([(window[:, -10:] == w).sum(axis=1) for w in range(3)], axis=1)
            scores.append(law[np.arange(len(law)), counts.argmin(axis=1)])
    assert bound.lower_bound and bound.samples == (chains - chains // 2) * (steps - memory)
    if scores:  # the simple rule chosen: its score on half B, recomputed here
        assert bound.value == pytest.approx(np.mean(scores), abs=1e-12)
