"""Chapter 2: the linear baseline attention is measured against.

Multinomial logistic regression on the flattened sequence: one weight per (day, feature, class).
Its parameter count grows with the sequence length; attention's does not.
"""

from __future__ import annotations

import equinox as eqx
import jax
from jaxtyping import Array, Float

from . import _checks, nn


class LinearClassifier(eqx.Module):
    """``logits = flatten(x) @ W + b`` for ``x`` of shape ``(T, d_in)``; ``(T * d_in + 1) * classes`` parameters."""

    weight: jax.Array  # (T * d_in, num_classes)
    bias: jax.Array  # (num_classes,)
    length: int = eqx.field(static=True)
    d_in: int = eqx.field(static=True)

    def __init__(self, length: int, d_in: int, num_classes: int, *, key: jax.Array):
        self.length = _checks.positive_int("length", length)
        self.d_in = _checks.positive_int("d_in", d_in)
        num_classes = _checks.positive_int("num_classes", num_classes)
        key = _checks.prng_key("key", key)
        fan_in = self.length * self.d_in
        self.weight, self.bias = nn.init(key, ((fan_in, num_classes), (num_classes,)), "fan-in", fan_in=fan_in,
                                           generator="jax")

    @_checks.shaped
    def __call__(self, x: Float[Array, "T d_in"]) -> Float[Array, " num_classes"]:
        """``x`` of shape ``(T, d_in)`` -> logits of shape ``(num_classes,)``."""
        # Both axes, not just the size: a transposed (d_in, T) input has the right size and would
        # be flattened into the wrong weights without a word.
        if tuple(x.shape) != (self.length, self.d_in):
            raise ValueError(f"x must have shape (T, d_in) = {(self.length, self.d_in)} "
                             f"({self.weight.shape[0]} entries in that order), got {tuple(x.shape)}")
        return x.reshape(-1) @ self.weight + self.bias
