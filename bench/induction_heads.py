"""Chapter 11: 1- and 2-layer attention-only models trained on Python's standard library, measured as they learn.

The data is ``attnbook.corpus`` (CPython 3.11.7's top-level standard-library modules as 98 characters, split by
file); the model is ``attnbook.induction.AttentionOnlyLM`` (pre-LN, d_model 64, 4 heads of 16, RoPE, context 128
characters). Adam with a linear warm-up over the first 100 steps to a constant learning rate 3e-3, gradients
clipped to norm 1, 32 windows of 129 characters per step, 1500 steps.

**Seeds.** Seed ``s`` draws the initial weights from ``jax.random.key(s)`` and the batch of step ``n`` from
``jax.random.fold_in(jax.random.key(1000 + s), n)``: at one seed both depths start from the same embedding and
see the same batches in the same order.

**Two variants**, each its own run:

- ``plain``: windows of the training files as they are (real text only);
- ``curriculum``: for the first ``curriculum_steps`` (600) steps, random periodic sequences instead
  (``induction.periodic_random_tokens``: each row repeats its first ``P`` printable characters, ``P`` uniform in
  8..60 per row, so only induction predicts them, and no fixed offset does); from then on, plain windows as above.

(Pilots that led to these two, with their logs: ``bench/pilots/induction_heads/``.)

Every ``eval_every`` (100) steps, step 0 included, the script measures on fixed evaluation sets (the same for
every run):

- the training loss (mean of the steps since the last evaluation) and the held-out loss (256 plain windows of 128
  characters from the held-out files), with the loss per position there and the in-context loss L(120) - L(12)
  (``induction.in_context_loss``);
- on 64 sequences of 64 uniform random printable characters repeated twice (``induction.repeated_random_tokens``
  with ``low=induction.PRINTABLE``): the loss on the first and on the second copy, and every head's induction
  score (``induction.induction_score``);
- on the first 64 held-out windows as their first 64 characters twice (real code repeated): the loss on the first
  and on the second copy;
- every head's previous-token score on the held-out windows (``induction.previous_token_score``);
- for the 2-layer model, the K-composition of each layer-0 head into each layer-1 head (``induction.composition_scores``).

Checkpoints (``equinox.tree_serialise_leaves``): at the steps of ``checkpoints`` for seed 0 and at the last step
for every seed. Rebuild a model with ``make_model(depth, seed)`` then ``equinox.tree_deserialise_leaves``.

Writes (each table keyed by variant, depth and seed; a run replaces its own rows and keeps the others, under a
file lock, so several runs may write at once):
- lib/attnbook/experiments/results/induction_heads/{variant}_L{depth}_s{seed}_step{step:05d}.eqx: the checkpoints;
- lib/attnbook/experiments/results/induction_heads_training.csv: one line per run and evaluation step, the losses above;
- lib/attnbook/experiments/results/induction_heads_scores.csv: one line per run, step, layer and head, its two scores;
- lib/attnbook/experiments/results/induction_heads_composition.csv: one line per 2-layer run, step and (layer-0, layer-1) head pair;
- lib/attnbook/experiments/results/induction_heads_per_position.csv: the held-out loss per position at every checkpoint;
- lib/attnbook/experiments/results/induction_heads.json: one record per command (machine, load, versions, settings, CPU seconds).

The stored runs (2026-11-26, AMD EPYC Zen 3), two processes at once on the 2-core machine, each pinned to one core
and to one XLA thread (``taskset -c 0|1``, ``XLA_FLAGS="--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1"``), started at nice 5 and reniced to -5 after ten minutes, when other work loaded
the machine (load average 3 to 8); about 310 s of CPU per 2-layer run and 175 s per 1-layer run
(``induction_heads.json``):

    nice -n 5 python bench/induction_heads.py --variant curriculum --seeds 0 1 2
    nice -n 5 python bench/induction_heads.py --variant plain --seeds 0 1 2
    python bench/induction_heads.py --steps 20 --out /tmp/x   # a quick trial elsewhere
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import fcntl
import hashlib
import json
import pathlib
import sys
import tempfile
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from attnbook import corpus, induction, train
from attnbook.experiments import RunInfo, source_folder, write_csv

OUT = source_folder()
VARIANTS = ("plain", "curriculum")
SETTINGS = dict(d_model=64, heads=4, context=128, batch=32, learning_rate=3e-3, warmup_steps=100, clip_norm=1.0,
                steps=1500, eval_every=100, checkpoints=[0, 400, 600, 1500], data_seed=1000,
                encoding="rope", curriculum_steps=600, periods=[8, 60], heldout_windows=256, repeated_sequences=64,
                repeated_period=64, repeated_low=induction.PRINTABLE, early=induction.EARLY, late=induction.LATE,
                depths=[2, 1])
KEYS = ("variant", "depth", "seed")


def make_model(depth: int, seed: int = 0, settings: dict = SETTINGS) -> induction.AttentionOnlyLM:
    return induction.AttentionOnlyLM(d_model=settings["d_model"], depth=depth, heads=settings["heads"],
                                     encoding=settings["encoding"], key=jax.random.key(seed))


def checkpoint(variant: str, depth: int, seed: int, step: int, folder: pathlib.Path = OUT / "induction_heads"):
    return pathlib.Path(folder) / f"{variant}_L{depth}_s{seed}_step{step:05d}.eqx"


def load_model(variant: str, depth: int, seed: int, step: int, folder: pathlib.Path = OUT / "induction_heads"):
    """A stored checkpoint as an :class:`attnbook.induction.AttentionOnlyLM`."""
    return eqx.tree_deserialise_leaves(checkpoint(variant, depth, seed, step, folder), make_model(depth, seed))


def optimizer(settings: dict = SETTINGS):
    schedule = optax.linear_schedule(0.0, settings["learning_rate"], settings["warmup_steps"])
    return optax.chain(optax.clip_by_global_norm(settings["clip_norm"]), optax.adam(schedule))


def batch(step: int, seed: int = 0, variant: str = "plain", settings: dict = SETTINGS) -> jax.Array:
    """The training windows of one step ``(batch, context + 1)``: the same for every depth at one seed."""
    key = jax.random.fold_in(jax.random.key(settings["data_seed"] + seed), step)
    if variant == "curriculum" and step < settings["curriculum_steps"]:
        return induction.periodic_random_tokens(key, settings["batch"], settings["context"] + 1, *settings["periods"],
                                                low=induction.PRINTABLE)
    return corpus.sample_windows(corpus.load("train"), key, settings["batch"], settings["context"] + 1)


def eval_sets(settings: dict = SETTINGS):
    held = corpus.sample_windows(corpus.load("held_out"), jax.random.key(7), settings["heldout_windows"],
                                 settings["context"] + 1)
    repeated = induction.repeated_random_tokens(jax.random.key(8), settings["repeated_sequences"],
                                                settings["repeated_period"], low=settings["repeated_low"])
    return held, repeated, repeated_code(held, settings)


def repeated_code(held, settings: dict = SETTINGS):
    """The first ``repeated_sequences`` held-out windows as their first ``repeated_period`` characters twice:
    real code repeated, ``(num, 2 * period)``."""
    first = held[:settings["repeated_sequences"], :settings["repeated_period"]]
    return jnp.concatenate([first, first], axis=1)


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


def copy_losses(model, sequences, period: int) -> tuple[float, float]:
    """The mean loss (nats) on the first and on the second copy of sequences that repeat at ``period``."""
    logits, _, _ = induction.forward(model, sequences)
    loss = np.asarray(train.cross_entropy(logits[:, :-1], sequences[:, 1:]).mean(axis=0))
    # loss[t] predicts token t + 1: the first copy's predictions are t = 0..P-2, the second copy's t = P..2P-2
    return float(loss[:period - 1].mean()), float(loss[period:].mean())


def measure(model, held, repeated, code, settings):
    """The losses and scores of one evaluation (see the module docstring)."""
    period = settings["repeated_period"]
    logits, w_held, _ = induction.forward(model, held[:, :-1])  # one pass per set: losses and weights
    per_position = np.asarray(train.cross_entropy(logits, held[:, 1:]).mean(axis=0))
    _, w_rep, _ = induction.forward(model, repeated)
    first, second = copy_losses(model, repeated, period)
    code_first, code_second = copy_losses(model, code, period)
    prev = np.asarray(induction.previous_token_score(w_held).mean(axis=0))  # (depth, heads)
    ind = np.asarray(induction.induction_score(w_rep, period).mean(axis=0))
    return dict(heldout_loss=float(per_position.mean()),
                in_context_loss=float(induction.in_context_loss(per_position, settings["early"], settings["late"])),
                loss_at_early=float(per_position[settings["early"]]), loss_at_late=float(per_position[settings["late"]]),
                repeat_loss_first=first, repeat_loss_second=second,
                code_repeat_loss_first=code_first, code_repeat_loss_second=code_second), prev, ind, per_position


def run(variant, depth, seed, settings, out_dir, tables, flush):
    model = make_model(depth, seed, settings)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    opt = optimizer(settings)
    state = opt.init(params)
    step_fn = make_step(static, opt)
    held, repeated, code = eval_sets(settings)
    ident = dict(variant=variant, depth=depth, seed=seed)
    stored = set(settings["checkpoints"]) if seed == 0 else set()
    stored.add(settings["steps"])
    losses = []
    for step in range(settings["steps"] + 1):
        if step % settings["eval_every"] == 0 or step in stored:
            model = eqx.combine(params, static)
            summary, prev, ind, per_position = measure(model, held, repeated, code, settings)
            row = dict(ident, step=step, train_loss=round(float(np.mean(losses)), 5) if losses else "",
                       **{k: round(v, 5) for k, v in summary.items()})
            tables["training"].append(row)
            losses = []
            for layer in range(depth):
                for head in range(settings["heads"]):
                    tables["scores"].append(dict(ident, step=step, layer=layer, head=head,
                                                 previous_token=round(float(prev[layer, head]), 5),
                                                 induction=round(float(ind[layer, head]), 5)))
            if depth > 1:
                k = induction.composition_scores(model, "K")
                for src in range(settings["heads"]):
                    for dst in range(settings["heads"]):
                        tables["composition"].append(dict(ident, step=step, layer0_head=src, layer1_head=dst,
                                                          k_composition=round(float(k[0, src, 1, dst]), 5)))
            if step in stored:
                eqx.tree_serialise_leaves(checkpoint(variant, depth, seed, step, out_dir), model)
                tables["per_position"] += [dict(ident, step=step, position=t, loss=round(float(v), 5))
                                           for t, v in enumerate(per_position)]
            print(f"{variant} L{depth} s{seed} step {step}: train {row['train_loss']} held-out {row['heldout_loss']} "
                  f"icl {row['in_context_loss']} repeat {row['repeat_loss_first']}->{row['repeat_loss_second']} "
                  f"code {row['code_repeat_loss_first']}->{row['code_repeat_loss_second']} "
                  f"max induction {ind.max():.3f} max prev {prev.max():.3f}", flush=True)
            flush()  # the tables so far, in case the run is cut
        if step == settings["steps"]:
            break
        params, state, value = step_fn(params, state, batch(step, seed, variant, settings))
        losses.append(float(value))


@contextlib.contextmanager
def locked(folder: pathlib.Path):
    folder.mkdir(parents=True, exist_ok=True)
    name = "induction_heads_" + hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16] + ".lock"
    with (pathlib.Path(tempfile.gettempdir()) / name).open("w") as lock:  # outside the repository
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def merge_csv(path: pathlib.Path, rows: list[dict], runs: set) -> None:
    """Write ``rows`` to ``path`` after the rows already there whose (variant, depth, seed) is not in ``runs``."""
    kept = []
    if path.exists():
        with path.open(newline="", encoding="utf-8") as f:
            kept = [r for r in csv.DictReader(f) if (r["variant"], int(r["depth"]), int(r["seed"])) not in runs]
    if kept or rows:
        write_csv(path, kept + rows)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", choices=VARIANTS, default="plain")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=SETTINGS["steps"])
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    parser.add_argument("--depths", type=int, nargs="+", default=SETTINGS["depths"])
    args = parser.parse_args(argv)
    settings = dict(SETTINGS, steps=args.steps, depths=args.depths,
                    checkpoints=[s for s in SETTINGS["checkpoints"] if s <= args.steps])
    command = "nice -n 5 python " + " ".join(["bench/induction_heads.py"] + (argv if argv is not None else sys.argv[1:]))
    info = RunInfo(command)
    out_dir = args.out / "induction_heads"
    out_dir.mkdir(parents=True, exist_ok=True)
    tables = {name: [] for name in ("training", "scores", "composition", "per_position")}
    runs = {(args.variant, d, s) for s in args.seeds for d in args.depths}

    def flush():
        with locked(args.out):
            for name, rows in tables.items():
                merge_csv(args.out / f"induction_heads_{name}.csv", rows, runs)

    seconds = {}
    for seed in args.seeds:
        for depth in args.depths:
            wall, cpu = time.time(), time.process_time()
            run(args.variant, depth, seed, settings, out_dir, tables, flush)
            seconds[f"L{depth}_s{seed}"] = dict(wall=round(time.time() - wall, 1), cpu=round(time.process_time() - cpu, 1))
            info.sample()
    meta = info.metadata(samples_name="after_each_run", settings=dict(settings, variant=args.variant, seeds=args.seeds),
                         corpus_sha256=corpus.SHA256, seconds=seconds)
    with locked(args.out):
        path = args.out / "induction_heads.json"
        record = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        record = record if "runs" in record and "machine" not in record else {"runs": {}}
        record["runs"][f"{args.variant}_seeds_{'_'.join(map(str, args.seeds))}"] = meta
        path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print("wrote", args.out / "induction_heads_training.csv", "and the other tables, checkpoints in", out_dir)


if __name__ == "__main__":
    main()
