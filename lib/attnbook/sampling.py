"""Chapter 3: autoregressive sampling, one token at a time, from a causal model.

The whole loop runs inside ``jax.lax.scan`` with fixed shapes: the model always receives the last
``window`` tokens, left-padded and flagged invalid at the start of a sequence, so it compiles once.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Int

from . import _checks


def _array(x):
    """``x`` itself if it is an array (NumPy, JAX or a tracer), else ``np.asarray(x)`` (nested lists)."""
    return x if hasattr(x, "shape") and hasattr(x, "dtype") else np.asarray(x)


@_checks.shaped
def sample(
    logits_fn: Callable[[jax.Array, jax.Array], jax.Array],
    prompt: Int[Array, "n t0"],
    steps: int,
    window: int,
    key: jax.Array,
) -> Int[Array, "n t"]:
    """Extend each prompt by ``steps`` tokens drawn from ``softmax(logits_fn(tokens, valid))``.

    Args:
        logits_fn: maps the last ``window`` tokens ``(window,)`` and a boolean ``valid`` of the same
            shape (False for left padding before the sequence starts) to next-token logits ``(classes,)``
            (``-inf`` for impossible tokens; NaN, or no possible token, stops sampling with an error).
        prompt: integer tokens of shape ``(n, t0)`` with ``t0 >= 1``, each in ``[0, classes)``
            (a float prompt is a ``TypeError``, not truncated; ids out of range are a ``ValueError``,
            also under ``jax.jit``).
        steps: number of tokens to draw.
        window: how many of the most recent tokens the model sees.
        key: PRNG key.

    Returns:
        tokens of shape ``(n, t0 + steps)``: the prompts followed by the samples.
    """
    if not callable(logits_fn):
        raise TypeError(f"logits_fn must be a function (tokens, valid) -> logits, got {type(logits_fn).__name__}")
    steps = _checks.positive_int("steps", steps)
    window = _checks.positive_int("window", window)
    key = _checks.prng_key("key", key)
    prompt = _array(prompt)
    n, t0 = prompt.shape
    if t0 < 1:
        raise ValueError(f"prompt must hold at least one token per row, shape (n, t0) with t0 >= 1, got {(n, t0)}")
    # The number of classes, from the shape the model returns (traced, nothing computed).
    spec = jax.ShapeDtypeStruct((window,), jnp.int32), jax.ShapeDtypeStruct((window,), jnp.bool_)
    logits = jax.eval_shape(logits_fn, *spec)
    if not (isinstance(logits, jax.ShapeDtypeStruct) and logits.ndim == 1 and logits.shape[0] >= 1
            and jnp.issubdtype(logits.dtype, jnp.floating)):
        raise ValueError(f"logits_fn must return float logits of shape (classes,) for tokens and valid of shape "
                         f"(window,) = ({window},), got {logits}")
    # Checked before the cast to int32, which would wrap large ids around.
    prompt = _checks.integers_in_range("prompt", prompt, 0, logits.shape[0])
    prompt = jnp.asarray(prompt, dtype=jnp.int32)
    # Buffer coordinates: `window` padding slots, then the sequence. Slot window + t holds token t.
    buffer = jnp.zeros((n, window + t0 + steps), dtype=jnp.int32).at[:, window : window + t0].set(prompt)
    slots = jnp.arange(window + t0 + steps)

    def step(buffer, inputs):
        length, key = inputs  # tokens 0 .. length-1 exist
        recent = jax.lax.dynamic_slice_in_dim(buffer, length, window, axis=1)  # tokens length-window .. length-1
        valid = jax.lax.dynamic_slice_in_dim(slots, length, window) >= window
        logits = jax.vmap(logits_fn, in_axes=(0, None))(recent, valid)
        # jax.random.categorical reads a NaN row, or a row of -inf, as token 0: stop instead.
        unusable = jnp.isnan(logits) | jnp.all(logits == -jnp.inf, axis=-1, keepdims=True)
        logits = _checks.values("logits_fn's output", logits, unusable,
                                "logits without NaN and with at least one token not -inf")
        drawn = jax.random.categorical(key, logits, axis=-1).astype(jnp.int32)
        return jax.lax.dynamic_update_slice_in_dim(buffer, drawn[:, None], window + length, axis=1), None

    lengths = t0 + jnp.arange(steps)
    buffer, _ = jax.lax.scan(step, buffer, (lengths, jax.random.split(key, steps)))
    return buffer[:, window:]


@_checks.shaped
def transition_counts(tokens: Int[Array, "n T"], num_classes: int) -> Int[np.ndarray, "num_classes num_classes"]:
    """``counts[a, b]``: how often token ``b`` follows token ``a`` in the rows of ``tokens``.

    ``tokens`` are integer ids in ``[0, num_classes)``, shape ``(n, T)``; ``counts`` has shape
    ``(num_classes, num_classes)``. Counted with NumPy, so ``tokens`` must be concrete (not traced).
    """
    num_classes = _checks.positive_int("num_classes", num_classes)
    tokens = np.asarray(_checks.integers_in_range("tokens", _array(tokens), 0, num_classes))  # -1 is not the last class
    counts = np.zeros((num_classes, num_classes), dtype=np.int64)
    np.add.at(counts, (tokens[:, :-1].ravel(), tokens[:, 1:].ravel()), 1)
    return counts


def weather_next_day(model) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """The ``logits_fn`` of :func:`sample` for chapter 3's weather models (``masking.MaskedSelfAttention`` read at
    every token over windows of ``T`` days): the logits of the day after the last one.

    The window is padded on the left; its real days are renumbered ``1..n`` as in training (feature
    ``position / 20``, ``data.features``), and the model's mask is combined with the padding, so that a real day sees
    no padding and a padding query nothing.
    """
    T = model.mask.shape[0]

    def logits(tokens: jax.Array, valid: jax.Array) -> jax.Array:
        n = valid.sum()
        position = (jnp.arange(T) - (T - n) + 1) / 20.0  # real days numbered 1..n, as in training
        x = jnp.concatenate([jax.nn.one_hot(tokens, 3), position[:, None]], axis=1)
        visible = model.mask & valid[:, None] & valid[None, :]
        return model.attention(x, visible)[0][-1]

    return logits
