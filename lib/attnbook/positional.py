"""Chapter 1: telling a model where each token is.

The sinusoidal encoding of Vaswani et al. (2017), the rotation that relates ``PE[p + k]`` to
``PE[p]``, rotary position embeddings (RoPE, Su et al. 2021) and the linear attention biases
of ALiBi (Press et al. 2022). Rows are positions (tokens), columns are features.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import _checks


def frequencies(d_model: int, base: float = 10000.0) -> Float[np.ndarray, " pairs"]:
    """Angular frequencies ``omega_i = base ** (-2i / d_model)``, one per (sin, cos) pair.

    Returns a float64 array of shape ``(ceil(d_model / 2),)``; pair ``i`` occupies
    columns ``2i`` (sin) and ``2i + 1`` (cos).
    """
    d_model = _checks.positive_int("d_model", d_model)
    base = _checks.positive_float("base", base)
    two_i = np.arange(0, d_model, 2, dtype=np.float64)
    return base ** (-two_i / d_model)


def sinusoidal_encoding(length: int, d_model: int, base: float = 10000.0) -> Float[Array, "length d_model"]:
    """The sinusoidal positional encoding, shape ``(length, d_model)``.

    ``PE[p, 2i] = sin(p / base**(2i/d_model))`` and ``PE[p, 2i+1] = cos(p / base**(2i/d_model))``
    for positions ``p = 0 .. length-1``. With an odd ``d_model`` the last column is a sine.
    The angles are computed in float64 and rounded once to float32, so long sequences stay
    exact to float32 precision.
    """
    length = _checks.positive_int("length", length)
    omega = frequencies(d_model, base)
    angles = np.arange(length, dtype=np.float64)[:, None] * omega[None, :]  # (length, pairs)
    pe = np.empty((length, d_model), dtype=np.float64)
    pe[:, 0::2] = np.sin(angles)
    pe[:, 1::2] = np.cos(angles[:, : d_model // 2])
    return jnp.asarray(pe, dtype=jnp.float32)


def relative_rotation(offset: int, d_model: int, base: float = 10000.0) -> Float[Array, "d_model d_model"]:
    """The matrix ``R_k`` with ``PE[p + k] = R_k @ PE[p]`` for every position ``p``.

    Block-diagonal, shape ``(d_model, d_model)``: pair ``i`` is rotated by the angle
    ``k * omega_i``, because sin(a + b) = sin a cos b + cos a sin b and
    cos(a + b) = cos a cos b - sin a sin b. With rows as tokens, ``PE[p + k] = PE[p] @ R_k.T``.
    ``offset`` may be any integer, negative included. ``d_model`` must be even.
    """
    d_model = _checks.positive_int("d_model", d_model)
    if d_model % 2:
        raise ValueError(f"d_model must be even for (sin, cos) pairs to rotate, got {d_model}")
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"offset must be an integer, got {type(offset).__name__} {offset!r}")
    theta = offset * frequencies(d_model, base)
    c, s = np.cos(theta), np.sin(theta)
    rot = np.zeros((d_model, d_model))
    idx = np.arange(0, d_model, 2)
    rot[idx, idx], rot[idx, idx + 1] = c, s  # new sin = cos(kw) sin + sin(kw) cos
    rot[idx + 1, idx], rot[idx + 1, idx + 1] = -s, c  # new cos = -sin(kw) sin + cos(kw) cos
    return jnp.asarray(rot, dtype=jnp.float32)


@_checks.shaped
def rope(x: Float[Array, "T d"], base: float = 10000.0) -> Float[Array, "T d"]:
    """Rotary position embedding: rotate each feature pair of token ``p`` by ``p * omega_i``.

    ``x`` is a float array of shape ``(T, d)`` with ``d`` even; so is the result, in the dtype
    of ``x`` (an integer ``x`` is a ``TypeError``: its rotation would be rounded to integers).
    Applied to queries and keys, it makes ``rope(q)[m] . rope(k)[n]`` depend on positions only
    through ``m - n``. Pairs are adjacent columns ``(2i, 2i + 1)``, as in the RoPE paper.
    """
    x = jnp.asarray(x)  # nested lists of floats work too
    length, d = x.shape
    if d % 2:
        raise ValueError(f"x must have an even number of features d for RoPE, got shape {tuple(x.shape)}")
    angles = np.arange(length)[:, None] * frequencies(d, base)[None, :]  # (T, d/2)
    cos = jnp.asarray(np.cos(angles), dtype=x.dtype)
    sin = jnp.asarray(np.sin(angles), dtype=x.dtype)
    even, odd = x[:, 0::2], x[:, 1::2]
    rotated = jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
    return rotated.reshape(length, d)


def alibi_slopes(num_heads: int) -> Float[np.ndarray, " num_heads"]:
    """ALiBi's per-head slopes: the geometric sequence ``2**(-8 / n)``, ..., ``2**(-8)``.

    For a power-of-two ``num_heads = n`` these are the paper's slopes. For other counts the
    paper interleaves two such sequences; we follow it. Shape ``(num_heads,)``.
    """
    num_heads = _checks.positive_int("num_heads", num_heads)

    def geometric(n: int) -> np.ndarray:
        return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)

    closest = 2 ** int(np.floor(np.log2(num_heads)))
    slopes = geometric(closest)
    if closest < num_heads:  # the paper's rule: take every other slope of the next power of two
        slopes = np.concatenate([slopes, geometric(2 * closest)[0::2][: num_heads - closest]])
    return slopes


def alibi_bias(length: int, num_heads: int) -> Float[Array, "num_heads length length"]:
    """ALiBi attention biases ``bias[h, i, j] = -slope_h * |i - j|``, shape ``(heads, T, T)``.

    Added to the attention scores instead of adding anything to the embeddings. Under a causal
    mask only ``j <= i`` is used, where this equals the paper's ``slope_h * (j - i)``.
    """
    length = _checks.positive_int("length", length)
    pos = np.arange(length)
    distance = np.abs(pos[:, None] - pos[None, :])
    bias = 0.0 - alibi_slopes(num_heads)[:, None, None] * distance[None]  # 0.0 - x: no "-0." on the diagonal
    return jnp.asarray(bias, dtype=jnp.float32)
