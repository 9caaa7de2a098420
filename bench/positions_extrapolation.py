"""Chapter 8: six position encodings, three seeds each, evaluated at 1, 2, 4 and 8 times the training length.

The task and the model are ``attnbook.extrapolation``'s (``SETTINGS``): next-token prediction on a Markov
chain of order 2 over 8 symbols, a 2-layer causal Transformer (d_model 32, 4 heads) trained for 300 Adam
steps on sequences of length L = 32, one program per encoding with the three seeds vmapped. Each seed has
its own training data (NumPy seed 1000 + seed) and initial weights (``jax.random.key(seed)``); the held-out
sequences are the same for every model.

Writes
- bench/results/positions_extrapolation.csv: one line per encoding, seed and evaluation length, with the
  mean loss over all positions, over positions beyond L, and the final training loss (last 20 steps);
- bench/results/positions_per_position.csv: the mean loss at every position, per encoding, seed and length,
  and the optimum (``encoding = optimum``, the mean entropy of the true next-token distribution);
- bench/results/positions_extrapolation.json: the machine, the load average, the settings, the time per encoding.

Chapter 8 reads them and re-trains one seed live. A few minutes on an idle 2-core machine:

    python bench/positions_extrapolation.py
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from attention_cost import machine, write_csv  # noqa: E402

from attnbook import extrapolation as ex  # noqa: E402

SEEDS = [0, 1, 2]
MULTIPLES = [1, 2, 4, 8]
OUT = pathlib.Path(__file__).parent / "results"


def main() -> None:
    start, load_before = time.time(), os.getloadavg()
    L = ex.SETTINGS["train_length"]
    evals = {m: ex.experiment_eval_data(m) for m in MULTIPLES}
    summary, per_position, timings, loads = [], [], {}, []
    for m, (_, _, floor) in evals.items():
        per_position += [dict(encoding="optimum", seed="", eval_length=m * L, position=t, loss=round(float(v), 5))
                         for t, v in enumerate(floor.mean(axis=0))]
        summary.append(dict(encoding="optimum", seed="", eval_length=m * L, loss_all=round(float(floor.mean()), 5),
                            loss_beyond_L=round(float(floor[:, L:].mean()), 5) if m > 1 else "", final_train_loss=""))
    for encoding in ex.ENCODINGS:
        began = time.time()
        models, losses = ex.experiment_train(encoding, SEEDS)
        for i, seed in enumerate(SEEDS):
            model = ex.select(models, i)
            for m, (x, y, _) in evals.items():
                curve = np.asarray(ex.loss_per_position(model, x, y))
                per_position += [dict(encoding=encoding, seed=seed, eval_length=m * L, position=t, loss=round(float(v), 5))
                                 for t, v in enumerate(curve)]
                summary.append(dict(encoding=encoding, seed=seed, eval_length=m * L, loss_all=round(float(curve.mean()), 5),
                                    loss_beyond_L=round(float(curve[L:].mean()), 5) if m > 1 else "",
                                    final_train_loss=round(float(losses[i, -20:].mean()), 5)))
        timings[encoding] = round(time.time() - began, 1)
        loads.append(round(os.getloadavg()[0], 2))
        print(encoding, timings[encoding], "s", [r["loss_beyond_L"] for r in summary[-len(MULTIPLES) * len(SEEDS):]],
              flush=True)
    write_csv(OUT / "positions_extrapolation.csv", summary)
    write_csv(OUT / "positions_per_position.csv", per_position)
    meta = dict(
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        machine=machine(),
        load_average_1min=dict(before=round(load_before[0], 2), after=round(os.getloadavg()[0], 2),
                               after_each_encoding=dict(min=min(loads), max=max(loads))),
        note="the machine was shared with other processes; timings are inflated by the load, losses are not",
        settings=dict(ex.SETTINGS, seeds=SEEDS, eval_multiples=MULTIPLES),
        seconds_per_encoding=timings,
        total_seconds=round(time.time() - start, 1),
    )
    (OUT / "positions_extrapolation.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", OUT / "positions_extrapolation.csv", "and the per-position table and .json")


if __name__ == "__main__":
    main()
