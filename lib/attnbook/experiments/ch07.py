"""Chapter 7's experiment: the digit-reversal Transformer, its ablations and the cost of greedy decoding.

The components (:class:`~attnbook.transformer.EncoderDecoder`, :func:`~attnbook.transformer.reversal_data`,
:func:`~attnbook.transformer.sequence_loss`, the decoders) are :mod:`attnbook.transformer`'s; this module fixes their
sizes once (:data:`SETTINGS`, :data:`ABLATIONS`, :data:`DECODING`) and runs them, for the chapter's first steps,
its stored runs and the widget alike:

    from attnbook.experiments import ch07
    train_set, test_set = ch07.data()                        # 20000 strings of 8 digits, 1000 held out
    model, history = ch07.train(ch07.model(ch07.SEED), train_set, ch07.SEED)   # seed 0's run, 600 steps
    ch07.evaluate(model, history, test_set)                  # final loss, exact match, parameters
    trained = ch07.stored_model()                            # the same run's weights, as stored
    batch = ch07.minibatch(train_set, ch07.SEED, step=0)     # the run's first minibatch, as train.fit reads it
    ablations = ch07.stored_ablations()                      # the stored ablation runs, typed, row by row

The stored runs, too slow for the notebook (lib/attnbook/experiments/results/):

    python -m attnbook.experiments.ch07 model --write       # the chapter's model: seed 0, 600 steps (about 15 s)
    python -m attnbook.experiments.ch07 ablations --write   # about 20 minutes on an idle 2-core machine
    python -m attnbook.experiments.ch07 decoding --write    # a few minutes

``model``: seed :data:`SEED`'s run of :func:`train`, the first row of the ablation table, with its weights
(``transformer_model.eqx``, read by :func:`stored_model`) and its loss at every step (``transformer_model.json``).
The chapter analyses these weights rather than its own: another CPU changes the last bits of each step, and 600
steps amplify them into other weights (the library of 24 November, whose first loss agrees with today's within
2e-6, ends this run at 1.5e-03 instead of 3.8e-04).

``ablations``: every row of :data:`ABLATIONS` trains a model for the same number of Adam steps on the same 20000
training strings, and reports the exact-match accuracy of greedy decoding on 1000 held-out strings and the loss of
the last 50 training steps; seeds 0, 1, 2 set the initial weights (``jax.random.key(seed)``) and the minibatch order
(``jax.random.key(1000 + seed)``), the data are the same for every run (NumPy seed 0). Writes
``transformer_ablations.csv`` (one line per run) and ``.json`` (the machine, the settings). On a busy machine the
runs can be shared between processes, each appending its results to a file of JSON lines in a folder, and merged
afterwards (the merged results are the same):

    python -m attnbook.experiments.ch07 ablations --shard 0/3 --partial /tmp/ablations   # and 1/3, 2/3
    python -m attnbook.experiments.ch07 ablations --merge --partial /tmp/ablations --write

``decoding``: the wall time of greedy decoding against output length, for three decoders of the chapter's size
(untrained weights: the cost does not depend on what the weights say): ``recompute``
(:func:`~attnbook.transformer.greedy_decode`, the whole prefix through the decoder at every step), ``kv-cache``
(:func:`~attnbook.transformer.greedy_decode_cached` with attention) and ``aft-simple`` (the same with AFT-simple as
the decoder's mixer, whose self-attention state has a fixed size). For each length the jitted decoder is compiled
once, then timed: the fastest of 7 runs (3 when a run takes more than a second), since on a shared machine other
jobs only add time. ``state_bytes`` is what a decoder keeps from step to step
(:func:`~attnbook.transformer.cache_bytes`); 0 for ``recompute``, which keeps no keys or values. Writes
``transformer_decoding.csv`` and ``.json``.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib
import sys
import time

import equinox as eqx
import jax
import numpy as np
import optax

from .. import train as training
from .. import transformer
from ..nn import count_parameters
from .store import RESULTS, RunInfo, command_line, read_csv, read_json, write_csv


@dataclasses.dataclass(frozen=True)
class Settings:
    """The task, the model and its training: the chapter's live run and every ablation (the stored JSON's
    ``settings``). ``warmup`` is the warm-up of the ablation rows that have one."""

    length: int = 8  # digits per string
    train_size: int = 20000
    test_size: int = 1000
    data_seed: int = 0  # NumPy seed of both sets
    d_model: int = 32
    heads: int = 4
    depth: int = 2  # encoder blocks, and as many decoder blocks
    steps: int = 600
    batch_size: int = 64
    learning_rate: float = 3e-3
    warmup: int = 100
    seeds: tuple[int, ...] = (0, 1, 2)

    def to_dict(self) -> dict:
        """The settings as ``transformer_ablations.json`` records them."""
        return dict(dataclasses.asdict(self), seeds=list(self.seeds))


SETTINGS = Settings()

SEED = 0
"""The seed of the chapter's model (:func:`stored_model`) and of the widget's: the ablation table's seed 0."""

ABLATIONS: dict[str, tuple[dict, float, int]] = {
    "full model (pre-LN)": ({}, SETTINGS.learning_rate, 0),
    "no residual connections": ({"residual": False}, SETTINGS.learning_rate, 0),
    "no feed-forward layer": ({"feed_forward": False}, SETTINGS.learning_rate, 0),
    "1 layer": ({"depth": 1}, SETTINGS.learning_rate, 0),
    "AFT-simple mixer": ({"mixer": "aft-simple"}, SETTINGS.learning_rate, 0),
    "AFT-conv mixer": ({"mixer": "aft-conv"}, SETTINGS.learning_rate, 0),
    "post-LN": ({"pre_norm": False}, SETTINGS.learning_rate, 0),
}
"""The rows of the ablation table: name -> (options of :func:`model`, learning rate, warm-up steps)."""
for _lr in (2e-2, 3e-2):
    ABLATIONS[f"pre-LN, lr {_lr:g}"] = ({}, _lr, 0)
    ABLATIONS[f"post-LN, lr {_lr:g}"] = ({"pre_norm": False}, _lr, 0)
    ABLATIONS[f"post-LN, lr {_lr:g}, warm-up"] = ({"pre_norm": False}, _lr, SETTINGS.warmup)
del _lr


@dataclasses.dataclass(frozen=True)
class DecodingSettings:
    """The decoding benchmark: models of :data:`SETTINGS`' sizes, a source of 8 tokens, outputs of 16 to 1024."""

    source_length: int = 8
    repeats: int = 7
    lengths: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 1024)
    recompute_max_length: int = 256  # no cache: only up to 256 tokens (the longest runs would take minutes)

    def to_dict(self) -> dict:
        """The settings as ``transformer_decoding.json`` records them (with the model's sizes)."""
        return dict(d_model=SETTINGS.d_model, heads=SETTINGS.heads, depth=SETTINGS.depth,
                    source_length=self.source_length, repeats=self.repeats, lengths=list(self.lengths),
                    recompute_max_length=self.recompute_max_length)


DECODING = DecodingSettings()


# ---------------------------------------------------------------------------------------------
# Data, model, training, evaluation


def data(s: Settings = SETTINGS):
    """The training set and the held-out set (strings never trained on), each ``(sources, targets_in, targets)``."""
    rng = np.random.default_rng(s.data_seed)
    train_set = transformer.reversal_data(s.train_size, s.length, rng)
    test_set = transformer.reversal_data(s.test_size, s.length, rng, exclude=train_set[0])
    return train_set, test_set


def model(seed: int, s: Settings = SETTINGS, **options) -> transformer.EncoderDecoder:
    """The chapter's encoder-decoder (11 tokens: 10 digits and the start token), weights from ``jax.random.key(seed)``;
    ``options`` (``depth``, ``mixer``, ``residual``, ``feed_forward``, ``pre_norm``) as an ablation row changes it."""
    options = dict(options)
    depth = options.pop("depth", s.depth)
    return transformer.EncoderDecoder(transformer.DIGITS + 1, d_model=s.d_model, depth=depth, heads=s.heads,
                                      key=jax.random.key(seed), **options)


def optimizer(learning_rate: float, warmup: int = 0) -> optax.GradientTransformation:
    """Adam; with warm-up the rate rises linearly from 0 to ``learning_rate`` over ``warmup`` steps, then stays."""
    return optax.adam(optax.linear_schedule(0.0, learning_rate, warmup) if warmup else learning_rate)


def train(model, train_set, seed: int, *, learning_rate: float | None = None, warmup: int = 0,
          s: Settings = SETTINGS):
    """:func:`attnbook.train.fit` with :func:`~attnbook.transformer.sequence_loss` (teacher forcing): ``s.steps``
    Adam steps of ``s.batch_size`` strings, the minibatch order from ``jax.random.key(1000 + seed)``; returns the
    trained model and its :class:`~attnbook.train.History`."""
    rate = s.learning_rate if learning_rate is None else learning_rate
    return training.fit(model, transformer.sequence_loss, train_set, optimizer=optimizer(rate, warmup),
                        steps=s.steps, batch_size=s.batch_size, key=jax.random.key(1000 + seed))


def minibatch(train_set, seed: int, step: int, s: Settings = SETTINGS) -> tuple[np.ndarray, ...]:
    """Minibatch ``step`` (from 0) of the training run with ``seed``: the ``s.batch_size`` strings that
    :func:`train`'s step ``step`` reads, as ``(sources, targets_in, targets)``, each ``(batch_size, length)``."""
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or not 0 <= step < s.steps:
        raise ValueError(f"step must be an integer in 0..{s.steps - 1} (the run's steps), got {step!r}")
    rows = _order(seed, len(train_set[0]), s.batch_size, s.steps)[step]
    return tuple(np.asarray(a)[rows] for a in train_set)


@functools.lru_cache(maxsize=8)
def _order(seed: int, num_examples: int, batch_size: int, steps: int) -> np.ndarray:
    """The run's minibatch indices ``(steps, batch_size)``, drawn as :func:`attnbook.train.fit` draws them."""
    return np.asarray(training.minibatch_indices(jax.random.key(1000 + seed), num_examples, batch_size, steps))


def evaluate(model, history, test_set) -> dict:
    """What an ablation run stores: the loss of the last 50 training steps, the exact match of greedy decoding on
    the held-out strings (0 when the training diverged), and the number of parameters."""
    loss = float(np.mean(history.train_loss[-50:]))
    accuracy = transformer.exact_match(model, test_set[0], test_set[2]) if np.isfinite(loss) else 0.0
    return dict(final_loss=round(loss, 5), exact_match=round(accuracy, 4), parameters=count_parameters(model))


def ablation(name: str, seed: int, train_set, test_set, s: Settings = SETTINGS) -> dict:
    """One run of the ablation table: row ``name`` of :data:`ABLATIONS` with ``seed``, trained and evaluated."""
    options, lr, warmup = ABLATIONS[name]
    trained, history = train(model(seed, s, **options), train_set, seed, learning_rate=lr, warmup=warmup, s=s)
    return evaluate(trained, history, test_set)


# ---------------------------------------------------------------------------------------------
# The stored runs


def stored_model(folder=RESULTS) -> transformer.EncoderDecoder:
    """Seed :data:`SEED`'s model at the end of its :func:`train` run, as ``model --write`` stored it
    (``transformer_model.eqx``): what the chapter analyses and the widget decodes with."""
    like = eqx.filter_eval_shape(model, SEED)  # the structure and shapes only: nothing drawn or compiled
    return eqx.tree_deserialise_leaves(folder / "transformer_model.eqx", like)


def stored_training(folder=RESULTS) -> dict:
    """What the stored model's run recorded (``transformer_model.json``): ``train_loss`` (one loss per step, before
    its update), ``final_loss``, ``exact_match``, ``parameters``, and the machine and settings."""
    return read_json("transformer_model.json", folder)


def run_model(out: pathlib.Path, s: Settings = SETTINGS) -> dict:
    """Seed :data:`SEED`'s run of :func:`train`, its weights written to ``out`` (``transformer_model.eqx``) and its
    losses, its evaluation, the machine and the settings to ``out`` with the suffix ``.json``."""
    info = RunInfo("python -m attnbook.experiments.ch07 model")
    train_set, test_set = data(s)
    trained, history = train(model(SEED, s), train_set, SEED, s=s)
    result = evaluate(trained, history, test_set)
    out.parent.mkdir(parents=True, exist_ok=True)
    eqx.tree_serialise_leaves(out, trained)
    meta = info.metadata(settings=s.to_dict(), seed=SEED, **result,
                         train_loss=[float(f"{loss:.6g}") for loss in history.train_loss])
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name}: {result}")
    return result


@dataclasses.dataclass(frozen=True)
class AblationRun:
    """One stored run of the ablation table, a line of ``transformer_ablations.csv`` with its numbers typed."""

    row: str  # the row's name, a key of ABLATIONS
    seed: int
    learning_rate: float
    warmup: int
    final_loss: float  # mean training loss of the last 50 steps, nats per digit
    exact_match: float  # on the 1000 held-out strings
    parameters: int
    seconds: float | None = None
    load_average: float | None = None


@dataclasses.dataclass(frozen=True)
class AblationRow:
    """One row of the ablation table: its name (a key of :data:`ABLATIONS`) and its runs, one per seed."""

    name: str
    runs: tuple[AblationRun, ...]

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(r.seed for r in self.runs)

    @property
    def parameters(self) -> int:
        """The model's parameters (the same with every seed)."""
        return self.runs[0].parameters

    @property
    def exact_match(self) -> tuple[float, ...]:
        """The exact match of each seed, in the order of :attr:`seeds`."""
        return tuple(r.exact_match for r in self.runs)

    @property
    def final_loss(self) -> tuple[float, ...]:
        return tuple(r.final_loss for r in self.runs)

    @property
    def mean_exact_match(self) -> float:
        return float(np.mean(self.exact_match))

    @property
    def mean_loss(self) -> float:
        return float(np.mean(self.final_loss))


def _number(kind, text: str):
    return None if text == "" else kind(text)


def stored_ablations(folder=RESULTS) -> dict[str, AblationRow]:
    """The stored ablation runs (``transformer_ablations.csv``), typed: row name -> :class:`AblationRow`, in the
    order of :data:`ABLATIONS`, each row's runs in the order of their seeds."""
    runs = [AblationRun(row=r["row"], seed=int(r["seed"]), learning_rate=float(r["learning_rate"]),
                        warmup=int(r["warmup"]), final_loss=float(r["final_loss"]),
                        exact_match=float(r["exact_match"]), parameters=int(r["parameters"]),
                        seconds=_number(float, r.get("seconds", "")), load_average=_number(float, r.get("load_average", "")))
            for r in read_csv("transformer_ablations.csv", folder)]
    unknown = sorted({r.row for r in runs} - set(ABLATIONS))
    if unknown:
        raise ValueError(f"transformer_ablations.csv has rows that ABLATIONS does not name: {unknown}")
    return {name: AblationRow(name, tuple(sorted((r for r in runs if r.row == name), key=lambda r: r.seed)))
            for name in ABLATIONS if any(r.row == name for r in runs)}


def run_ablations(out: pathlib.Path | None, *, shard: str | None = None, partial: pathlib.Path | None = None,
                  merge: bool = False, s: Settings = SETTINGS) -> list[dict]:
    """Every row of :data:`ABLATIONS` with every seed of ``s``, written to ``out`` (``transformer_ablations.csv``
    and its ``.json``); ``shard`` ``"i/n"`` runs every n-th run from the i-th into ``partial`` only (skipping the
    runs already there, so a shard started again goes on where it stopped), ``merge`` writes the runs found in
    ``partial``."""
    info = RunInfo("python -m attnbook.experiments.ch07 ablations")
    jobs = [(name, seed) for name in ABLATIONS for seed in s.seeds]
    done = {}  # runs already in `partial` (a shard started again skips them)
    for path in sorted(partial.glob("*.jsonl")) if partial else []:
        for line in path.read_text(encoding="utf-8").splitlines():
            result = json.loads(line)
            done[result["row"], result["seed"]] = result
    if merge:
        missing = [job for job in jobs if job not in done]
        if missing:
            raise SystemExit(f"runs missing from {partial}: {missing}")
        rows = [done[job] for job in jobs]
        write_ablations(out, rows, info, s)
        return rows
    index, count = (int(n) for n in shard.split("/")) if shard else (0, 1)
    train_set, test_set = data(s)
    rows = []
    for name, seed in [job for i, job in enumerate(jobs) if i % count == index and job not in done]:
        began = time.time()
        result = ablation(name, seed, train_set, test_set, s)
        rows.append(dict(row=name, seed=seed, learning_rate=ABLATIONS[name][1], warmup=ABLATIONS[name][2], **result,
                         seconds=round(time.time() - began, 1), load_average=round(os.getloadavg()[0], 2)))
        print(rows[-1], flush=True)
        if partial:
            partial.mkdir(parents=True, exist_ok=True)
            with open(partial / f"shard-{index}.jsonl", "a", encoding="utf-8") as f:
                f.write(json.dumps(rows[-1]) + "\n")
    if not shard:
        write_ablations(out, rows, info, s)
    return rows


def write_ablations(out: pathlib.Path, rows: list[dict], info: RunInfo, s: Settings = SETTINGS) -> None:
    write_csv(out, rows)
    loads = [r["load_average"] for r in rows if r.get("load_average") is not None]
    meta = info.metadata(duration_seconds=round(time.time() - info.start, 1),  # of this process (merging only: about 0)
                         load_average_1min_after_each_run=dict(min=min(loads, default=None), max=max(loads, default=None)),
                         seconds_of_all_runs=round(sum(r["seconds"] for r in rows), 1),
                         settings=s.to_dict(), rows={name: dict(options=o, learning_rate=lr, warmup=w)
                                                     for name, (o, lr, w) in ABLATIONS.items()})
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name}")


def fastest_seconds(fn, repeats: int = DECODING.repeats) -> float:
    """The fastest of several runs, after one that compiles: on a shared machine the other jobs only ever add time,
    so the minimum is the best estimate of what the program itself needs (three runs are enough over a second)."""
    jax.block_until_ready(fn())  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
        if times[0] > 1.0 and len(times) >= 3:  # slow runs (no cache, long outputs): three are enough
            break
    return float(np.min(times))


def run_decoding(out: pathlib.Path, d: DecodingSettings = DECODING) -> list[dict]:
    """The decoding benchmark, written to ``out`` (``transformer_decoding.csv``) and its ``.json``."""
    info = RunInfo("python -m attnbook.experiments.ch07 decoding")
    source = np.random.default_rng(0).integers(0, transformer.DIGITS, d.source_length).astype(np.int32)
    models = {mixer: model(0, mixer=mixer) for mixer in ("attention", "aft-simple")}
    methods = {
        "recompute": (models["attention"], transformer.greedy_decode),
        "kv-cache": (models["attention"], transformer.greedy_decode_cached),
        "aft-simple": (models["aft-simple"], transformer.greedy_decode_cached),
    }
    rows = []
    for length in d.lengths:
        for name, (m, decode) in methods.items():
            if name == "recompute" and length > d.recompute_max_length:
                continue
            total = fastest_seconds(lambda: decode(m, source, length, transformer.START), d.repeats)  # noqa: B023
            state = transformer.cache_bytes(m, length, d.source_length) if name != "recompute" else 0
            rows.append(dict(method=name, length=length, seconds=round(total, 6),
                             ms_per_token=round(1e3 * total / length, 4), state_bytes=state,
                             load_average=round(os.getloadavg()[0], 2)))
            print(rows[-1], flush=True)
    write_csv(out, rows)
    meta = info.metadata(duration_seconds=round(time.time() - info.start, 1), settings=d.to_dict())
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name}")
    return rows


def main(argv=None) -> int:
    def options(parsers):
        ablations = parsers["ablations"]
        ablations.add_argument("--shard", help="i/n: run only every n-th run, starting at the i-th, into --partial")
        ablations.add_argument("--partial", type=pathlib.Path, help="folder of the shards' JSON-lines files")
        ablations.add_argument("--merge", action="store_true", help="write the results from the shards in --partial")

    args, out, parser = command_line("python -m attnbook.experiments.ch07", __doc__.split("\n\n")[0], {
        "model": ("the chapter's model, seed 0, trained and stored with its losses", "transformer_model.eqx"),
        "ablations": ("every ablation row with seeds 0, 1, 2 (about 20 minutes)", "transformer_ablations.csv"),
        "decoding": ("greedy decoding time against output length", "transformer_decoding.csv"),
    }, argv, options=options, needs_out=lambda args: not getattr(args, "shard", None))
    if args.run == "ablations" and args.shard and not args.partial:
        parser.error("--shard needs --partial")
    if args.run == "model":
        run_model(out)
    elif args.run == "ablations":
        run_ablations(out, shard=args.shard, partial=args.partial, merge=args.merge)
    else:
        run_decoding(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
