"""Chapter 10: key/value heads against quality on a task where the cache can matter, multi-query associative recall.

Chapter 8's Markov task needs only the last two tokens, and every number of key/value heads learns it equally
well (``bench/kv_heads_quality.py``). Multi-query associative recall (MQAR, Arora et al. 2023, "Zoology") needs the
cache itself: each sequence lists 4 key-value pairs (16 keys, 16 values), then asks for the 4 keys again in a
random order, and the model must recall each value (``attnbook.experiments.ch10.associative_recall``; optimal loss 0 on the
recalled values). The model is chapter 8's Transformer (d_model 32, 2 layers, feed-forward width 128) with 8 query
heads of 4 features, so that each key/value head stores little, learned absolute positions (``ch10.RECALL``'s
docstring says why not RoPE), and ``kv_heads`` 8, 4, 2, 1 at equal width (``attnbook.experiments.ch10.recall_models``); 2000
Adam steps (learning rate 0.003, batches of 32 sequences of 16 tokens, NumPy seed 1000 + seed), the loss on the
recalled values only; five seeds vmapped in one program per ``kv_heads``.

Baselines on the recalled values of the evaluation sequences:
- ``no_context``: uniform over the vocabulary, ln 32;
- ``uniform_over_values`` (the best without context: the answer is a value, any of 16), ln 16;
- ``bag_of_values``: the best prediction that knows which values the sequence lists but not which key each
  belongs to (each value in proportion to how often the 4 pairs list it), and its accuracy (the most frequent
  value, ties shared); the plateau a model sits on before it learns to bind keys to values.

Writes lib/attnbook/experiments/results/kv_heads_recall.csv (per kv_heads and seed: held-out loss and accuracy on the recalled values
of 256 evaluation sequences, the mean training loss of the last 50 steps, cache bytes per token per layer, the
model's parameters; and the baselines), lib/attnbook/experiments/results/kv_heads_recall_curves.csv (per kv_heads, seed and block of
20 steps, the mean training loss on the recalled values: every batch is new data, so it is a held-out estimate)
and lib/attnbook/experiments/results/kv_heads_recall.json (machine, load, versions, settings, wall and CPU time per kv_heads).

    python bench/kv_heads_recall.py
"""

from __future__ import annotations

import json
import time

import numpy as np

from attnbook import extrapolation as ex
from attnbook import kv, nn
from attnbook.experiments import RunInfo, ch10, source_folder, write_csv

SEEDS, KV_HEADS = list(ch10.SETTINGS.seeds), list(ch10.SETTINGS.recall_kv_heads)
BLOCK = ch10.SETTINGS.recall_curve_block  # steps per point of the stored training curves
OUT = source_folder()


def bag_of_values(r) -> tuple[float, float]:
    """Loss and accuracy on the recalled values of the evaluation sequences of the best prediction that knows the
    multiset of values a sequence lists but not which key each belongs to."""
    x, y, m = ch10.associative_recall(r["eval_sequences"], rng=np.random.default_rng(r["eval_seed"]), keys=r["keys"],
                                    values=r["values"], pairs=r["pairs"])
    listed = x[:, 1:2 * r["pairs"]:2]  # the values of the pairs, (N, pairs)
    answers = y[:, 2 * r["pairs"]::2]  # the recalled values, (N, pairs)
    count = (listed[:, None, :] == answers[:, :, None]).sum(-1)  # how often each answer's value is listed
    counts = (listed[:, :, None] == listed[:, None, :]).sum(-1)  # for each listed value, its count
    top = counts.max(-1, keepdims=True)
    ties = np.array([len(set(row[c == t[0]])) for row, c, t in zip(listed, counts, top)])[:, None]
    loss = float(-np.log(count / r["pairs"]).mean())
    accuracy = float(((count == top) / ties).mean())
    return loss, accuracy


def main() -> None:
    info = RunInfo("python bench/kv_heads_recall.py")
    r = ch10.RECALL.to_dict()
    blank = dict(kv_heads="", seed="", final_train_loss="", cache_bytes_per_token_per_layer="", parameters="")
    bag_loss, bag_accuracy = bag_of_values(r)
    rows = [dict(method="optimum", loss=0.0, accuracy=1.0, **blank),
            dict(method="no_context", loss=round(float(np.log(r["keys"] + r["values"])), 5),
                 accuracy=round(1 / r["values"], 5), **blank),
            dict(method="uniform_over_values", loss=round(float(np.log(r["values"])), 5),
                 accuracy=round(1 / r["values"], 5), **blank),
            dict(method="bag_of_values", loss=round(bag_loss, 5), accuracy=round(bag_accuracy, 5), **blank)]
    curves, timings, cpu = [], {}, {}
    for groups in KV_HEADS:
        began, began_cpu = time.time(), time.process_time()
        models, losses = ch10.recall_train(groups, SEEDS)
        for i, seed in enumerate(SEEDS):
            model = ex.select(models, i)
            loss, accuracy = ch10.recall_eval(model)
            rows.append(dict(method="trained", kv_heads=groups, seed=seed, loss=round(loss, 5),
                             accuracy=round(accuracy, 5), final_train_loss=round(float(losses[i, -50:].mean()), 5),
                             cache_bytes_per_token_per_layer=kv.cache_bytes_per_token(model.blocks[0].mixer),
                             parameters=nn.count_parameters(model)))
            blocks = losses[i].reshape(-1, BLOCK).mean(axis=1)
            curves += [dict(kv_heads=groups, seed=seed, step=b * BLOCK, loss=round(float(v), 5))
                       for b, v in enumerate(blocks)]
        timings[f"kv_heads_{groups}"] = round(time.time() - began, 1)
        cpu[f"kv_heads_{groups}"] = round(time.process_time() - began_cpu, 1)
        info.sample()
        print("kv_heads", groups, timings[f"kv_heads_{groups}"], "s wall", cpu[f"kv_heads_{groups}"], "s CPU",
              [(x["loss"], x["accuracy"]) for x in rows[-len(SEEDS):]], flush=True)
    write_csv(OUT / "kv_heads_recall.csv", rows)
    write_csv(OUT / "kv_heads_recall_curves.csv", curves)
    meta = info.metadata(samples_name="after_each_run",
                         settings=dict(r, seeds=SEEDS, kv_heads=KV_HEADS, curve_block=BLOCK,
                                       data="default_rng(1000 + seed)",
                                       initialisation="ch10.gqa_position_model: chapter 8's weights, each group keeps "
                                                      "its first head's initial key/value projections"),
                         seconds=timings, cpu_seconds=cpu)
    (OUT / "kv_heads_recall.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", OUT / "kv_heads_recall.csv", OUT / "kv_heads_recall_curves.csv", "and the .json")


if __name__ == "__main__":
    main()
