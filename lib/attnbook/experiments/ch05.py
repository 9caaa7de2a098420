"""Chapter 5's experiment: the cost of the causal token mixers, and next-pixel modelling of the 8 x 8 digits.

The components (the AFT functions and layers of :mod:`attnbook.aft`, :class:`~attnbook.lm.NextTokenModel`,
:func:`attnbook.train.fit`) are the library's; this module fixes their sizes once (:data:`COST`, :data:`SETTINGS`)
and runs them, for the chapter's live cells and for its two stored runs alike:

    from attnbook.experiments import ch05
    args = ch05.cost_arguments(4096)                    # q, k, v (T, 64), w (T, T), AFT-conv's keys and kernel
    compiled = jax.jit(ch05.MIXERS["attention"]).lower(*args).compile()   # as the stored run compiles it
    train_pixels, test_pixels = ch05.pixels()           # 1397 and 400 digits, 64 pixel values 0..16 each
    model = ch05.model()                                # the five mixers in one model (lm.MixerChoice)
    trained, bits = ch05.train(model.only("aft-full"), train_pixels, test_pixels)   # the chapter's live run

The two stored runs (lib/attnbook/experiments/results/), each a minute or two on an idle 2-core machine:

    python -m attnbook.experiments.ch05 cost --write     # aft_cost.csv and .json
    python -m attnbook.experiments.ch05 digits --write   # aft_digits.csv and .json

``cost``: for each of the five causal mixers of :data:`MIXERS` and each length of ``COST.lengths``, the temporary
memory of the compiled forward pass as XLA plans it (``memory_analysis().temp_size_in_bytes``: deterministic for a
given XLA version and backend, whatever the load) and its wall time, the median of ``COST.runs`` runs of the
compiled program (AFT-full, with its ``T^2 d`` exponentials, only up to ``COST.aft_full_max_length``). Writes
``aft_cost.csv`` (one row per mixer and length; ``seconds`` empty where not timed) and ``.json`` (the machine, the
load, :data:`COST`).

``digits``: the five models of :func:`model` (one program for the five, ``lm.MixerChoice``), each trained for
``SETTINGS.steps`` Adam steps on the same minibatches and scored in bits/dim on the 400 test images, after one run
whose result is discarded, so that the recorded seconds exclude compilation. Writes ``aft_digits.csv`` (one row per
model) and ``.json`` (the machine, the load, :data:`SETTINGS`). The chapter trains AFT-full again, live, as
``model().only("aft-full")``: the same weights with the one mixer, whose program compiles one layer instead of five;
the layers a :class:`~attnbook.lm.MixerChoice` does not choose get zero gradients, and Adam leaves them as they
are, so the two runs compute the same numbers, up to the last bits that a different program may round otherwise.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import pathlib
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from .. import aft, lm
from .. import train as training
from ..attention import scaled_dot_product_attention
from ..masking import causal_mask
from .store import RunInfo, command_line, write_csv

# ---------------------------------------------------------------------------------------------
# Time and memory of the token mixers


@dataclasses.dataclass(frozen=True)
class CostSettings:
    """The cost measurement of chapter 5's section on time and memory (the stored JSON's ``settings``)."""

    d: int = 64  # channels of q, k and v
    heads: int = 4  # AFT-conv
    window: int = 16  # AFT-local and AFT-conv
    lengths: tuple[int, ...] = (1024, 4096)
    runs: int = 3  # timed runs of each compiled program; the median is stored
    aft_full_max_length: int = 1024  # AFT-full's T^2 d exponentials: timed only up to this length
    seed: int = 0  # NumPy seed of the inputs (their values do not change the cost)

    def to_dict(self) -> dict:
        """The settings as ``aft_cost.json`` records them."""
        return dict(dataclasses.asdict(self), lengths=list(self.lengths))


COST = CostSettings()


def mixers(c: CostSettings = COST) -> dict:
    """The five causal token mixers by name, each ``f(q, k, v, w, k_heads, kernel) -> (T, d)``: attention and the four
    AFT functions, AFT-local and AFT-conv with a window of ``c.window``, AFT-conv with ``c.heads`` heads (its keys
    ``k_heads`` and kernel; the other four ignore them)."""
    window = c.window
    return {
        "attention": lambda q, k, v, w, kh, ker: scaled_dot_product_attention(q, k, v, mask=causal_mask(len(q)))[0],
        "AFT-full": lambda q, k, v, w, kh, ker: aft.aft_full(q, k, v, w, causal=True),
        "AFT-local": lambda q, k, v, w, kh, ker: aft.aft_local(q, k, v, w, window, causal=True),
        "AFT-simple": lambda q, k, v, w, kh, ker: aft.aft_simple(q, k, v, causal=True),
        "AFT-conv": lambda q, k, v, w, kh, ker: aft.aft_conv(q, kh, v, ker, causal=True),
    }


MIXERS = mixers(COST)
"""The mixers the stored cost run measured, by name (:func:`mixers` with :data:`COST`)."""


def cost_arguments(length: int, c: CostSettings = COST) -> list[jax.Array]:
    """The arguments of every mixer at ``length`` positions: ``q``, ``k``, ``v`` ``(T, d)`` from ``N(0, 1)``, ``w``
    ``(T, T)`` of zeros (an argument, so the analysis does not count it), AFT-conv's keys ``(T, heads)`` and kernel
    ``(heads, window)``; drawn from ``default_rng(c.seed)``."""
    rng = np.random.default_rng(c.seed)
    normal = lambda *shape: jnp.asarray(rng.standard_normal(size=shape, dtype=np.float32))  # noqa: E731
    return [normal(length, c.d), normal(length, c.d), normal(length, c.d), jnp.zeros((length, length)),
            normal(length, c.heads), normal(c.heads, c.window)]


def median_seconds(compiled, args, runs: int = COST.runs) -> float:
    """The median wall time of ``runs`` calls of a compiled program, each waited for (``block_until_ready``)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        compiled(*args).block_until_ready()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def timed(name: str, length: int, c: CostSettings = COST) -> bool:
    """Whether the cost run times mixer ``name`` at ``length`` (AFT-full only up to ``c.aft_full_max_length``)."""
    return name != "AFT-full" or length <= c.aft_full_max_length


def measure(name: str, length: int, c: CostSettings = COST) -> tuple[int, float | None]:
    """Mixer ``name`` at ``length``: the temporary bytes of its compiled forward pass and its median time in seconds
    (``None`` where :func:`timed` says it is not timed)."""
    args = cost_arguments(length, c)
    compiled = jax.jit(mixers(c)[name]).lower(*args).compile()
    memory = int(compiled.memory_analysis().temp_size_in_bytes)
    return memory, median_seconds(compiled, args, c.runs) if timed(name, length, c) else None


def run_cost(out: pathlib.Path, c: CostSettings = COST) -> list[dict]:
    """The cost run, written to ``out`` (``aft_cost.csv``) and its ``.json``."""
    info = RunInfo("python -m attnbook.experiments.ch05 cost")
    rows = []
    for length in c.lengths:
        for name in mixers(c):
            memory, seconds = measure(name, length, c)
            rows.append(dict(mixer=name, T=length, d=c.d, temp_bytes=memory,
                             seconds="" if seconds is None else round(seconds, 6),
                             load_average=round(os.getloadavg()[0], 2)))
            info.sample()
            print(rows[-1], flush=True)
    write_csv(out, rows)
    meta = info.metadata(settings=c.to_dict())
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name}")
    return rows


def read_cost(rows: list[dict]) -> tuple[dict, dict]:
    """``memory[name, T]`` (bytes) and ``seconds[name, T]`` (only where timed) from the rows of ``aft_cost.csv``."""
    memory = {(r["mixer"], int(r["T"])): int(r["temp_bytes"]) for r in rows}
    seconds = {(r["mixer"], int(r["T"])): float(r["seconds"]) for r in rows if r["seconds"] != ""}
    return memory, seconds


# ---------------------------------------------------------------------------------------------
# Next-pixel modelling of the 8 x 8 digits

KINDS = ("attention", "aft-full", "aft-local", "aft-simple", "aft-conv")
"""The five models' mixers, in the order of the chapter's table."""

VALUES = 17
"""Pixel values 0..16: the classes to predict."""

START = 17
"""The start token in front of every image: the input vocabulary is the 17 values and it."""

PIXELS = 64
"""Tokens per image: 8 x 8 pixels, row by row."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """The data, the models and their training (the stored JSON's ``settings``)."""

    test_images: int = 400
    split_seed: int = 5  # NumPy seed of the permutation that picks the test images
    d_model: int = 32
    depth: int = 1
    heads: int = 4  # attention and AFT-conv
    window: int = 9  # AFT-local and AFT-conv: reaches the pixel directly above
    bias_dim: int = 16  # AFT-full's and AFT-local's factorised bias u v^T
    model_seed: int = 0  # jax.random.key of the weights
    steps: int = 80
    batch_size: int = 16
    learning_rate: float = 2e-2
    order_seed: int = 1  # jax.random.key of the minibatch order

    def to_dict(self) -> dict:
        """The settings as ``aft_digits.json`` records them."""
        return dataclasses.asdict(self)


SETTINGS = Settings()


def pixels(s: Settings = SETTINGS) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's 1797 digits (shipped with it: no download) as ``(N, 64)`` int32 pixel values 0..16, row by row,
    split into training and test images (``s.test_images`` of them, drawn by ``default_rng(s.split_seed)``)."""
    from sklearn.datasets import load_digits

    images = load_digits().images.reshape(-1, PIXELS).astype(np.int32)
    order = np.random.default_rng(s.split_seed).permutation(len(images))
    return images[order[s.test_images:]], images[order[:s.test_images]]


def model(s: Settings = SETTINGS) -> lm.NextTokenModel:
    """The five models in one: token and position embeddings, ``s.depth`` pre-norm blocks whose mixer is a
    :class:`~attnbook.lm.MixerChoice` of :data:`KINDS`, a final norm and a read-out, weights from
    ``jax.random.key(s.model_seed)``. ``.using(kind)`` chooses a mixer, ``.only(kind)`` keeps that one alone."""
    return lm.NextTokenModel(KINDS, vocab_size=START + 1, num_classes=VALUES, max_len=PIXELS, d_model=s.d_model,
                             depth=s.depth, heads=s.heads, window=s.window, bias_dim=s.bias_dim,
                             key=jax.random.key(s.model_seed))


LOSS = training.classification_loss(lambda model, tokens: model(tokens))
"""The mean negative log-likelihood of the next pixel, in nats."""


@functools.cache
def optimizer(learning_rate: float = SETTINGS.learning_rate) -> optax.GradientTransformation:
    """Adam, created once per learning rate: training compiles once per loss, optimizer and model structure."""
    return optax.adam(learning_rate)


def train(model: lm.NextTokenModel, train_pixels, test_pixels, s: Settings = SETTINGS):
    """:func:`attnbook.train.fit` on next-pixel prediction (:func:`attnbook.lm.next_token_data` with :data:`START`):
    ``s.steps`` Adam steps of ``s.batch_size`` images in the order of ``jax.random.key(s.order_seed)``, the test
    loss computed in the same compiled program after the last step. Returns the trained model and its test
    bits/dim (nats divided by ln 2)."""
    x_train, y_train = lm.next_token_data(train_pixels, START)  # position t sees the start token and pixels 0..t-1
    x_test, y_test = lm.next_token_data(test_pixels, START)
    trained, history = training.fit(model, LOSS, (x_train, y_train), optimizer=optimizer(s.learning_rate),
                                    steps=s.steps, batch_size=s.batch_size, key=jax.random.key(s.order_seed),
                                    test_data=(x_test, y_test), eval_every=s.steps)
    return trained, float(history.test_loss[-1]) / float(np.log(2))


def run_digits(out: pathlib.Path, s: Settings = SETTINGS) -> list[dict]:
    """The five trainings, written to ``out`` (``aft_digits.csv``) and its ``.json``."""
    info = RunInfo("python -m attnbook.experiments.ch05 digits")
    train_pixels, test_pixels = pixels(s)
    five = model(s)
    began = time.perf_counter()
    train(five.using("aft-simple"), train_pixels, test_pixels, s)  # compiles the five runs' one program; discarded
    compile_seconds = time.perf_counter() - began
    rows = []
    for kind in KINDS:
        began = time.perf_counter()
        _, bits = train(five.using(kind), train_pixels, test_pixels, s)
        rows.append(dict(kind=kind, seed=s.model_seed, parameters=five.using(kind).parameters(),
                         test_bits_per_dim=round(bits, 5), train_seconds=round(time.perf_counter() - began, 3),
                         load_average=round(os.getloadavg()[0], 2)))
        info.sample()
        print(rows[-1], flush=True)
    write_csv(out, rows)
    meta = info.metadata(settings=s.to_dict(), kinds=list(KINDS), train_images=len(train_pixels),
                         test_images=len(test_pixels), compile_and_first_run_seconds=round(compile_seconds, 1))
    out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} and {out.with_suffix('.json').name}")
    return rows


def read_digits(rows: list[dict]) -> dict[str, dict]:
    """The rows of ``aft_digits.csv`` by kind: ``parameters`` (int), ``bits`` and ``seconds`` (floats)."""
    return {r["kind"]: dict(parameters=int(r["parameters"]), bits=float(r["test_bits_per_dim"]),
                            seconds=float(r["train_seconds"])) for r in rows}


# ---------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    args, out, _ = command_line("python -m attnbook.experiments.ch05", __doc__.split("\n\n")[0], {
        "cost": ("temporary memory and time of the five causal mixers at T = 1024, 4096", "aft_cost.csv"),
        "digits": ("the five next-pixel models trained and scored in bits/dim", "aft_digits.csv")}, argv)
    if args.run == "cost":
        run_cost(out)
    else:
        run_digits(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
