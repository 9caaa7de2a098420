"""Chapter 10: quality against KV-cache size, for key/value heads shared by groups of query heads, and uptraining.

The task and the model are chapter 8's (``attnbook.extrapolation.SETTINGS``): next-token prediction on a Markov
chain of order 2 over 8 symbols, whose optimal loss is known; a 2-layer causal Transformer (d_model 32, 4 query
heads of 8 features, RoPE) trained for 300 Adam steps (learning rate 0.003) on sequences of length 32, five seeds
vmapped in one program (``attnbook.extrapolation.fine_tune`` from the initial weights, which returns the models
after 0, 10, 30, 100 and 300 steps). Each seed has its own training data (NumPy seed 1000 + seed), as in chapter 8.

- **Equal width** (``from_scratch``): only ``kv_heads`` changes (``attnbook.kv.gqa_position_model``): 4 (multi-head
  attention, chapter 8's RoPE model), 2 (grouped-query) and 1 (multi-query); every ``kv_heads`` starts from the
  same initial queries, outputs, embeddings and feed-forward layers (each group keeps its first head's initial
  key/value weights).
- **Equal parameters** (``equal_parameters``): the grouped models with their freed key/value parameters given
  back to the feed-forward layers (``attnbook.kv.equal_parameter_model``: width 144 for 2 key/value heads, 152
  for 1, against 128), as Llama 2 does.
- **Uptraining** (``uptrained``, Ainslie et al. 2023): each trained multi-head model converted to 2 and to 1
  key/value heads by mean-pooling (``attnbook.kv.pool_kv_heads``) and trained 300 more Adam steps (a fresh
  optimiser, learning rate 0.003) on fresh data (NumPy seed 3000 + seed), evaluated after 0, 10, 30, 100 and 300.

Writes
- bench/results/kv_heads_quality.csv: per method, kv_heads, seed and steps, the held-out loss on chapter 8's 128
  evaluation sequences of length 32 and its excess over the optimum, the feed-forward width, KV-cache bytes per
  token per layer and per token for the model, attention parameters per layer and the model's parameters; the
  rows ``optimum`` and ``current_token`` are the baselines (``uniform``: ln 8);
- bench/results/kv_heads_quality.json: the machine, the load, the versions, the settings, the time per run.

    python bench/kv_heads_quality.py
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from attention_cost import write_csv  # noqa: E402
from run_info import RunInfo  # noqa: E402

from attnbook import extrapolation as ex  # noqa: E402
from attnbook import kv, nn  # noqa: E402

SEEDS = [0, 1, 2, 3, 4]
KV_HEADS = [4, 2, 1]
UPTRAIN_TO = [2, 1]
CHECKPOINTS = [0, 10, 30, 100, 300]  # Ainslie et al.'s 5% of the 300 pre-training steps is step 15
OUT = pathlib.Path(__file__).parent / "results"


def batches(seed: int, steps: int, rng_seed: int):
    """``steps`` minibatches of chapter 8's data from ``default_rng(rng_seed)``: inputs and targets, as
    ``ex.experiment_training_data`` (which is ``rng_seed = 1000 + seed``)."""
    s = ex.SETTINGS
    x, y, _ = ex.markov_data(ex.experiment_table(), s["order"], steps * s["batch_size"], s["train_length"],
                             rng=np.random.default_rng(rng_seed))
    shape = (steps, s["batch_size"], s["train_length"])
    return x.reshape(shape), y.reshape(shape)


def stack(models):
    """One stacked model (every array with a leading axis of runs) from a list of models of one structure."""
    return jax.tree.map(lambda *a: jnp.stack(a), *models)


def held_out(model, x, y, floor_mean):
    loss = float(np.mean(np.asarray(ex.loss_per_position(model, x, y))))
    return round(loss, 5), round(loss - floor_mean, 5)


def train(models, rng_seeds, checkpoints):
    """``ex.fine_tune`` of the stacked ``models`` on each seed's data (``default_rng(rng_seed)``), Adam at chapter
    8's learning rate; the stacked models after each checkpoint."""
    data = [batches(0, checkpoints[-1], r) for r in rng_seeds]
    return ex.fine_tune(stack(models), np.stack([d[0] for d in data]), np.stack([d[1] for d in data]),
                        checkpoints=checkpoints, learning_rate=ex.SETTINGS["learning_rate"])


def main() -> None:
    info = RunInfo("python bench/kv_heads_quality.py")
    s = ex.SETTINGS
    x, y, floor = ex.experiment_eval_data(1)
    floor_mean = float(floor.mean())
    current = float(ex.current_token_loss(ex.experiment_table(), s["order"], x).mean())
    blank = dict(kv_heads="", seed="", steps="", ff_width="", cache_bytes_per_token_per_layer="",
                 cache_bytes_per_token="", attention_parameters_per_layer="", parameters="")
    rows = [dict(method="optimum", loss=round(floor_mean, 5), excess=0.0, **blank),
            dict(method="current_token", loss=round(current, 5), excess=round(current - floor_mean, 5), **blank),
            dict(method="uniform", loss=round(float(np.log(s["vocab_size"])), 5),
                 excess=round(float(np.log(s["vocab_size"])) - floor_mean, 5), **blank)]
    timings, trained = {}, {}

    def record(method, groups, checkpoints, stacked_models):
        for c, models in zip(checkpoints, stacked_models):
            for i, seed in enumerate(SEEDS):
                model = ex.select(models, i)
                mixer = model.blocks[0].mixer
                loss, excess = held_out(model, x, y, floor_mean)
                rows.append(dict(method=method, kv_heads=groups, seed=seed, steps=c, loss=loss, excess=excess,
                                 ff_width=model.blocks[0].feed_forward.hidden.weight.shape[1],
                                 cache_bytes_per_token_per_layer=kv.cache_bytes_per_token(mixer),
                                 cache_bytes_per_token=kv.cache_bytes_per_token(mixer) * len(model.blocks),
                                 attention_parameters_per_layer=nn.count_parameters(mixer),
                                 parameters=nn.count_parameters(model)))
        last = [r["excess"] for r in rows[-len(SEEDS):]]
        timings[f"{method}_kv_heads_{groups}"] = round(time.time() - began, 1)
        info.sample()
        print(method, groups, timings[f"{method}_kv_heads_{groups}"], "s", last, flush=True)

    for groups in KV_HEADS:
        began = time.time()
        out = train(kv.experiment_models(groups, SEEDS), [1000 + seed for seed in SEEDS], CHECKPOINTS)
        trained[groups] = out[-1]
        record("from_scratch", groups, CHECKPOINTS, out)
    for groups in UPTRAIN_TO:
        began = time.time()
        converted = [kv.pool_kv_heads(ex.select(trained[max(KV_HEADS)], i), groups) for i in range(len(SEEDS))]
        record("uptrained", groups, CHECKPOINTS, train(converted, [3000 + seed for seed in SEEDS], CHECKPOINTS))
    for groups in UPTRAIN_TO:
        began = time.time()
        out = train(kv.experiment_models(groups, SEEDS, equal_parameters=True), [1000 + seed for seed in SEEDS],
                    [CHECKPOINTS[-1]])
        record("equal_parameters", groups, [CHECKPOINTS[-1]], out)
    write_csv(OUT / "kv_heads_quality.csv", rows)
    meta = info.metadata(
        samples_name="after_each_run",
        settings=dict(ex.SETTINGS, encoding="rope", seeds=SEEDS, kv_heads=KV_HEADS, checkpoints=CHECKPOINTS,
                      uptrain_to=UPTRAIN_TO, uptrain_data="default_rng(3000 + seed)", uptrain_pooling="mean",
                      uptrain_learning_rate=ex.SETTINGS["learning_rate"],
                      equal_parameters_ff_width={g: kv.equal_parameter_width(g) for g in KV_HEADS},
                      initialisation="kv.gqa_position_model: chapter 8's weights, each group keeps its first "
                                     "head's initial key/value projections; equal_parameters: wider "
                                     "feed-forward layers from fold_in(key(seed), 2000 + block)"),
        seconds=timings,
    )
    (OUT / "kv_heads_quality.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", OUT / "kv_heads_quality.csv", "and the .json")


if __name__ == "__main__":
    main()
