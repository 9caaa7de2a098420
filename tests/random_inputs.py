"""Random inputs shared by several test files (tests/ is on pytest's path, as for book_copy.py)."""

import jax
import jax.numpy as jnp
import numpy as np

from attnbook import extrapolation as ex


def small_markov_data(num: int, length: int, seed: int = 0):
    """``num`` sequences of ``length`` tokens (inputs, targets) of one fixed order-2 chain over 5 symbols."""
    table = ex.markov_table(5, 2, rng=np.random.default_rng(0))
    x, y, _ = ex.markov_data(table, 2, num, length, rng=np.random.default_rng(seed))
    return x, y


def randomised(layer, seed: int):
    """The same layer with every weight and bias random (the initial biases are zero)."""
    rng = np.random.default_rng(seed)
    leaves, treedef = jax.tree.flatten(layer)
    return jax.tree.unflatten(treedef, [jnp.asarray(rng.normal(scale=0.5, size=a.shape), dtype=jnp.float32)
                                        for a in leaves])


def tokens(seed: int, t: int, d: int):
    """``(t, d)`` standard-normal float32 features."""
    return jnp.asarray(np.random.default_rng(100 + seed).normal(size=(t, d)), dtype=jnp.float32)
