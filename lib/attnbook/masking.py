"""Chapter 3: which keys each query may see.

A boolean mask ``mask[i, j]`` is True where query ``i`` may attend to key ``j``, the
convention of ``jax.nn.dot_product_attention`` and ``equinox.nn.MultiheadAttention``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from . import _checks


def causal_mask(length: int) -> jnp.ndarray:
    """Causal mask of shape ``(length, length)``: True on and below the diagonal (``j <= i``).

    Token ``i`` sees itself and the past, never the future.
    """
    length = _checks.positive_int("length", length)
    return jnp.tril(jnp.ones((length, length), dtype=bool))


def padding_mask(lengths, max_length: int) -> jnp.ndarray:
    """Masks for a batch of sequences padded to ``max_length``, shape ``(batch, T, T)``.

    ``lengths`` has shape ``(batch,)``; sequence ``b`` occupies positions ``0 .. lengths[b]-1``.
    ``mask[b, i, j]`` is True when both ``i`` and ``j`` are real tokens: real queries ignore
    padding keys, and padding queries see nothing, so their rows are fully masked and
    :func:`attnbook.attention.scaled_dot_product_attention` returns zeros for them.
    Combine with a causal mask by ``&``.
    """
    max_length = _checks.positive_int("max_length", max_length)
    _checks.ndim("lengths", lengths, 1, "(batch,)")
    if _checks.is_concrete(lengths):
        values = np.asarray(lengths)
        if not np.issubdtype(values.dtype, np.integer):
            raise ValueError(f"lengths must be integers, got dtype {values.dtype}")
        if values.size and (values.min() < 1 or values.max() > max_length):
            raise ValueError(
                f"lengths must lie in [1, max_length={max_length}], got {values.tolist()}"
            )
    valid = jnp.arange(max_length)[None, :] < jnp.asarray(lengths)[:, None]  # (batch, T)
    return valid[:, :, None] & valid[:, None, :]
