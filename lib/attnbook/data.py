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

import numbers

import numpy as np
from jaxtyping import Float, Int, Real

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


def _probabilities(name: str, p) -> np.ndarray:
    """``p`` as float64 if every entry is finite and non-negative and every row (last axis) sums to 1.

    The shape is checked by the caller's annotation (:func:`attnbook._checks.shaped`).
    """
    p = np.asarray(p)
    if p.dtype == np.bool_ or not (np.issubdtype(p.dtype, np.integer) or np.issubdtype(p.dtype, np.floating)):
        raise TypeError(f"{name} must be an array of real probabilities, got dtype {p.dtype}")
    p = p.astype(np.float64)
    p = _checks.values(name, p, ~np.isfinite(p), "finite probabilities")
    p = _checks.values(name, p, p < 0, "non-negative probabilities")
    sums = p.sum(axis=-1)
    if not np.allclose(sums, 1.0, atol=1e-8):
        raise ValueError(f"{name} must sum to 1 along the last axis, got sums {sums}")
    return p


def _fresh_days(name: str, days) -> tuple[int, ...]:
    """The 1-based days drawn afresh in the 1-4-8 process: integers in 1..10, day 1 among them."""
    if isinstance(days, (str, bytes)) or not hasattr(days, "__iter__"):
        raise TypeError(f"{name} must be a tuple of days such as (1, 4, 8), got {type(days).__name__} {days!r}")
    days = tuple(days)
    if not all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in days):
        raise TypeError(f"{name} must hold integer days such as (1, 4, 8), got {days!r}")
    if 1 not in days or not set(days) <= set(range(1, 11)):
        raise ValueError(f"{name} must include day 1 and lie in 1..10, got {days}")
    return tuple(int(d) for d in days)


def _first_value(first_value) -> int:
    """How dotmod codes the weathers: 0 (the articles' text) or 1 (their code)."""
    if isinstance(first_value, bool) or not isinstance(first_value, numbers.Integral):
        raise TypeError(f"first_value must be the integer 0 or 1, got {type(first_value).__name__} {first_value!r}")
    if first_value not in (0, 1):
        raise ValueError(f"first_value must be 0 (the articles' text) or 1 (their code), got {first_value!r}")
    return int(first_value)


def _weathers(name: str, tokens) -> np.ndarray:
    """``tokens`` as an integer array with every entry a weather, 0, 1 or 2 (-1 is not "the last one")."""
    tokens = np.asarray(tokens)
    return _checks.integers_in_range(name, tokens, 0, NUM_WEATHERS)


def _sample(rng: np.random.Generator, probs: np.ndarray) -> np.ndarray:
    """One categorical draw per row of ``probs`` (shape ``(n, k)``), vectorised."""
    u = rng.random(probs.shape[0])[:, None]
    return (u > np.cumsum(probs, axis=1)[:, :-1]).sum(axis=1)


def _split(days: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Last ``length + 1`` days of each row -> (visible days, next day)."""
    window = days[:, -(length + 1) :].astype(np.int32)
    return window[:, :-1], window[:, -1]


# --------------------------------------------------------------------------- Markov


@_checks.shaped
def markov(
    n: int,
    rng: np.random.Generator,
    length: int = 10,
    initial: Real[np.ndarray, "3"] = MARKOV_INITIAL,
    transition: Real[np.ndarray, "3 3"] = MARKOV_TRANSITION,
) -> tuple[Int[np.ndarray, "n length"], Int[np.ndarray, " n"]]:
    """Weather that depends only on the day before: day 1 from ``initial``, then ``transition``.

    Returns ``(tokens (n, length), targets (n,))``: days ``1..length`` and day ``length + 1``.
    ``initial`` and the rows of ``transition`` are probability vectors (finite, >= 0, summing to 1).
    """
    n = _checks.positive_int("n", n)
    rng = _checks.numpy_rng("rng", rng)
    length = _checks.positive_int("length", length)
    initial = _probabilities("initial", initial)
    transition = _probabilities("transition", transition)
    days = np.empty((n, length + 1), dtype=np.int64)
    days[:, 0] = _sample(rng, np.broadcast_to(initial, (n, NUM_WEATHERS)))
    for t in range(1, length + 1):
        days[:, t] = _sample(rng, transition[days[:, t - 1]])
    return _split(days, length)


@_checks.shaped
def markov_bayes_accuracy(
    length: int = 10,
    initial: Real[np.ndarray, "3"] = MARKOV_INITIAL,
    transition: Real[np.ndarray, "3 3"] = MARKOV_TRANSITION,
) -> BayesAccuracy:
    """Exact: predict the most likely successor of the last visible day.

    ``sum_w P(day_length = w) * max_v transition[w, v]``; 0.5056 for the articles' chain.
    """
    length = _checks.positive_int("length", length)
    initial = _probabilities("initial", initial)
    transition = _probabilities("transition", transition)
    last_day = initial @ np.linalg.matrix_power(transition, length - 1)
    return BayesAccuracy(float(last_day @ transition.max(axis=1)), exact=True)


# --------------------------------------------------------------------------- 1-4-8


def one_four_eight_table(rng: np.random.Generator) -> Float[np.ndarray, "3 3 3 3"]:
    """The random rule of the 1-4-8 process: a distribution of day 11 for each (day 1, 4, 8).

    As in the articles, each of the 27 distributions is ``(i, j, k) / 10`` with ``i + j + k = 10``
    and ``1 <= i, j, k <= 8``, chosen uniformly. Shape ``(3, 3, 3, 3)``.
    """
    rng = _checks.numpy_rng("rng", rng)
    candidates = np.array([c for c in itertools.product(range(1, 9), repeat=3) if sum(c) == 10]) / 10
    return candidates[rng.integers(len(candidates), size=(NUM_WEATHERS,) * 3)]


@_checks.shaped
def one_four_eight(
    n: int, rng: np.random.Generator, table: Real[np.ndarray, "3 3 3 3"], fresh_days=(1, 4, 8)
) -> tuple[Int[np.ndarray, "n 10"], Int[np.ndarray, " n"]]:
    """The 1-4-8 process: 10 visible days, day 11 drawn from ``table[day1, day4, day8]``.

    Days listed in ``fresh_days`` (1-based) are drawn independently from ``MARKOV_INITIAL``; every
    other day follows the Markov chain from the day before. The articles' text says days 1, 4 and 8
    are drawn independently (the default); their code draws days 1, 5 and 9 instead (pass
    ``fresh_days=(1, 5, 9)`` to reproduce it). Day 11 depends on days 1, 4 and 8 in both.
    ``table[a, b, c]`` is a probability vector over day 11, e.g. from :func:`one_four_eight_table`.
    """
    n = _checks.positive_int("n", n)
    rng = _checks.numpy_rng("rng", rng)
    table = _probabilities("table", table)
    fresh_days = _fresh_days("fresh_days", fresh_days)
    days = np.empty((n, 11), dtype=np.int64)
    for t in range(10):
        if t + 1 in fresh_days:
            days[:, t] = _sample(rng, np.broadcast_to(MARKOV_INITIAL, (n, NUM_WEATHERS)))
        else:
            days[:, t] = _sample(rng, MARKOV_TRANSITION[days[:, t - 1]])
    days[:, 10] = _sample(rng, table[days[:, 0], days[:, 3], days[:, 7]])
    return _split(days, 10)


@_checks.shaped
def one_four_eight_bayes_accuracy(table: Real[np.ndarray, "3 3 3 3"], fresh_days=(1, 4, 8)) -> BayesAccuracy:
    """Exact: ``sum P(day1, day4, day8) * max table[day1, day4, day8]``.

    The joint law of (day 1, day 4, day 8) is propagated forward through the chain, day by day.
    """
    table = _probabilities("table", table)
    fresh_days = _fresh_days("fresh_days", fresh_days)

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
    days = np.empty((2 * memory + steps, n), dtype=np.int64)  # time first: each day of every chain side by side
    days[: 2 * memory] = np.concatenate([start, following[:, None]], axis=1).T
    for t in range(2 * memory, days.shape[0]):
        days[t] = _sample(rng, next_probs(days[t - memory : t].T))
    return np.ascontiguousarray(days.T)


def _n_days_probs(window: np.ndarray) -> np.ndarray:
    """``(memory - count) / (2 * memory)`` for each weather in the last ``memory`` days."""
    memory = window.shape[1]
    counts = np.stack([(window == w).sum(axis=1) for w in range(NUM_WEATHERS)], axis=1)
    return (memory - counts) / (2 * memory)


def _run_n_days_chains(n: int, rng: np.random.Generator, memory: int, steps: int) -> np.ndarray:
    """``_run_chains(_n_days_probs, n, rng, memory, steps)``: the same days from the same draws, faster. Each
    chain's counts of its last ``memory`` days are kept up to date (one day in, one day out) instead of recounted
    at every step, and the days are stored day by day (each day of every chain side by side in memory)."""
    start, following = markov(n, rng, length=2 * memory - 1)
    days = np.empty((2 * memory + steps, n), dtype=np.int64)  # time first: one row per day
    days[: 2 * memory] = np.concatenate([start, following[:, None]], axis=1).T
    weathers = np.arange(NUM_WEATHERS)
    counts = (days[memory : 2 * memory, :, None] == weathers).sum(axis=0)  # (n, 3): the window before day 2 memory
    for t in range(2 * memory, days.shape[0]):
        days[t] = _sample(rng, (memory - counts) / (2 * memory))
        counts += days[t, :, None] == weathers  # the new day enters the window
        counts -= days[t - memory, :, None] == weathers  # and the oldest leaves it
    return np.ascontiguousarray(days.T)


def n_days(
    n: int, rng: np.random.Generator, memory: int = 10, length: int = 10, burn_in: int = 100
) -> tuple[Int[np.ndarray, "n length"], Int[np.ndarray, " n"]]:
    """The n-days process: a weather seen ``k`` times in the last ``memory`` days comes next with
    probability ``(memory - k) / (2 * memory)``. With ``memory > length`` some of the days that
    matter are hidden from the model (the articles use memory 10 and 15, length 10).
    """
    n = _checks.positive_int("n", n)
    rng = _checks.numpy_rng("rng", rng)
    memory = _checks.positive_int("memory", memory)
    length = _checks.positive_int("length", length)
    burn_in = _checks.positive_int("burn_in", burn_in)
    days = _run_n_days_chains(n, rng, memory, burn_in + length + 1)
    return _split(days, length)


@_checks.shaped
def dotmod_probs(window: Int[np.ndarray, "n memory"], first_value: int = 1, noise: float = 0.02) -> Float[np.ndarray, "n 3"]:
    """Next-day law of the dotmod process given the last days (oldest first), shape ``(n, 3)``.

    With ``y`` the weathers coded ``first_value, first_value + 1, first_value + 2``, the next day is
    ``(y * (2 - y)) . beta mod 3`` with probability ``1 - 2 * noise``, each other weather with
    probability ``noise``. The articles' code codes the weathers 1, 2, 3 (the default); their text
    says 0, 1, 2. ``noise`` lies in ``[0, 0.5]``: beyond 0.5, ``1 - 2 * noise`` would be negative.
    """
    window = _weathers("window", window)
    if window.shape[1] < 1:
        raise ValueError(f"window must hold at least one day (shape (n, memory) with memory >= 1), got {window.shape}")
    first_value = _first_value(first_value)
    noise = _checks.probability("noise", noise, high=0.5)
    y = window + first_value
    beta = np.resize(DOTMOD_BETA, window.shape[1])
    target = ((y * (2 - y)) @ beta) % NUM_WEATHERS
    probs = np.full((window.shape[0], NUM_WEATHERS), noise)
    probs[np.arange(window.shape[0]), target] = 1.0 - 2 * noise
    return probs


def dotmod(
    n: int, rng: np.random.Generator, memory: int = 10, length: int = 10, burn_in: int = 100, first_value: int = 1
) -> tuple[Int[np.ndarray, "n length"], Int[np.ndarray, " n"]]:
    """The dotmod process: a non-linear (modular) function of the last ``memory`` days, 4 % noise."""
    n = _checks.positive_int("n", n)
    rng = _checks.numpy_rng("rng", rng)
    memory = _checks.positive_int("memory", memory)
    length = _checks.positive_int("length", length)
    burn_in = _checks.positive_int("burn_in", burn_in)
    first_value = _first_value(first_value)
    days = _run_chains(lambda w: dotmod_probs(w, first_value), n, rng, memory, burn_in + length + 1)
    return _split(days, length)


def dotmod_bayes_accuracy(memory: int = 10, length: int = 10) -> BayesAccuracy:
    """Exact when the visible days include all ``memory`` days the rule reads: 0.96 (the rule's
    weather has probability ``1 - 2 * 0.02``)."""
    memory = _checks.positive_int("memory", memory)
    length = _checks.positive_int("length", length)
    if length < memory:
        raise ValueError(f"length must be at least memory={memory} for dotmod's accuracy to be exact, got {length}")
    return BayesAccuracy(0.96, exact=True)


_LAW_PROCESSES = ("Markov", "1-4-8", "10-days", "dotmod")


@_checks.shaped
def next_day_law(
    process: str, days: Int[np.ndarray, "n 10"], table: Real[np.ndarray, "3 3 3 3"] | None = None
) -> Float[np.ndarray, "n 3"]:
    """The exact law of day 11 given the 10 visible days, for the processes whose law they fix.

    ``process`` is one of ``"Markov"`` (the transition row of day 10), ``"1-4-8"`` (``table[day 1,
    day 4, day 8]``, ``table`` required), ``"10-days"`` (``(10 - k) / 20``) or ``"dotmod"`` (the rule's
    weather with probability 0.96). 15-days has no such law: five of the days it reads are hidden.
    """
    if process not in _LAW_PROCESSES:
        raise ValueError(f"process must be one of {_LAW_PROCESSES} (the law of 15-days depends on hidden days), "
                         f"got {process!r}")
    days = _weathers("days", days)
    if days.ndim != 2 or days.shape[1] != 10:
        raise ValueError(f"days must have shape (n, 10), got {days.shape}")
    if process == "Markov":
        return MARKOV_TRANSITION[days[:, -1]]
    if process == "1-4-8":
        if table is None:
            raise ValueError("table is required for process '1-4-8' (from one_four_eight_table)")
        table = _probabilities("table", table)
        return table[days[:, 0], days[:, 3], days[:, 7]]
    if process == "10-days":
        return _n_days_probs(days)
    return dotmod_probs(days)


def bayes_loss(
    process: str,
    days: Int[np.ndarray, "n 10"],
    table: Real[np.ndarray, "3 3 3 3"] | None = None,
    next_day: Int[np.ndarray, " n"] | None = None,
) -> float:
    """The Bayes-optimal cross-entropy (nats) on ``days``, from :func:`next_day_law`.

    Without ``next_day``: the mean entropy of the law, the lowest expected loss of any model on
    sequences drawn like ``days``. With ``next_day`` (the days that came): the loss that the
    Bayes-optimal predictor actually scores on these sequences, ``mean(-ln law[next_day])``, the
    number to compare with a model's loss on the same test set.
    """
    law = next_day_law(process, days, table)
    if next_day is not None:
        next_day = _weathers("next_day", next_day)
        if next_day.shape != (law.shape[0],):
            raise ValueError(f"next_day must have shape ({law.shape[0]},), one day per sequence, got {next_day.shape}")
        return float(-np.log(law[np.arange(law.shape[0]), next_day]).mean())
    terms = np.where(law > 0, -law * np.log(np.where(law > 0, law, 1.0)), 0.0)  # 0 ln 0 = 0
    return float(terms.sum(axis=1).mean())


_MAX_LOOKUP_LENGTH = 14  # the lookup table of n_days_bayes_accuracy has 3**length cells per weather: 4.8 million at 14


def n_days_bayes_accuracy(
    memory: int, rng: np.random.Generator, length: int = 10, chains: int = 2000, steps: int = 400, burn_in: int = 100
) -> BayesAccuracy:
    """Monte Carlo estimate of the best accuracy from ``length`` visible days.

    Windows are cut from ``chains`` long chains. For each window we know the exact law of the next
    day, ``p = (memory - counts) / (2 memory)``, hidden days included. When nothing is hidden
    (``memory <= length``) the best prediction is ``argmax p`` and the accuracy is ``E[max p]``.
    Otherwise the optimum is out of reach and we report a **lower bound**: the accuracy of one real
    predictor, scored with the exact ``p`` on half of the chains (half B). The predictor is the better,
    on the other half (A), of two rules: "the least frequent visible weather" and a lookup table of
    ``E[p | visible days]`` estimated on A (with 3**10 possible windows, the table is noisy; the simple
    rule often wins). Half B plays no part in the choice, so the reported score is not the larger of
    two noisy scores; on A the table is compared cross-fitted (fitted on one fold of A's chains, scored
    on the other, and the other way round), not on the windows it was fitted on.
    The standard error treats each chain's mean as one sample, since windows of a chain are correlated.

    Each chain yields ``steps - max(memory, length)`` windows, so ``steps`` must exceed
    ``max(memory, length)``; the standard error needs two scored chains (``chains >= 2``, or ``>= 3``
    when half of them fit the lookup table).
    """
    memory = _checks.positive_int("memory", memory)
    rng = _checks.numpy_rng("rng", rng)
    length = _checks.positive_int("length", length)
    chains = _checks.positive_int("chains", chains)
    steps = _checks.positive_int("steps", steps)
    burn_in = _checks.positive_int("burn_in", burn_in)
    span = max(memory, length) + 1  # the days that matter for the next day, and that day
    if steps < span:
        raise ValueError(f"steps must be at least max(memory, length) + 1 = {span} for one window per chain, got {steps}")
    scored = chains if memory <= length else chains - chains // 2  # chains whose windows are scored
    if scored < 2:
        least = 2 if memory <= length else 3
        raise ValueError(f"chains must be at least {least} for a standard error"
                         f"{' (half of them fit the lookup table and choose the rule)' if memory > length else ''}, got {chains}")
    if memory > length > _MAX_LOOKUP_LENGTH:
        raise ValueError(f"length must be at most {_MAX_LOOKUP_LENGTH} when memory > length (the lookup table has "
                         f"3**length cells per weather), got {length}")
    days = _run_n_days_chains(chains, rng, memory, burn_in + steps)
    starts = range(2 * memory + burn_in, days.shape[1] - span + 1)
    windows = np.stack([days[:, s : s + span - 1] for s in starts], axis=1)  # (chains, per chain, span-1)
    probs = _n_days_probs(windows[..., -memory:].reshape(-1, memory)).reshape(windows.shape[:2] + (NUM_WEATHERS,))
    visible = windows[..., -length:]
    if memory <= length:
        method = "most probable next day"
        best = probs.max(axis=-1)  # (chains, per chain)
    else:
        # Half A (the first chains // 2 chains) fits the lookup table and chooses the rule; half B, which
        # played no part in either, scores the chosen rule. Choosing on the scored half would report the
        # larger of two noisy scores (a selection bias); choosing with a table scored on the windows it
        # was fitted on would favour the table. So the choice compares the rules on A with the table
        # cross-fitted: fitted on one fold of A's chains, scored on the other, and the other way round.
        codes = visible @ (NUM_WEATHERS ** np.arange(length))
        counts = np.stack([(visible == w).sum(axis=-1) for w in range(NUM_WEATHERS)], axis=-1)
        rarest = counts.argmin(axis=-1)  # rule 1: the least frequent visible weather

        def lookup(fitted: np.ndarray, scored: np.ndarray) -> np.ndarray:
            """Rule 2 on the chains ``scored``, its table of E[p | visible days] fitted on ``fitted``."""
            expected = np.stack(
                [np.bincount(codes[fitted].ravel(), weights=probs[fitted][..., w].ravel(), minlength=NUM_WEATHERS**length)
                 for w in range(NUM_WEATHERS)],
                axis=-1,
            )
            table = expected[codes[scored]]
            return np.where(table.sum(axis=-1) > 0, table.argmax(axis=-1), rarest[scored])

        def score(choice: np.ndarray, chains_: np.ndarray) -> np.ndarray:
            return np.take_along_axis(probs[chains_], choice[..., None], axis=-1)[..., 0]

        half_a, half_b = np.arange(chains // 2), np.arange(chains // 2, chains)
        fold_1, fold_2 = half_a[0::2], half_a[1::2]
        on_a = {
            "least frequent visible weather": score(rarest[half_a], half_a).mean(),
            "lookup table of E[p | visible days]": np.concatenate(
                [score(lookup(fold_1, fold_2), fold_2).ravel(), score(lookup(fold_2, fold_1), fold_1).ravel()]).mean(),
        }
        method = max(on_a, key=lambda name: on_a[name])  # a tie keeps the simple rule
        choice = rarest[half_b] if method == "least frequent visible weather" else lookup(half_a, half_b)
        best = score(choice, half_b)
    per_chain = best.mean(axis=1)
    stderr = float(per_chain.std(ddof=1) / np.sqrt(len(per_chain)))
    return BayesAccuracy(float(best.mean()), exact=False, stderr=stderr, samples=int(best.size),
                         lower_bound=memory > length, method=method)


# --------------------------------------------------------------------------- features


@_checks.shaped
def features(tokens: Int[np.ndarray, "*batch T"], max_length: int = 20) -> Float[np.ndarray, "*batch T 4"]:
    """The articles' 4 input features per day: one-hot weather and ``(t + 1) / max_length``.

    ``tokens`` of shape ``(..., T)``, weathers 0, 1, 2 with ``T <= max_length``, gives
    ``(..., T, 4)`` float32.
    """
    tokens = _weathers("tokens", tokens)
    max_length = _checks.positive_int("max_length", max_length)
    if tokens.shape[-1] > max_length:
        raise ValueError(f"tokens must have at most max_length={max_length} days, got {tokens.shape[-1]}")
    one_hot = np.eye(NUM_WEATHERS, dtype=np.float32)[tokens]
    position = (np.arange(1, tokens.shape[-1] + 1, dtype=np.float32) / max_length)[:, None]
    position = np.broadcast_to(position, tokens.shape + (1,))
    return np.concatenate([one_hot, position], axis=-1)
