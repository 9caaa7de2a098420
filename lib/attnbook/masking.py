"""Chapter 3: which keys each query may see.

A boolean mask ``mask[i, j]`` is True where query ``i`` may attend to key ``j``, the
convention of ``jax.nn.dot_product_attention`` and ``equinox.nn.MultiheadAttention``.
Chapter 9 adds the causal sliding window (:func:`sliding_window_mask`).
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, Bool, Int

from . import _checks


def causal_mask(length: int) -> Bool[Array, "length length"]:
    """Causal mask of shape ``(length, length)``: True on and below the diagonal (``j <= i``).

    Token ``i`` sees itself and the past, never the future. ``length`` is an integer >= 0;
    ``causal_mask(0)`` is the empty ``(0, 0)`` mask of an empty sequence.
    """
    length = _checks.nonnegative_int("length", length)
    return jnp.tril(jnp.ones((length, length), dtype=bool))


def sliding_window_mask(length: int, window: int) -> Bool[Array, "length length"]:
    """Causal sliding-window mask (chapter 9), shape ``(length, length)``: True where ``0 <= i - j < window``.

    Query ``i`` sees itself and the ``window - 1`` keys before it; keys older than that, and the future, are
    masked. This is the causal window of Mistral 7B (Jiang et al. 2023; Hugging Face's ``sliding_window``:
    key ``j`` is dropped when ``j <= i - window``), the one-sided form of Longformer's local attention (Beltagy
    et al. 2020). It bounds both the work per query and the cache of keys and values to ``window``.
    ``window`` is a positive integer; with ``window >= length`` the mask is :func:`causal_mask`.
    """
    length = _checks.nonnegative_int("length", length)
    window = _checks.positive_int("window", window)
    offset = jnp.arange(length)[:, None] - jnp.arange(length)[None, :]  # i - j
    return (offset >= 0) & (offset < window)


@_checks.shaped
def padding_mask(lengths: Int[Array, "batch"], max_length: int) -> Bool[Array, "batch max_length max_length"]:
    """Masks for a batch of sequences padded to ``max_length``, shape ``(batch, T, T)``.

    ``lengths`` has shape ``(batch,)``; sequence ``b`` occupies positions ``0 .. lengths[b]-1``.
    ``mask[b, i, j]`` is True when both ``i`` and ``j`` are real tokens: real queries ignore
    padding keys, and padding queries see nothing, so their rows are fully masked and
    :func:`attnbook.attention.scaled_dot_product_attention` returns zeros for them.
    Combine with a causal mask by ``&``.

    Every length must lie in ``[0, max_length]``: a length of 0 is a fully padded sequence (every
    row fully masked, a defined edge case), anything else is an error, also under ``jax.jit``
    and ``jax.vmap`` (checked with :func:`attnbook._checks.values`, never clamped).
    """
    max_length = _checks.nonnegative_int("max_length", max_length)
    lengths = jnp.asarray(lengths)
    lengths = _checks.values("lengths", lengths, (lengths < 0) | (lengths > max_length),
                             f"integers in [0, max_length={max_length}]")
    valid = jnp.arange(max_length)[None, :] < lengths[:, None]  # (batch, T)
    return valid[:, :, None] & valid[:, None, :]
