"""The weather experiments of source 003 ("Understanding what self-attention is doing"),
re-implemented the way the article does them, so a benchmark can time them.

This file is not part of the book's library and nothing should import from it except a
benchmark. It re-implements the article's *algorithm* and keeps its *costs* on purpose:

* weather sequences are Python strings of emoji (every weather is two code points:
  the symbol plus U+FE0F), grown one day at a time by string concatenation, with one
  ``numpy.random.Generator.choice`` call per day, and read back by slicing the string;
* embeddings are built per sequence with a Python loop (one-hot of the 3 weathers plus
  (t+1)/20), converted to a ``jnp`` array one sequence at a time, then stacked;
* the model is single-head attention with *columns* as tokens, weights drawn with
  ``jax.random.normal``, and the article's mask, which fills the strictly *lower* triangle
  of the score matrix with -inf, so query i sees keys j >= i (the reverse of the usual
  causal mask); accuracy is read at position 0, the only position that sees every day;
* training is the article's loop: Adam(1e-2), 500 steps, ``n_data // minibatch_size`` steps
  per "epoch", each step on the *whole* permuted data set (the minibatch size only sets
  the number of steps), ``loss.item()`` every step and the full test loss every step
  through a fresh ``jax.jit(loss_fn)`` wrapper.

The one deliberate change is the Optax fix described in ``train``.

Run it: ``python bench/source_weather.py [--seed N] [--article-seeds] [--legacy-prng]``.
With ``--article-seeds`` the numpy stream reproduces the article's example strings exactly
(Markov, 1-4-8, 10-days and dotmod examples). Adding ``--legacy-prng`` (JAX's pre-0.5
non-partitionable threefry, which the article's JAX used) also reproduces 7 of the 9
accuracies the English article prints to three decimals; the two dotmod numbers differ.

Where the time goes: besides the per-day Python work, ``jnp.stack`` over a list of N
per-sequence arrays is compiled by XLA once per distinct N in a process (about 2 s for
N = 1000 and 20 s for N = 5000 on a 2-core CPU), and that lands in the data time of the
first data sets of each size (Markov, 1-4-8).
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from functools import partial
from typing import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

# Each weather is two code points (the symbol and the emoji variation selector U+FE0F),
# which is why the article slices its strings in steps of two.
RAIN = "\U0001f327\ufe0f"
CLOUD = "\u2601\ufe0f"
SUN = "\u2600\ufe0f"
WEATHERS = [RAIN, CLOUD, SUN]

MAX_SEQ_LEN = 20  # L in the positional feature (t + 1) / L
SEQ_LEN = 10
D_ATTN = 6
N_TOTAL_STEPS = 500
MINIBATCH = 100
LEARNING_RATE = 1e-2

# The seeds the article uses: numpy PCG64(20230508) for data, PRNGKey(1234) for JAX.
ARTICLE_NUMPY_SEED = 20230508
ARTICLE_JAX_SEED = 1234

# Markov transition rows; the "" row is used for the first day and for the days the
# 1-4-8 generator draws independently.
MARKOV_TABLE = {
    "": [0.3, 0.4, 0.3],
    RAIN: [0.6, 0.3, 0.1],
    CLOUD: [0.3, 0.4, 0.3],
    SUN: [0.2, 0.3, 0.5],
}

DOTMOD_BETA = np.tile([0, 1, 2, 3, 2, 1], (10,))

# Accuracies printed in the English article (None: the article did not run it).
ARTICLE_ACCURACY = {
    ("markov", "attention"): 0.498,
    ("markov", "linear"): None,
    ("1-4-8", "attention"): 0.402,
    ("1-4-8", "linear"): 0.442,
    ("10-days", "linear"): 0.416,
    ("10-days", "attention"): 0.363,
    ("15-days", "linear"): 0.342,
    ("15-days", "attention"): 0.356,
    ("dotmod", "linear"): 0.744,
    ("dotmod", "attention"): 0.435,
}


# ----------------------------------------------------------------------------- data


class WeatherSource:
    """All the article's day-by-day generators, sharing one numpy Generator
    (the article's module-level ``_GEN``)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.table_148: dict[str, list[float]] | None = None

    # One day of each process: take the string so far, return it with one more day.

    def markov(self, history: str) -> str:
        probs = MARKOV_TABLE[history[-2:]]
        return history + self.rng.choice(WEATHERS, p=probs)

    def build_148_table(self) -> None:
        """For each (day 1, day 4, day 8) triple, a distribution (i, j, k)/10 with
        i + j + k = 10 and each of i, j, k in 1..8, picked at random."""
        triples = [
            (a, b, c)
            for a in range(1, 9)
            for b in range(1, 9)
            for c in range(1, 9)
            if a + b + c == 10
        ]
        table = {}
        for w1 in WEATHERS:
            for w4 in WEATHERS:
                for w8 in WEATHERS:
                    row = self.rng.choice(triples)
                    table[w1 + w4 + w8] = [x / 10 for x in row]
        self.table_148 = table

    def one_four_8(self, history: str) -> str:
        n_days = len(history) // 2
        if n_days == 10:
            # Day 11 from days 1, 4 and 8 (characters 0:2, 6:8, 14:16).
            key = history[0:2] + history[6:8] + history[14:16]
            return history + self.rng.choice(WEATHERS, p=self.table_148[key])
        if n_days in (4, 8):
            # The code draws days 5 and 9 independently (the text says days 4 and 8).
            return history + self.rng.choice(WEATHERS, p=MARKOV_TABLE[""])
        return self.markov(history)

    def ndays(self, history: str, n: int = 10) -> str:
        counts = np.zeros(3)
        recent = history[-2 * n :]
        for i in range(n):
            counts[WEATHERS.index(recent[2 * i : 2 * i + 2])] += 1
        probs = (n - counts) / (2 * n)
        return history + self.rng.choice(WEATHERS, p=probs)

    def dotmod(self, history: str, n: int = 10) -> str:
        y = np.zeros(n, dtype=int)
        recent = history[-2 * n :]
        for i in range(n):
            # The code codes the weathers 1, 2, 3 (the text says 0, 1, 2).
            y[i] = WEATHERS.index(recent[2 * i : 2 * i + 2]) + 1
        probs = [0.02, 0.02, 0.02]
        probs[np.dot(y * (2 - y), DOTMOD_BETA[:n]) % 3] = 0.96
        return history + self.rng.choice(WEATHERS, p=probs)


def unroll(step: Callable[[str], str], n_days: int, start: str = "") -> str:
    """Apply a one-day generator n_days times (the article's ``generate``)."""
    out = start
    for _ in range(n_days):
        out = step(out)
    return out


def embed(seq: str) -> np.ndarray:
    """(4, days) features: one-hot weather in rows 0-2, (t + 1) / MAX_SEQ_LEN in row 3."""
    n_days = len(seq) // 2
    e = np.zeros((4, n_days))
    for t in range(n_days):
        e[WEATHERS.index(seq[2 * t : 2 * t + 2]), t] = 1.0
        e[3, t] = (t + 1) / MAX_SEQ_LEN
    return e


@dataclasses.dataclass
class Dataset:
    weathers: list[str]
    embeddings: jax.Array  # (size, 4, seq_len)
    next_weather_indices: jax.Array  # (size,)

    def __len__(self) -> int:
        return len(self.weathers)


def _collect(windows: Callable[[], str], size: int) -> Dataset:
    strings, embs, targets = [], [], []
    for _ in range(size):
        w = windows()
        strings.append(w)
        embs.append(jnp.array(embed(w[:-2])))
        targets.append(WEATHERS.index(w[-2:]))
    return Dataset(strings, jnp.stack(embs), jnp.array(targets))


def independent_dataset(step: Callable[[str], str], seq_len: int, size: int) -> Dataset:
    """``size`` independent sequences of seq_len + 1 days, each grown from nothing."""
    return _collect(lambda: unroll(step, seq_len + 1), size)


def window_dataset(
    src: WeatherSource, step: Callable[[str], str], seq_len: int, size: int, n: int
) -> Dataset:
    """Windows of seq_len + 1 days cut from one chain of seq_len * size * 2 days that
    starts from 2n Markov days. As in the article, the start is drawn from
    [0, seq_len * size * 2 - 11), so windows may cover the Markov burn-in and never
    reach the chain's last 2n + 11 days."""
    total = seq_len * size * 2
    chain = unroll(step, total, unroll(src.markov, n * 2))

    def window() -> str:
        start = src.rng.integers(0, total - 11)
        return chain[start * 2 : start * 2 + (seq_len + 1) * 2]

    return _collect(window, size)


# ----------------------------------------------------------------------------- models


def reversed_causal_fill(scores: jax.Array, fill: float = -jnp.inf) -> jax.Array:
    """The article's mask: entries strictly below the diagonal (key j < query i) become
    ``fill``, so query i attends to keys j >= i."""
    below = jnp.tri(scores.shape[0], dtype=bool, k=-1)
    return jax.lax.select(below, jnp.ones_like(scores) * fill, scores)


class ColumnAttention(eqx.Module):
    """Single-head self-attention over a (d_in, T) input, tokens as columns, with the
    article's mask. Returns (d_out, T)."""

    w_q: jax.Array
    b_q: jax.Array
    w_k: jax.Array
    b_k: jax.Array
    w_v: jax.Array
    b_v: jax.Array
    sqrt_d_attn: float

    def __init__(self, d_in: int, d_attn: int, d_out: int, key: jax.Array) -> None:
        keys = jax.random.split(key, 6)
        self.w_q = jax.random.normal(keys[0], (d_attn, d_in))
        self.b_q = jax.random.normal(keys[1], (d_attn, 1))
        self.w_k = jax.random.normal(keys[2], (d_attn, d_in))
        self.b_k = jax.random.normal(keys[3], (d_attn, 1))
        self.w_v = jax.random.normal(keys[4], (d_out, d_in))
        self.b_v = jax.random.normal(keys[5], (d_out, 1))
        self.sqrt_d_attn = float(np.sqrt(d_attn))

    def __call__(self, e: jax.Array) -> jax.Array:
        q = self.w_q @ e + self.b_q
        k = self.w_k @ e + self.b_k
        v = self.w_v @ e + self.b_v
        # Mask first, then scale (-inf / s is still -inf), as the article does.
        weights = jax.nn.softmax(reversed_causal_fill(q.T @ k) / self.sqrt_d_attn, axis=-1)
        return v @ weights.T


class FlatLinear(eqx.Module):
    """Multinomial logistic regression on the flattened (d_in * T) input."""

    w: jax.Array
    b: jax.Array

    def __init__(self, d_in: int, d_out: int, key: jax.Array) -> None:
        kw, kb = jax.random.split(key)
        self.w = jax.random.normal(kw, (d_out, d_in))
        self.b = jax.random.normal(kb, (d_out,))

    def __call__(self, e: jax.Array) -> jax.Array:
        return self.w @ e.flatten() + self.b


def attention_nll(model, seqs: jax.Array, targets: jax.Array) -> jax.Array:
    """Every position predicts the day after the window; sum over positions, mean over
    the batch."""
    out = jax.vmap(model)(seqs)  # (B, 3, T)
    logp = jax.nn.log_softmax(out, axis=1)
    picked = logp * jax.nn.one_hot(targets, num_classes=3)[:, :, None]
    return -jnp.mean(jnp.sum(picked.reshape(seqs.shape[0], -1), axis=-1))


def linear_nll(model, seqs: jax.Array, targets: jax.Array) -> jax.Array:
    logp = jax.nn.log_softmax(jax.vmap(model)(seqs), axis=1)  # (B, 3)
    return -jnp.mean(jnp.sum(logp * jax.nn.one_hot(targets, num_classes=3), axis=1))


@jax.jit
def attention_accuracy(model, seqs: jax.Array, targets: jax.Array) -> jax.Array:
    out = jax.vmap(model)(seqs)  # (B, 3, T)
    guess = jnp.argmax(out[:, :, 0], axis=1)  # read at position 0, as the article does
    return jnp.sum(guess == targets) / seqs.shape[0]


@jax.jit
def linear_accuracy(model, seqs: jax.Array, targets: jax.Array) -> jax.Array:
    guess = jnp.argmax(jax.vmap(model)(seqs), axis=1)
    return jnp.sum(guess == targets) / seqs.shape[0]


# ----------------------------------------------------------------------------- training


def train(
    n_total_steps: int,
    minibatch_size: int,
    model,
    ds: Dataset,
    test_ds: Dataset,
    key: jax.Array,
    learning_rate: float = LEARNING_RATE,
    loss_fn=attention_nll,
):
    """The article's loop, inefficiencies included. Returns (model, key, train losses,
    test losses)."""
    n_data = len(ds)
    optim = optax.adam(learning_rate)

    @eqx.filter_jit
    def one_step(model, seqs, targets, opt_state):
        loss, grads = eqx.filter_value_and_grad(loss_fn)(model, seqs, targets)
        updates, opt_state = optim.update(grads, opt_state)
        return loss, eqx.apply_updates(model, updates), opt_state

    # Minimum fix for current Optax/Equinox: the article calls ``optim.init(model)``.
    # With the attention model's Python-float field ``sqrt_d_attn`` that state holds an
    # array where the gradients (from filter_value_and_grad) hold None, and
    # ``optim.update`` fails with a pytree structure error. Initialising on the array
    # leaves only makes the two trees match; nothing else changes.
    opt_state = optim.init(eqx.filter(model, eqx.is_array))

    steps_per_epoch = n_data // minibatch_size
    train_losses, test_losses = [], []
    for _ in range(n_total_steps // steps_per_epoch):
        key, perm_key = jax.random.split(key)
        order = jax.random.permutation(perm_key, n_data, independent=True)
        for _ in range(steps_per_epoch):
            # The article's bug, kept: every "minibatch" step takes the whole data set.
            seqs = ds.embeddings[order]
            targets = ds.next_weather_indices[order]
            loss, model, opt_state = one_step(model, seqs, targets, opt_state)
            train_losses.append(loss.item())
            test_loss = jax.jit(loss_fn)(model, test_ds.embeddings, test_ds.next_weather_indices)
            test_losses.append(test_loss.item())
    return model, key, train_losses, test_losses


# ----------------------------------------------------------------------------- experiments


def _advance_like_sampling_demo(key: jax.Array, n: int = 20) -> jax.Array:
    """After the Markov experiment the article samples 20 days from the model, splitting
    the key once per day; replay only the key splits so later keys match its chain."""
    for _ in range(n):
        _, key = jax.random.split(key)
    return key


def run_all(
    seed: int = 0,
    *,
    numpy_seed: int | None = None,
    jax_seed: int | None = None,
    replay_demos: bool = True,
    verbose: bool = False,
) -> list[dict]:
    """Run the article's five experiments (10 trainings) in the article's order.

    ``numpy_seed``/``jax_seed`` default to ``seed``; pass ARTICLE_NUMPY_SEED and
    ARTICLE_JAX_SEED for the article's seeds. With ``replay_demos`` the random draws of
    the article's demonstration cells (example strings, sampling from the model) are
    replayed untimed, so the data and keys follow the article's random streams.

    Each row: name, model, accuracy, data_seconds (generating that data set's train and
    test sets: the same value on both rows of a data set, count it once), train_seconds
    (the ``train`` call, compilation included), in_article (False for the one training
    the article did not run: linear on Markov), article_accuracy.
    The article's key chain is threaded through its own trainings; the extra Markov
    linear training uses a separate key so it does not shift that chain.
    """
    src = WeatherSource(seed if numpy_seed is None else numpy_seed)
    key = jax.random.PRNGKey(seed if jax_seed is None else jax_seed)
    extra_key = jax.random.fold_in(key, 1)
    jnp.zeros(1).block_until_ready()  # start the backend outside the timers

    rows: list[dict] = []

    def make_data(build):
        t0 = time.perf_counter()
        ds, test_ds = build()
        test_ds.embeddings.block_until_ready()
        return ds, test_ds, time.perf_counter() - t0

    def fit(name, kind, ds, test_ds, data_s, key, in_article=True):
        if kind == "attention":
            model = ColumnAttention(4, D_ATTN, 3, key)
            loss_fn, acc_fn = attention_nll, attention_accuracy
        else:
            model = FlatLinear(4 * SEQ_LEN, 3, key)
            loss_fn, acc_fn = linear_nll, linear_accuracy
        t0 = time.perf_counter()
        model, key, _, _ = train(
            N_TOTAL_STEPS, MINIBATCH, model, ds, test_ds, key, LEARNING_RATE, loss_fn
        )
        train_s = time.perf_counter() - t0
        acc = acc_fn(model, test_ds.embeddings, test_ds.next_weather_indices).item()
        row = dict(
            name=name,
            model=kind,
            accuracy=acc,
            data_seconds=data_s,
            train_seconds=train_s,
            in_article=in_article,
            article_accuracy=ARTICLE_ACCURACY[(name, kind)],
        )
        rows.append(row)
        if verbose:
            print(_format_row(row), flush=True)
        return key

    # 1. Markov (1000 train). The article trains attention only.
    if replay_demos:
        unroll(src.markov, 10)
    ds, test_ds, data_s = make_data(
        lambda: (
            independent_dataset(src.markov, SEQ_LEN, 1000),
            independent_dataset(src.markov, SEQ_LEN, 1000),
        )
    )
    key = fit("markov", "attention", ds, test_ds, data_s, key)
    fit("markov", "linear", ds, test_ds, data_s, extra_key, in_article=False)
    if replay_demos:
        key = _advance_like_sampling_demo(key)

    # 2. 1-4-8 (5000 train): attention, then linear. The table is built at its cell.
    def build_148():
        src.build_148_table()
        if replay_demos:
            unroll(src.one_four_8, 11)  # the example string (counted in the time; tiny)
        return (
            independent_dataset(src.one_four_8, SEQ_LEN, 5000),
            independent_dataset(src.one_four_8, SEQ_LEN, 1000),
        )

    ds, test_ds, data_s = make_data(build_148)
    key = fit("1-4-8", "attention", ds, test_ds, data_s, key)
    key = fit("1-4-8", "linear", ds, test_ds, data_s, key)

    # 3. 10 days (5000 train): linear, then attention.
    if replay_demos:
        unroll(src.ndays, 100, unroll(src.markov, 10))
    ds, test_ds, data_s = make_data(
        lambda: (
            window_dataset(src, partial(src.ndays, n=10), SEQ_LEN, 5000, n=10),
            window_dataset(src, partial(src.ndays, n=10), SEQ_LEN, 1000, n=10),
        )
    )
    key = fit("10-days", "linear", ds, test_ds, data_s, key)
    key = fit("10-days", "attention", ds, test_ds, data_s, key)

    # 4. 15 days (5000 train): linear, then attention.
    ds, test_ds, data_s = make_data(
        lambda: (
            window_dataset(src, partial(src.ndays, n=15), SEQ_LEN, 5000, n=15),
            window_dataset(src, partial(src.ndays, n=15), SEQ_LEN, 1000, n=15),
        )
    )
    key = fit("15-days", "linear", ds, test_ds, data_s, key)
    key = fit("15-days", "attention", ds, test_ds, data_s, key)

    # 5. dotmod (5000 train): linear, then attention.
    if replay_demos:
        unroll(src.dotmod, 100, unroll(src.markov, 10))
    ds, test_ds, data_s = make_data(
        lambda: (
            window_dataset(src, partial(src.dotmod, n=10), SEQ_LEN, 5000, n=10),
            window_dataset(src, partial(src.dotmod, n=10), SEQ_LEN, 1000, n=10),
        )
    )
    key = fit("dotmod", "linear", ds, test_ds, data_s, key)
    key = fit("dotmod", "attention", ds, test_ds, data_s, key)
    return rows


def _format_row(row: dict) -> str:
    art = row["article_accuracy"]
    art_s = "  -  " if art is None else f"{art:.3f}"
    mark = "" if row["in_article"] else "  (not run in the article)"
    return (
        f"{row['name']:<8} {row['model']:<9} {row['accuracy']:>8.3f} {art_s:>8} "
        f"{row['data_seconds']:>8.2f} {row['train_seconds']:>8.2f}{mark}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--article-seeds",
        action="store_true",
        help="numpy PCG64(20230508) and PRNGKey(1234), as in the article",
    )
    parser.add_argument(
        "--legacy-prng",
        action="store_true",
        help="jax_threefry_partitionable=False, the JAX default when the article ran",
    )
    args = parser.parse_args()
    if args.legacy_prng:
        jax.config.update("jax_threefry_partitionable", False)
    kwargs = {}
    if args.article_seeds:
        kwargs = dict(numpy_seed=ARTICLE_NUMPY_SEED, jax_seed=ARTICLE_JAX_SEED)
    print(f"{'data':<8} {'model':<9} {'accuracy':>8} {'article':>8} {'data s':>8} {'train s':>8}")
    t0 = time.perf_counter()
    run_all(args.seed, verbose=True, **kwargs)
    print(f"total seconds: {time.perf_counter() - t0:.1f}")


if __name__ == "__main__":
    main()
