"""Chapter 2: the linear baseline attention is measured against.

Multinomial logistic regression on the flattened sequence: one weight per (day, feature, class).
Its parameter count grows with the sequence length; attention's does not.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

from . import _checks


class LinearClassifier(eqx.Module):
    """``logits = flatten(x) @ W + b`` for ``x`` of shape ``(T, d_in)``; ``(T * d_in + 1) * classes`` parameters."""

    weight: jax.Array
    bias: jax.Array

    def __init__(self, length: int, d_in: int, num_classes: int, *, key: jax.Array):
        length = _checks.positive_int("length", length)
        d_in = _checks.positive_int("d_in", d_in)
        num_classes = _checks.positive_int("num_classes", num_classes)
        fan_in = length * d_in
        self.weight, self.bias = _checks.uniform_init(key, ((fan_in, num_classes), (num_classes,)), fan_in)

    def __call__(self, x: jax.Array) -> jax.Array:
        """``x`` of shape ``(T, d_in)`` -> logits of shape ``(num_classes,)``."""
        if x.size != self.weight.shape[0]:
            raise ValueError(f"x must have T * d_in = {self.weight.shape[0]} entries, got shape {x.shape}")
        return x.reshape(-1) @ self.weight + self.bias
