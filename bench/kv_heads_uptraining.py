"""Chapter 10: the uptraining grid. Mean-pooled MHA models fine-tuned 0 to 300 steps, against GQA from scratch.

Ainslie et al. (2023) convert a trained multi-head model into grouped-query (GQA) or multi-query (MQA) attention by
mean-pooling the key and value heads of each group, then train it a little more ("uptraining"): their abstract's
recipe uses "5% of original pre-training compute". Chapter 8's task and model as in ``bench/kv_heads_quality.py``:
the multi-head model (4 key/value heads) is trained 300 Adam steps per seed (chapter 8's data, NumPy seed
1000 + seed), mean-pooled to 2 and 1 key/value heads (``attnbook.kv.pool_kv_heads``) and trained 300 more steps
with a fresh Adam state (learning rate 0.003) on fresh data (NumPy seed 3000 + seed); the same 2 and 1 key/value
heads are trained from scratch for 300 steps (``attnbook.experiments.ch10.gqa_position_model``, chapter 8's data), and so is the
multi-head model itself. Same step, same cost: one step of either is one batch of 32 sequences of 32 tokens, so 5%
of the 300 pre-training steps is 15 steps. Every EVERY steps each model's held-out loss on chapter 8's 128
evaluation sequences of length 32 is computed inside the compiled training program (five seeds vmapped).

Writes lib/attnbook/experiments/results/kv_heads_uptraining_grid.csv (per method, kv_heads, seed and step 0, 5, ..., 300: held-out
loss and excess over the optimum; ``uptrained`` step 0 is the mean-pooled model untrained, ``from_scratch`` step 0
the initial model) and lib/attnbook/experiments/results/kv_heads_uptraining_grid.json (machine, load, versions, settings, wall and
CPU time per run).

    python bench/kv_heads_uptraining.py
"""

from __future__ import annotations

import json
import time

import equinox as eqx
import jax
import numpy as np
import optax

from attnbook import kv
from attnbook import train as train_module
from attnbook.experiments import RunInfo, ch08, ch10, source_folder, write_csv
from attnbook.experiments.ch10 import batches

C = ch10.SETTINGS
SEEDS, UPTRAIN_TO = list(C.seeds), list(C.uptrain_to)
MHA = max(C.kv_heads)
STEPS = ch08.SETTINGS.steps  # pre-training steps, and the longest fine-tuning
EVERY = C.grid_every  # steps between held-out evaluations
OUT = source_folder()


def train_with_checkpoints(models, inputs, targets, eval_x, eval_y):
    """Adam at chapter 8's learning rate on ``inputs, targets (seeds, STEPS, batch, T)``, five seeds vmapped;
    returns the trained models (stacked) and the held-out loss ``(seeds, STEPS / EVERY + 1)`` at steps
    0, EVERY, ..., STEPS."""
    optimizer = optax.adam(ch08.SETTINGS.learning_rate)
    parts = [eqx.partition(m, eqx.is_inexact_array) for m in models]
    static = parts[0][1]
    params = jax.tree.map(lambda *a: np.stack(a), *[p for p, _ in parts])
    step, loss_of = train_module.training_step(static, ch10.LOSS, optimizer)
    chunk = lambda a: a.reshape((a.shape[0], STEPS // EVERY, EVERY) + a.shape[2:])

    @jax.jit
    def run(params, xs, ys, eval_x, eval_y):  # the evaluation data as arguments, not constants to fold
        def one(params, xs, ys):
            def steps_then_test(carry, batch):
                carry, _ = jax.lax.scan(step, carry, batch)
                return carry, loss_of(carry[0], eval_x, eval_y)

            start = loss_of(params, eval_x, eval_y)
            (params, _), tests = jax.lax.scan(steps_then_test, (params, optimizer.init(params)), (xs, ys))
            return params, jax.numpy.concatenate([start[None], tests])

        return jax.vmap(one)(params, xs, ys)

    params, tests = run(params, chunk(np.asarray(inputs)), chunk(np.asarray(targets)), np.asarray(eval_x),
                        np.asarray(eval_y))
    return eqx.combine(params, static), np.asarray(tests)


def main() -> None:
    info = RunInfo("python bench/kv_heads_uptraining.py")
    eval_x, eval_y, floor = ch08.eval_data(1)
    optimum = float(floor.mean())
    scratch = [batches(seed, STEPS, 1000 + seed) for seed in SEEDS]  # chapter 8's data (its 300 steps)
    fresh = [batches(seed, STEPS, C.uptrain_data_seed + seed) for seed in SEEDS]
    rows, timings, cpu = [], {}, {}

    def record(method, groups, tests):
        for i, seed in enumerate(SEEDS):
            rows.extend(dict(method=method, kv_heads=groups, seed=seed, step=j * EVERY, loss=round(float(v), 5),
                             excess=round(float(v) - optimum, 5)) for j, v in enumerate(tests[i]))

    def timed(name, fn):
        began, began_cpu = time.time(), time.process_time()
        out = fn()
        timings[name], cpu[name] = round(time.time() - began, 1), round(time.process_time() - began_cpu, 1)
        info.sample()
        print(name, timings[name], "s wall", cpu[name], "s CPU", np.round(out[1][:, [0, 2, 6, 20, -1]] - optimum, 3)
              .tolist(), flush=True)
        return out

    for groups in [MHA] + UPTRAIN_TO:
        models, tests = timed(f"from_scratch_kv_heads_{groups}", lambda: train_with_checkpoints(
            [ch10.gqa_position_model(groups, seed=seed) for seed in SEEDS], np.stack([d[0] for d in scratch]),
            np.stack([d[1] for d in scratch]), eval_x, eval_y))
        record("from_scratch", groups, tests)
        if groups == MHA:
            mha = models
    for groups in UPTRAIN_TO:
        pooled = [kv.pool_kv_heads(train_module.select(mha, i), groups) for i in range(len(SEEDS))]
        _, tests = timed(f"uptrained_kv_heads_{groups}", lambda: train_with_checkpoints(
            pooled, np.stack([d[0] for d in fresh]), np.stack([d[1] for d in fresh]), eval_x, eval_y))
        record("uptrained", groups, tests)
    write_csv(OUT / "kv_heads_uptraining_grid.csv", rows)
    meta = info.metadata(
        samples_name="after_each_run",
        settings=dict(ch08.SETTINGS.to_dict(), encoding="rope", seeds=SEEDS, mha_kv_heads=MHA, uptrain_to=UPTRAIN_TO,
                      steps=STEPS, eval_every=EVERY, pretraining_steps=STEPS,
                      five_percent_of_pretraining_steps=STEPS * 5 // 100,
                      scratch_data="default_rng(1000 + seed)", uptrain_data=f"default_rng({C.uptrain_data_seed} + seed)",
                      uptrain_pooling="mean", learning_rate=ch08.SETTINGS.learning_rate, optimum=round(optimum, 5),
                      initialisation="ch10.gqa_position_model: chapter 8's weights, each group keeps its first "
                                     "head's initial key/value projections"),
        seconds=timings, cpu_seconds=cpu)
    (OUT / "kv_heads_uptraining_grid.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", OUT / "kv_heads_uptraining_grid.csv", "and the .json")


if __name__ == "__main__":
    main()
