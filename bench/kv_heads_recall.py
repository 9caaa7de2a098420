"""Chapter 10: key/value heads against quality on a task where the cache can matter, multi-query associative recall.

Chapter 8's Markov task needs only the last two tokens, and every number of key/value heads learns it equally
well (``bench/kv_heads_quality.py``). Multi-query associative recall (MQAR, Arora et al. 2023, "Zoology") needs the
cache itself: each sequence lists 4 key-value pairs (16 keys, 16 values), then asks for the 4 keys again in a
random order, and the model must recall each value (``attnbook.kv.associative_recall``; optimal loss 0 on the
recalled values, "uniform over the values" ln 16, no context ln 32). The model is chapter 8's RoPE Transformer
(d_model 32, 2 layers) with 8 query heads of 4 features, so that each key/value head stores little, and
``kv_heads`` 8, 4, 2, 1 (``attnbook.kv.recall_models``); 1000 Adam steps (learning rate 0.003, batches of 32
sequences of 16 tokens, NumPy seed 1000 + seed), the loss on the recalled values only; five seeds vmapped.

Writes bench/results/kv_heads_recall.csv (per kv_heads and seed: held-out loss and accuracy on the recalled values
of 256 evaluation sequences, the mean training loss of the last 50 steps, cache bytes per token per layer, the
model's parameters; and the baselines) and bench/results/kv_heads_recall.json (machine, load, versions,
settings, time per run).

    python bench/kv_heads_recall.py
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from attention_cost import write_csv  # noqa: E402
from run_info import RunInfo  # noqa: E402

from attnbook import extrapolation as ex  # noqa: E402
from attnbook import kv, nn  # noqa: E402

SEEDS = [0, 1, 2, 3, 4]
KV_HEADS = [8, 4, 2, 1]
OUT = pathlib.Path(__file__).parent / "results"


def main() -> None:
    info = RunInfo("python bench/kv_heads_recall.py")
    r = kv.RECALL
    blank = dict(kv_heads="", seed="", final_train_loss="", cache_bytes_per_token_per_layer="", parameters="")
    rows = [dict(method="optimum", loss=0.0, accuracy=1.0, **blank),
            dict(method="uniform_over_values", loss=round(float(np.log(r["values"])), 5),
                 accuracy=round(1 / r["values"], 5), **blank),
            dict(method="no_context", loss=round(float(np.log(r["keys"] + r["values"])), 5),
                 accuracy=round(1 / r["values"], 5), **blank)]
    timings = {}
    for groups in KV_HEADS:
        began = time.time()
        models, losses = kv.recall_train(groups, SEEDS)
        for i, seed in enumerate(SEEDS):
            model = ex.select(models, i)
            loss, accuracy = kv.recall_eval(model)
            rows.append(dict(method="trained", kv_heads=groups, seed=seed, loss=round(loss, 5),
                             accuracy=round(accuracy, 5), final_train_loss=round(float(losses[i, -50:].mean()), 5),
                             cache_bytes_per_token_per_layer=kv.cache_bytes_per_token(model.blocks[0].mixer),
                             parameters=nn.count_parameters(model)))
        timings[f"kv_heads_{groups}"] = round(time.time() - began, 1)
        info.sample()
        print("kv_heads", groups, timings[f"kv_heads_{groups}"], "s",
              [(x["loss"], x["accuracy"]) for x in rows[-len(SEEDS):]], flush=True)
    write_csv(OUT / "kv_heads_recall.csv", rows)
    meta = info.metadata(samples_name="after_each_run", settings=dict(r, seeds=SEEDS, kv_heads=KV_HEADS),
                         seconds=timings)
    (OUT / "kv_heads_recall.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", OUT / "kv_heads_recall.csv", "and the .json")


if __name__ == "__main__":
    main()
