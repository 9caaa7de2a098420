"""Chapter 10: quality against KV-cache size, for key/value heads shared by groups of query heads, and uptraining.

The task and the model are chapter 8's (``attnbook.experiments.ch08.SETTINGS``): next-token prediction on a Markov
chain of order 2 over 8 symbols, whose optimal loss is known; a 2-layer causal Transformer (d_model 32, 4 query
heads of 8 features, RoPE) trained for 300 Adam steps on sequences of length 32, five seeds vmapped in one
program. Only ``kv_heads`` changes (``attnbook.experiments.ch10.gqa_position_model``): 4 (multi-head attention, chapter 8's
RoPE runs repeated), 2 (grouped-query) and 1 (multi-query), at equal width; every ``kv_heads`` starts from the
same initial queries, outputs, embeddings and feed-forward layers (each group keeps its first head's initial
key/value weights). Each seed has its own training data (NumPy seed 1000 + seed), as in chapter 8.

Uptraining (Ainslie et al. 2023): each trained multi-head model is converted to 2 and to 1 key/value heads by
mean-pooling (``attnbook.kv.pool_kv_heads``) and trained ``ch10.SETTINGS.uptrain_steps`` more Adam steps (a fresh optimiser) on
fresh data (NumPy seed 3000 + seed). Every training batch is new data, so the loss of a batch before its update
is a held-out estimate; the excess over the batch's optimum is stored per step, for the uptrained models and for
the first ``uptrain_steps`` steps of training the same ``kv_heads`` from scratch.

Writes
- lib/attnbook/experiments/results/kv_heads_quality.csv: per kv_heads and seed, the held-out loss on chapter 8's 128 evaluation
  sequences of length 32, its excess over the optimum, the final training loss (last 20 steps), KV-cache bytes
  per token per layer and per token for the model, attention parameters per layer and the model's parameters;
  the rows ``uptrained`` give the same held-out numbers after uptraining (and before, ``steps=0``);
- lib/attnbook/experiments/results/kv_heads_uptraining.csv: per method (uptrained from 4 heads, or from scratch), kv_heads, seed
  and step, the batch's loss and its excess over the batch's optimum;
- lib/attnbook/experiments/results/kv_heads_quality.json: the machine, the load, the versions, the settings, the time per run.

    python bench/kv_heads_quality.py
"""

from __future__ import annotations

import json
import time

import numpy as np

from attnbook import extrapolation as ex
from attnbook import kv, nn
from attnbook.experiments import RunInfo, ch08, ch10, source_folder, write_csv
from attnbook.experiments.ch10 import batches, held_out

C = ch10.SETTINGS
SEEDS, KV_HEADS, UPTRAIN_TO, UPTRAIN_STEPS = list(C.seeds), list(C.kv_heads), list(C.uptrain_to), C.uptrain_steps
OUT = source_folder()


def main() -> None:
    info = RunInfo("python bench/kv_heads_quality.py")
    s = ch08.SETTINGS.to_dict()
    x, y, floor = ch08.eval_data(1)
    floor_mean = float(floor.mean())
    current = float(ex.current_token_loss(ch08.table(), s["order"], x).mean())
    rows = [dict(method="optimum", kv_heads="", seed="", steps="", loss=round(floor_mean, 5), excess=0.0,
                 final_train_loss="", cache_bytes_per_token_per_layer="", cache_bytes_per_token="",
                 attention_parameters_per_layer="", parameters=""),
            dict(method="current_token", kv_heads="", seed="", steps="", loss=round(current, 5),
                 excess=round(current - floor_mean, 5), final_train_loss="", cache_bytes_per_token_per_layer="",
                 cache_bytes_per_token="", attention_parameters_per_layer="", parameters="")]
    curves, timings, trained = [], {}, {}
    scratch_floor = {seed: batches(seed, s["steps"], 1000 + seed)[2] for seed in SEEDS}  # chapter 8's data
    for groups in KV_HEADS:
        began = time.time()
        models, losses = ch10.experiment_train(groups, SEEDS)
        for i, seed in enumerate(SEEDS):
            model = ex.select(models, i)
            trained[groups, seed] = model
            mixer = model.blocks[0].mixer
            loss, excess = held_out(model, x, y, floor_mean)
            rows.append(dict(method="from_scratch", kv_heads=groups, seed=seed, steps=s["steps"], loss=loss,
                             excess=excess, final_train_loss=round(float(losses[i, -20:].mean()), 5),
                             cache_bytes_per_token_per_layer=kv.cache_bytes_per_token(mixer),
                             cache_bytes_per_token=kv.cache_bytes_per_token(mixer) * len(model.blocks),
                             attention_parameters_per_layer=nn.count_parameters(mixer),
                             parameters=nn.count_parameters(model)))
            curves += [dict(method="from_scratch", kv_heads=groups, seed=seed, step=t, loss=round(float(l), 5),
                            excess=round(float(l - scratch_floor[seed][t]), 5))
                       for t, l in enumerate(losses[i, :UPTRAIN_STEPS])]
        timings[f"from_scratch_kv_heads_{groups}"] = round(time.time() - began, 1)
        info.sample()
        print("kv_heads", groups, timings[f"from_scratch_kv_heads_{groups}"], "s",
              [r["excess"] for r in rows[-len(SEEDS):]], flush=True)
    for groups in UPTRAIN_TO:
        began = time.time()
        data = [batches(seed, UPTRAIN_STEPS, C.uptrain_data_seed + seed) for seed in SEEDS]
        converted = [kv.pool_kv_heads(trained[max(KV_HEADS), seed], groups) for seed in SEEDS]
        models, losses = ch10.fit(converted, np.stack([d[0] for d in data]), np.stack([d[1] for d in data]))
        for i, seed in enumerate(SEEDS):
            mixer = converted[i].blocks[0].mixer
            for steps, model in ((0, converted[i]), (UPTRAIN_STEPS, ex.select(models, i))):
                loss, excess = held_out(model, x, y, floor_mean)
                rows.append(dict(method="uptrained", kv_heads=groups, seed=seed, steps=steps, loss=loss,
                                 excess=excess, final_train_loss=round(float(losses[i, -20:].mean()), 5) if steps else "",
                                 cache_bytes_per_token_per_layer=kv.cache_bytes_per_token(mixer),
                                 cache_bytes_per_token=kv.cache_bytes_per_token(mixer) * len(model.blocks),
                                 attention_parameters_per_layer=nn.count_parameters(mixer),
                                 parameters=nn.count_parameters(model)))
            curves += [dict(method="uptrained", kv_heads=groups, seed=seed, step=t, loss=round(float(l), 5),
                            excess=round(float(l - data[i][2][t]), 5)) for t, l in enumerate(losses[i])]
        timings[f"uptrained_kv_heads_{groups}"] = round(time.time() - began, 1)
        info.sample()
        print("uptrained to", groups, timings[f"uptrained_kv_heads_{groups}"], "s",
              [r["excess"] for r in rows[-2 * len(SEEDS):]], flush=True)
    write_csv(OUT / "kv_heads_quality.csv", rows)
    write_csv(OUT / "kv_heads_uptraining.csv", curves)
    meta = info.metadata(
        samples_name="after_each_run",
        settings=dict(ch08.SETTINGS.to_dict(), encoding="rope", seeds=SEEDS, kv_heads=KV_HEADS, uptrain_to=UPTRAIN_TO,
                      uptrain_steps=UPTRAIN_STEPS, uptrain_data=f"default_rng({C.uptrain_data_seed} + seed)",
                      uptrain_pooling="mean", uptrain_learning_rate=ch08.SETTINGS.learning_rate,
                      initialisation="ch10.gqa_position_model: chapter 8's weights, each group keeps its first "
                                     "head's initial key/value projections"),
        seconds=timings,
    )
    (OUT / "kv_heads_quality.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", OUT / "kv_heads_quality.csv", OUT / "kv_heads_uptraining.csv", "and the .json")


if __name__ == "__main__":
    main()
