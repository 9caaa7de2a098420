"""Chapter 7's ablations: one row per design choice, same task, same training budget, three seeds each.

The task is chapter 7's: reverse a string of 8 digits. Every row trains an ``attnbook.transformer.EncoderDecoder``
(d_model 32, 4 heads, feed-forward width 128, 2 layers unless the row says otherwise) for the same number of
Adam steps on the same 20000 training strings, and reports the exact-match accuracy of greedy decoding on 1000
held-out strings and the loss of the last 50 training steps. Seeds 0, 1, 2 set the initial weights and the
minibatch order; the data are the same for every run (NumPy seed 0).

Rows: the full model (pre-LN); no residual connections; no feed-forward layer; one layer; AFT-simple and
AFT-conv as the mixer; post-LN at the base learning rate; and, at two larger learning rates, pre-LN and
post-LN without warm-up and post-LN with a linear warm-up (``optax.linear_schedule``).

Writes lib/attnbook/experiments/results/transformer_ablations.csv (one line per run) and .json (the machine, the settings).
Chapter 7 reads both and reproduces the first row live. About 20 minutes on an idle 2-core machine:

    python bench/transformer_ablations.py

On a busy machine the runs can be shared between processes, each appending its results to a file of
JSON lines in a directory, and merged afterwards (the merged results are the same):

    python bench/transformer_ablations.py --shard 0/3 --partial /tmp/ablations   # and 1/3, 2/3
    python bench/transformer_ablations.py --merge --partial /tmp/ablations
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import time

import jax
import numpy as np
import optax

from attnbook import train, transformer
from attnbook.experiments import RunInfo, source_folder, write_csv
from attnbook.nn import count_parameters

SETTINGS = dict(length=8, train_size=20000, test_size=1000, data_seed=0, d_model=32, heads=4, depth=2,
                steps=600, batch_size=64, learning_rate=3e-3, warmup=100, seeds=[0, 1, 2])

# name -> (options of EncoderDecoder, learning rate, warm-up steps)
BASE = SETTINGS["learning_rate"]
ROWS = {
    "full model (pre-LN)": ({}, BASE, 0),
    "no residual connections": ({"residual": False}, BASE, 0),
    "no feed-forward layer": ({"feed_forward": False}, BASE, 0),
    "1 layer": ({"depth": 1}, BASE, 0),
    "AFT-simple mixer": ({"mixer": "aft-simple"}, BASE, 0),
    "AFT-conv mixer": ({"mixer": "aft-conv"}, BASE, 0),
    "post-LN": ({"pre_norm": False}, BASE, 0),
}
for lr in (2e-2, 3e-2):
    ROWS[f"pre-LN, lr {lr:g}"] = ({}, lr, 0)
    ROWS[f"post-LN, lr {lr:g}"] = ({"pre_norm": False}, lr, 0)
    ROWS[f"post-LN, lr {lr:g}, warm-up"] = ({"pre_norm": False}, lr, SETTINGS["warmup"])


def data():
    rng = np.random.default_rng(SETTINGS["data_seed"])
    train_set = transformer.reversal_data(SETTINGS["train_size"], SETTINGS["length"], rng)
    test_set = transformer.reversal_data(SETTINGS["test_size"], SETTINGS["length"], rng, exclude=train_set[0])
    return train_set, test_set


def optimizer(lr: float, warmup: int) -> optax.GradientTransformation:
    """Adam; with warm-up the rate rises linearly from 0 to ``lr`` over ``warmup`` steps, then stays."""
    return optax.adam(optax.linear_schedule(0.0, lr, warmup) if warmup else lr)


def run(options: dict, lr: float, warmup: int, seed: int, train_set, test_set) -> dict:
    options = dict(options)
    depth = options.pop("depth", SETTINGS["depth"])
    model = transformer.EncoderDecoder(transformer.DIGITS + 1, d_model=SETTINGS["d_model"], depth=depth, heads=SETTINGS["heads"],
                              key=jax.random.key(seed), **options)
    model, history = train.fit(model, transformer.sequence_loss, train_set, optimizer=optimizer(lr, warmup),
                               steps=SETTINGS["steps"], batch_size=SETTINGS["batch_size"],
                               key=jax.random.key(1000 + seed))
    loss = float(np.mean(history.train_loss[-50:]))
    accuracy = transformer.exact_match(model, test_set[0], test_set[2]) if np.isfinite(loss) else 0.0
    return dict(final_loss=round(loss, 5), exact_match=round(accuracy, 4),
                parameters=count_parameters(model))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shard", help="i/n: run only every n-th run, starting at the i-th, into --partial")
    parser.add_argument("--partial", type=pathlib.Path, help="directory of the shards' JSON-lines files")
    parser.add_argument("--merge", action="store_true", help="write the results from the shards in --partial")
    args = parser.parse_args()
    out = source_folder() / "transformer_ablations.csv"
    info = RunInfo("python bench/transformer_ablations.py")
    jobs = [(name, seed) for name in ROWS for seed in SETTINGS["seeds"]]
    done = {}  # runs already in --partial (a shard started again skips them)
    for path in sorted(args.partial.glob("*.jsonl")) if args.partial else []:
        for line in path.read_text(encoding="utf-8").splitlines():
            result = json.loads(line)
            done[result["row"], result["seed"]] = result
    if args.merge:
        missing = [job for job in jobs if job not in done]
        if missing:
            raise SystemExit(f"runs missing from {args.partial}: {missing}")
        write(out, [done[job] for job in jobs], info)
        return
    shard, count = (int(n) for n in args.shard.split("/")) if args.shard else (0, 1)
    train_set, test_set = data()
    rows = []
    for name, seed in [job for job in jobs if job not in done][shard::count]:
        options, lr, warmup = ROWS[name]
        began = time.time()
        result = run(options, lr, warmup, seed, train_set, test_set)
        rows.append(dict(row=name, seed=seed, learning_rate=lr, warmup=warmup, **result,
                         seconds=round(time.time() - began, 1), load_average=round(os.getloadavg()[0], 2)))
        print(rows[-1], flush=True)
        if args.partial:
            args.partial.mkdir(parents=True, exist_ok=True)
            with open(args.partial / f"shard-{shard}.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(rows[-1]) + "\n")
    if not args.shard:
        write(out, rows, info)


def write(out: pathlib.Path, rows: list[dict], info: RunInfo) -> None:
    write_csv(out, rows)
    loads = [r["load_average"] for r in rows if r.get("load_average") is not None]
    meta = info.metadata(duration_seconds=round(time.time() - info.start, 1),  # of this process (merging only: about 0)
                         load_average_1min_after_each_run=dict(min=min(loads, default=None), max=max(loads, default=None)),
                         seconds_of_all_runs=round(sum(r["seconds"] for r in rows), 1),
                         settings=SETTINGS, rows={name: dict(options=o, learning_rate=lr, warmup=w)
                                                  for name, (o, lr, w) in ROWS.items()})
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name}")


if __name__ == "__main__":
    main()
