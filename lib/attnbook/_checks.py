"""Argument checks shared by the library.

Every public function validates its arguments up front and raises a ``ValueError`` that
names the argument, says what was expected and shows what was received. Shapes are static
under ``jax.jit`` and ``jax.vmap``, so these checks cost nothing at run time.
"""

from __future__ import annotations

import functools
import numbers

import jax
import jax.numpy as jnp
import numpy as np


def positive_int(name: str, value) -> int:
    """Return ``value`` as an ``int`` if it is a positive integer, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def positive_float(name: str, value) -> float:
    """Return ``value`` as a ``float`` if it is a finite positive number, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return float(value)


def ndim(name: str, x, expected: int, meaning: str) -> None:
    """Raise unless ``x`` has ``expected`` dimensions; ``meaning`` spells the shape, e.g. ``"(T, d)"``."""
    shape = np.shape(x)
    if len(shape) != expected:
        raise ValueError(f"{name} must have shape {meaning}, got an array of shape {shape}")


def shape(name: str, x, expected: tuple[int, ...], meaning: str) -> None:
    """Raise unless ``x`` has exactly the shape ``expected``; ``meaning`` names the axes."""
    if tuple(np.shape(x)) != tuple(expected):
        raise ValueError(f"{name} must have shape {meaning} = {tuple(expected)}, got {tuple(np.shape(x))}")


def is_concrete(x) -> bool:
    """True when ``x`` holds values (not a tracer inside ``jit``/``vmap``), so values can be checked."""
    return not isinstance(x, jax.core.Tracer)


@functools.partial(jax.jit, static_argnums=(1, 2))
def uniform_init(key: jax.Array, shapes: tuple[tuple[int, ...], ...], fan_in: int) -> tuple[jax.Array, ...]:
    """Arrays of the given shapes from Uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)), one split key each.

    Jitted as a whole: drawn eagerly, every new shape would compile its own random-number kernel.
    """
    keys = jax.random.split(key, len(shapes))
    return tuple(jax.random.uniform(k, s, minval=-1.0, maxval=1.0) / jnp.sqrt(fan_in) for k, s in zip(keys, shapes))
