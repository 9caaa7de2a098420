"""Chapter 3: which keys each query may see.

A boolean mask ``mask[i, j]`` is True where query ``i`` may attend to key ``j``, the
convention of ``jax.nn.dot_product_attention`` and ``equinox.nn.MultiheadAttention``.
Chapter 3's experiments train :class:`MaskedSelfAttention`, a single-head layer with a mask of their choice.
Chapter 9 adds the causal sliding window (:func:`sliding_window_mask`).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int

from . import _checks
from .attention import SelfAttention


class MaskedSelfAttention(eqx.Module):
    """A non-causal :class:`~attnbook.attention.SelfAttention` under a fixed ``mask`` (any ``(T, T)`` boolean, the
    causal one or the sources' reversed one), read at every token or, with ``read``, at one token.

    ``mask`` and ``read`` are arrays, not static fields, so one compiled training program serves every mask and
    read-out position; ``train.fit`` trains only the floating-point leaves, the layer's weights.
    """

    attention: SelfAttention
    mask: jax.Array
    read: jax.Array | None = None

    def __init__(self, attention: SelfAttention, mask, read: int | None = None):
        if not isinstance(attention, SelfAttention) or attention.causal:
            raise TypeError("attention must be a SelfAttention with causal=False (the mask says what is seen)")
        mask = jnp.asarray(mask)
        if mask.dtype != jnp.bool_ or mask.ndim != 2 or mask.shape[0] != mask.shape[1]:
            raise TypeError(f"mask must be a square boolean (T, T) array, got {mask.dtype} of shape {mask.shape}")
        if read is not None and not (isinstance(read, int) and -mask.shape[0] <= read < mask.shape[0]):
            raise ValueError(f"read must be a token index in [0, {mask.shape[0]}) or None, got {read!r}")
        self.attention, self.mask = attention, mask
        self.read = None if read is None else jnp.asarray(read % mask.shape[0])

    def __call__(self, x: Float[Array, "T d_in"]) -> Float[Array, "*T d_out"]:
        """The outputs ``(T, d_out)`` of every token, or ``(d_out,)`` of token ``read``."""
        out = self.attention(x, self.mask)[0]
        return out if self.read is None else out[self.read]


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
