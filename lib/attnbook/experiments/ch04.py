"""Chapter 4's experiment: one multi-head self-attention layer trained on the article's three synthetic targets.

This module fixes the inputs, the layer's sizes and the training once, for the notebook, the widget's export
(tools/export_widget_data.py, which shows the key-bias layer trained on "add token 2") and the stored runs:

    from attnbook.experiments import ch04
    xs = ch04.inputs()                       # 1000 inputs of 5 tokens x 7 features, uniform in [0, 1)
    targets = ch04.targets(xs)               # "own sum", "add token 2", "replace by token 2"
    run = ch04.train_on(SelfAttentionModel(ch04.layer(key_bias_positions=5)), xs, targets["add token 2"])

The notebook trains most of its layers live, with ``attnbook.train.fit`` and the settings written out. Every run of
the chapter (:data:`VARIANTS` on every target, :data:`ABLATIONS` and the marked token 2 of :data:`MARKED`) is also
stored, so that the chapter can read the runs that only fill a table (the two sinusoidal encodings) and check that
each of its live runs prints what its stored twin does:

    python -m attnbook.experiments.ch04 --write   # about a minute: writes results/mha_runs.csv and .json
    ch04.stored_runs()                            # {(variant, target): {"loss": float, "parameters": int}}

The components (:class:`~attnbook.mha.MultiHeadAttention`, :class:`~attnbook.mha.SelfAttentionModel`,
:func:`~attnbook.mha.fit_and_evaluate`) are :mod:`attnbook.mha`'s.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..mha import MultiHeadAttention, SelfAttentionModel, fit_and_evaluate, parameter_count
from ..positional import sinusoidal_encoding
from .store import RESULTS, RunInfo, read_csv, read_json, source_folder, write_csv


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sizes of chapter 4's experiment (the stored JSON's ``settings``)."""

    examples: int = 1000
    tokens: int = 5
    features: int = 7
    data_seed: int = 2023  # NumPy seed of the inputs
    heads: int = 8
    key_dim: int = 7
    model_seed: int = 0  # jax.random.key of the layer's weights
    learning_rate: float = 1e-2
    steps: int = 1000  # 32 epochs of 1000 examples (31 batches each)
    batch_size: int = 32
    order_seed: int = 1  # jax.random.key of the minibatch order

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


SETTINGS = Settings()

STORED = "mha_runs.csv"
"""The stored runs (and ``mha_runs.json``, the machine and the settings), in ``attnbook/experiments/results/``."""

VARIANTS: dict[str, tuple[dict, str]] = {
    "standard": ({}, "none"),
    "key bias": ({"key_bias_positions": 5}, "none"),
    "learned embedding": ({}, "learned"),
    "sinusoidal, added": ({}, "added"),
    "sinusoidal, concatenated": ({"d_model": 14}, "concatenated"),
}
"""The ways of giving the layer positions, trained on every target: name -> (options of :func:`layer`, inputs of
:func:`encoded_inputs`; ``"learned"`` is the plain inputs with a learned ``(tokens, features)`` table added first,
which starts at zero)."""

ABLATIONS: dict[str, dict] = {
    "1 head": {"num_heads": 1, "key_bias_positions": 5},
    "key_dim 1": {"key_dim": 1, "key_bias_positions": 5},
    "key_dim 1, value_dim 7": {"key_dim": 1, "value_dim": 7, "key_bias_positions": 5},
}
"""The smaller layers, all with the per-position key bias, trained on "add token 2": name -> options of :func:`layer`."""

TARGETS = ("own sum", "add token 2", "replace by token 2")
"""The article's three targets (:func:`targets`), in the chapter's order."""

MARKED = ("standard, token 2 marked", "replace by token 2")
"""The control run: the standard layer on inputs whose token 2 has 1 added to its first feature (:func:`marked`)."""


def inputs(s: Settings = SETTINGS) -> np.ndarray:
    """The inputs ``(examples, tokens, features)``, float32, uniform in [0, 1) from ``default_rng(s.data_seed)``."""
    return np.random.default_rng(s.data_seed).random((s.examples, s.tokens, s.features), dtype=np.float32)


def targets(xs: np.ndarray) -> dict[str, np.ndarray]:
    """The article's three targets, of the inputs' shape (its token 2 is index 1)."""
    return {
        "own sum": np.repeat(xs.sum(axis=2, keepdims=True), xs.shape[2], axis=2),  # each token's sum, on every feature
        "add token 2": xs + xs[:, [1]],  # every token plus token 2
        "replace by token 2": np.broadcast_to(xs[:, [1]], xs.shape),  # every token becomes token 2
    }


def marked(xs: np.ndarray) -> np.ndarray:
    """The inputs with token 2 marked: 1 added to its first feature, which then lies in [1, 2), the others' in [0, 1)."""
    out = xs.copy()
    out[:, 1, 0] += 1.0
    return out


def encoded_inputs(xs: np.ndarray) -> dict[str, np.ndarray]:
    """The inputs of each variant: ``"none"`` (and ``"learned"``, whose table the model adds), chapter 1's sinusoidal
    encoding ``"added"`` to them, or ``"concatenated"`` as as many more features."""
    pe = np.asarray(sinusoidal_encoding(xs.shape[1], xs.shape[2]))
    return {"none": xs, "learned": xs, "added": xs + pe,
            "concatenated": np.concatenate([xs, np.broadcast_to(pe, xs.shape)], axis=2)}


def layer(s: Settings = SETTINGS, **options) -> MultiHeadAttention:
    """The chapter's layer: ``s.heads`` heads of ``key_dim`` ``s.key_dim`` on ``s.features`` features, as many out,
    weights from ``jax.random.key(s.model_seed)``; ``options`` override any argument (``d_model=14``,
    ``num_heads=1``, ``key_bias_positions=5``, ...)."""
    arguments = dict(d_model=s.features, num_heads=s.heads, key_dim=s.key_dim, d_out=s.features,
                     key=jax.random.key(s.model_seed))
    return MultiHeadAttention(**(arguments | options))


def model(variant: str, s: Settings = SETTINGS) -> SelfAttentionModel:
    """The untrained model of a row of :data:`VARIANTS` or :data:`ABLATIONS` (or :data:`MARKED`'s standard layer)."""
    if variant in ABLATIONS:
        return SelfAttentionModel(layer(s, **ABLATIONS[variant]))
    if variant == MARKED[0]:
        variant = "standard"
    options, given = VARIANTS[variant]
    positions = jnp.zeros((s.tokens, s.features)) if given == "learned" else None
    return SelfAttentionModel(layer(s, **options), positions=positions)


@functools.cache
def optimizer(learning_rate: float = SETTINGS.learning_rate) -> optax.GradientTransformation:
    """Adam, created once per learning rate: training compiles once per loss, optimizer and model structure."""
    return optax.adam(learning_rate)


def train_on(model, x, y, s: Settings = SETTINGS) -> dict:
    """:func:`attnbook.mha.fit_and_evaluate` with the chapter's training: Adam at ``s.learning_rate``, ``s.steps``
    minibatches of ``s.batch_size``, the order from ``jax.random.key(s.order_seed)``."""
    return fit_and_evaluate(model, x, y, optimizer=optimizer(s.learning_rate), steps=s.steps,
                            batch_size=s.batch_size, key=jax.random.key(s.order_seed))


def jobs() -> list[tuple[str, str]]:
    """Every run of the chapter, ``(variant, target)``, in the order they are run and stored."""
    return ([(variant, name) for variant in VARIANTS for name in TARGETS]
            + [(variant, "add token 2") for variant in ABLATIONS] + [MARKED])


def run(variant: str, target: str, s: Settings = SETTINGS) -> dict:
    """One stored run: the model of ``variant`` trained on ``target`` as the chapter trains it, with its final loss
    on the training inputs and its number of parameters."""
    xs = inputs(s)
    if variant == MARKED[0]:
        xs = marked(xs)
        given = "none"
    else:
        given = "none" if variant in ABLATIONS else VARIANTS[variant][1]
    m = model(variant, s)
    result = train_on(m, encoded_inputs(xs)[given], targets(xs)[target], s)
    return dict(variant=variant, target=target, loss=result["loss"], parameters=parameter_count(m.attention))


def run_all(out: pathlib.Path, s: Settings = SETTINGS) -> list[dict]:
    """Every run of :func:`jobs`, written to ``out`` (a CSV, one line per run) and its ``.json`` (machine, settings)."""
    info = RunInfo("python -m attnbook.experiments.ch04 --write")
    rows = []
    for variant, target in jobs():
        began = time.time()
        rows.append(run(variant, target, s) | dict(seconds=round(time.time() - began, 2)))
        info.sample()
        print(rows[-1], flush=True)
    write_csv(out, rows)
    meta = info.metadata(settings=s.to_dict(), variants={name: dict(options=o, inputs=i) for name, (o, i) in VARIANTS.items()},
                         ablations=ABLATIONS, marked=dict(variant=MARKED[0], target=MARKED[1]))
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name}")
    return rows


def stored_runs(folder=RESULTS) -> dict[tuple[str, str], dict]:
    """The stored runs: ``{(variant, target): {"loss": float, "parameters": int}}``."""
    return {(r["variant"], r["target"]): {"loss": float(r["loss"]), "parameters": int(r["parameters"])}
            for r in read_csv(STORED, folder)}


def stored_settings(folder=RESULTS) -> dict:
    """The settings the stored runs were trained with (``mha_runs.json``)."""
    return read_json(pathlib.Path(STORED).with_suffix(".json").name, folder)["settings"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnbook.experiments.ch04", description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write the stored results (results/{STORED} and .json)")
    parser.add_argument("--out", type=pathlib.Path, help="the CSV to write instead")
    args = parser.parse_args(argv)
    out = args.out or (source_folder() / STORED if args.write else None)
    if out is None:
        parser.error(f"say --write to overwrite the stored {STORED}, or --out PATH")
    run_all(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
