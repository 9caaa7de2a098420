"""Chapters 2-3: the weather processes of source articles 000/003, vectorised.

Tokens are integers: 0 = ☂ (rain), 1 = ☁ (cloud), 2 = ☀ (sun). Every generator takes a NumPy
``Generator`` and returns ``(tokens, targets)``: ``tokens`` of shape ``(n, length)`` holds the
visible days, ``targets`` of shape ``(n,)`` the day after them. Each process also comes with
the Bayes-optimal accuracy of predicting that next day from the visible days: exact where it can
be computed, otherwise a Monte Carlo estimate that says so.

Where the articles sample many overlapping windows from one long chain, we run one chain per
example for a burn-in and keep its last days: the windows follow the same stationary
distribution of the same process and are independent of each other.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from . import _checks

NUM_WEATHERS = 3
MARKOV_INITIAL = np.array([0.3, 0.4, 0.3])
MARKOV_TRANSITION = np.array(
    [
        [0.6, 0.3, 0.1],  # after ☂
        [0.3, 0.4, 0.3],  # after ☁
        [0.2, 0.3, 0.5],  # after ☀
    ]
)
DOTMOD_BETA = np.array([0, 1, 2, 3, 2, 1])  # repeated as 0 1 2 3 2 1 0 1 2 3 ...


@dataclasses.dataclass(frozen=True)
class BayesAccuracy:
    """The best accuracy any predictor of the next day can reach from the visible days.

    ``exact`` is False for Monte Carlo estimates; then ``stderr`` is the sampling standard error
    and ``samples`` the number of windows used. ``lower_bound`` marks the accuracy of a real
    predictor standing in for an optimum we cannot compute.
    """

    value: float
    exact: bool
    stderr: float = 0.0
    samples: int = 0
    lower_bound: bool = False
    method: str = ""

    def __str__(self) -> str:
        if self.exact:
            return f"{self.value:.4f} (exact)"
        kind = f"lower bound from the rule '{self.method}'" if self.lower_bound else "estimate"
        return f"{self.value:.3f} ({kind}, sampling error ± {self.stderr:.4f}, {self.samples} windows)"


# --------------------------------------------------------------------------- argument checks


def _probabilities(name: str, p, shape: tuple[int, ...]) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {p.shape}")
    if np.any(p < 0) or not np.allclose(p.sum(axis=-1), 1.0, atol=1e-8):
        raise ValueError(f"{name} must be non-negative and sum to 1 along the last axis, got sums {p.sum(axis=-1)}")
    return p


def _sample(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One categorical draw per row of ``probs`` (shape ``(n, k)``), vectorised."""
    u = rng.random(probs.shape[0])[:, None]
    return (u > np.cumsum(probs, axis=1)[:, :-1]).sum(axis=1)


def _split(days: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Last ``length + 1`` days of each row -> (visible days, next day)."""
    window = days[:, -(length + 1) :].astype(np.int32)
    return window[:, :-1], window[:, -1]


# --------------------------------------------------------------------------- Markov


def markov(n: int, rng: np.random.Generator, length: int = 10, initial=MARKOV_INITIAL, transition=MARKOV_TRANSITION):
    """Weather that depends only on the day before: day 1 from ``initial``, then ``transition``.

    Returns ``(tokens (n, length), targets (n,))``: days ``1..length`` and day ``length + 1``.
    """
    n = _checks.positive_int("n", n)
    length = _checks.positive_int("length", length)
    initial = _probabilities("initial", initial, (NUM_WEATHERS,))
    transition = _probabilities("transition", transition, (NUM_WEATHERS, NUM_WEATHERS))
    days = np.empty((n, length + 1), dtype=np.int64)
    days[:, 0] = _sample(rng, np.broadcast_to(initial, (n, NUM_WEATHERS)))
    for t in range(1, length + 1):
        days[:, t] = _sample(rng, transition[days[:, t - 1]])
    return _split(days, length)


def markov_bayes_accuracy(length: int = 10, initial=MARKOV_INITIAL, transition=MARKOV_TRANSITION) -> BayesAccuracy:
    """Exact: predict the most likely successor of the last visible day.

    ``sum_w P(day_length = w) * max_v transition[w, v]``; 0.5056 for the articles' chain.
    """
    length = _checks.positive_int("length", length)
    initial = _probabilities("initial", initial, (NUM_WEATHERS,))
    transition = _probabilities("transition", transition, (NUM_WEATHERS, NUM_WEATHERS))
    last_day = initial @ np.linalg.matrix_power(transition, length - 1)
    return BayesAccuracy(float(last_day @ transition.max(axis=1)), exact=True)


# --------------------------------------------------------------------------- 1-4-8


def one_four_eight_table(rng: np.random.Generator) -> np.ndarray:
    """The random rule of the 1-4-8 process: a distribution of day 11 for each (day 1, 4, 8).

    As in the articles, each of the 27 distributions is ``(i, j, k) / 10`` with ``i + j + k = 10``
    and ``1 <= i, j, k <= 8``, chosen uniformly. Shape ``(3, 3, 3, 3)``.
    """
    candidates = np.array([c for c in itertools.product(range(1, 9), repeat=3) if sum(c) == 10]) / 10
    return candidates[rng.integers(len(candidates), size=(NUM_WEATHERS,) * 3)]


def one_four_eight(n: int, rng: np.random.Generator, table: np.ndarray, fresh_days=(1, 4, 8)):
    """The 1-4-8 process: 10 visible days, day 11 drawn from ``table[day1, day4, day8]``.

    Days listed in ``fresh_days`` (1-based) are drawn independently from ``MARKOV_INITIAL``; every
    other day follows the Markov chain from the day before. The articles' text says days 1, 4 and 8
    are drawn independently (the default); their code draws days 1, 5 and 9 instead (pass
    ``fresh_days=(1, 5, 9)`` to reproduce it). Day 11 depends on days 1, 4 and 8 in both.
    """
    n = _checks.positive_int("n", n)
    table = _probabilities("table", table, (NUM_WEATHERS,) * 4)
    if 1 not in fresh_days or not set(fresh_days) <= set(range(1, 11)):
        raise ValueError(f"fresh_days must include day 1 and lie in 1..10, got {fresh_days}")
    days = np.empty((n, 11), dtype=np.int64)
    for t in range(10):
        if t + 1 in fresh_days:
            days[:, t] = _sample(rng, np.broadcast_to(MARKOV_INITIAL, (n, NUM_WEATHERS)))
        else:
            days[:, t] = _sample(rng, MARKOV_TRANSITION[days[:, t - 1]])
    days[:, 10] = _sample(rng, table[days[:, 0], days[:, 3], days[:, 7]])
    return _split(days, 10)


def one_four_eight_bayes_accuracy(table: np.ndarray, fresh_days=(1, 4, 8)) -> BayesAccuracy:
    """Exact: ``sum P(day1, day4, day8) * max table[day1, day4, day8]``.

    The joint law of (day 1, day 4, day 8) is propagated forward through the chain, day by day.
    """
    table = _probabilities("table", table, (NUM_WEATHERS,) * 4)

    def step(day: int) -> np.ndarray:  # law of `day` given the day before, as a matrix
        return np.tile(MARKOV_INITIAL, (NUM_WEATHERS, 1)) if day in fresh_days else MARKOV_TRANSITION

    pair = np.diag(MARKOV_INITIAL)  # P(day 1 = a, current day = c) on day 1
    for day in range(2, 5):
        pair = pair @ step(day)
    triple = pair[:, :, None] * np.eye(NUM_WEATHERS)[None]  # (day 1, day 4, current = day 4)
    for day in range(5, 9):
        triple = triple @ step(day)  # matmul acts on the last axis: the current day
    return BayesAccuracy(float((triple * table.max(axis=-1)).sum()), exact=True)


# --------------------------------------------------------------------------- chains with memory


def _run_chains(next_probs, n: int, rng: np.random.Generator, memory: int, steps: int) -> np.ndarray:
    """Run ``n`` chains: ``2 * memory`` Markov days to start (as the articles do), then ``steps``
    days, each drawn from ``next_probs(last_memory_days) -> (n, 3)``. Returns ``(n, 2*memory + steps)``.
    """
    start, following = markov(n, rng, length=2 * memory - 1)
    days = np.empty((n, 2 * memory + steps), dtype=np.int64)
    days[:, : 2 * memory] = np.concatenate([start, following[:, None]], axis=1)
    for t in range(2 * memory, days.shape[1]):
        days[:, t] = _sample(rng, next_probs(days[:, t - memory : t]))
    return days


def _n_days_probs(window: np.ndarray) -> np.ndarray:
    """``(memory - count) / (2 * memory)`` for each weather in the last ``memory`` days."""
    memory = window.shape[1]
    counts = np.stack([(window == w).sum(axis=1) for w in range(NUM_WEATHERS)], axis=1)
    return (memory - counts) / (2 * memory)


def n_days(n: int, rng: np.random.Generator, memory: int = 10, length: int = 10, burn_in: int = 100):
    """The n-days process: a weather seen ``k`` times in the last ``memory`` days comes next with
    probability ``(memory - k) / (2 * memory)``. With ``memory > length`` some of the days that
    matter are hidden from the model (the articles use memory 10 and 15, length 10).
    """
    n = _checks.positive_int("n", n)
    memory = _checks.positive_int("memory", memory)
    length = _checks.positive_int("length", length)
    burn_in = _checks.positive_int("burn_in", burn_in)
    days = _run_chains(_n_days_probs, n, rng, memory, burn_in + length + 1)
    return _split(days, length)


def dotmod_probs(window: np.ndarray, first_value: int = 1, noise: float = 0.02) -> np.ndarray:
    """Next-day law of the dotmod process given the last days (oldest first), shape ``(n, 3)``.

    With ``y`` the weathers coded ``first_value, first_value + 1, first_value + 2``, the next day is
    ``(y * (2 - y)) . beta mod 3`` with probability ``1 - 2 * noise``. The articles' code codes the
    weathers 1, 2, 3 (the default); their text says 0, 1, 2.
    """
    y = window + first_value
    beta = np.resize(DOTMOD_BETA, window.shape[1])
    target = ((y * (2 - y)) @ beta) % NUM_WEATHERS
    probs = np.full((window.shape[0], NUM_WEATHERS), noise)
    probs[np.arange(window.shape[0]), target] = 1.0 - 2 * noise
    return probs


def dotmod(n: int, rng: np.random.Generator, memory: int = 10, length: int = 10, burn_in: int = 100, first_value: int = 1):
    """The dotmod process: a non-linear (modular) function of the last ``memory`` days, 4 % noise."""
    n = _checks.positive_int("n", n)
    memory = _checks.positive_int("memory", memory)
    length = _checks.positive_int("length", length)
    burn_in = _checks.positive_int("burn_in", burn_in)
    if first_value not in (0, 1):
        raise ValueError(f"first_value must be 0 (the articles' text) or 1 (their code), got {first_value!r}")
    days = _run_chains(lambda w: dotmod_probs(w, first_value), n, rng, memory, burn_in + length + 1)
    return _split(days, length)


def dotmod_bayes_accuracy(memory: int = 10, length: int = 10) -> BayesAccuracy:
    """Exact when the visible days include all ``memory`` days the rule reads: 0.96."""
    if length < memory:
        raise ValueError(f"dotmod's accuracy is exact only for length >= memory, got length {length} < memory {memory}")
    return BayesAccuracy(0.96, exact=True)


def n_days_bayes_accuracy(
    memory: int, rng: np.random.Generator, length: int = 10, chains: int = 2000, steps: int = 400, burn_in: int = 100
) -> BayesAccuracy:
    """Monte Carlo estimate of the best accuracy from ``length`` visible days.

    Windows are cut from ``chains`` long chains. For each window we know the exact law of the next
    day, ``p = (memory - counts) / (2 memory)``, hidden days included. When nothing is hidden
    (``memory <= length``) the best prediction is ``argmax p`` and the accuracy is ``E[max p]``.
    Otherwise the optimum is out of reach and we report a **lower bound**: the accuracy, scored with
    the exact ``p`` on half of the chains, of the better of two real predictors, "the least frequent
    visible weather" and a lookup table of ``E[p | visible days]`` estimated on the other half (with
    3**10 possible windows, the table is noisy; the simple rule often wins).
    The standard error treats each chain's mean as one sample, since windows of a chain are correlated.
    """
    memory = _checks.positive_int("memory", memory)
    length = _checks.positive_int("length", length)
    chains = _checks.positive_int("chains", chains)
    if chains < 2:
        raise ValueError(f"chains must be at least 2 for a standard error, got {chains}")
    days = _run_chains(_n_days_probs, chains, rng, memory, burn_in + steps)
    span = max(memory, length) + 1  # the days that matter for the next day, and that day
    starts = range(2 * memory + burn_in, days.shape[1] - span + 1)
    windows = np.stack([days[:, s : s + span - 1] for s in starts], axis=1)  # (chains, per chain, span-1)
    probs = _n_days_probs(windows[..., -memory:].reshape(-1, memory)).reshape(windows.shape[:2] + (NUM_WEATHERS,))
    visible = windows[..., -length:]
    if memory <= length:
        method = "most probable next day"
        best = probs.max(axis=-1)  # (chains, per chain)
    else:
        fit, test = slice(0, chains // 2), slice(chains // 2, chains)
        codes = visible @ (NUM_WEATHERS ** np.arange(length))
        expected = np.stack(
            [np.bincount(codes[fit].ravel(), weights=probs[fit][..., w].ravel(), minlength=NUM_WEATHERS**length)
             for w in range(NUM_WEATHERS)],
            axis=-1,
        )
        counts = np.stack([(visible[test] == w).sum(axis=-1) for w in range(NUM_WEATHERS)], axis=-1)
        table = expected[codes[test]]
        rules = {  # two real predictors; the better one's accuracy is the lower bound we report
            "least frequent visible weather": counts.argmin(axis=-1),
            "lookup table of E[p | visible days]": np.where(table.sum(axis=-1) > 0, table.argmax(axis=-1),
                                                            counts.argmin(axis=-1)),
        }
        scores = {name: np.take_along_axis(probs[test], c[..., None], axis=-1)[..., 0] for name, c in rules.items()}
        method = max(scores, key=lambda name: scores[name].mean())
        best = scores[method]
    per_chain = best.mean(axis=1)
    stderr = float(per_chain.std(ddof=1) / np.sqrt(len(per_chain)))
    return BayesAccuracy(float(best.mean()), exact=False, stderr=stderr, samples=int(best.size),
                         lower_bound=memory > length, method=method)


# --------------------------------------------------------------------------- features


def features(tokens, max_length: int = 20) -> np.ndarray:
    """The articles' 4 input features per day: one-hot weather and ``(t + 1) / max_length``.

    ``tokens`` of shape ``(..., T)`` gives ``(..., T, 4)`` float32.
    """
    tokens = np.asarray(tokens)
    max_length = _checks.positive_int("max_length", max_length)
    if tokens.shape[-1] > max_length:
        raise ValueError(f"tokens must have at most max_length={max_length} days, got {tokens.shape[-1]}")
    one_hot = np.eye(NUM_WEATHERS, dtype=np.float32)[tokens]
    position = (np.arange(1, tokens.shape[-1] + 1, dtype=np.float32) / max_length)[:, None]
    position = np.broadcast_to(position, tokens.shape + (1,))
    return np.concatenate([one_hot, position], axis=-1)
