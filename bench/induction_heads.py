"""Chapter 11: 1- and 2-layer attention-only models trained on Python's standard library, measured as they learn.

The data is ``attnbook.corpus`` (CPython 3.11.7's top-level standard-library modules as 98 characters, split by
file); the model is ``attnbook.induction.AttentionOnlyLM`` (pre-LN, d_model 64, 4 heads of 16, sinusoidal
positions, context 128 characters). Both depths see the same batches in the same order (32 random windows of 129
characters from the training files per step, drawn with ``jax.random.fold_in(key(1000), step)``), Adam with a
linear warm-up over the first 100 steps to a constant learning rate 3e-3, gradients clipped to norm 1, initial
weights ``jax.random.key(0)``, 1500 steps (6.1 million training characters). One seed per depth: that is what
the CPU budget of the stored run allowed (about 0.3 s of CPU per 2-layer step here; the machine was shared with
other jobs at a load average of 18 to 26, so the run took far longer in wall time than in CPU time).

Every ``eval_every`` (50) steps, step 0 included, the script measures, on fixed evaluation sets:

- the training loss (mean of the steps since the last evaluation) and the held-out loss (256 windows of 128
  characters from the held-out files, the same windows at every evaluation), with the loss per position there and
  the in-context loss L(120) - L(12) (``induction.in_context_loss``);
- on 64 sequences of 64 uniform random characters repeated twice: the loss on the first and on the second copy,
  and every head's induction score (``induction.induction_score``);
- every head's previous-token score on the held-out windows (``induction.previous_token_score``);
- for the 2-layer model, the K-composition of each layer-0 head into each layer-1 head (``induction.composition_scores``).

Every ``checkpoint_every`` (250) steps, step 0 included, the model is stored with ``equinox.tree_serialise_leaves``.

Writes
- bench/results/induction_heads/L{depth}_step{step:05d}.eqx: the checkpoints (rebuild the model with
  ``induction.AttentionOnlyLM(d_model=64, depth=depth, heads=4, key=jax.random.key(0))``, then
  ``equinox.tree_deserialise_leaves``);
- bench/results/induction_heads_training.csv: one line per depth and evaluation step, the losses above;
- bench/results/induction_heads_scores.csv: one line per depth, step, layer and head, its two scores;
- bench/results/induction_heads_composition.csv: one line per step and (layer-0 head, layer-1 head) pair;
- bench/results/induction_heads_per_position.csv: the held-out loss per position at every stored checkpoint;
- bench/results/induction_heads.json: machine, load, versions, settings, seconds per depth.

    nice -n 5 python bench/induction_heads.py             # both depths, one after the other
    nice -n 5 python bench/induction_heads.py --depths 1  # one depth; the other depth's rows are kept
    python bench/induction_heads.py --steps 20 --out /tmp/x   # a quick trial elsewhere

The stored run trained the two depths at the same time, in two processes, and its tables were merged: depth 2 for
the full 1500 steps, depth 1 for 750 steps only (``--depths 1 --steps 750``), so the depths compare up to step
750. ``induction_heads.json`` holds the record of each (CPU time 6.2 min for depth 2, 1.9 min for depth 1).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from attention_cost import write_csv  # noqa: E402
from run_info import RunInfo  # noqa: E402

from attnbook import corpus, induction, train  # noqa: E402

OUT = pathlib.Path(__file__).parent / "results"
SETTINGS = dict(d_model=64, heads=4, context=128, batch=32, learning_rate=3e-3, warmup_steps=100, clip_norm=1.0,
                steps=1500, eval_every=50, checkpoint_every=250, init_seed=0, data_seed=1000,
                heldout_windows=256, repeated_sequences=64, repeated_period=64, early=induction.EARLY,
                late=induction.LATE, depths=[2, 1])


def make_model(depth: int, settings: dict = SETTINGS) -> induction.AttentionOnlyLM:
    return induction.AttentionOnlyLM(d_model=settings["d_model"], depth=depth, heads=settings["heads"],
                                     key=jax.random.key(settings["init_seed"]))


def optimizer(settings: dict = SETTINGS):
    schedule = optax.linear_schedule(0.0, settings["learning_rate"], settings["warmup_steps"])
    return optax.chain(optax.clip_by_global_norm(settings["clip_norm"]), optax.adam(schedule))


def batch(step: int, settings: dict = SETTINGS) -> jax.Array:
    """The training windows of one step ``(batch, context + 1)``: the same for every depth."""
    key = jax.random.fold_in(jax.random.key(settings["data_seed"]), step)
    return corpus.sample_windows(corpus.load("train"), key, settings["batch"], settings["context"] + 1)


def eval_sets(settings: dict = SETTINGS):
    held = corpus.sample_windows(corpus.load("held_out"), jax.random.key(7), settings["heldout_windows"],
                                 settings["context"] + 1)
    repeated = induction.repeated_random_tokens(jax.random.key(8), settings["repeated_sequences"],
                                                settings["repeated_period"])
    return held, repeated


def make_step(static, opt):
    @jax.jit
    def step(params, state, windows):
        def loss(p):
            model = eqx.combine(p, static)
            return train.cross_entropy(jax.vmap(model)(windows[:, :-1]), windows[:, 1:]).mean()

        value, grads = jax.value_and_grad(loss)(params)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, value
    return step


def measure(model, held, repeated, settings):
    """The losses and scores of one evaluation (see the module docstring)."""
    period = settings["repeated_period"]
    logits, w_held, _ = induction.forward(model, held[:, :-1])  # one pass per set: losses and weights
    per_position = np.asarray(train.cross_entropy(logits, held[:, 1:]).mean(axis=0))
    logits, w_rep, _ = induction.forward(model, repeated)
    rep_loss = np.asarray(train.cross_entropy(logits[:, :-1], repeated[:, 1:]).mean(axis=0))
    prev = np.asarray(induction.previous_token_score(w_held).mean(axis=0))  # (depth, heads)
    ind = np.asarray(induction.induction_score(w_rep, period).mean(axis=0))
    # rep_loss[t] predicts token t + 1: the first copy's predictions are t = 0..P-2, the second copy's t = P..2P-2
    return dict(heldout_loss=float(per_position.mean()),
                in_context_loss=float(induction.in_context_loss(per_position, settings["early"], settings["late"])),
                loss_at_early=float(per_position[settings["early"]]), loss_at_late=float(per_position[settings["late"]]),
                repeat_loss_first=float(rep_loss[:period - 1].mean()),
                repeat_loss_second=float(rep_loss[period:].mean())), prev, ind, per_position


def run(depth, settings, out_dir, rows, head_rows, comp_rows, position_rows, flush):
    model = make_model(depth, settings)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    opt = optimizer(settings)
    state = opt.init(params)
    step_fn = make_step(static, opt)
    held, repeated = eval_sets(settings)
    losses = []
    for step in range(settings["steps"] + 1):
        if step % settings["eval_every"] == 0:
            model = eqx.combine(params, static)
            summary, prev, ind, per_position = measure(model, held, repeated, settings)
            rows.append(dict(depth=depth, step=step, train_loss=round(float(np.mean(losses)), 5) if losses else "",
                             **{k: round(v, 5) for k, v in summary.items()}))
            losses = []
            for layer in range(depth):
                for head in range(settings["heads"]):
                    head_rows.append(dict(depth=depth, step=step, layer=layer, head=head,
                                          previous_token=round(float(prev[layer, head]), 5),
                                          induction=round(float(ind[layer, head]), 5)))
            if depth > 1:
                k = induction.composition_scores(model, "K")
                for src in range(settings["heads"]):
                    for dst in range(settings["heads"]):
                        comp_rows.append(dict(step=step, layer0_head=src, layer1_head=dst,
                                              k_composition=round(float(k[0, src, 1, dst]), 5)))
            if step % settings["checkpoint_every"] == 0:
                eqx.tree_serialise_leaves(out_dir / f"L{depth}_step{step:05d}.eqx", model)
                position_rows += [dict(depth=depth, step=step, position=t, loss=round(float(v), 5))
                                  for t, v in enumerate(per_position)]
            print(f"L{depth} step {step}: train {rows[-1]['train_loss']} held-out {rows[-1]['heldout_loss']} "
                  f"icl {rows[-1]['in_context_loss']} repeat {rows[-1]['repeat_loss_first']}->"
                  f"{rows[-1]['repeat_loss_second']} max induction {ind.max():.3f} max prev {prev.max():.3f}",
                  flush=True)
            flush()  # the tables so far, in case the run is cut
        if step == settings["steps"]:
            break
        params, state, value = step_fn(params, state, batch(step, settings))
        losses.append(float(value))


def merge_csv(path: pathlib.Path, rows: list[dict], depths) -> None:
    """Write ``rows`` to ``path``, after the rows already there whose depth is not in ``depths``."""
    import csv
    kept = []
    if path.exists():
        with path.open(newline="", encoding="utf-8") as f:
            kept = [r for r in csv.DictReader(f) if int(r["depth"]) not in depths]
    write_csv(path, kept + rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=SETTINGS["steps"])
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    parser.add_argument("--depths", type=int, nargs="+", default=SETTINGS["depths"],
                        help="the depths to train (the rows of other depths in existing tables are kept)")
    args = parser.parse_args(argv)
    settings = dict(SETTINGS, steps=args.steps, depths=args.depths)
    info = RunInfo("nice -n 5 python " + " ".join(["bench/induction_heads.py"] + (argv if argv is not None else sys.argv[1:])))
    out_dir = args.out / "induction_heads"
    out_dir.mkdir(parents=True, exist_ok=True)
    rows, head_rows, comp_rows, position_rows, seconds = [], [], [], [], {}

    def flush():  # rows of depths not trained now are kept
        merge_csv(args.out / "induction_heads_training.csv", rows, settings["depths"])
        merge_csv(args.out / "induction_heads_scores.csv", head_rows, settings["depths"])
        merge_csv(args.out / "induction_heads_per_position.csv", position_rows, settings["depths"])
        if comp_rows:
            write_csv(args.out / "induction_heads_composition.csv", comp_rows)

    for depth in settings["depths"]:
        began = time.time()
        run(depth, settings, out_dir, rows, head_rows, comp_rows, position_rows, flush)
        seconds[f"depth_{depth}"] = round(time.time() - began, 1)
        info.sample()
    meta = info.metadata(samples_name="after_each_depth", settings=settings, corpus_sha256=corpus.SHA256,
                         seconds_per_depth=seconds)
    (args.out / "induction_heads.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print("wrote", args.out / "induction_heads_training.csv", "and the other tables, checkpoints in", out_dir)


if __name__ == "__main__":
    main()
