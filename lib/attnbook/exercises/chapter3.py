"""Exercises of chapter 3 (masking)."""

import jax.numpy as jnp

from attnbook.exercises._core import Exercise, register
from attnbook.masking import causal_mask


register(
    # 3.1 (implement): the causal mask, True where query i may attend to key j <= i.
    Exercise(
        id="3.1",
        kind="function",
        reference=lambda T: causal_mask(T),
        inputs=lambda rng: {"T": int(rng.integers(2, 7))},
        edge_cases=({"T": 1},),
    ),
)
