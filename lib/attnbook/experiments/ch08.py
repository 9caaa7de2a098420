"""Chapter 8's experiment: its settings, data and training run, shared by the chapter, bench/positions_extrapolation.py
and bench/positions_bos_ablation.py (and chapters 9 and 10's runs, which start from it) and the tests.

The components (the Markov task, :class:`~attnbook.extrapolation.PositionModel`, its training loop and evaluation)
are :mod:`attnbook.extrapolation`'s; this module fixes their sizes once (:data:`SETTINGS`) and draws the data:

    from attnbook.experiments import ch08
    table = ch08.table()                    # the order-2 chain over 8 symbols
    x, y, floor = ch08.eval_data(8)         # 128 held-out sequences of 8L tokens, and their optimal loss
    models, losses = ch08.train("rope", [0, 1, 2, 3, 4])
    models, losses = ch08.train_with_bos("nope", [0, 1, 2, 3, 4])   # a BOS token before every sequence

The stored results (``positions_extrapolation.csv`` and the rest) are read through :mod:`attnbook.experiments`.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .. import _checks
from ..extrapolation import PositionModel, markov_data, markov_table
from ..extrapolation import train as train_encoding


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sizes of chapter 8's experiment (the bench script stores them beside its results)."""

    vocab_size: int = 8
    order: int = 2
    concentration: float = 0.2
    train_length: int = 32
    steps: int = 300
    batch_size: int = 32
    learning_rate: float = 3e-3
    d_model: int = 32
    depth: int = 2
    heads: int = 4
    eval_sequences: int = 128
    table_seed: int = 0
    eval_seed: int = 1

    def to_dict(self) -> dict:
        """The settings as the stored JSON files record them."""
        return dataclasses.asdict(self)


SETTINGS = Settings()


def table() -> np.ndarray:
    """The transition table of chapter 8's chain (``SETTINGS``: order 2 over 8 symbols)."""
    s = SETTINGS
    return markov_table(s.vocab_size, s.order, concentration=s.concentration, rng=np.random.default_rng(s.table_seed))


def training_data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seed ``seed``'s minibatches ``(steps, batch, L)`` of inputs and targets, from ``default_rng(1000 + seed)``."""
    s = SETTINGS
    seed = _checks.nonnegative_int("seed", seed)
    x, y, _ = markov_data(table(), s.order, s.steps * s.batch_size, s.train_length,
                          rng=np.random.default_rng(1000 + seed))
    shape = (s.steps, s.batch_size, s.train_length)
    return x.reshape(shape), y.reshape(shape)


def eval_data(multiple: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Held-out sequences ``multiple`` times the training length: inputs, targets, optimal loss.

    Every length is a prefix of the same sequences: :func:`~attnbook.extrapolation.markov_data` draws them one
    position at a time, so the first ``T`` tokens of the ``8L`` set are the ``T``-token set (the seed is
    ``100 eval_seed + 8``).
    """
    s = SETTINGS
    multiple = _checks.positive_int("multiple", multiple)
    return markov_data(table(), s.order, s.eval_sequences, multiple * s.train_length,
                       rng=np.random.default_rng(s.eval_seed * 100 + 8))


def train(encoding: str, seeds) -> tuple[PositionModel, np.ndarray]:
    """:func:`attnbook.extrapolation.train` with chapter 8's settings and each seed's own data."""
    s = SETTINGS
    data = [training_data(seed) for seed in seeds]
    inputs = np.stack([d[0] for d in data])
    targets = np.stack([d[1] for d in data])
    return train_encoding(encoding, seeds, inputs, targets, vocab_size=s.vocab_size, learning_rate=s.learning_rate,
                          d_model=s.d_model, depth=s.depth, heads=s.heads)


def with_bos(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and targets ``(..., T)`` with a beginning-of-sequence token in front: ``(..., T + 1)``.

    The token is ``SETTINGS.vocab_size`` (one past the chain's symbols, so the model's vocabulary grows by one);
    the target after it is the sequence's first token, and every other target is unchanged.
    """
    x, y = np.asarray(x), np.asarray(y)
    column = np.full(x.shape[:-1] + (1,), SETTINGS.vocab_size, dtype=x.dtype)
    return np.concatenate([column, x], axis=-1), np.concatenate([x[..., :1], y], axis=-1)


def train_with_bos(encoding: str, seeds) -> tuple[PositionModel, np.ndarray]:
    """:func:`train` with :func:`with_bos` applied to every training sequence (the vocabulary one larger): chapter
    8's NoPE ablation (``"nope"``) and chapter 9's attention-sink models (``"rope"``)."""
    s = SETTINGS
    data = [with_bos(*training_data(seed)) for seed in seeds]
    inputs = np.stack([d[0] for d in data])
    targets = np.stack([d[1] for d in data])
    return train_encoding(encoding, seeds, inputs, targets, vocab_size=s.vocab_size + 1,
                          learning_rate=s.learning_rate, d_model=s.d_model, depth=s.depth, heads=s.heads)
