"""Chapter 4's experiment: one multi-head self-attention layer trained on the article's three synthetic targets.

Chapter 4 trains its models live (it stores no results); this module fixes the inputs, the layer's sizes and the
training once, for the notebook and for the widget's export (tools/export_widget_data.py), which shows the key-bias
layer trained on "add token 2":

    from attnbook.experiments import ch04
    xs = ch04.inputs()                       # 1000 inputs of 5 tokens x 7 features, uniform in [0, 1)
    targets = ch04.targets(xs)               # "own sum", "add token 2", "replace by token 2"
    run = ch04.train_on(SelfAttentionModel(ch04.layer(key_bias_positions=5)), xs, targets["add token 2"])

The components (:class:`~attnbook.mha.MultiHeadAttention`, :class:`~attnbook.mha.SelfAttentionModel`,
:func:`~attnbook.mha.fit_and_evaluate`) are :mod:`attnbook.mha`'s.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np
import optax

from ..mha import MultiHeadAttention, fit_and_evaluate


@dataclasses.dataclass(frozen=True)
class Settings:
    """The sizes of chapter 4's experiment."""

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


SETTINGS = Settings()


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


def layer(s: Settings = SETTINGS, **options) -> MultiHeadAttention:
    """The chapter's layer: ``s.heads`` heads of ``key_dim`` ``s.key_dim`` on ``s.features`` features, as many out,
    weights from ``jax.random.key(s.model_seed)``; ``options`` override any argument (``d_model=14``,
    ``num_heads=1``, ``key_bias_positions=5``, ...)."""
    arguments = dict(d_model=s.features, num_heads=s.heads, key_dim=s.key_dim, d_out=s.features,
                     key=jax.random.key(s.model_seed))
    return MultiHeadAttention(**(arguments | options))


@functools.cache
def optimizer(learning_rate: float = SETTINGS.learning_rate) -> optax.GradientTransformation:
    """Adam, created once per learning rate: training compiles once per loss, optimizer and model structure."""
    return optax.adam(learning_rate)


def train_on(model, x, y, s: Settings = SETTINGS) -> dict:
    """:func:`attnbook.mha.fit_and_evaluate` with the chapter's training: Adam at ``s.learning_rate``, ``s.steps``
    minibatches of ``s.batch_size``, the order from ``jax.random.key(s.order_seed)``."""
    return fit_and_evaluate(model, x, y, optimizer=optimizer(s.learning_rate), steps=s.steps,
                            batch_size=s.batch_size, key=jax.random.key(s.order_seed))
