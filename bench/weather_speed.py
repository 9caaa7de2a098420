"""Time the five weather experiments of chapter 2 two ways on this machine.

* the book's way: `attnbook.data` generators (vectorised NumPy) and `attnbook.train.fit`
  (500 minibatch steps, each followed by a test-loss evaluation, in one `jax.lax.scan`);
* the sources' way: `bench/source_weather.py`, a re-implementation of the algorithm of source
  articles 000/003 (string-built sequences, a Python training loop), run in a fresh process.

Both run the same ten trainings (attention and linear on Markov, 1-4-8, 10-days, 15-days, dotmod)
at the articles' sizes, data generation and compilation included. One difference in the work done:
the book evaluates the test loss every 5 steps, as chapter 2 does (`--eval-every 1` for every step,
as the articles do).

    python bench/weather_speed.py            # both, then the ratio
    python bench/weather_speed.py --book     # only the book's way
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import time


def run_book(seed: int = 0, eval_every: int = 5) -> list[dict]:
    import jax
    import numpy as np
    import optax

    from attnbook import data, train
    from attnbook.attention import SelfAttention
    from attnbook.baselines import LinearClassifier

    rng = np.random.default_rng(seed)
    table = data.one_four_eight_table(rng)
    processes = {
        "Markov": (lambda n: data.markov(n, rng), 1000),
        "1-4-8": (lambda n: data.one_four_eight(n, rng, table), 5000),
        "10-days": (lambda n: data.n_days(n, rng, memory=10), 5000),
        "15-days": (lambda n: data.n_days(n, rng, memory=15), 5000),
        "dotmod": (lambda n: data.dotmod(n, rng), 5000),
    }
    logits = {"attention": lambda m, x: m(x)[0][-1], "linear": lambda m, x: m(x)}
    losses = {kind: train.classification_loss(f) for kind, f in logits.items()}
    optimizer = optax.adam(1e-2)
    rows = []
    for name, (generate, n_train) in processes.items():
        start = time.perf_counter()
        x_train, y_train = generate(n_train)
        x_test, y_test = generate(1000)
        train_set, test_set = (data.features(x_train), y_train), (data.features(x_test), y_test)
        data_seconds = time.perf_counter() - start
        for kind in ("attention", "linear"):
            start = time.perf_counter()
            model = (SelfAttention(4, 6, 3, key=jax.random.key(0)) if kind == "attention"
                     else LinearClassifier(10, 4, 3, key=jax.random.key(0)))
            model, _ = train.fit(model, losses[kind], train_set, optimizer=optimizer, steps=500,
                                 batch_size=100, key=jax.random.key(1), test_data=test_set,
                                 eval_every=eval_every)
            accuracy = train.accuracy(logits[kind], model, *test_set)
            rows.append({"experiment": name, "model": kind, "accuracy": accuracy,
                         "data_seconds": data_seconds,
                         "train_seconds": time.perf_counter() - start})
    return rows


def print_table(title: str, rows: list[dict]) -> float:
    print(title)
    print(f"  {'experiment':10s} {'model':10s} {'accuracy':>8s} {'data s':>7s} {'train s':>8s}")
    for r in rows:
        print(f"  {r['experiment']:10s} {r['model']:10s} {r['accuracy']:8.3f} {r['data_seconds']:7.2f} {r['train_seconds']:8.2f}")
    # A data set is generated once for its two trainings: count its time once.
    data_total = sum({r["experiment"]: r["data_seconds"] for r in rows}.values())
    total = data_total + sum(r["train_seconds"] for r in rows)
    print(f"  total: {total:.1f} s")
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--book", action="store_true", help="time only the book's way")
    parser.add_argument("--eval-every", type=int, default=5, help="test-loss evaluation interval of the book's runs")
    parser.add_argument("--json", action="store_true", help="(internal) print the book's rows as JSON")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(run_book(eval_every=args.eval_every)))
        return
    here = pathlib.Path(__file__).resolve().parent
    # Each way runs in a fresh interpreter, so neither benefits from the other's compilation caches.
    start = time.perf_counter()
    book_rows = json.loads(subprocess.run([sys.executable, __file__, "--json", "--eval-every", str(args.eval_every)],
                                          check=True, capture_output=True, text=True).stdout)
    book_wall = time.perf_counter() - start
    book_total = print_table(f"The book's way (attnbook; test loss every {args.eval_every} steps):", book_rows)
    print(f"  wall time with interpreter start and imports: {book_wall:.1f} s")
    if args.book:
        return
    start = time.perf_counter()
    program = ("import json, sys; sys.path.insert(0, sys.argv[1]); import source_weather; "
               "print(json.dumps(source_weather.run_all()))")
    source = subprocess.run([sys.executable, "-c", program, str(here)], check=True, capture_output=True, text=True)
    source_wall = time.perf_counter() - start
    source_rows = [dict(r, experiment=r["name"]) for r in json.loads(source.stdout.strip().splitlines()[-1])]
    source_total = print_table("The sources' way (bench/source_weather.py):", source_rows)
    print(f"  wall time with interpreter start and imports: {source_wall:.1f} s")
    print(f"speed-up, timed work: {source_total / book_total:.1f}x; wall time: {source_wall / book_wall:.1f}x")


if __name__ == "__main__":
    main()
