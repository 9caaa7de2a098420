"""Chapter 1: telling a model where each token is.

The sinusoidal encoding of Vaswani et al. (2017), the rotation that relates ``PE[p + k]`` to
``PE[p]``, rotary position embeddings (RoPE, Su et al. 2021) and the linear attention biases
of ALiBi (Press et al. 2022). Rows are positions (tokens), columns are features.

Chapter 8 adds learned absolute position embeddings (:class:`LearnedPositions`, clamped beyond the
trained length), T5's relative position buckets and a learned relative bias (Raffel et al. 2020), and
ALiBi's causal bias ``slope * (j - i)``.

Chapter 9 adds three ways of stretching RoPE beyond the length it was trained at, each a frozen scaling object
that :func:`rope` and :func:`rope_heads` take as ``scaling=`` (``None``, the default, is plain RoPE, unchanged):
position interpolation (:class:`PositionInterpolation`, Chen et al. 2023), "NTK-aware" scaling of the base
(:class:`NTKAwareScaling`, bloc97 2023; Rozière et al. 2023) and YaRN (:class:`YaRNScaling`, Peng et al. 2023).
They live here, beside the RoPE they change, because each is only a new set of per-pair frequencies (and, for
YaRN, a magnitude); at scale 1 each returns the plain frequencies bit for bit.
"""

from __future__ import annotations

import dataclasses
import math

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
    """The matrix ``W_k`` with ``PE[p + k] = PE[p] @ W_k`` for every position ``p`` (rows are tokens).

    Block-diagonal, shape ``(d_model, d_model)``: pair ``i`` is rotated by the angle ``k * omega_i``,
    its block ``[[cos, -sin], [sin, cos]]`` of ``k * omega_i`` on rows and columns ``2i, 2i + 1``,
    because sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b.
    ``offset`` may be any integer, negative included (``W_{-k}`` is the transpose of ``W_k``).
    ``d_model`` must be even.
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
    rot[idx, idx], rot[idx + 1, idx] = c, s  # new sin = sin a cos(kw) + cos a sin(kw)
    rot[idx, idx + 1], rot[idx + 1, idx + 1] = -s, c  # new cos = -sin a sin(kw) + cos a cos(kw)
    return jnp.asarray(rot, dtype=jnp.float32)


@_checks.shaped
def rope(x: Float[Array, "T d"], base: float = 10000.0, *, scaling=None, positions=None) -> Float[Array, "T d"]:
    """Rotary position embedding: rotate each feature pair of token ``p`` by ``p * omega_i``.

    ``x`` is a float array of shape ``(T, d)`` with ``d`` even; so is the result, in the dtype
    of ``x`` (an integer ``x`` is a ``TypeError``: its rotation would be rounded to integers).
    Applied to queries and keys, it makes ``rope(q)[m] . rope(k)[n]`` depend on positions only
    through ``m - n``. Pairs are adjacent columns ``(2i, 2i + 1)``, as in the RoPE paper.

    ``scaling`` (chapter 9): one of :class:`PositionInterpolation`, :class:`NTKAwareScaling`,
    :class:`YaRNScaling`; the frequencies become ``scaling.frequencies(d, base)`` and the rotated
    vector is multiplied by ``scaling.magnitude`` (YaRN's ``sqrt(1/t)``; 1 for the others, then no
    multiplication is done). ``None`` (the default) is plain RoPE.

    ``positions`` (chapter 9's rolling cache with positions numbered inside the cache): the position of each
    row, ``T`` integers known before tracing (a NumPy array or a list); ``None`` (the default) is
    ``0 .. T - 1``.
    """
    x = jnp.asarray(x)  # nested lists of floats work too
    length, d = x.shape
    if d % 2:
        raise ValueError(f"x must have an even number of features d for RoPE, got shape {tuple(x.shape)}")
    if scaling is None:
        omega, magnitude = frequencies(d, base), 1.0
    else:
        scaling = _check_scaling(scaling)
        omega, magnitude = scaling.frequencies(d, base), scaling.magnitude
    if positions is None:
        positions = np.arange(length)
    else:
        positions = np.asarray(positions)
        if positions.shape != (length,) or not np.issubdtype(positions.dtype, np.integer):
            raise ValueError(f"positions must be {length} integers, one per row of x, got "
                             f"{_checks.describe(positions)}")
    angles = positions[:, None] * omega[None, :]  # (T, d/2)
    cos = jnp.asarray(np.cos(angles), dtype=x.dtype)
    sin = jnp.asarray(np.sin(angles), dtype=x.dtype)
    even, odd = x[:, 0::2], x[:, 1::2]
    rotated = jnp.stack([even * cos - odd * sin, even * sin + odd * cos], axis=-1)
    if magnitude != 1.0:
        rotated = rotated * jnp.asarray(magnitude, dtype=x.dtype)
    return rotated.reshape(length, d)


@_checks.shaped
def rope_heads(q: Float[Array, "Tq heads dq"], k: Float[Array, "Tk heads dq"], v: Float[Array, "Tk heads dv"],
               *, scaling=None
               ) -> tuple[Float[Array, "Tq heads dq"], Float[Array, "Tk heads dq"], Float[Array, "Tk heads dv"]]:
    """:func:`rope` on every head of projected queries and keys (values unchanged): a ``process_heads`` hook.

    Shapes are those of :meth:`attnbook.mha.MultiHeadAttention.project`, ``(T, heads, features)``; pass it as
    ``layer(x, x, x, process_heads=rope_heads)``. With a ``scaling`` (chapter 9), pass
    ``functools.partial(rope_heads, scaling=...)``, or :func:`scaled_rope_heads`.
    """
    if scaling is None:
        rotate = jax.vmap(rope, in_axes=1, out_axes=1)  # per head, over positions
    else:
        scaling = _check_scaling(scaling)
        rotate = jax.vmap(lambda x: rope(x, scaling=scaling), in_axes=1, out_axes=1)
    return rotate(q), rotate(k), v


def scaled_rope_heads(scaling):
    """The ``process_heads`` hook :func:`rope_heads` with ``scaling`` (``None``: :func:`rope_heads` itself)."""
    if scaling is None:
        return rope_heads
    scaling = _check_scaling(scaling)

    def hook(q, k, v):
        return rope_heads(q, k, v, scaling=scaling)

    return hook


# ---------------------------------------------------------------------------------------------
# Chapter 9: RoPE stretched beyond its training length


def _scale_factor(scale) -> float:
    scale = _checks.positive_float("scale", scale)
    if scale < 1.0:
        raise ValueError(f"scale must be >= 1 (the new length over the trained one, L'/L), got {scale!r}")
    return scale


def _even_d(d: int, minimum: int = 2) -> int:
    d = _checks.positive_int("d", d)
    if d % 2 or d < minimum:
        raise ValueError(f"d must be an even number of features >= {minimum}, got {d}")
    return d


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """What every scaling of chapter 9 is: a stretch ``scale`` ``s = L' / L >= 1`` (checked on construction),
    new per-pair frequencies ``frequencies(d, base)`` (float64, ``(d/2,)``) and a ``magnitude`` on the rotated
    vectors (1 unless a subclass says otherwise). :func:`rope` and :func:`rope_heads` take any subclass."""

    scale: float

    def __post_init__(self):
        object.__setattr__(self, "scale", _scale_factor(self.scale))

    @property
    def magnitude(self) -> float:
        return 1.0

    def frequencies(self, d: int, base: float = 10000.0) -> Float[np.ndarray, " pairs"]:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class PositionInterpolation(RopeScaling):
    """Position interpolation (PI; Chen et al. 2023, arXiv:2306.15595): positions scaled down by ``L/L'``.

    A model trained at length ``L`` and read at ``L' = s L`` sees position ``m`` as ``m L / L' = m / s``:

        f'(x, m) = f(x, m L / L'),   so every angle is   m * omega_i / s,   omega_i = base ** (-2i / d).

    Every angle stays inside the range trained at, and neighbouring positions come ``1/s`` apart.
    ``scale`` is ``s = L' / L >= 1``; ``frequencies(d, base)`` returns ``omega_i / s`` (float64,
    ``(d/2,)``); ``magnitude`` is 1. At ``s = 1`` the frequencies are :func:`frequencies`' exactly.
    """

    def frequencies(self, d: int, base: float = 10000.0) -> Float[np.ndarray, " pairs"]:
        return frequencies(_even_d(d), base) / self.scale


@dataclasses.dataclass(frozen=True)
class NTKAwareScaling(RopeScaling):
    """"NTK-aware" scaling (bloc97 2023; used by Code Llama, Rozière et al. 2023): the base raised.

    The base becomes ``b' = b * s ** (d / (d - 2))``, so that the lowest frequency ``omega_{d/2-1} =
    b ** (-(d-2)/d)`` is divided by exactly ``s`` (interpolated, as PI would) while the highest,
    ``omega_0 = 1``, is unchanged (extrapolated); the pairs between are divided by ``s ** (2i / (d - 2))``:

        omega'_i = (b * s ** (d / (d - 2))) ** (-2i / d).

    ``scale`` is ``s = L' / L >= 1``; ``frequencies(d, base)`` (``d >= 4``: with one pair there is no
    lowest frequency to stretch) returns ``omega'_i``; ``magnitude`` is 1. At ``s = 1``, ``b' = b`` exactly.
    """

    def base(self, d: int, base: float = 10000.0) -> float:
        """The raised base ``b * s ** (d / (d - 2))``."""
        d = _even_d(d, minimum=4)
        return _checks.positive_float("base", base) * self.scale ** (d / (d - 2))

    def frequencies(self, d: int, base: float = 10000.0) -> Float[np.ndarray, " pairs"]:
        return frequencies(d, self.base(d, base))


@dataclasses.dataclass(frozen=True)
class YaRNScaling(RopeScaling):
    """YaRN (Peng et al. 2023, arXiv:2309.00071): interpolate the low frequencies only, and sharpen attention.

    "NTK-by-parts" interpolation: pair ``i`` of wavelength ``lambda_i = 2 pi / omega_i`` turns ``r_i = L /
    lambda_i`` times over the original length ``L``. Pairs that turn many times (``r > beta``) keep their
    frequency, pairs that turn less than ``alpha`` times are interpolated as PI does, a linear ramp between:

        omega'_i = (1 - gamma_i) * omega_i / s + gamma_i * omega_i,
        gamma(r) = 0 if r < alpha,  1 if r > beta,  (r - alpha) / (beta - alpha) otherwise,

    with the paper's ``alpha = 1``, ``beta = 32``. Plus an attention temperature ``t``: the logits are divided by
    ``t``, done by multiplying the rotated queries and keys by ``magnitude = sqrt(1/t) = 0.1 ln(s) + 1``
    (1 for ``s <= 1``).

    The ramp follows the authors' code (jquesnelle/yarn, ``scaled_rope/LlamaYaRNScaledRotaryEmbedding.py``, as
    the released YaRN models and Hugging Face's ``rope_type="yarn"`` do), which is linear in the *pair index*
    rather than in ``r``: with ``i(r) = d ln(L / (2 pi r)) / (2 ln b)`` the index at which a pair turns ``r`` times,
    ``low = max(floor(i(beta)), 0)``, ``high = min(ceil(i(alpha)), d - 1)`` (``high += 0.001`` if equal) and
    ``1 - gamma_i = clip((i - low) / (high - low), 0, 1)`` (:meth:`ramp`). The frequencies are computed as
    ``omega_i * (1 - ramp_i * (1 - 1/s))``, the same number written so that ``s = 1`` gives ``omega_i`` exactly.

    Args: ``scale`` ``s = L' / L >= 1``; ``original_length`` ``L``, the length trained at; ``alpha``, ``beta``:
    the ramp's ends in turns over ``L`` (``0 < alpha < beta``).
    """

    original_length: int
    alpha: float = 1.0
    beta: float = 32.0

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "original_length", _checks.positive_int("original_length", self.original_length))
        alpha = _checks.positive_float("alpha", self.alpha)
        beta = _checks.positive_float("beta", self.beta)
        if not alpha < beta:
            raise ValueError(f"alpha must be below beta (turns over the original length), got alpha={alpha}, "
                             f"beta={beta}")
        object.__setattr__(self, "alpha", alpha)
        object.__setattr__(self, "beta", beta)

    @property
    def magnitude(self) -> float:
        """``sqrt(1/t) = 0.1 ln(s) + 1``, the factor on queries and keys (so ``1/t`` on the logits)."""
        return 0.1 * math.log(self.scale) + 1.0 if self.scale > 1.0 else 1.0

    def correction_range(self, d: int, base: float = 10000.0) -> tuple[int, int]:
        """``(low, high)``: the pair indices where the ramp starts and ends (see the class docstring)."""
        d = _even_d(d)
        base = _checks.positive_float("base", base)

        def index(turns):  # the pair index whose wavelength fits `turns` times in the original length
            return d * math.log(self.original_length / (turns * 2 * math.pi)) / (2 * math.log(base))

        return max(math.floor(index(self.beta)), 0), min(math.ceil(index(self.alpha)), d - 1)

    def ramp(self, d: int, base: float = 10000.0) -> Float[np.ndarray, " pairs"]:
        """``1 - gamma_i`` per pair: 0 for pairs kept as trained, 1 for pairs interpolated fully."""
        low, high = self.correction_range(d, base)
        high = high + 0.001 if low == high else high  # as the authors' code: no division by zero
        return np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)

    def frequencies(self, d: int, base: float = 10000.0) -> Float[np.ndarray, " pairs"]:
        return frequencies(_even_d(d), base) * (1.0 - self.ramp(d, base) * (1.0 - 1.0 / self.scale))


def _check_scaling(scaling):
    if not isinstance(scaling, RopeScaling) or type(scaling) is RopeScaling:  # the base has no frequencies
        raise TypeError(f"scaling must be None, a PositionInterpolation, an NTKAwareScaling or a YaRNScaling, "
                        f"got {_checks.describe(scaling)}")
    return scaling


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


def rms_row_norm(table) -> float:
    """The root-mean-square Euclidean norm of the rows of ``table`` ``(n, d)``, in float64: the typical length of a row.

    Chapter 1 compares an encoding's rows with those of embedding tables at two scales this way.
    """
    table = np.asarray(table, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError(f"table must have shape (n, d), got {table.shape}")
    return float(np.sqrt(np.mean(np.sum(np.square(table), axis=1))))
