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


@pytest.mark.parametrize("n, memory, steps", [(300, 10, 60), (200, 15, 130), (7, 1, 20), (50, 3, 40)])
def test_n_days_chains_kept_counts_are_the_generic_chains(n, memory, steps):
    """The n-days chains keep each window's counts up to date instead of recounting it: the same days, bit for
    bit, as the generic chain runner with the law written from the window, from the same generator."""
    generic = data._run_chains(data._n_days_probs, n, np.random.default_rng(n), memory, steps)
    kept = data._run_n_days_chains(n, np.random.default_rng(n), memory, steps)
    assert kept.shape == generic.shape == (n, 2 * memory + steps) and kept.dtype == generic.dtype
    assert np.array_equal(kept, generic)


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


@pytest.mark.parametrize("process", ["Markov", "1-4-8", "10-days", "dotmod"])
def test_next_day_law_is_the_law_of_the_generated_day_11(process):
    rng = np.random.default_rng(7)
    table = data.one_four_eight_table(rng)
    generate = {"Markov": lambda n: data.markov(n, rng), "1-4-8": lambda n: data.one_four_eight(n, rng, table),
                "10-days": lambda n: data.n_days(n, rng, memory=10), "dotmod": lambda n: data.dotmod(n, rng)}[process]
    days, y = generate(40_000)
    law = data.next_day_law(process, days, table)
    assert law.shape == (40_000, 3) and np.allclose(law.sum(axis=1), 1.0)
    # E[-ln p(y | days)] under the true law is the mean entropy: the two estimates agree within sampling error
    nll = -np.log(law[np.arange(len(y)), y])
    assert abs(nll.mean() - data.bayes_loss(process, days, table)) < 4 * nll.std() / np.sqrt(len(y))
    assert np.isclose(data.bayes_loss(process, days, table, next_day=y), nll.mean())
    # the law predicts the day that came: its probability of each weather matches the frequency
    for w in range(3):
        assert abs((y == w).mean() - law[:, w].mean()) < 0.01


def test_bayes_loss_markov_exact_and_edge_cases():
    days, _ = data.markov(50_000, np.random.default_rng(3))
    rows = -(data.MARKOV_TRANSITION * np.log(data.MARKOV_TRANSITION)).sum(axis=1)
    assert np.isclose(data.bayes_loss("Markov", days), rows[days[:, -1]].mean())
    # a weather seen 10 times has probability 0 under 10-days: 0 ln 0 counts as 0, not NaN
    assert np.isclose(data.bayes_loss("10-days", np.zeros((1, 10), dtype=int)), np.log(2))
    # uniform law has entropy ln 3; dotmod's law has entropy of (0.96, 0.02, 0.02)
    assert np.isclose(data.bayes_loss("dotmod", days[:5]), -(0.96 * np.log(0.96) + 0.04 * np.log(0.02)))
    with pytest.raises(ValueError, match="process"):
        data.next_day_law("15-days", days)
    with pytest.raises(ValueError, match="table"):
        data.next_day_law("1-4-8", days)
    with pytest.raises(ValueError, match="days"):
        data.next_day_law("Markov", days[:, :5])
    with pytest.raises(ValueError, match="next_day"):
        data.bayes_loss("Markov", days, next_day=np.zeros(3, dtype=int))
