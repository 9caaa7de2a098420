"""Chapter 3: autoregressive sampling, one token at a time, from a causal model.

The whole loop runs inside ``jax.lax.scan`` with fixed shapes: the model always receives the last
``window`` tokens, left-padded and flagged invalid at the start of a sequence, so it compiles once.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from . import _checks


def sample(
    logits_fn: Callable[[jax.Array, jax.Array], jax.Array],
    prompt,
    steps: int,
    window: int,
    key: jax.Array,
) -> jax.Array:
    """Extend each prompt by ``steps`` tokens drawn from ``softmax(logits_fn(tokens, valid))``.

    Args:
        logits_fn: maps the last ``window`` tokens ``(window,)`` and a boolean ``valid`` of the same
            shape (False for left padding before the sequence starts) to next-token logits ``(classes,)``.
        prompt: integer tokens of shape ``(n, t0)`` with ``t0 >= 1``.
        steps: number of tokens to draw.
        window: how many of the most recent tokens the model sees.
        key: PRNG key.

    Returns:
        tokens of shape ``(n, t0 + steps)``: the prompts followed by the samples.
    """
    _checks.ndim("prompt", prompt, 2, "(n, t0)")
    steps = _checks.positive_int("steps", steps)
    window = _checks.positive_int("window", window)
    prompt = jnp.asarray(prompt, dtype=jnp.int32)
    n, t0 = prompt.shape
    # Buffer coordinates: `window` padding slots, then the sequence. Slot window + t holds token t.
    buffer = jnp.zeros((n, window + t0 + steps), dtype=jnp.int32).at[:, window : window + t0].set(prompt)
    slots = jnp.arange(window + t0 + steps)

    def step(buffer, inputs):
        length, key = inputs  # tokens 0 .. length-1 exist
        recent = jax.lax.dynamic_slice_in_dim(buffer, length, window, axis=1)  # tokens length-window .. length-1
        valid = jax.lax.dynamic_slice_in_dim(slots, length, window) >= window
        logits = jax.vmap(logits_fn, in_axes=(0, None))(recent, valid)
        drawn = jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)
        return jax.lax.dynamic_update_slice_in_dim(buffer, drawn[:, None], window + length, axis=1), None

    lengths = t0 + jnp.arange(steps)
    buffer, _ = jax.lax.scan(step, buffer, (lengths, jax.random.split(key, steps)))
    return buffer[:, window:]


def transition_counts(tokens, num_classes: int) -> np.ndarray:
    """``counts[a, b]``: how often token ``b`` follows token ``a`` in the rows of ``tokens``."""
    tokens = np.asarray(tokens)
    counts = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(counts, (tokens[:, :-1].ravel(), tokens[:, 1:].ravel()), 1)
    return counts
