"""Chapter 11's experiment: 1- and 2-layer attention-only models trained on Python's standard library, measured as
they learn; shared by the chapter, its command (bench/induction_heads.py, a thin wrapper of :func:`main`) and the
tests.

The components are :mod:`attnbook.corpus` (the shipped text), :mod:`attnbook.induction` (the model and every
score); this module fixes the run's sizes once (:data:`SETTINGS`) and holds its data, training, measurements and
stored checkpoints:

    from attnbook.experiments import ch11
    model = ch11.make_model(2, seed=0)                          # the initial weights of seed 0
    final = ch11.load_model("curriculum", 2, seed=0, step=1500)  # a stored checkpoint (shipped for 2 layers)

    python -m attnbook.experiments.ch11 --variant curriculum --seeds 0 1 2
    python -m attnbook.experiments.ch11 --steps 20 --out /tmp/x   # a quick trial elsewhere

**Seeds.** Seed ``s`` draws the initial weights from ``jax.random.key(s)`` and the batch of step ``n`` from
``jax.random.fold_in(jax.random.key(data_seed + s), n)``: at one seed both depths start from the same embedding and
see the same batches in the same order.

**Two variants**, each its own run: ``plain`` (windows of the training files as they are) and ``curriculum`` (for
the first ``curriculum_steps`` steps random periodic sequences, :func:`attnbook.induction.periodic_random_tokens`,
then plain windows). bench/induction_heads.py's docstring describes the measurements and the stored files.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import fcntl
import functools
import hashlib
import json
import pathlib
import re
import sys
import tempfile
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import corpus, induction, train
from .store import RESULTS, RunInfo, read_csv, source_folder, write_csv

VARIANTS = ("plain", "curriculum")


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sizes of chapter 11's runs; every run's record in ``induction_heads.json`` stores them (with its variant
    and seeds)."""

    d_model: int = 64
    heads: int = 4
    context: int = 128  # characters a model reads; windows of context + 1 for next-character training
    batch: int = 32
    learning_rate: float = 3e-3
    warmup_steps: int = 100  # a linear warm-up to the constant learning rate
    clip_norm: float = 1.0
    steps: int = 1500
    eval_every: int = 100
    checkpoints: tuple[int, ...] = (0, 400, 600, 1500)  # stored for seed 0 (the last step for every seed)
    data_seed: int = 1000
    encoding: str = "rope"
    curriculum_steps: int = 600
    periods: tuple[int, int] = (8, 60)  # the curriculum's periods, uniform per row
    heldout_windows: int = 256
    repeated_sequences: int = 64
    repeated_period: int = 64
    repeated_low: int = induction.PRINTABLE
    early: int = induction.EARLY
    late: int = induction.LATE
    depths: tuple[int, ...] = (2, 1)

    def to_dict(self) -> dict:
        """The settings as the stored JSON records them (tuples as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}


SETTINGS = Settings()
OUT = source_folder()


def make_model(depth: int, seed: int = 0, settings: Settings = SETTINGS) -> induction.AttentionOnlyLM:
    """The untrained model of one run: its initial weights depend on the seed only (``jax.random.key(seed)``)."""
    return induction.AttentionOnlyLM(d_model=settings.d_model, depth=depth, heads=settings.heads,
                                     encoding=settings.encoding, key=jax.random.key(seed))


def checkpoint(variant: str, depth: int, seed: int, step: int, folder=OUT / "induction_heads"):
    """The path of one stored checkpoint in ``folder`` (a path, or a folder of ``importlib.resources``)."""
    folder = pathlib.Path(folder) if isinstance(folder, str) else folder
    return folder / f"{variant}_L{depth}_s{seed}_step{step:05d}.eqx"


def load_model(variant: str, depth: int, seed: int, step: int, folder=RESULTS / "induction_heads"
               ) -> induction.AttentionOnlyLM:
    """A stored checkpoint (of the installed package's results unless ``folder``) as an
    :class:`attnbook.induction.AttentionOnlyLM`."""
    return eqx.tree_deserialise_leaves(checkpoint(variant, depth, seed, step, folder), make_model(depth, seed))


def optimizer(settings: Settings = SETTINGS):
    """Adam with a linear warm-up to the learning rate, gradients clipped to ``clip_norm``."""
    schedule = optax.linear_schedule(0.0, settings.learning_rate, settings.warmup_steps)
    return optax.chain(optax.clip_by_global_norm(settings.clip_norm), optax.adam(schedule))


def batch(step: int, seed: int = 0, variant: str = "plain", settings: Settings = SETTINGS) -> jax.Array:
    """The training windows of one step ``(batch, context + 1)``: the same for every depth at one seed."""
    key = jax.random.fold_in(jax.random.key(settings.data_seed + seed), step)
    if variant == "curriculum" and step < settings.curriculum_steps:
        return induction.periodic_random_tokens(key, settings.batch, settings.context + 1, *settings.periods,
                                                low=induction.PRINTABLE)
    return corpus.sample_windows(corpus.load("train"), key, settings.batch, settings.context + 1)


def eval_sets(settings: Settings = SETTINGS):
    """The fixed evaluation sets of every run: held-out windows, random sequences repeated twice, and real code
    repeated (:func:`repeated_code`)."""
    held = corpus.sample_windows(corpus.load("held_out"), jax.random.key(7), settings.heldout_windows,
                                 settings.context + 1)
    repeated = induction.repeated_random_tokens(jax.random.key(8), settings.repeated_sequences,
                                                settings.repeated_period, low=settings.repeated_low)
    return held, repeated, repeated_code(held, settings)


def repeated_code(held, settings: Settings = SETTINGS):
    """The first ``repeated_sequences`` held-out windows as their first ``repeated_period`` characters twice:
    real code repeated, ``(num, 2 * period)``."""
    first = held[:settings.repeated_sequences, :settings.repeated_period]
    return jnp.concatenate([first, first], axis=1)


def make_step(static, opt):
    """One jitted training step ``(params, state, windows) -> (params, state, loss)``."""
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


def measure(model, held, repeated, code, settings: Settings = SETTINGS):
    """The losses and scores of one evaluation (bench/induction_heads.py's docstring lists them)."""
    period = settings.repeated_period
    logits, w_held, _ = induction.forward(model, held[:, :-1])  # one pass per set: losses and weights
    per_position = np.asarray(train.cross_entropy(logits, held[:, 1:]).mean(axis=0))
    _, w_rep, _ = induction.forward(model, repeated)
    first, second = copy_losses(model, repeated, period)
    code_first, code_second = copy_losses(model, code, period)
    prev = np.asarray(induction.previous_token_score(w_held).mean(axis=0))  # (depth, heads)
    ind = np.asarray(induction.induction_score(w_rep, period).mean(axis=0))
    return dict(heldout_loss=float(per_position.mean()),
                in_context_loss=float(induction.in_context_loss(per_position, settings.early, settings.late)),
                loss_at_early=float(per_position[settings.early]), loss_at_late=float(per_position[settings.late]),
                repeat_loss_first=first, repeat_loss_second=second,
                code_repeat_loss_first=code_first, code_repeat_loss_second=code_second), prev, ind, per_position


def run(variant, depth, seed, settings: Settings, out_dir, tables, flush):
    """One run (variant, depth, seed): train ``settings.steps`` steps, measuring every ``eval_every`` and at the
    checkpoints; the rows go into ``tables``, the checkpoints into ``out_dir``."""
    model = make_model(depth, seed, settings)
    params, static = eqx.partition(model, eqx.is_inexact_array)
    opt = optimizer(settings)
    state = opt.init(params)
    step_fn = make_step(static, opt)
    held, repeated, code = eval_sets(settings)
    ident = dict(variant=variant, depth=depth, seed=seed)
    stored = set(settings.checkpoints) if seed == 0 else set()
    stored.add(settings.steps)
    losses = []
    for step in range(settings.steps + 1):
        if step % settings.eval_every == 0 or step in stored:
            model = eqx.combine(params, static)
            summary, prev, ind, per_position = measure(model, held, repeated, code, settings)
            row = dict(ident, step=step, train_loss=round(float(np.mean(losses)), 5) if losses else "",
                       **{k: round(v, 5) for k, v in summary.items()})
            tables["training"].append(row)
            losses = []
            for layer in range(depth):
                for head in range(settings.heads):
                    tables["scores"].append(dict(ident, step=step, layer=layer, head=head,
                                                 previous_token=round(float(prev[layer, head]), 5),
                                                 induction=round(float(ind[layer, head]), 5)))
            if depth > 1:
                k = induction.composition_scores(model, "K")
                for src in range(settings.heads):
                    for dst in range(settings.heads):
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
        if step == settings.steps:
            break
        params, state, value = step_fn(params, state, batch(step, seed, variant, settings))
        losses.append(float(value))


@contextlib.contextmanager
def locked(folder: pathlib.Path):
    """A file lock (outside the repository) for writing ``folder``'s tables from several runs at once."""
    folder.mkdir(parents=True, exist_ok=True)
    name = "induction_heads_" + hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:16] + ".lock"
    with (pathlib.Path(tempfile.gettempdir()) / name).open("w") as lock:
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


def main(argv=None, program: str = "python -m attnbook.experiments.ch11") -> None:
    """Train and measure the runs of one variant for the given seeds and depths, and store them (see the module's
    docstring); ``program``: how the command is recorded in the JSON file."""
    parser = argparse.ArgumentParser(description="Chapter 11: attention-only models trained on Python's standard "
                                                 "library, measured as they learn")
    parser.add_argument("--variant", choices=VARIANTS, default="plain")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--steps", type=int, default=SETTINGS.steps)
    parser.add_argument("--out", type=pathlib.Path, default=OUT)
    parser.add_argument("--depths", type=int, nargs="+", default=list(SETTINGS.depths))
    args = parser.parse_args(argv)
    settings = dataclasses.replace(SETTINGS, steps=args.steps, depths=tuple(args.depths),
                                   checkpoints=tuple(s for s in SETTINGS.checkpoints if s <= args.steps))
    command = "nice -n 5 " + " ".join([program] + (list(argv) if argv is not None else sys.argv[1:]))
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
    meta = info.metadata(samples_name="after_each_run",
                         settings=dict(settings.to_dict(), variant=args.variant, seeds=args.seeds),
                         corpus_sha256=corpus.SHA256, seconds=seconds)
    with locked(args.out):
        path = args.out / "induction_heads.json"
        record = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        record = record if "runs" in record and "machine" not in record else {"runs": {}}
        record["runs"][f"{args.variant}_seeds_{'_'.join(map(str, args.seeds))}"] = meta
        path.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    print("wrote", args.out / "induction_heads_training.csv", "and the other tables, checkpoints in", out_dir)


# What the chapter reads from the stored tables and measures on the final checkpoints.

RUNS = (("plain", 2), ("plain", 1), ("curriculum", 2), ("curriculum", 1))  # (variant, depth), as the chapter lists them


def character_pairs(split) -> tuple[np.ndarray, np.ndarray]:
    """The ``(previous, next)`` character pairs inside the files of a split (never the last character of one file
    with the first of the next), as int64 ids: what a bigram model counts."""
    inside = np.ones(split.ids.size - 1, bool)
    inside[split.starts[1:-1] - 1] = False  # the last character of a file and the first of the next
    return split.ids[:-1][inside].astype(np.int64), split.ids[1:][inside].astype(np.int64)


@functools.cache
def stored(name: str) -> tuple[dict[str, str], ...]:
    """The rows of ``induction_heads_{name}.csv`` (``training``, ``scores``, ``composition``, ``per_position``)."""
    return tuple(read_csv(f"induction_heads_{name}.csv"))


def _rows(name: str, variant: str, depth: int, seed: int) -> list[dict[str, str]]:
    return [r for r in stored(name) if (r["variant"], int(r["depth"]), int(r["seed"])) == (variant, depth, seed)]


def stored_seeds() -> list[int]:
    """The seeds of the stored runs."""
    return sorted({int(r["seed"]) for r in stored("training")})


def curve(variant: str, depth: int, field: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(steps, values)`` of one column of the stored training table for one run (its evaluated steps)."""
    rows = [r for r in _rows("training", variant, depth, seed) if r[field] != ""]
    return np.array([int(r["step"]) for r in rows]), np.array([float(r[field]) for r in rows])


def value_at(variant: str, depth: int, field: str, seed: int, step: int) -> float:
    """One column of the stored training table at one step of one run."""
    steps, values = curve(variant, depth, field, seed)
    return values[list(steps).index(step)]


def head_scores(variant: str, depth: int, field: str, seed: int, heads: int = SETTINGS.heads):
    """``(steps, scores (steps, depth, heads))``: one stored score (``induction``, ``previous_token``) of every head
    of one run."""
    rows = _rows("scores", variant, depth, seed)
    steps = sorted({int(r["step"]) for r in rows})
    out = np.zeros((len(steps), depth, heads))
    for r in rows:
        out[steps.index(int(r["step"])), int(r["layer"]), int(r["head"])] = float(r[field])
    return np.array(steps), out


def best(variant: str, depth: int, field: str, seed: int, layer: int | None = None):
    """``(steps, the highest score of any head (of one layer) at each step)`` of one run."""
    steps, v = head_scores(variant, depth, field, seed)
    return steps, (v if layer is None else v[:, layer:layer + 1]).max(axis=(1, 2))


def first_step(variant: str, depth: int, seed: int, above: float) -> int | None:
    """The first evaluated step at which some head's stored induction score exceeds ``above`` (None: never)."""
    steps, v = best(variant, depth, "induction", seed)
    return next((int(t) for t, x in zip(steps, v) if x > above), None)


def position_losses(variant: str, depth: int, seed: int, step: int = SETTINGS.steps) -> np.ndarray:
    """The stored held-out loss at each position ``(T,)`` of one run's checkpoint."""
    return np.array([float(r["loss"]) for r in _rows("per_position", variant, depth, seed) if int(r["step"]) == step])


def loss_per_position(logits, tokens) -> np.ndarray:
    """The loss (nats) at each position ``t``, predicting ``tokens[:, t + 1]``, averaged over the sequences."""
    return np.asarray(train.cross_entropy(logits[:, :-1], tokens[:, 1:]).mean(axis=0))


def measure_heads(model, held, repeated, code, ablated, parts=("held", "random", "code"),
                  period: int = SETTINGS.repeated_period) -> dict:
    """Of the ``parts`` asked for, with the heads ``ablated`` (boolean ``(depth, heads)``) zero-ablated: the held-out
    loss and every head's previous-token score (``"held"``: keys ``held``, ``previous``), every head's induction
    score on the random repeats (``"random"``: ``induction``), and on the repeated code the loss per position, every
    head's induction score and the gain, the first copy's mean loss minus the second's (``"code"``: ``code``,
    ``code_induction``, ``gain``). Every input is ``(N, 2 * period)``: one compiled program serves them all."""
    zeros = np.zeros((*ablated.shape, model.head_dim), np.float32)
    first, second = slice(0, period - 1), slice(period, 2 * period - 1)  # predictions inside each copy
    out = {}
    if "held" in parts:
        logits, w, _ = induction.forward(model, held[:, :-1], ablated, zeros)
        out["held"] = float(loss_per_position(np.concatenate([logits, logits[:, :1]], 1), held).mean())
        out["previous"] = np.asarray(induction.previous_token_score(w).mean(axis=0))
    if "random" in parts:
        _, w, _ = induction.forward(model, repeated, ablated, zeros)
        out["induction"] = np.asarray(induction.induction_score(w, period).mean(axis=0))
    if "code" in parts:
        logits, w, _ = induction.forward(model, code, ablated, zeros)
        out["code"] = loss_per_position(logits, code)
        out["code_induction"] = np.asarray(induction.induction_score(w, period).mean(axis=0))
        out["gain"] = out["code"][first].mean() - out["code"][second].mean()  # what the second copy saves
    return out


@dataclasses.dataclass(frozen=True)
class Identifiers:
    """Repeated identifiers of a text: each name of ``min_length`` or more characters that occurs again 10 to 109
    characters later, seen in the ``context``-character window that starts 8 characters before its first
    occurrence (the first ``count`` of them). ``found``: ``(name, first, again)`` character offsets; ``windows``:
    token ids ``(count, context)``; ``distance``: ``again - first``."""

    found: tuple[tuple[str, int, int], ...]
    windows: np.ndarray
    distance: np.ndarray

    @classmethod
    def of(cls, split, context: int = SETTINGS.context, count: int = 256, min_length: int = 8) -> "Identifiers":
        text = corpus.decode(split.ids)
        found = []
        for match in re.finditer(rf"\b[A-Za-z_][A-Za-z0-9_]{{{min_length - 1},}}\b", text):
            name, at = match.group(), match.start()
            again = text.find(name, at + 10, at + 110)
            if again > 0 and at >= 8 and again - at + 8 + len(name) < context:
                found.append((name, at, again))
            if len(found) == count:
                break
        windows = np.stack([split.ids[at - 8:at - 8 + context] for _, at, _ in found]).astype(np.int32)
        return cls(tuple(found), windows, np.array([again - at for _, at, again in found]))

    def queries(self, i: int) -> np.ndarray:
        """The positions of identifier ``i``'s second occurrence, after its first character, in its window."""
        name, at, again = self.found[i]
        return np.arange(again - at + 9, again - at + 8 + len(name))

    def induction_targets(self, i: int) -> np.ndarray:
        """For each query of identifier ``i``: the character after the same one in the first occurrence."""
        return self.queries(i) - self.distance[i] + 1

    def weights(self, model, batch: int = 64) -> np.ndarray:
        """Every head's attention weights on the windows ``(count, depth, heads, T, T)``, in batches of ``batch``."""
        none = np.zeros((model.depth, model.heads), bool)
        zeros = np.zeros((model.depth, model.heads, model.head_dim), np.float32)
        return np.concatenate([np.asarray(induction.forward(model, self.windows[i:i + batch], none, zeros)[1])
                               for i in range(0, len(self.found), batch)])

    def hit_rate(self, weights, layer: int, head: int, target: str = "induction") -> np.ndarray:
        """Per identifier, the share of its queries whose largest weight in head ``(layer, head)`` is on their
        ``"induction"`` target or on the ``"previous"`` character."""
        if target not in ("induction", "previous"):
            raise ValueError(f"target must be 'induction' or 'previous', got {target!r}")
        return np.array([(weights[i, layer, head, self.queries(i)].argmax(axis=1)
                          == (self.induction_targets(i) if target == "induction" else self.queries(i) - 1)).mean()
                         for i in range(len(self.found))])


__all__ = ["VARIANTS", "Settings", "SETTINGS", "make_model", "checkpoint", "load_model", "optimizer", "batch",
           "eval_sets", "repeated_code", "make_step", "copy_losses", "measure", "run", "merge_csv", "main",
           "RUNS", "character_pairs", "stored", "stored_seeds", "curve", "value_at", "head_scores", "best", "first_step",
           "position_losses", "loss_per_position", "measure_heads", "Identifiers"]


if __name__ == "__main__":
    main()
