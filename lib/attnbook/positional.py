"""Chapter 1: telling a model where each token is.

The sinusoidal encoding of Vaswani et al. (2017), the rotation that relates ``PE[p + k]`` to
``PE[p]``, rotary position embeddings (RoPE, Su et al. 2021) and the linear attention biases
of ALiBi (Press et al. 2022). Rows are positions (tokens), columns are features.

Chapter 8 adds learned absolute position embeddings (:class:`LearnedPositions`, clamped beyond the
trained length), T5's relative position buckets and a learned relative bias (Raffel et al. 2020), and
ALiBi's causal bias ``slope * (j - i)``.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import _checks, nn


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


@_checks.shaped
def rope_heads(q: Float[Array, "Tq heads dq"], k: Float[Array, "Tk heads dq"], v: Float[Array, "Tk heads dv"]
               ) -> tuple[Float[Array, "Tq heads dq"], Float[Array, "Tk heads dq"], Float[Array, "Tk heads dv"]]:
    """:func:`rope` on every head of projected queries and keys (values unchanged): a ``process_heads`` hook.

    Shapes are those of :meth:`attnbook.mha.MultiHeadAttention.project`, ``(T, heads, features)``; pass it as
    ``layer(x, x, x, process_heads=rope_heads)``.
    """
    rotate = jax.vmap(rope, in_axes=1, out_axes=1)  # per head, over positions
    return rotate(q), rotate(k), v


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


# ---------------------------------------------------------------------------------------------
# Chapter 8: learned absolute positions and a learned relative bias


def relative_position_bucket(
    relative_position, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128
) -> np.ndarray:
    """T5's bucket of each relative position ``j - i`` (key minus query), as in the T5 code.

    Follows ``_relative_position_bucket`` of Mesh TensorFlow (Raffel et al. 2020): with ``n = i - j``,
    half of the buckets hold the offsets ``0 .. max_exact - 1`` exactly (``max_exact = num_buckets // 2``,
    after halving ``num_buckets`` when ``bidirectional``), the other half cover ``max_exact`` to
    ``max_distance`` in logarithmically growing ranges, and every offset at or beyond ``max_distance``
    shares the last bucket. When ``bidirectional`` is False, keys after the query (``j > i``) fall into
    bucket 0. Returns integer buckets in ``0 .. num_buckets - 1``, the shape of ``relative_position``.
    """
    rel = np.asarray(relative_position)
    if not np.issubdtype(rel.dtype, np.integer):
        raise TypeError(f"relative_position must hold integers, got dtype {rel.dtype}")
    num_buckets = _checks.positive_int("num_buckets", num_buckets)
    max_distance = _checks.positive_int("max_distance", max_distance)
    n = -rel.astype(np.int64)
    ret = np.zeros(rel.shape, dtype=np.int64)
    if bidirectional:
        num_buckets //= 2
        ret += (n < 0) * num_buckets
        n = np.abs(n)
    else:
        n = np.maximum(n, 0)
    max_exact = num_buckets // 2
    if max_exact < 1 or max_distance <= max_exact:
        raise ValueError(f"need num_buckets >= {4 if bidirectional else 2} and max_distance > num_buckets "
                         f"// {4 if bidirectional else 2}, got num_buckets={num_buckets * (1 + bidirectional)}, "
                         f"max_distance={max_distance}")
    with np.errstate(divide="ignore"):
        large = max_exact + (
            np.log(np.maximum(n, 1) / max_exact) / np.log(max_distance / max_exact) * (num_buckets - max_exact)
        ).astype(np.int64)
    large = np.minimum(large, num_buckets - 1)
    return ret + np.where(n < max_exact, n, large)


class LearnedPositions(eqx.Module):
    """Learned absolute position embeddings: one trained vector per position ``0 .. max_len - 1``.

    ``positions(T)`` returns the rows for positions ``0 .. T-1``, shape ``(T, d_model)``. The table has no
    row for a position at or beyond ``max_len``: such positions get the row of ``max_len - 1`` (clamped),
    said plainly because it is a choice (repeating the table is another).
    """

    table: jax.Array

    def __init__(self, max_len: int, d_model: int, *, scale: float = 0.02, key: jax.Array):
        max_len = _checks.positive_int("max_len", max_len)
        d_model = _checks.positive_int("d_model", d_model)
        key = _checks.prng_key("key", key)
        self.table = nn.init(key, (max_len, d_model), "normal", scale=scale)

    @property
    def max_len(self) -> int:
        return self.table.shape[0]

    def __call__(self, length: int) -> Float[Array, "length d_model"]:
        length = _checks.nonnegative_int("length", length)
        return self.table[np.minimum(np.arange(length), self.max_len - 1)]


class RelativePositionBias(eqx.Module):
    """A learned relative position bias, T5-style: one scalar per head and bucket of ``j - i``.

    ``bias(T)`` returns ``(heads, T, T)`` with ``bias[h, i, j] = table[bucket(j - i), h]``, added to the
    attention scores (Raffel et al. 2020). Causal (``bidirectional=False``) by default: every key in the
    future of the query shares bucket 0, which the causal mask hides anyway. Offsets at or beyond
    ``max_distance`` share the last bucket, so the bias is defined for any length.
    """

    table: jax.Array
    bidirectional: bool = eqx.field(static=True)
    max_distance: int = eqx.field(static=True)

    def __init__(self, num_heads: int, *, num_buckets: int = 32, max_distance: int = 128,
                 bidirectional: bool = False, key: jax.Array):
        num_heads = _checks.positive_int("num_heads", num_heads)
        num_buckets = _checks.positive_int("num_buckets", num_buckets)
        self.max_distance = _checks.positive_int("max_distance", max_distance)
        self.bidirectional = bool(bidirectional)
        relative_position_bucket(np.zeros(1, dtype=int), bidirectional=self.bidirectional,
                                 num_buckets=num_buckets, max_distance=self.max_distance)  # checks the sizes
        key = _checks.prng_key("key", key)
        self.table = nn.init(key, (num_buckets, num_heads), "normal", scale=0.02)

    def buckets(self, length: int) -> np.ndarray:
        """The ``(T, T)`` bucket of ``j - i`` for query ``i`` and key ``j``."""
        length = _checks.nonnegative_int("length", length)
        pos = np.arange(length)
        return relative_position_bucket(pos[None, :] - pos[:, None], bidirectional=self.bidirectional,
                                        num_buckets=self.table.shape[0], max_distance=self.max_distance)

    def __call__(self, length: int) -> Float[Array, "heads length length"]:
        return jnp.transpose(self.table[self.buckets(length)], (2, 0, 1))


def alibi_causal_bias(length: int, num_heads: int) -> Float[Array, "num_heads length length"]:
    """ALiBi's bias as the paper writes it for a causal model: ``slope_h * (j - i)`` for ``j <= i``.

    Keys in the future of the query (``j > i``) get ``-inf``, which masks them (chapter 3): the result is
    the causal mask and the ALiBi bias in one additive term, shape ``(heads, T, T)``.
    """
    length = _checks.nonnegative_int("length", length)
    pos = np.arange(length)
    offset = (pos[None, :] - pos[:, None]).astype(np.float64)  # j - i
    bias = alibi_slopes(num_heads)[:, None, None] * offset[None]
    bias = np.where(offset[None] <= 0, bias + 0.0, -np.inf)
    return jnp.asarray(bias, dtype=jnp.float32)
